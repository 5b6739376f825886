//! Drift detection: schedules fired by the scheduler on an injected clock (stepped, not
//! slept), checks as refresh-only proposed runs, the stack's drift status, the rules on when
//! a check may run, and bad input.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use serde_json::{Value, json};
use terraplane_client::RunState;
use terraplane_domain::ManualClock;

use crate::harness::*;

async fn gql(app: &TestApp, q: &str, v: Value) -> Result<Value, terraplane_client::ClientError> {
    app.client.graphql::<Value>(q, v).await
}

/// Waits for a run of `stack` matching `pred` to appear.
async fn wait_for_run(
    app: &TestApp,
    stack: &str,
    pred: impl Fn(&terraplane_client::Run) -> bool,
) -> terraplane_client::Run {
    for _ in 0..300 {
        if let Some(r) = app.client.runs(stack, 50).await.unwrap().into_iter().find(|r| pred(r)) {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no such run on {stack}");
}

async fn scheduled_checks(app: TestApp, clock: Arc<ManualClock>) {
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", TWO_RESOURCES)]);
    app.stack("net", &repo, true).await;
    app.stack("fresh", &repo, true).await;

    // Bad input: the reason is given, nothing is stored.
    for (cron, tz, want) in [
        ("61 * * * *", "UTC", "invalid cron expression"),
        ("every hour", "UTC", "invalid cron expression"),
        ("0 * * * *", "Mars/Olympus", "unknown time zone"),
    ] {
        let e = gql(
            &app,
            "mutation($c: String!, $t: String!) { driftScheduleAdd(stackId: \"net\", cron: $c, timezone: $t) { id } }",
            json!({"c": cron, "t": tz}),
        )
        .await
        .unwrap_err();
        assert_eq!(e.code(), Some("bad_request"), "{e}");
        assert!(e.to_string().contains(want), "{e}");
    }
    let none = gql(&app, "{ driftSchedules(stackId: \"net\") { id } }", json!({}))
        .await
        .unwrap();
    assert_eq!(none["driftSchedules"], json!([]));

    // A check needs a finished tracked run first.
    let e = gql(&app, "mutation { driftCheck(stackId: \"fresh\") { id } }", json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some("drift_check_not_possible"));
    assert!(e.to_string().contains("no finished tracked run"), "{e}");

    let run = app.client.run_trigger("net", false).await.unwrap();
    app.wait_state(&run.id, RunState::Finished, 120).await;
    let s = gql(&app, "{ stack(id: \"net\") { driftStatus driftReaction } }", json!({}))
        .await
        .unwrap();
    assert_eq!(s["stack"], json!({"driftStatus": "UNKNOWN", "driftReaction": "ALERT"}));

    // Hourly in Paris: nothing fires until the clock reaches the hour.
    let added = gql(
        &app,
        "mutation { driftScheduleAdd(stackId: \"net\", cron: \"0 * * * *\", timezone: \"Europe/Paris\", reaction: ALERT) { id nextRunAt } }",
        json!({}),
    )
    .await
    .unwrap();
    let next: chrono::DateTime<Utc> = serde_json::from_value(added["driftScheduleAdd"]["nextRunAt"].clone()).unwrap();
    assert_eq!(
        next,
        Utc.with_ymd_and_hms(2026, 11, 30, 10, 0, 0).unwrap(),
        "11:00 in Paris"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        app.client
            .runs("net", 50)
            .await
            .unwrap()
            .iter()
            .all(|r| !r.drift_detection)
    );
    clock.advance(chrono::Duration::minutes(30));
    let check = wait_for_run(&app, "net", |r| r.drift_detection).await;
    assert_eq!(check.run_type, terraplane_client::RunType::Proposed);
    let check = app.wait_state(&check.id, RunState::Finished, 120).await;
    assert_eq!(check.has_changes, Some(false));
    let log = app.log_text(&check.id).await;
    assert!(log.contains("-refresh-only"), "{log}");
    let s = gql(&app, "{ stack(id: \"net\") { driftStatus driftCheckedAt } }", json!({}))
        .await
        .unwrap();
    assert_eq!(s["stack"]["driftStatus"], "IN_SYNC");
    let sched = gql(&app, "{ driftSchedules(stackId: \"net\") { nextRunAt } }", json!({}))
        .await
        .unwrap();
    let next: chrono::DateTime<Utc> = serde_json::from_value(sched["driftSchedules"][0]["nextRunAt"].clone()).unwrap();
    assert_eq!(
        next,
        Utc.with_ymd_and_hms(2026, 11, 30, 11, 0, 0).unwrap(),
        "moved to the next hour"
    );
    let inbox = gql(&app, "{ driftRecords { id } }", json!({})).await.unwrap();
    assert_eq!(inbox["driftRecords"], json!([]), "in sync: nothing in the inbox");

    // A tracked run cancels a check still waiting (here: for a worker pool without runners).
    gql(
        &app,
        "mutation { stackUpdate(id: \"net\", input: {workerPool: \"parked\"}) { id } }",
        json!({}),
    )
    .await
    .unwrap();
    let check = gql(&app, "mutation { driftCheck(stackId: \"net\") { id } }", json!({}))
        .await
        .unwrap();
    let check_id = check["driftCheck"]["id"].as_str().unwrap().to_owned();
    let tracked = app.client.run_trigger("net", false).await.unwrap();
    let canceled = app.wait_state(&check_id, RunState::Canceled, 60).await;
    assert!(
        canceled
            .events
            .iter()
            .any(|e| e.note.as_deref().is_some_and(|n| n.contains("superseded"))),
        "{:?}",
        canceled.events
    );
    assert_eq!(
        app.client.run(&tracked.id).await.unwrap().unwrap().state,
        RunState::Queued
    );
    app.client.run_cancel(&tracked.id).await.unwrap();
    let e = gql(
        &app,
        "mutation { driftScheduleDelete(id: \"not-a-schedule\") { id } }",
        json!({}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Some("not_found"));
    app.teardown().await;
}

mod drift_schedules_fire_on_the_injected_clock {
    use super::*;
    fn opts(clock: &Arc<ManualClock>) -> Options {
        Options {
            clock: Some(clock.clone()),
            ..Options::default()
        }
    }
    fn clock() -> Arc<ManualClock> {
        // 09:45 UTC = 10:45 in Paris.
        Arc::new(ManualClock::new(Utc.with_ymd_and_hms(2026, 11, 30, 9, 45, 0).unwrap()))
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite() {
        let c = clock();
        if let Some(app) = spawn(Backend::Sqlite, opts(&c)).await {
            scheduled_checks(app, c).await;
        }
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        let c = clock();
        if let Some(app) = spawn(Backend::Postgres, opts(&c)).await {
            scheduled_checks(app, c).await;
        }
    }
}

const SANDBOX_TF: &str = r#"
terraform {
  required_providers {
    sandbox = { source = "terraplane/sandbox" }
  }
}
resource "sandbox_instance" "web" {
  name          = "web"
  instance_type = "t3.small"
  tags          = { env = "prod" }
}
resource "sandbox_security_group" "web" {
  name = "web"
  ingress {
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }
}
resource "sandbox_bucket" "logs" {
  name = "logs"
}
"#;

/// Console changes to sandbox resources are found by a scheduled check, exactly; with
/// `reconcile` a tracked run puts them back; the next check finds the stack in sync and
/// closes the record. Deleting a resource's file is drift too.
async fn sandbox_drift(app: TestApp, clock: Arc<ManualClock>) {
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", SANDBOX_TF)]);
    app.stack("cloud", &repo, true).await;
    let run = app.client.run_trigger("cloud", false).await.unwrap();
    app.wait_state(&run.id, RunState::Finished, 120).await;
    let root = app.tmp.path().join("sandbox").join(app.org()).join("cloud");
    let file = |kind: &str| {
        let dir = root.join(kind);
        std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path()
    };
    // The console changes: a tag on the instance, an ingress rule on the security group.
    let inst = file("instance");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&inst).unwrap()).unwrap();
    v["tags"]["env"] = json!("hacked");
    std::fs::write(&inst, v.to_string()).unwrap();
    let sg = file("security_group");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&sg).unwrap()).unwrap();
    v["ingress"]
        .as_array_mut()
        .unwrap()
        .push(json!({"from_port": 22, "to_port": 22, "protocol": "tcp", "cidr_blocks": ["0.0.0.0/0"]}));
    std::fs::write(&sg, v.to_string()).unwrap();

    // Who hears about it: a signed webhook and PagerDuty.
    let hook =
        terraplane_test_support::mock::MockServer::start(|_| terraplane_test_support::mock::Reply::text(200, "ok"))
            .await
            .unwrap();
    let pd = terraplane_test_support::mock::MockServer::start(|_| {
        terraplane_test_support::mock::Reply::json(202, json!({"status": "success", "message": "Event processed"}))
    })
    .await
    .unwrap();
    for (id, kind, url, secret) in [
        ("drift-hook", "WEBHOOK", hook.url(), "drift-hook-secret"),
        (
            "pager",
            "PAGERDUTY",
            format!("{}/v2/enqueue", pd.url()),
            "R0UT1NGKEY0123456789012345678901",
        ),
    ] {
        gql(
            &app,
            &format!(
                r#"mutation {{ notificationEndpointCreate(input: {{id: "{id}", name: "{id}", kind: {kind}, url: "{url}", secret: "{secret}", events: [DRIFT_DETECTED, DRIFT_RESOLVED]}}) {{ id }} }}"#
            ),
            json!({}),
        )
        .await
        .unwrap();
    }
    gql(
        &app,
        "mutation { driftScheduleAdd(stackId: \"cloud\", cron: \"*/10 * * * *\", reaction: RECONCILE) { id } }",
        json!({}),
    )
    .await
    .unwrap();
    clock.advance(chrono::Duration::minutes(10));
    let check = wait_for_run(&app, "cloud", |r| r.drift_detection).await;
    let check = app.wait_state(&check.id, RunState::Finished, 120).await;
    assert_eq!(check.has_changes, Some(true));
    let recs = gql(
        &app,
        "{ driftRecords(stackId: \"cloud\") { open resources { address action attributes } lastRunId } stack(id: \"cloud\") { driftStatus } }",
        json!({}),
    )
    .await
    .unwrap();
    assert_eq!(
        recs["driftRecords"][0]["resources"],
        json!([
            {"address": "sandbox_instance.web", "action": "update", "attributes": ["tags"]},
            {"address": "sandbox_security_group.web", "action": "update", "attributes": ["ingress"]},
        ]),
        "{recs}"
    );
    assert_eq!(recs["driftRecords"][0]["open"], true);
    assert_eq!(recs["stack"]["driftStatus"], "DRIFTED");
    for _ in 0..200 {
        if !hook.requests().is_empty() && !pd.requests().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let req = hook
        .requests()
        .into_iter()
        .next()
        .expect("the webhook heard of the drift");
    assert_eq!(
        req.header("X-Terraplane-Signature-256").unwrap(),
        terraplane_scheduler::audit_delivery::signature(b"drift-hook-secret", &req.body)
    );
    let body: Value = serde_json::from_slice(&req.body).unwrap();
    assert_eq!(body["event"], "drift_detected");
    assert_eq!(body["drift"], recs["driftRecords"][0]["resources"]);
    let trigger: Value = serde_json::from_slice(&pd.requests()[0].body).unwrap();
    assert_eq!(pd.requests()[0].path, "/v2/enqueue");
    assert_eq!(trigger["event_action"], "trigger");
    assert_eq!(trigger["routing_key"], "R0UT1NGKEY0123456789012345678901");
    assert!(trigger["payload"]["summary"].as_str().unwrap().contains("cloud"));
    let dedup = trigger["dedup_key"].as_str().unwrap().to_owned();
    // Reconcile: a tracked run (autodeploy here) restores the files.
    let fix = wait_for_run(&app, "cloud", |r| {
        r.run_type == terraplane_client::RunType::Tracked && r.id != run.id
    })
    .await;
    let fix = app.wait_state(&fix.id, RunState::Finished, 120).await;
    assert!(
        fix.triggered_by.contains("drift reconciliation"),
        "{}",
        fix.triggered_by
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&inst).unwrap()).unwrap();
    assert_eq!(v["tags"]["env"], "prod");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&sg).unwrap()).unwrap();
    assert_eq!(v["ingress"].as_array().unwrap().len(), 1);
    // The next check finds it in sync: the record closes.
    clock.advance(chrono::Duration::minutes(10));
    let second = wait_for_run(&app, "cloud", |r| r.drift_detection && r.id != check.id).await;
    let second = app.wait_state(&second.id, RunState::Finished, 120).await;
    assert_eq!(second.has_changes, Some(false));
    let recs = gql(
        &app,
        "{ driftRecords(stackId: \"cloud\") { open resolvedByRunId } stack(id: \"cloud\") { driftStatus } }",
        json!({}),
    )
    .await
    .unwrap();
    assert_eq!(recs["driftRecords"][0]["open"], false);
    assert_eq!(recs["driftRecords"][0]["resolvedByRunId"], second.id.as_str());
    assert_eq!(recs["stack"]["driftStatus"], "IN_SYNC");
    for _ in 0..200 {
        if pd.requests().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let resolve: Value = serde_json::from_slice(&pd.requests()[1].body).unwrap();
    assert_eq!(resolve["event_action"], "resolve");
    assert_eq!(
        resolve["dedup_key"],
        dedup.as_str(),
        "resolved with the trigger's dedup_key"
    );
    let hooks: Vec<Value> = hook
        .requests()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert!(hooks.iter().any(|b| b["event"] == "drift_resolved"));
    // Deleting a resource's file out of band is drift too (checked on demand).
    std::fs::remove_file(file("bucket")).unwrap();
    gql(
        &app,
        "mutation { stackUpdate(id: \"cloud\", input: {description: \"x\"}) { id } }",
        json!({}),
    )
    .await
    .unwrap();
    let on_demand = gql(&app, "mutation { driftCheck(stackId: \"cloud\") { id } }", json!({}))
        .await
        .unwrap();
    let id = on_demand["driftCheck"]["id"].as_str().unwrap().to_owned();
    app.wait_state(&id, RunState::Finished, 120).await;
    let inbox = gql(
        &app,
        "{ driftRecords(openOnly: true) { stack resources { address action } } }",
        json!({}),
    )
    .await
    .unwrap();
    assert_eq!(
        inbox["driftRecords"],
        json!([{"stack": "cloud", "resources": [{"address": "sandbox_bucket.logs", "action": "delete"}]}])
    );
    app.teardown().await;
}

mod sandbox_drift_is_found_and_reconciled {
    use super::*;
    fn clock() -> Arc<ManualClock> {
        Arc::new(ManualClock::new(Utc.with_ymd_and_hms(2026, 11, 30, 9, 45, 0).unwrap()))
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite() {
        let c = clock();
        let o = Options {
            clock: Some(c.clone()),
            ..Options::default()
        };
        if let Some(app) = spawn(Backend::Sqlite, o).await {
            sandbox_drift(app, c).await;
        }
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        let c = clock();
        let o = Options {
            clock: Some(c.clone()),
            ..Options::default()
        };
        if let Some(app) = spawn(Backend::Postgres, o).await {
            sandbox_drift(app, c).await;
        }
    }
}
