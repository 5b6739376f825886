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

/// Two approvals from `infra-leads` release a run held for review, at both stages: when it
/// is queued and when its plan waits for confirmation. Only each reviewer's latest review
/// counts; a reviewer outside the team does not count; a rejection ends the run.
async fn approvals(app: TestApp) {
    let g = |q: String| {
        let c = app.client.clone();
        async move { c.graphql::<Value>(&q, json!({})).await.unwrap() }
    };
    g(r#"mutation { teamCreate(slug: "infra-leads") { id } }"#.into()).await;
    let mut reviewer = std::collections::HashMap::new();
    for u in ["alice", "bob", "carol"] {
        g(format!(
            r#"mutation {{ userCreate(email: "{u}@example.com", password: "a-long-password-1") {{ id }} }}"#
        ))
        .await;
        g(format!(
            r#"mutation {{ roleGrant(space: "root", subject: {{user: "{u}@example.com"}}, role: "reader") {{ role }} }}"#
        ))
        .await;
        if u != "carol" {
            g(format!(
                r#"mutation {{ teamAddMember(team: "infra-leads", email: "{u}@example.com") {{ id }} }}"#
            ))
            .await;
        }
        let l = app
            .client
            .with_token(None)
            .login(&format!("{u}@example.com"), "a-long-password-1", None)
            .await
            .unwrap();
        reviewer.insert(u, app.client.with_token(Some(l.token)));
    }
    let policy = r#"package spacelift

approvals := {a.author | a := input.reviews.current.approvals[_]; a.session.teams[_] == "infra-leads"}

approve { count(approvals) >= 2 }
reject { count(input.reviews.current.rejections) > 0 }
"#;
    create(&app, "two-leads", "APPROVAL", policy, &["autoattach:reviewed"])
        .await
        .unwrap();
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", &buckets(1))]);
    let input = terraplane_client::StackCreateInput {
        slug: Some("reviewed".into()),
        name: "reviewed".into(),
        repository: repo,
        autodeploy: Some(false),
        labels: Some(vec!["reviewed".into()]),
        ..Default::default()
    };
    app.client.stack_create(&input).await.unwrap();

    let review = |who: &'static str, run: String, approve: bool, note: &'static str| {
        let c = reviewer[who].clone();
        async move {
            let d = if approve { "APPROVE" } else { "REJECT" };
            c.graphql::<Value>(
                "mutation($id: ID!, $d: ReviewDecision!, $n: String) { runReview(id: $id, decision: $d, note: $n) { state } }",
                json!({"id": run, "d": d, "n": note}),
            )
            .await
            .unwrap()["runReview"]["state"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    let run = app.client.run_trigger("reviewed", false).await.unwrap();
    assert_eq!(run.state, RunState::PendingReview, "held as it is queued");
    // Nothing runs while it waits.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        app.client.run(&run.id).await.unwrap().unwrap().state,
        RunState::PendingReview
    );
    assert_eq!(review("alice", run.id.clone(), true, "ok").await, "PENDING_REVIEW");
    // alice again: still one approval; carol is not in the team.
    assert_eq!(
        review("alice", run.id.clone(), true, "still ok").await,
        "PENDING_REVIEW"
    );
    assert_eq!(review("carol", run.id.clone(), true, "me too").await, "PENDING_REVIEW");
    assert_eq!(review("bob", run.id.clone(), true, "ok").await, "QUEUED");
    // It plans, then waits again at confirmation: the earlier reviews are older now.
    app.wait_state(&run.id, RunState::PendingReview, 180).await;
    let e = app.client.run_confirm(&run.id).await.unwrap_err();
    assert_eq!(e.code(), Some("invalid_run_state"), "{e}");
    assert_eq!(review("bob", run.id.clone(), true, "plan ok").await, "PENDING_REVIEW");
    assert_eq!(review("alice", run.id.clone(), true, "plan ok").await, "UNCONFIRMED");
    app.client.run_confirm(&run.id).await.unwrap();
    app.wait_state(&run.id, RunState::Finished, 180).await;
    let v = gql(
        &app,
        "query($id: ID!) { run(id: $id) { reviews { reviewer teams stage decision note } policyEvaluations { policy type outcome } } }",
        json!({"id": run.id}),
    )
    .await
    .unwrap();
    let reviews = v["run"]["reviews"].as_array().unwrap();
    assert_eq!(reviews.len(), 6);
    assert_eq!(
        reviews[0],
        json!({"reviewer": "alice@example.com", "teams": ["infra-leads"], "stage": "QUEUED", "decision": "APPROVE", "note": "ok"})
    );
    assert_eq!(reviews[2]["teams"], json!([]));
    assert_eq!(reviews[5]["stage"], "UNCONFIRMED");
    let outcomes: Vec<&str> = v["run"]["policyEvaluations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "APPROVAL")
        .map(|e| e["outcome"].as_str().unwrap())
        .collect();
    // queued, alice, alice, carol, bob; unconfirmed, bob, alice.
    assert_eq!(
        outcomes,
        vec![
            "undecided",
            "undecided",
            "undecided",
            "undecided",
            "approve",
            "undecided",
            "undecided",
            "approve"
        ]
    );

    // A rejection ends the run.
    let run = app.client.run_trigger("reviewed", false).await.unwrap();
    assert_eq!(run.state, RunState::PendingReview);
    assert_eq!(review("carol", run.id.clone(), false, "no").await, "FAILED");
    let failed = app.client.run(&run.id).await.unwrap().unwrap();
    assert_eq!(failed.error.as_deref(), Some("rejected by approval policy two-leads"));
    // Reviews are taken only while a run waits.
    let e = reviewer["alice"]
        .graphql::<Value>(
            "mutation($id: ID!) { runReview(id: $id, decision: APPROVE) { state } }",
            json!({"id": run.id}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("invalid_run_state"), "{e}");
    // Another organization's run, or none: not found.
    let e = gql(
        &app,
        "mutation($id: ID!) { runReview(id: $id, decision: APPROVE) { state } }",
        json!({"id": uuid::Uuid::now_v7().to_string()}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Some("not_found"), "{e}");
    app.teardown().await;
}

/// A trigger chain: each FINISHED tracked run of A, then B, queues the next stack's run.
async fn trigger_chain(app: TestApp) {
    let policy = r#"package spacelift

next := {"chain-a": "chain-b", "chain-b": "chain-c"}

trigger[next[input.stack.id]] {
  input.run.state == "FINISHED"
  input.run.type == "TRACKED"
}
"#;
    create(&app, "chain", "TRIGGER", policy, &["autoattach:chain"])
        .await
        .unwrap();
    for (i, slug) in ["chain-a", "chain-b", "chain-c"].iter().enumerate() {
        let repo = git_repo(&app.tmp.path().join(slug), &[("main.tf", &buckets(i + 1))]);
        let input = terraplane_client::StackCreateInput {
            slug: Some((*slug).into()),
            name: (*slug).into(),
            repository: repo,
            autodeploy: Some(true),
            labels: Some(vec!["chain".into()]),
            ..Default::default()
        };
        app.client.stack_create(&input).await.unwrap();
    }
    let first = app.client.run_trigger("chain-a", false).await.unwrap();
    app.wait_state(&first.id, RunState::Finished, 180).await;
    let mut from = first.id.clone();
    for (prev, slug) in [("chain-a", "chain-b"), ("chain-b", "chain-c")] {
        let mut found = None;
        for _ in 0..300 {
            if let Some(r) = app.client.runs(slug, 10).await.unwrap().into_iter().next() {
                found = Some(r);
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let run = found.unwrap_or_else(|| panic!("no run on {slug}"));
        assert_eq!(run.triggered_by, format!("trigger policy chain (run {from} of {prev})"));
        let done = app.wait_state(&run.id, RunState::Finished, 180).await;
        assert_eq!(done.run_type, terraplane_client::RunType::Tracked);
        let evs = evaluations(&app, &from).await;
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0]["outcome"], "trigger");
        assert_eq!(evs[0]["messages"], json!([slug]));
        from = run.id;
    }
    // C names no one: its run's evaluation triggers nothing, and A ran once.
    let evs = evaluations(&app, &from).await;
    assert_eq!(evs[0]["outcome"], "none");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(app.client.runs("chain-a", 10).await.unwrap().len(), 1);
    assert_eq!(app.client.runs("chain-c", 10).await.unwrap().len(), 1);
    app.teardown().await;
}

/// Login policies: `deny` refuses a member's login (and is recorded), `admin` makes the
/// session an owner's; only owners write login policies.
async fn login_policies(app: TestApp) {
    let g = |q: String| {
        let c = app.client.clone();
        async move { c.graphql::<Value>(&q, json!({})).await.unwrap() }
    };
    g(r#"mutation { teamCreate(slug: "admins") { id } }"#.into()).await;
    for u in ["mallory", "alice", "bob"] {
        g(format!(
            r#"mutation {{ userCreate(email: "{u}@example.com", password: "a-long-password-1") {{ id }} }}"#
        ))
        .await;
    }
    g(r#"mutation { teamAddMember(team: "admins", email: "alice@example.com") { id } }"#.into()).await;
    g(r#"mutation { roleGrant(space: "root", subject: {user: "bob@example.com"}, role: "admin") { role } }"#.into())
        .await;
    let login = |u: &'static str| {
        let c = app.client.with_token(None);
        async move { c.login(&format!("{u}@example.com"), "a-long-password-1", None).await }
    };
    // Before any login policy, everyone logs in; bob (a space admin) cannot write one.
    let bob = app.client.with_token(Some(login("bob").await.unwrap().token));
    let gate = "package spacelift\n\ndeny { input.session.login == \"mallory@example.com\" }\n\nadmin { input.session.teams[_] == \"admins\" }\n";
    let q = "mutation($b: String!) { policyCreate(input: {id: \"gate\", name: \"gate\", type: \"LOGIN\", body: $b}) { id } }";
    let e = bob.graphql::<Value>(q, json!({"b": gate})).await.unwrap_err();
    assert_eq!(e.code(), Some("forbidden"), "{e}");
    app.client.graphql::<Value>(q, json!({"b": gate})).await.unwrap();
    // Login policies are never attached to stacks, nor autoattached.
    let e = create(&app, "gate2", "LOGIN", "package spacelift\n", &["autoattach:x"])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("bad_request"), "{e}");

    let e = login("mallory").await.unwrap_err();
    assert_eq!(e.code(), Some("forbidden"), "{e}");
    assert!(e.to_string().contains("login denied by policy gate"), "{e}");
    // alice's session is an owner's; bob's is not.
    let alice = app.client.with_token(Some(login("alice").await.unwrap().token));
    alice
        .graphql::<Value>("{ auditEvents { seq } }", json!({}))
        .await
        .unwrap();
    let bob = app.client.with_token(Some(login("bob").await.unwrap().token));
    let e = bob
        .graphql::<Value>("{ auditEvents { seq } }", json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("forbidden"), "{e}");
    let v = g(r#"{ policy(id: "gate") { evaluations { subject outcome } } }"#.into()).await;
    let mut evs: Vec<(String, String)> = v["policy"]["evaluations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["subject"].as_str().unwrap().into(),
                e["outcome"].as_str().unwrap().into(),
            )
        })
        .collect();
    evs.sort();
    assert_eq!(
        evs,
        vec![
            ("login:alice@example.com".into(), "admin".into()),
            ("login:bob@example.com".into(), "undecided".into()),
            ("login:mallory@example.com".into(), "deny".into()),
        ]
    );
    app.teardown().await;
}

/// A notification policy routes a run's failure to a webhook endpoint that does not
/// subscribe to failures, with the policy's own payload, signed like any delivery.
async fn notification_routing(app: TestApp) {
    let hook =
        terraplane_test_support::mock::MockServer::start(|_| terraplane_test_support::mock::Reply::text(200, "ok"))
            .await
            .unwrap();
    gql(
        &app,
        "mutation($u: String!) { notificationEndpointCreate(input: {id: \"ops-hook\", name: \"ops\", kind: WEBHOOK, url: $u, secret: \"ops-hook-secret\", events: [DRIFT_DETECTED]}) { id } }",
        json!({"u": hook.url()}),
    )
    .await
    .unwrap();
    let policy = r#"package spacelift

webhook[{"endpoint_id": "ops-hook", "payload": {"text": msg}}] {
  input.run_updated.state == "FAILED"
  msg := sprintf("%s failed: %s", [input.run_updated.stack.id, input.run_updated.run.id])
}
"#;
    create(&app, "route-failures", "NOTIFICATION", policy, &["autoattach:routed"])
        .await
        .unwrap();
    // A bucket name the sandbox refuses: the plan fails.
    let bad = "terraform {\n  required_providers {\n    sandbox = { source = \"terraplane/sandbox\" }\n  }\n}\nresource \"sandbox_bucket\" \"b\" {\n  name = \"x\"\n}\n";
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", bad)]);
    let input = terraplane_client::StackCreateInput {
        slug: Some("routed".into()),
        name: "routed".into(),
        repository: repo,
        labels: Some(vec!["routed".into()]),
        ..Default::default()
    };
    app.client.stack_create(&input).await.unwrap();
    let run = app.client.run_trigger("routed", false).await.unwrap();
    app.wait_state(&run.id, RunState::Failed, 180).await;
    for _ in 0..200 {
        if !hook.requests().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let reqs = hook.requests();
    assert_eq!(reqs.len(), 1, "one routed delivery");
    assert_eq!(
        reqs[0].header("X-Terraplane-Signature-256").unwrap(),
        terraplane_scheduler::audit_delivery::signature(b"ops-hook-secret", &reqs[0].body)
    );
    let body: Value = serde_json::from_slice(&reqs[0].body).unwrap();
    assert_eq!(body, json!({"text": format!("routed failed: {}", run.id)}));
    let evs = evaluations(&app, &run.id).await;
    let kinds: Vec<(&str, &str)> = evs
        .iter()
        .map(|e| (e["type"].as_str().unwrap(), e["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(kinds, vec![("NOTIFICATION", "decided")]);
    app.teardown().await;
}

both_backends!(plan_policies_on_real_runs, Options::default(), plan_policies);
both_backends!(
    notification_policies_route_events,
    Options::default(),
    notification_routing
);
both_backends!(
    login_policies_deny_and_grant_admin,
    Options {
        runners: 0,
        ..Options::default()
    },
    login_policies
);
both_backends!(trigger_policies_chain_stacks, Options::default(), trigger_chain);
both_backends!(approval_with_two_reviewers, Options::default(), approvals);
