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
    assert_eq!(app.client.run(&tracked.id).await.unwrap().unwrap().state, RunState::Queued);
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
