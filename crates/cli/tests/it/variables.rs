//! Contexts, stack variables and AWS integrations: what `tpctl` sends for each command and
//! what it prints. Secrets never reach a table, and `-` reads a value from stdin.

use serde_json::{Value, json};
use terraplane_test_support::mock::MockServer;

use super::{T0, TestResult, data, env_for, operations, query, root_field, tpctl, tpctl_bin, variables};

fn variable_json(name: &str, kind: &str, secret: bool, value: Option<&str>) -> Value {
    json!({"name": name, "kind": kind, "secret": secret, "applyOnly": false,
           "value": if secret { Value::Null } else { json!(value) },
           "checksum": format!("c-{}", name.to_lowercase()), "updatedAt": T0})
}

fn context_json(id: &str) -> Value {
    json!({"id": id, "name": "AWS prod", "description": "", "labels": ["autoattach:prod"], "space": "root",
           "variables": [variable_json("AWS_REGION", "ENV", false, Some("eu-west-1")),
                         variable_json("db_password", "TERRAFORM", true, None)],
           "attachments": [{"context": id, "stack": "net", "priority": 2, "autoAttached": false}],
           "createdAt": T0})
}

fn integration_json(id: &str, stacks: &[&str]) -> Value {
    json!({"id": id, "name": "Prod", "space": "root", "roleArn": "arn:aws:iam::1:role/tp", "readRoleArn": null,
           "audience": null, "durationSeconds": 3600, "stacks": stacks})
}

/// What a server with context `aws-prod`, stack `net` and integration `aws-prod` answers.
fn answer(field: &str, vars: &Value) -> Value {
    let input = &vars["input"];
    match field {
        "contexts" => json!([context_json("aws-prod")]),
        "context" | "contextDelete" => context_json(vars["id"].as_str().unwrap_or_default()),
        "contextCreate" => context_json(input["id"].as_str().unwrap_or("aws-prod")),
        "contextSetVariable" | "stackSetVariable" => {
            let mut v = variable_json(
                input["name"].as_str().unwrap_or_default(),
                input["kind"].as_str().unwrap_or_default(),
                input["secret"] == true,
                input["value"].as_str(),
            );
            v["applyOnly"] = input["applyOnly"].clone();
            v
        }
        "contextUnsetVariable" | "stackUnsetVariable" => {
            variable_json(vars["name"].as_str().unwrap_or_default(), "ENV", true, None)
        }
        "contextAttach" | "contextDetach" => json!({"context": vars["context"], "stack": vars["stackId"],
                                                    "priority": vars["priority"].as_i64().unwrap_or(0),
                                                    "autoAttached": false}),
        "stackEnvironment" => json!([
            {"name": "AWS_REGION", "kind": "ENV", "secret": false, "applyOnly": false, "value": "eu-west-1",
             "checksum": "a1", "source": "context:aws-prod", "priority": 2, "autoAttached": false},
            {"name": "TOKEN", "kind": "ENV", "secret": true, "applyOnly": true, "value": null,
             "checksum": "b2", "source": "stack", "priority": null, "autoAttached": false}
        ]),
        "awsIntegrations" => json!([integration_json("aws-prod", &["net"])]),
        "awsIntegrationCreate" => integration_json(input["id"].as_str().unwrap_or("prod"), &[]),
        "awsIntegrationAttach" => integration_json(vars["id"].as_str().unwrap_or_default(), &["net"]),
        "awsIntegrationDetach" | "awsIntegrationDelete" => integration_json("aws-prod", &[]),
        _ => Value::Null,
    }
}

async fn server() -> std::io::Result<MockServer> {
    MockServer::start(|r| {
        let field = root_field(&query(r));
        data(json!({ field.clone(): answer(&field, &variables(r)) }))
    })
    .await
}

#[tokio::test]
async fn context_show_masks_secrets_and_json_leaves_them_null() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["context", "show", "aws-prod"]).await?;
    o.result?;
    assert!(
        o.out.starts_with("ID:          aws-prod\nName:        AWS prod\n"),
        "{}",
        o.out
    );
    assert!(
        o.out
            .contains("\nTERRAFORM   db_password   *****       yes      no           c-db_password\n"),
        "{}",
        o.out
    );
    assert!(
        o.out.ends_with("\nSTACK   PRIORITY   AUTO\nnet     2          no\n"),
        "{}",
        o.out
    );
    assert_eq!(operations(&srv)[0], ("context".to_owned(), json!({"id": "aws-prod"})));

    let o = tpctl(&env, &["context", "show", "aws-prod", "-o", "json"]).await?;
    o.result?;
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!(v["variables"][1]["name"], "db_password");
    assert_eq!(v["variables"][1]["value"], Value::Null);
    assert_eq!(v["variables"][1]["kind"], "TERRAFORM");

    let o = tpctl(&env, &["context", "list"]).await?;
    o.result?;
    assert_eq!(
        o.out,
        "ID         NAME       SPACE   LABELS            VARIABLES\naws-prod   AWS prod   root    autoattach:prod   2\n"
    );
    Ok(())
}

#[tokio::test]
async fn context_commands_send_their_variables() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let cases: &[(&[&str], &str, Value, &str)] = &[
        (
            &[
                "context",
                "create",
                "AWS prod",
                "--id",
                "aws-prod",
                "--label",
                "autoattach:prod",
                "--space",
                "prod",
            ],
            "contextCreate",
            json!({"input": {"id": "aws-prod", "name": "AWS prod", "labels": ["autoattach:prod"], "space": "prod"}}),
            "Created context aws-prod\n\nID:          aws-prod\n",
        ),
        (
            &[
                "context",
                "set",
                "aws-prod",
                "db_password",
                "pw",
                "--secret",
                "--type",
                "terraform",
                "--apply-only",
            ],
            "contextSetVariable",
            json!({"context": "aws-prod", "input": {"name": "db_password", "value": "pw", "kind": "TERRAFORM",
                                                    "secret": true, "applyOnly": true}}),
            "Set secret Terraform variable db_password in context aws-prod (checksum c-db_password)\n",
        ),
        (
            &[
                "context",
                "set",
                "aws-prod",
                "conf/backend.hcl",
                "bucket = 1",
                "--type",
                "file",
            ],
            "contextSetVariable",
            json!({"context": "aws-prod", "input": {"name": "conf/backend.hcl", "value": "bucket = 1", "kind": "FILE",
                                                    "secret": false, "applyOnly": false}}),
            "Set file conf/backend.hcl in context aws-prod (checksum c-conf/backend.hcl)\n",
        ),
        (
            &["context", "unset", "aws-prod", "AWS_REGION"],
            "contextUnsetVariable",
            json!({"context": "aws-prod", "name": "AWS_REGION"}),
            "Removed environment variable AWS_REGION from context aws-prod\n",
        ),
        (
            &["context", "attach", "aws-prod", "net", "--priority", "3"],
            "contextAttach",
            json!({"context": "aws-prod", "stackId": "net", "priority": 3}),
            "Attached context aws-prod to stack net (priority 3)\n",
        ),
        (
            &["context", "attach", "aws-prod", "net"],
            "contextAttach",
            json!({"context": "aws-prod", "stackId": "net", "priority": 0}),
            "Attached context aws-prod to stack net (priority 0)\n",
        ),
        (
            &["context", "detach", "aws-prod", "net"],
            "contextDetach",
            json!({"context": "aws-prod", "stackId": "net"}),
            "Detached context aws-prod from stack net\n",
        ),
        (
            &["context", "delete", "aws-prod"],
            "contextDelete",
            json!({"id": "aws-prod"}),
            "Deleted context aws-prod\n",
        ),
    ];
    for (i, (args, field, vars, printed)) in cases.iter().enumerate() {
        let o = tpctl(&env, args).await?;
        o.result?;
        assert!(o.out.starts_with(printed), "{args:?}: {}", o.out);
        assert_eq!(operations(&srv)[i], (field.to_string(), vars.clone()), "{args:?}");
    }
    Ok(())
}

#[tokio::test]
async fn stack_env_short_and_long_forms_print_the_effective_set() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let short = tpctl(&env, &["stack", "env", "net"]).await?;
    short.result?;
    let long = tpctl(&env, &["stack", "env", "list", "net"]).await?;
    long.result?;
    let expected = "\
KIND   NAME         VALUE       SOURCE             PRIORITY   CHECKSUM
ENV    AWS_REGION   eu-west-1   context:aws-prod   2          a1
ENV    TOKEN        *****       stack              -          b2
";
    assert_eq!(short.out, expected);
    assert_eq!(long.out, expected);
    for op in operations(&srv) {
        assert_eq!(op, ("stackEnvironment".to_owned(), json!({"stackId": "net"})));
    }

    let o = tpctl(&env, &["stack", "env", "net", "-o", "json"]).await?;
    o.result?;
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!(v[1]["value"], Value::Null);
    assert_eq!(v[1]["source"], "stack");

    let o = tpctl(&env, &["stack", "env", "set", "net", "TF_LOG", "debug", "--apply-only"]).await?;
    o.result?;
    assert_eq!(
        o.out,
        "Set environment variable TF_LOG in stack net (checksum c-tf_log)\n"
    );
    let o = tpctl(&env, &["stack", "env", "unset", "net", "TF_LOG"]).await?;
    o.result?;
    assert_eq!(o.out, "Removed environment variable TF_LOG from stack net\n");
    let ops = operations(&srv);
    assert_eq!(
        ops[ops.len() - 2..],
        [
            (
                "stackSetVariable".to_owned(),
                json!({"stackId": "net", "input": {"name": "TF_LOG", "value": "debug", "kind": "ENV",
                                                   "secret": false, "applyOnly": true}})
            ),
            (
                "stackUnsetVariable".to_owned(),
                json!({"stackId": "net", "name": "TF_LOG"})
            ),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn empty_variable_lists_say_so_on_stderr() -> TestResult {
    let srv = MockServer::start(|r| {
        let field = root_field(&query(r));
        data(json!({ field: [] }))
    })
    .await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    for (args, remark) in [
        (&["context", "list"][..], "No contexts.\n"),
        (&["stack", "env", "net"], "Stack net has no variables.\n"),
        (&["integration", "aws", "list"], "No AWS integrations.\n"),
    ] {
        let o = tpctl(&env, args).await?;
        o.result?;
        assert_eq!((o.out.as_str(), o.err.as_str()), ("", remark), "{args:?}");
        let json_args: Vec<&str> = args.iter().copied().chain(["-o", "json"]).collect();
        let o = tpctl(&env, &json_args).await?;
        o.result?;
        assert_eq!(o.out, "[]\n", "{args:?}");
    }
    Ok(())
}

#[tokio::test]
async fn a_dash_value_is_read_from_stdin_and_never_printed() -> TestResult {
    let srv = server().await?;
    let out = tpctl_bin(
        &srv,
        &["stack", "env", "set", "net", "TOKEN", "-", "--secret"],
        b"s3cr3t value\n",
    )
    .await?;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout,
        "Set secret environment variable TOKEN in stack net (checksum c-token)\n"
    );
    assert_eq!(
        operations(&srv)[0].1["input"],
        json!({"name": "TOKEN", "value": "s3cr3t value", "kind": "ENV", "secret": true, "applyOnly": false})
    );

    // A file keeps its content byte for byte, final line break included.
    let out = tpctl_bin(
        &srv,
        &["context", "set", "aws-prod", "backend.hcl", "-", "--type", "file"],
        b"bucket = \"x\"\nkey = \"y\"\n",
    )
    .await?;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(operations(&srv)[1].1["input"]["value"], "bucket = \"x\"\nkey = \"y\"\n");
    Ok(())
}

#[tokio::test]
async fn aws_integration_commands_send_their_variables() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let cases: &[(&[&str], &str, Value, &str)] = &[
        (
            &[
                "integration",
                "aws",
                "create",
                "Prod",
                "--role-arn",
                "arn:aws:iam::1:role/tp",
                "--read-role-arn",
                "arn:aws:iam::1:role/tp-read",
                "--audience",
                "sts.amazonaws.com",
                "--duration",
                "3600",
                "--space",
                "prod",
                "--id",
                "aws-prod",
            ],
            "awsIntegrationCreate",
            json!({"input": {"id": "aws-prod", "name": "Prod", "roleArn": "arn:aws:iam::1:role/tp",
                             "readRoleArn": "arn:aws:iam::1:role/tp-read", "audience": "sts.amazonaws.com",
                             "durationSeconds": 3600, "space": "prod"}}),
            "Created AWS integration aws-prod\n\nID:            aws-prod\n",
        ),
        (
            &[
                "integration",
                "aws",
                "create",
                "Dev",
                "--role-arn",
                "arn:aws:iam::1:role/dev",
            ],
            "awsIntegrationCreate",
            json!({"input": {"name": "Dev", "roleArn": "arn:aws:iam::1:role/dev"}}),
            "Created AWS integration prod\n",
        ),
        (
            &["integration", "aws", "list"],
            "awsIntegrations",
            json!({}),
            "ID         NAME   SPACE   ROLE ARN                 READ ROLE ARN   AUDIENCE   DURATION   STACKS\n\
             aws-prod   Prod   root    arn:aws:iam::1:role/tp   -               -          3600s      net\n",
        ),
        (
            &["integration", "aws", "attach", "aws-prod", "net"],
            "awsIntegrationAttach",
            json!({"id": "aws-prod", "stackId": "net"}),
            "Attached AWS integration aws-prod to stack net\n",
        ),
        (
            &["integration", "aws", "detach", "net"],
            "awsIntegrationDetach",
            json!({"stackId": "net"}),
            "Detached AWS integration aws-prod from stack net\n",
        ),
        (
            &["integration", "aws", "delete", "aws-prod"],
            "awsIntegrationDelete",
            json!({"id": "aws-prod"}),
            "Deleted AWS integration aws-prod\n",
        ),
    ];
    for (i, (args, field, vars, printed)) in cases.iter().enumerate() {
        let o = tpctl(&env, args).await?;
        o.result?;
        assert!(o.out.starts_with(printed), "{args:?}: {}", o.out);
        assert_eq!(operations(&srv)[i], (field.to_string(), vars.clone()), "{args:?}");
    }

    let o = tpctl(&env, &["integration", "aws", "attach", "aws-prod", "net", "-o", "json"]).await?;
    o.result?;
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!(v["stacks"], json!(["net"]));
    assert_eq!(v["durationSeconds"], 3600);
    Ok(())
}
