//! Notifications: endpoints per space subscribed by event and stack label, delivered from
//! the outbox with retries (exponential backoff, `Retry-After` on 429) until a limit, each
//! delivery on its own; history in GraphQL. The clock is stepped, not slept.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{TimeZone, Utc};
use serde_json::{Value, json};
use terraplane_client::RunState;
use terraplane_domain::ManualClock;
use terraplane_test_support::mock::{MockServer, Reply};

use crate::harness::*;

async fn gql(app: &TestApp, q: &str, v: Value) -> Result<Value, terraplane_client::ClientError> {
    app.client.graphql::<Value>(q, v).await
}

async fn deliveries(app: &TestApp, endpoint: &str) -> Vec<Value> {
    let r = gql(
        app,
        "query($e: ID) { notificationDeliveries(endpoint: $e) { event status attempts lastStatusCode lastError nextAttemptAt createdAt stack runId } }",
        json!({"e": endpoint}),
    )
    .await
    .unwrap();
    r["notificationDeliveries"].as_array().unwrap().clone()
}

async fn until<F: Fn(&[Value]) -> bool>(app: &TestApp, endpoint: &str, f: F) -> Vec<Value> {
    for _ in 0..200 {
        let d = deliveries(app, endpoint).await;
        if f(&d) {
            return d;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "deliveries of {endpoint} never got there: {:?}",
        deliveries(app, endpoint).await
    );
}

async fn retries(app: TestApp, clock: Arc<ManualClock>) {
    let ok = MockServer::start(|_| Reply::text(200, "ok")).await.unwrap();
    let broken = MockServer::start(|_| Reply::text(500, "upstream exploded"))
        .await
        .unwrap();
    let calls = Arc::new(Mutex::new(0));
    let c2 = calls.clone();
    let limited = MockServer::start(move |_| {
        let mut n = c2.lock().unwrap();
        *n += 1;
        if *n == 1 {
            Reply::text(429, "slow down").with_header("Retry-After", "7")
        } else {
            Reply::text(200, "ok")
        }
    })
    .await
    .unwrap();
    let create = |id: &str, url: String, kind: &str, labels: &str| {
        format!(
            r#"mutation {{ notificationEndpointCreate(input: {{id: "{id}", name: "{id}", kind: {kind}, url: "{url}", secret: "hook-secret", events: [RUN_FINISHED, RUN_FAILED], stackLabels: {labels}}}) {{ id hasSecret }} }}"#
        )
    };
    let e = gql(&app, &create("ok", ok.url(), "WEBHOOK", "[]"), json!({}))
        .await
        .unwrap();
    assert_eq!(e["notificationEndpointCreate"]["hasSecret"], true);
    gql(&app, &create("broken", broken.url(), "SLACK", "[]"), json!({}))
        .await
        .unwrap();
    gql(&app, &create("limited", limited.url(), "TEAMS", "[]"), json!({}))
        .await
        .unwrap();
    gql(&app, &create("other-label", ok.url(), "WEBHOOK", "[\"db\"]"), json!({}))
        .await
        .unwrap();

    // Bad input: the reason, nothing stored.
    for (input, want) in [
        (
            r#"{name: "x", kind: WEBHOOK, url: "not a url", events: [RUN_FAILED]}"#,
            "url",
        ),
        (
            r#"{name: "x", kind: WEBHOOK, url: "ftp://h/x", events: [RUN_FAILED]}"#,
            "http or https",
        ),
        (
            r#"{name: "x", kind: WEBHOOK, url: "http://h/x", events: []}"#,
            "at least one event",
        ),
        (
            r#"{name: "x", kind: PAGERDUTY, url: "http://h/x", events: [DRIFT_DETECTED]}"#,
            "routing key",
        ),
    ] {
        let e = gql(
            &app,
            &format!("mutation {{ notificationEndpointCreate(input: {input}) {{ id }} }}"),
            json!({}),
        )
        .await
        .unwrap_err();
        assert_eq!(e.code(), Some("bad_request"), "{e}");
        assert!(e.to_string().contains(want), "{e}");
    }
    let e = gql(&app, "mutation { notificationEndpointCreate(input: {name: \"x\", kind: CARRIER_PIGEON, url: \"http://h\", events: [RUN_FAILED]}) { id } }", json!({}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("CARRIER_PIGEON"), "{e}");
    let list = gql(&app, "{ notificationEndpoints { id } }", json!({})).await.unwrap();
    assert_eq!(list["notificationEndpoints"].as_array().unwrap().len(), 4);

    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", TWO_RESOURCES)]);
    app.stack("web", &repo, true).await;
    let run = app.client.run_trigger("web", false).await.unwrap();
    app.wait_state(&run.id, RunState::Finished, 120).await;

    // The healthy endpoint has it at once, signed; the label filter keeps `other-label` out.
    let d = until(&app, "ok", |d| d.iter().any(|x| x["status"] == "DELIVERED")).await;
    assert_eq!(d[0]["event"], "RUN_FINISHED");
    assert_eq!(d[0]["stack"], "web");
    let req = ok.requests().into_iter().next().unwrap();
    assert_eq!(
        req.header("X-Terraplane-Signature-256").unwrap(),
        terraplane_scheduler::audit_delivery::signature(b"hook-secret", &req.body)
    );
    let body: Value = serde_json::from_slice(&req.body).unwrap();
    assert_eq!(
        (body["event"].as_str(), body["stack"].as_str()),
        (Some("run_finished"), Some("web"))
    );
    assert_eq!(body["run_id"], run.id.as_str());
    assert!(deliveries(&app, "other-label").await.is_empty());

    // 429 with Retry-After: 7 s later, not sooner.
    let d = until(&app, "limited", |d| d.first().is_some_and(|x| x["attempts"] == 1)).await;
    assert_eq!(d[0]["lastStatusCode"], 429);
    let created: chrono::DateTime<Utc> = serde_json::from_value(d[0]["createdAt"].clone()).unwrap();
    let next: chrono::DateTime<Utc> = serde_json::from_value(d[0]["nextAttemptAt"].clone()).unwrap();
    assert_eq!(next - created, chrono::Duration::seconds(7));
    clock.advance(chrono::Duration::seconds(6));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        deliveries(&app, "limited").await[0]["attempts"],
        1,
        "not before Retry-After"
    );
    clock.advance(chrono::Duration::seconds(1));
    let d = until(&app, "limited", |d| d[0]["status"] == "DELIVERED").await;
    assert_eq!(d[0]["attempts"], 2);
    let teams: Value = serde_json::from_slice(&limited.requests()[1].body).unwrap();
    assert_eq!(teams["attachments"][0]["content"]["type"], "AdaptiveCard");

    // 500 forever: backoff doubles, and after the configured 4 attempts it is FAILED.
    let mut last_attempts = 0;
    for _ in 0..20 {
        clock.advance(chrono::Duration::seconds(60));
        let d = until(&app, "broken", |d| {
            d[0]["attempts"].as_i64().unwrap_or(0) > last_attempts || d[0]["status"] == "FAILED"
        })
        .await;
        last_attempts = d[0]["attempts"].as_i64().unwrap();
        if d[0]["status"] == "FAILED" {
            break;
        }
    }
    let d = deliveries(&app, "broken").await;
    assert_eq!(d[0]["status"], "FAILED", "{d:?}");
    assert_eq!(d[0]["attempts"], 4);
    assert_eq!(d[0]["lastStatusCode"], 500);
    assert!(d[0]["lastError"].as_str().unwrap().contains("upstream exploded"));
    assert_eq!(broken.requests().len(), 4, "no attempt after giving up");
    clock.advance(chrono::Duration::seconds(600));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(broken.requests().len(), 4);
    // The healthy endpoint got nothing twice.
    assert_eq!(ok.requests().len(), 1);
    app.teardown().await;
}

mod deliveries_retry_back_off_and_give_up {
    use super::*;
    fn opts(c: &Arc<ManualClock>) -> Options {
        Options {
            clock: Some(c.clone()),
            notify_max_attempts: 4,
            ..Options::default()
        }
    }
    fn clock() -> Arc<ManualClock> {
        Arc::new(ManualClock::new(Utc.with_ymd_and_hms(2026, 11, 30, 9, 45, 0).unwrap()))
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite() {
        let c = clock();
        if let Some(app) = spawn(Backend::Sqlite, opts(&c)).await {
            retries(app, c).await;
        }
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        let c = clock();
        if let Some(app) = spawn(Backend::Postgres, opts(&c)).await {
            retries(app, c).await;
        }
    }
}
