//! The sandbox provider driven by real Terraform: apply, no perpetual diffs, drift from hand
//! edits and deleted files, broken files, import, and the data source.

// Test code: a failed step should stop the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;

use harness::{Sandbox, changed_attributes, flat};
use serde_json::{Value as Json, json};

/// Instances with tags, without, and with an empty map; a security group with rules with and
/// without `cidr_blocks`; buckets with default and explicit versioning; a data source.
const STACK: &str = r#"
provider "sandbox" {}

resource "sandbox_instance" "web" {
  name          = "web"
  instance_type = "t3.micro"
  tags          = { env = "dev", team = "platform" }
}

resource "sandbox_instance" "db" {
  name          = "db"
  instance_type = "t3.large"
}

resource "sandbox_instance" "empty_tags" {
  name          = "cache"
  instance_type = "t3.small"
  tags          = {}
}

resource "sandbox_security_group" "web" {
  name = "web"

  ingress {
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }

  ingress {
    from_port = 22
    to_port   = 22
    protocol  = "tcp"
  }
}

resource "sandbox_bucket" "logs" {
  name = "terraplane-logs"
}

resource "sandbox_bucket" "versioned" {
  name       = "terraplane-state"
  versioning = true
  tags       = { env = "dev" }
}

data "sandbox_instance" "db" {
  id = sandbox_instance.db.id
}

output "db_ip" {
  value = data.sandbox_instance.db.private_ip
}
"#;

fn applied_stack() -> Sandbox {
    let sb = Sandbox::new(STACK);
    sb.init();
    sb.apply();
    sb
}

fn id_of(sb: &Sandbox, address: &str) -> String {
    sb.state_values(address)["id"].as_str().unwrap().to_owned()
}

#[test]
fn apply_writes_the_files_and_a_second_plan_has_no_changes() {
    let sb = applied_stack();

    let web = id_of(&sb, "sandbox_instance.web");
    assert!(web.starts_with("i-") && web.len() == 19, "{web}");
    let file = sb.read_file("instance", &web);
    let ip = file["private_ip"].as_str().unwrap().to_owned();
    assert!(ip.starts_with("10."), "{ip}");
    assert_eq!(
        file,
        json!({
            "id": web,
            "arn": format!("arn:sandbox:ec2:local:000000000000:instance/{web}"),
            "name": "web",
            "instance_type": "t3.micro",
            "private_ip": ip,
            "tags": {"env": "dev", "team": "platform"},
        })
    );
    let db = id_of(&sb, "sandbox_instance.db");
    assert_eq!(sb.read_file("instance", &db)["tags"], json!({}));
    // Null tags stay null in the state (and empty ones empty): no perpetual diff either way.
    assert_eq!(sb.state_values("sandbox_instance.db")["tags"], Json::Null);
    assert_eq!(sb.state_values("sandbox_instance.empty_tags")["tags"], json!({}));

    let sg = id_of(&sb, "sandbox_security_group.web");
    assert!(sg.starts_with("sg-"), "{sg}");
    assert_eq!(
        sb.read_file("security_group", &sg),
        json!({
            "id": sg,
            "arn": format!("arn:sandbox:ec2:local:000000000000:security-group/{sg}"),
            "name": "web",
            "ingress": [
                {"from_port": 443, "to_port": 443, "protocol": "tcp", "cidr_blocks": ["0.0.0.0/0"]},
                {"from_port": 22, "to_port": 22, "protocol": "tcp", "cidr_blocks": []},
            ],
            "tags": {},
        })
    );

    assert_eq!(
        sb.read_file("bucket", "terraplane-logs"),
        json!({
            "id": "terraplane-logs",
            "arn": "arn:sandbox:s3:::terraplane-logs",
            "name": "terraplane-logs",
            "versioning": false,
            "tags": {},
        })
    );
    assert_eq!(sb.read_file("bucket", "terraplane-state")["versioning"], json!(true));

    // The data source read the instance the resource created.
    let outputs = sb.show_json(None)["values"]["outputs"].clone();
    assert_eq!(outputs["db_ip"]["value"], sb.read_file("instance", &db)["private_ip"]);

    let (code, out) = sb.plan_exit(&[]);
    assert_eq!(
        code,
        0,
        "second plan has changes:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn changes_apply_in_place_and_a_bucket_rename_replaces() {
    let sb = applied_stack();
    let web = id_of(&sb, "sandbox_instance.web");

    let changed = STACK
        .replace(
            "name          = \"web\"\n  instance_type = \"t3.micro\"",
            "name          = \"web-2\"\n  instance_type = \"t3.large\"",
        )
        .replace("terraplane-logs", "terraplane-logs-2")
        .replace("versioning = true", "");
    assert_ne!(changed, STACK);
    sb.write_config(&changed);
    sb.run_expect(&["plan", "-no-color", "-input=false", "-out=p"], 0);
    let plan = sb.show_json(Some("p"));
    let mut actions: Vec<(String, Json)> = plan["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["change"]["actions"] != json!(["no-op"]) && c["mode"] == "managed")
        .map(|c| {
            (
                c["address"].as_str().unwrap().to_owned(),
                c["change"]["actions"].clone(),
            )
        })
        .collect();
    actions.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        actions,
        [
            ("sandbox_bucket.logs".to_owned(), json!(["delete", "create"])),
            ("sandbox_bucket.versioned".to_owned(), json!(["update"])),
            ("sandbox_instance.web".to_owned(), json!(["update"])),
        ]
    );
    sb.run_expect(&["apply", "-no-color", "-input=false", "p"], 0);

    let file = sb.read_file("instance", &web);
    assert_eq!(file["name"], "web-2");
    assert_eq!(file["instance_type"], "t3.large");
    assert_eq!(id_of(&sb, "sandbox_instance.web"), web);
    assert!(!sb.file("bucket", "terraplane-logs").exists());
    assert_eq!(sb.read_file("bucket", "terraplane-logs-2")["id"], "terraplane-logs-2");
    // `versioning` removed from the configuration goes back to its default.
    assert_eq!(sb.read_file("bucket", "terraplane-state")["versioning"], json!(false));

    let (code, out) = sb.plan_exit(&[]);
    assert_eq!(
        code,
        0,
        "plan after the change:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );

    sb.run_expect(&["destroy", "-auto-approve", "-no-color", "-input=false"], 0);
    for kind in ["instance", "security_group", "bucket"] {
        let left: Vec<_> = std::fs::read_dir(sb.root.join(kind))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "{kind}: {left:?}");
    }
}

#[test]
fn hand_edits_and_deleted_files_are_drift() {
    let sb = applied_stack();
    let web = id_of(&sb, "sandbox_instance.web");
    let sg = id_of(&sb, "sandbox_security_group.web");

    sb.edit_file("instance", &web, |f| f["tags"]["env"] = json!("prod"));
    sb.edit_file("security_group", &sg, |f| {
        f["ingress"]
            .as_array_mut()
            .unwrap()
            .push(json!({"from_port": 80, "to_port": 80, "protocol": "tcp", "cidr_blocks": ["10.0.0.0/8"]}))
    });

    let (code, out) = sb.plan_exit(&["-refresh-only", "-out=p"]);
    assert_eq!(code, 2, "{}", String::from_utf8_lossy(&out.stdout));
    let plan = sb.show_json(Some("p"));
    let mut drift: Vec<(String, Vec<String>)> = plan["resource_drift"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["address"].as_str().unwrap().to_owned(),
                changed_attributes(&d["change"]),
            )
        })
        .collect();
    drift.sort();
    assert_eq!(
        drift,
        [
            ("sandbox_instance.web".to_owned(), vec!["tags".to_owned()]),
            ("sandbox_security_group.web".to_owned(), vec!["ingress".to_owned()]),
        ],
        "{:#}",
        plan["resource_drift"]
    );
    let instance = &plan["resource_drift"][0]["change"];
    assert_eq!(instance["before"]["tags"]["env"], "dev");
    assert_eq!(instance["after"]["tags"]["env"], "prod");
    assert_eq!(
        plan["resource_drift"][1]["change"]["after"]["ingress"][2]["from_port"],
        80
    );

    // A deleted file is a deleted resource.
    std::fs::remove_file(sb.file("bucket", "terraplane-logs")).unwrap();
    let (code, _) = sb.plan_exit(&["-refresh-only", "-out=p2"]);
    assert_eq!(code, 2);
    let plan = sb.show_json(Some("p2"));
    let deleted = plan["resource_drift"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["address"] == "sandbox_bucket.logs")
        .unwrap_or_else(|| panic!("no drift for the deleted bucket: {:#}", plan["resource_drift"]));
    assert_eq!(deleted["change"]["actions"], json!(["delete"]));
    assert_eq!(deleted["change"]["after"], Json::Null);

    // A normal plan undoes all three: update, update, create.
    sb.run_expect(&["plan", "-no-color", "-input=false", "-out=p3"], 0);
    let plan = sb.show_json(Some("p3"));
    let mut actions: Vec<(String, Json)> = plan["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["change"]["actions"] != json!(["no-op"]) && c["mode"] == "managed")
        .map(|c| {
            (
                c["address"].as_str().unwrap().to_owned(),
                c["change"]["actions"].clone(),
            )
        })
        .collect();
    actions.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        actions,
        [
            ("sandbox_bucket.logs".to_owned(), json!(["create"])),
            ("sandbox_instance.web".to_owned(), json!(["update"])),
            ("sandbox_security_group.web".to_owned(), json!(["update"])),
        ]
    );
    sb.run_expect(&["apply", "-no-color", "-input=false", "p3"], 0);
    assert_eq!(sb.read_file("instance", &web)["tags"]["env"], "dev");
    assert_eq!(
        sb.read_file("security_group", &sg)["ingress"].as_array().unwrap().len(),
        2
    );
    assert!(sb.file("bucket", "terraplane-logs").exists());
    assert_eq!(sb.plan_exit(&[]).0, 0);
}

#[test]
fn invalid_json_fails_the_plan_naming_the_file() {
    let sb = applied_stack();
    let db = id_of(&sb, "sandbox_instance.db");
    let path = sb.file("instance", &db);
    std::fs::write(&path, "{\n  \"id\": \"oops\",\n").unwrap();

    let out = sb.run(&["plan", "-no-color", "-input=false"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = flat(&out.stderr);
    assert!(stderr.contains("Error: Invalid sandbox resource file"), "{stderr}");
    assert!(
        stderr.contains(&format!("{} is not a valid sandbox instance file", path.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains("EOF while parsing a value at line 3 column 0"),
        "{stderr}"
    );
    // The message is the provider's, not a backtrace or an internal error.
    assert!(
        !stderr.contains("Internal error") && !stderr.contains("tf_provider::"),
        "{stderr}"
    );

    // A file missing a required field fails the same way, naming the field.
    std::fs::write(&path, format!(r#"{{"id": "{db}", "name": "db"}}"#)).unwrap();
    let out = sb.run(&["plan", "-no-color", "-input=false"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = flat(&out.stderr);
    assert!(stderr.contains("missing field `arn`"), "{stderr}");
}

#[test]
fn import_reads_existing_files() {
    let sb = Sandbox::new(
        r#"
provider "sandbox" {}

resource "sandbox_instance" "legacy" {
  name          = "legacy"
  instance_type = "m5.large"
  tags          = { owner = "ops" }
}

resource "sandbox_security_group" "legacy" {
  name = "legacy"

  ingress {
    from_port   = 0
    to_port     = 65535
    protocol    = "tcp"
    cidr_blocks = ["10.0.0.0/8", "192.168.0.0/16"]
  }
}

resource "sandbox_bucket" "legacy" {
  name       = "legacy-bucket"
  versioning = true
}
"#,
    );
    let instance = "i-00000000000abcdef";
    sb.write_file(
        "instance",
        instance,
        &json!({
            "id": instance,
            "arn": format!("arn:sandbox:ec2:local:000000000000:instance/{instance}"),
            "name": "legacy",
            "instance_type": "m5.large",
            "private_ip": "10.10.10.10",
            "tags": {"owner": "ops"},
        }),
    );
    let sg = "sg-0000000000000beef";
    sb.write_file(
        "security_group",
        sg,
        &json!({
            "id": sg,
            "arn": format!("arn:sandbox:ec2:local:000000000000:security-group/{sg}"),
            "name": "legacy",
            "ingress": [{"from_port": 0, "to_port": 65535, "protocol": "tcp",
                         "cidr_blocks": ["10.0.0.0/8", "192.168.0.0/16"]}],
        }),
    );
    // Written by hand without `tags`: the defaults fill in.
    sb.write_file(
        "bucket",
        "legacy-bucket",
        &json!({"id": "legacy-bucket", "arn": "arn:sandbox:s3:::legacy-bucket", "name": "legacy-bucket",
                "versioning": true}),
    );
    sb.init();

    for (address, id) in [
        ("sandbox_instance.legacy", instance),
        ("sandbox_security_group.legacy", sg),
        ("sandbox_bucket.legacy", "legacy-bucket"),
    ] {
        sb.run_expect(&["import", "-no-color", "-input=false", address, id], 0);
        assert_eq!(sb.state_values(address)["id"], id);
    }
    assert_eq!(sb.state_values("sandbox_instance.legacy")["private_ip"], "10.10.10.10");

    let (code, out) = sb.plan_exit(&[]);
    assert_eq!(code, 0, "plan after import:\n{}", String::from_utf8_lossy(&out.stdout));

    // Importing something that is not there fails clearly.
    sb.run_expect(&["state", "rm", "-no-color", "sandbox_instance.legacy"], 0);
    let out = sb.run(&[
        "import",
        "-no-color",
        "-input=false",
        "sandbox_instance.legacy",
        "i-0000000000000dead",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = flat(&out.stderr);
    assert!(
        stderr.contains("Cannot import non-existent sandbox instance"),
        "{stderr}"
    );
}

#[test]
fn data_source_reads_an_instance_by_id_and_by_name() {
    let sb = Sandbox::new(
        r#"
provider "sandbox" {}

data "sandbox_instance" "by_id" {
  id = "i-0000000000000cafe"
}

data "sandbox_instance" "by_name" {
  name = "bastion"
}

output "by_id" {
  value = data.sandbox_instance.by_id
}

output "by_name_ip" {
  value = data.sandbox_instance.by_name.private_ip
}
"#,
    );
    for (id, name, ip) in [
        ("i-0000000000000cafe", "api", "10.0.12.254"),
        ("i-0000000000000b00b", "bastion", "10.0.11.0"),
    ] {
        sb.write_file(
            "instance",
            id,
            &json!({"id": id, "arn": format!("arn:sandbox:ec2:local:000000000000:instance/{id}"),
                    "name": name, "instance_type": "t3.nano", "private_ip": ip, "tags": {"role": name}}),
        );
    }
    sb.init();
    sb.apply();
    let outputs = sb.show_json(None)["values"]["outputs"].clone();
    assert_eq!(
        outputs["by_id"]["value"],
        json!({
            "id": "i-0000000000000cafe",
            "arn": "arn:sandbox:ec2:local:000000000000:instance/i-0000000000000cafe",
            "name": "api",
            "instance_type": "t3.nano",
            "private_ip": "10.0.12.254",
            "tags": {"role": "api"},
        })
    );
    assert_eq!(outputs["by_name_ip"]["value"], "10.0.11.0");

    // Setting both keys is refused before anything is read.
    sb.write_config(
        r#"
provider "sandbox" {}

data "sandbox_instance" "both" {
  id   = "i-0000000000000cafe"
  name = "api"
}
"#,
    );
    let out = sb.run(&["plan", "-no-color", "-input=false"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        flat(&out.stderr).contains("Conflicting lookup keys"),
        "{}",
        flat(&out.stderr)
    );
}

#[test]
fn root_comes_from_the_provider_block_or_the_environment() {
    let mut sb = Sandbox::new(
        r#"
provider "sandbox" {}

resource "sandbox_bucket" "b" {
  name = "rooted"
}
"#,
    );
    sb.root_env = false;
    sb.init();
    let out = sb.run(&["plan", "-no-color", "-input=false"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = flat(&out.stderr);
    assert!(stderr.contains("No sandbox root"), "{stderr}");
    assert!(stderr.contains("SANDBOX_ROOT"), "{stderr}");

    let elsewhere = sb.tmp.path().join("configured");
    sb.write_config(&format!(
        r#"
provider "sandbox" {{
  root = "{}"
}}

resource "sandbox_bucket" "b" {{
  name = "rooted"
}}
"#,
        elsewhere.display()
    ));
    sb.apply();
    assert!(elsewhere.join("bucket/rooted.json").is_file());
    assert!(!sb.root.exists());
}
