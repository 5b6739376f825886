//! Plan policies on real Terraform runs (sandbox resources): the product's two fixture
//! policies loaded unchanged and autoattached by label, a deny failing the run with exactly
//! the policy's messages, a warn holding an autodeploy run for confirmation, a runaway
//! policy failing the run at its limit, every evaluation stored on the run; and bad input.

use serde_json::{Value, json};
use terraplane_client::RunState;

use crate::both_backends;
use crate::harness::*;

async fn gql(app: &TestApp, q: &str, v: Value) -> Result<Value, terraplane_client::ClientError> {
    app.client.graphql::<Value>(q, v).await
}

fn fixture(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../crates/policy/tests/fixtures")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

const CREATE: &str = "mutation($i: PolicyCreateInput!) { policyCreate(input: $i) { id type version labels } }";

async fn create(
    app: &TestApp,
    id: &str,
    kind: &str,
    body: &str,
    labels: &[&str],
) -> Result<Value, terraplane_client::ClientError> {
    gql(
        app,
        CREATE,
        json!({"i": {"id": id, "name": id, "type": kind, "body": body, "labels": labels}}),
    )
    .await
}

fn buckets(n: usize) -> String {
    format!(
        r#"
terraform {{
  required_providers {{
    sandbox = {{ source = "terraplane/sandbox" }}
  }}
}}
resource "sandbox_bucket" "b" {{
  count = {n}
  name  = "bucket-${{count.index}}"
}}
"#
    )
}

/// Commits new content for `main.tf` in the test's repository.
fn commit(dir: &std::path::Path, main_tf: &str) {
    std::fs::write(dir.join("main.tf"), main_tf).unwrap();
    for args in [
        vec!["add", "-A"],
        vec![
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "--quiet",
            "-m",
            "change",
        ],
    ] {
        let st = std::process::Command::new("git")
            .args(&args)
            .current_dir(dir)
            .status()
            .unwrap();
        assert!(st.success(), "git {args:?}");
    }
}

async fn evaluations(app: &TestApp, run: &str) -> Vec<Value> {
    let v = gql(
        app,
        "query($id: ID!) { run(id: $id) { policyEvaluations { policy policyVersion type outcome messages inputHash } } }",
        json!({"id": run}),
    )
    .await
    .unwrap();
    v["run"]["policyEvaluations"].as_array().unwrap().clone()
}

async fn plan_policies(app: TestApp) {
    // Bad input: the reason, with line and column; nothing is stored.
    let e = create(
        &app,
        "broken",
        "PLAN",
        "package spacelift\n\ndeny[msg] {\n  msg := \"a\"\n  1 +* 2\n}\n",
        &[],
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Some("bad_request"), "{e}");
    assert!(
        e.to_string()
            .contains("policy does not compile: line 5, column 6: expecting expression"),
        "{e}"
    );
    let e = create(&app, "odd", "ACCESS", "package spacelift\n", &[])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("bad_request"), "{e}");
    assert!(e.to_string().contains("unknown policy type \"ACCESS\""), "{e}");
    let e = create(
        &app,
        "elsewhere",
        "PLAN",
        "package other\n\ndeny[\"x\"] { true }\n",
        &[],
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("package \"spacelift\""), "{e}");
    let e = create(
        &app,
        "clock",
        "PLAN",
        "package spacelift\n\ndeny[\"late\"] { time.now_ns() > 0 }\n",
        &[],
    )
    .await
    .unwrap_err();
    assert!(e.to_string().contains("time.now_ns"), "{e}");
    let none = gql(&app, "{ policies { id } }", json!({})).await.unwrap();
    assert_eq!(none["policies"], json!([]));

    // The fixtures, unchanged, attached to every stack labelled `guarded`.
    let destructive = fixture("require-approval-for-destructive-changes.rego");
    let cost = fixture("cost-control.rego");
    let p = create(&app, "destructive", "plan", &destructive, &["autoattach:guarded"])
        .await
        .unwrap();
    assert_eq!(
        p["policyCreate"],
        json!({"id": "destructive", "type": "PLAN", "version": 1, "labels": ["autoattach:guarded"]})
    );
    create(&app, "cost", "PLAN", &cost, &["autoattach:guarded"])
        .await
        .unwrap();

    let dir = app.tmp.path().join("repo");
    let repo = git_repo(&dir, &[("main.tf", &buckets(6))]);
    let input = terraplane_client::StackCreateInput {
        slug: Some("guarded".into()),
        name: "guarded".into(),
        repository: repo.clone(),
        autodeploy: Some(true),
        labels: Some(vec!["guarded".into()]),
        ..Default::default()
    };
    app.client.stack_create(&input).await.unwrap();
    // Creating six buckets: nothing to deny.
    let run = app.client.run_trigger("guarded", false).await.unwrap();
    app.wait_state(&run.id, RunState::Finished, 180).await;
    let evs = evaluations(&app, &run.id).await;
    let mut seen: Vec<(String, String)> = evs
        .iter()
        .map(|e| {
            (
                e["policy"].as_str().unwrap().into(),
                e["outcome"].as_str().unwrap().into(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![("cost".into(), "allow".into()), ("destructive".into(), "allow".into())]
    );
    assert_eq!(evs[0]["inputHash"], evs[1]["inputHash"], "one input for both");

    // Deleting all six: each deletion denied, and the "more than five" rule.
    commit(&dir, &buckets(0));
    let run = app.client.run_trigger("guarded", false).await.unwrap();
    let failed = app.wait_state(&run.id, RunState::Failed, 180).await;
    let mut want: Vec<String> = (0..6)
        .map(|i| format!("Destroy richiede approvazione: sandbox_bucket.b[{i}]"))
        .collect();
    want.push("Piu di 5 destroy in un singolo plan: richiede approvazione senior".into());
    want.sort();
    assert_eq!(
        failed.error.as_deref(),
        Some(format!("denied by plan policy: {}", want.join("; ")).as_str())
    );
    let evs = evaluations(&app, &run.id).await;
    let destr = evs.iter().find(|e| e["policy"] == "destructive").unwrap();
    assert_eq!(destr["outcome"], "deny");
    assert_eq!(destr["messages"], json!(want));
    assert_eq!(destr["policyVersion"], 1);
    let cost_ev = evs.iter().find(|e| e["policy"] == "cost").unwrap();
    assert_eq!(cost_ev["outcome"], "allow");
    assert_eq!(cost_ev["messages"], json!([]));
    // Nothing was applied: the buckets are still there.
    let root = app
        .tmp
        .path()
        .join("sandbox")
        .join(app.org())
        .join("guarded")
        .join("bucket");
    assert_eq!(std::fs::read_dir(&root).unwrap().count(), 6);

    // A warning holds an autodeploy run for confirmation.
    let sg_repo = git_repo(
        &app.tmp.path().join("sg"),
        &[(
            "main.tf",
            r#"
terraform {
  required_providers {
    sandbox = { source = "terraplane/sandbox" }
  }
}
resource "sandbox_security_group" "web" {
  name = "web"
}
"#,
        )],
    );
    app.stack("sg", &sg_repo, true).await;
    let warn = "package spacelift\n\nwarn[sprintf(\"security group changed: %s\", [rc.address])] {\n  rc := input.terraform.resource_changes[_]\n  rc.type == \"sandbox_security_group\"\n  rc.change.actions[_] != \"no-op\"\n}\n";
    create(&app, "sg-warn", "PLAN", warn, &[]).await.unwrap();
    gql(
        &app,
        "mutation { policyAttach(id: \"sg-warn\", stackId: \"sg\") { policy stack } }",
        json!({}),
    )
    .await
    .unwrap();
    let run = app.client.run_trigger("sg", false).await.unwrap();
    let held = app.wait_state(&run.id, RunState::Unconfirmed, 180).await;
    let events = app.client.run(&held.id).await.unwrap().unwrap().events;
    assert!(
        events
            .iter()
            .any(|e| e.note.as_deref().is_some_and(
                |n| n.contains("plan policy warnings: security group changed: sandbox_security_group.web")
            )),
        "{events:?}"
    );
    let evs = evaluations(&app, &run.id).await;
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0]["outcome"], "warn");
    assert_eq!(
        evs[0]["messages"],
        json!(["security group changed: sandbox_security_group.web"])
    );

    // A new version of the policy: versions kept, the next evaluation names it.
    let v = gql(
        &app,
        "mutation($b: String!) { policyUpdate(id: \"sg-warn\", input: {body: $b}) { version versions { version } } }",
        json!({"b": warn.replace("security group changed", "sg changed")}),
    )
    .await
    .unwrap();
    assert_eq!(v["policyUpdate"]["version"], 2);
    assert_eq!(v["policyUpdate"]["versions"], json!([{"version": 1}, {"version": 2}]));
    // An update that does not compile changes nothing.
    let e = gql(
        &app,
        "mutation { policyUpdate(id: \"sg-warn\", input: {body: \"package spacelift\\nwarn[\"}) { version } }",
        json!({}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Some("bad_request"), "{e}");
    let v = gql(&app, "{ policy(id: \"sg-warn\") { version } }", json!({}))
        .await
        .unwrap();
    assert_eq!(v["policy"]["version"], 2);

    // A runaway policy fails the run at its limit instead of hanging it.
    let runaway = "package spacelift\n\ndeny[msg] {\n  some i, j, k\n  numbers.range(1, 2000)[i]\n  numbers.range(1, 2000)[j]\n  numbers.range(1, 2000)[k]\n  msg := \"never\"\n}\n";
    create(&app, "runaway", "PLAN", runaway, &[]).await.unwrap();
    gql(
        &app,
        "mutation { policyDetach(id: \"sg-warn\", stackId: \"sg\") { policy } }",
        json!({}),
    )
    .await
    .unwrap();
    gql(
        &app,
        "mutation { policyAttach(id: \"runaway\", stackId: \"sg\") { policy } }",
        json!({}),
    )
    .await
    .unwrap();
    app.client.run_discard(&held.id).await.unwrap();
    let run = app.client.run_trigger("sg", false).await.unwrap();
    let failed = app.wait_state(&run.id, RunState::Failed, 180).await;
    let err = failed.error.unwrap_or_default();
    assert!(
        err.starts_with("plan policy runaway: policy evaluation exceeded its limit"),
        "{err}"
    );
    let evs = evaluations(&app, &run.id).await;
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0]["outcome"], "error");

    // Attaching to an unknown stack, detaching what is not attached.
    let e = gql(
        &app,
        "mutation { policyAttach(id: \"runaway\", stackId: \"nope\") { policy } }",
        json!({}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Some("not_found"), "{e}");
    let e = gql(
        &app,
        "mutation { policyDetach(id: \"cost\", stackId: \"sg\") { policy } }",
        json!({}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Some("not_found"), "{e}");
    app.teardown().await;
}

both_backends!(plan_policies_on_real_runs, Options::default(), plan_policies);
