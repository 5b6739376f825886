//! The audit trail through the product: mutations over GraphQL and the state backend,
//! logins, each recorded with actor, target, request id and client address, in one
//! verifiable chain per organization.

use serde_json::{Value, json};
use terraplane_client::{Client, ClientError};

use crate::both_backends;
use crate::harness::*;

async fn gql(c: &Client, q: &str, vars: Value) -> Result<Value, ClientError> {
    c.graphql::<Value>(q, vars).await
}

async fn trail(app: TestApp) {
    let c = &app.client;
    app.stack("audited", "file:///x", false).await;
    c.stack_lock("audited", Some("maintenance")).await.unwrap();
    c.stack_unlock("audited", false).await.unwrap();
    let run = c.run_trigger("audited", true).await.unwrap();
    c.run_cancel(&run.id).await.unwrap();
    gql(c, "mutation { spaceCreate(slug: \"dev\") { id } }", json!({}))
        .await
        .unwrap();
    gql(
        c,
        "mutation { userCreate(email: \"bob@example.com\", password: \"a-long-password-1\") { id } }",
        json!({}),
    )
    .await
    .unwrap();
    gql(
        c,
        "mutation { roleGrant(space: \"dev\", subject: {user: \"bob@example.com\"}, role: \"reader\") { role } }",
        json!({}),
    )
    .await
    .unwrap();
    let key = gql(
        c,
        "mutation { apiKeyCreate(name: \"ci\", kind: \"service\", role: \"reader\") { secret key { id } } }",
        json!({}),
    )
    .await
    .unwrap();
    let secret = key["apiKeyCreate"]["secret"].as_str().unwrap().to_owned();
    // State backend: lock, write, unlock.
    let http = app.http();
    let url = app.state_url(app.org(), "audited");
    let info = r#"{"ID":"l1","Operation":"OperationTypeApply","Who":"me@host","Created":"2026-01-01T00:00:00Z"}"#;
    let lock = reqwest::Method::from_bytes(b"LOCK").unwrap();
    let unlock = reqwest::Method::from_bytes(b"UNLOCK").unwrap();
    assert_eq!(
        http.request(lock, &url)
            .bearer_auth(ADMIN_TOKEN)
            .header("X-Request-Id", "req-lock-1")
            .body(info)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let state = json!({"version": 4, "serial": 1, "lineage": "L", "resources": []}).to_string();
    assert_eq!(
        http.post(format!("{url}?ID=l1"))
            .bearer_auth(ADMIN_TOKEN)
            .body(state)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        http.request(unlock, &url)
            .bearer_auth(ADMIN_TOKEN)
            .body(info)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    // Logins: a failure and a success.
    assert!(
        c.with_token(None)
            .login("bob@example.com", "wrong-password-x", None)
            .await
            .is_err()
    );
    c.with_token(None)
        .login("bob@example.com", "a-long-password-1", None)
        .await
        .unwrap();

    let events = gql(
        c,
        "{ auditEvents(limit: 100) { seq actor action target before after requestId clientIp } }",
        json!({}),
    )
    .await
    .unwrap();
    let events = events["auditEvents"].as_array().unwrap().clone();
    let actions: Vec<&str> = events.iter().rev().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(
        actions,
        [
            "stack.create",
            "stack.lock",
            "stack.unlock",
            "run.trigger",
            "run.cancel",
            "space.create",
            "member.add",
            "role.grant",
            "api_key.create",
            "state.lock",
            "state.write",
            "state.unlock",
            "login.failure",
            "login.success",
        ],
        "{events:#?}"
    );
    let seqs: Vec<i64> = events.iter().rev().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, (1..=14).collect::<Vec<_>>());
    let lock_ev = events.iter().find(|e| e["action"] == "state.lock").unwrap();
    assert_eq!(lock_ev["requestId"], "req-lock-1");
    assert_eq!(lock_ev["clientIp"], "127.0.0.1");
    assert_eq!(lock_ev["target"], "audited");
    let unlock_ev = events.iter().find(|e| e["action"] == "stack.unlock").unwrap();
    assert_eq!(unlock_ev["before"]["locked_by"], unlock_ev["actor"]);
    assert!(unlock_ev["after"]["locked_by"].is_null());
    assert_eq!(
        events.iter().find(|e| e["action"] == "login.failure").unwrap()["actor"],
        "bob@example.com"
    );
    // Secrets never reach the trail.
    let text = serde_json::to_string(&events).unwrap();
    assert!(!text.contains(&secret) && !text.contains("a-long-password-1") && !text.contains(ADMIN_TOKEN));
    // Filters.
    let mine = gql(c, "{ auditEvents(action: \"state.write\") { target } }", json!({}))
        .await
        .unwrap();
    assert_eq!(mine["auditEvents"], json!([{"target": "audited"}]));
    let bobs = gql(c, "{ auditEvents(actor: \"bob@example.com\") { action } }", json!({}))
        .await
        .unwrap();
    assert_eq!(
        bobs["auditEvents"],
        json!([{"action": "login.success"}, {"action": "login.failure"}])
    );
    let v = gql(c, "{ auditVerify { ok events problem } }", json!({}))
        .await
        .unwrap();
    assert_eq!(v["auditVerify"], json!({"ok": true, "events": 14, "problem": null}));
    // A refused mutation writes nothing.
    assert!(c.stack_delete("nope").await.is_err());
    assert_eq!(
        gql(c, "{ auditVerify { events } }", json!({})).await.unwrap()["auditVerify"]["events"],
        14
    );
    // Tampering in the database is named by verify.
    let org = app.store.get_org_by_slug("default").await.unwrap();
    let conn = sea_orm::Database::connect(app.cfg.database.url.as_str()).await.unwrap();
    use sea_orm::ConnectionTrait;
    conn.execute_unprepared(&format!(
        "UPDATE audit_events SET target = 'other' WHERE org_id = '{}' AND seq = 7",
        org.id
    ))
    .await
    .unwrap();
    let v = gql(c, "{ auditVerify { ok seq problem } }", json!({})).await.unwrap();
    assert_eq!(v["auditVerify"]["ok"], false);
    assert_eq!(v["auditVerify"]["seq"], 7);
    assert!(v["auditVerify"]["problem"].as_str().unwrap().contains("altered"));
    // Only owners read the trail.
    let reader = c.with_token(Some(secret));
    assert_eq!(
        gql(&reader, "{ auditEvents { seq } }", json!({}))
            .await
            .unwrap_err()
            .code(),
        Some("forbidden")
    );
    app.teardown().await;
}
both_backends!(
    audit_trail,
    Options {
        runners: 0,
        ..Options::default()
    },
    trail
);
