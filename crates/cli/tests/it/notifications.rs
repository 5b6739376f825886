//! Notifications: what `tpctl notification …` sends for each command and what it prints.
//! A secret is write-only: `-` reads it from stdin and nothing prints it.

use serde_json::{Value, json};
use terraplane_test_support::mock::MockServer;

use super::{T0, TestResult, data, env_for, operations, query, root_field, tpctl, tpctl_bin, variables};

fn endpoint_json(input: &Value) -> Value {
    let or = |k: &str, d: Value| if input[k].is_null() { d } else { input[k].clone() };
    json!({"id": or("id", json!("ops")), "name": or("name", json!("Ops")), "kind": or("kind", json!("WEBHOOK")),
           "url": or("url", json!("https://hooks.example.com/tp")), "space": or("space", json!("root")),
           "events": or("events", json!(["DRIFT_DETECTED", "RUN_FAILED"])),
           "stackLabels": or("stackLabels", json!([])), "hasSecret": !input["secret"].is_null(),
           "createdAt": T0})
}

fn delivery_json(endpoint: &str, status: &str, code: Option<i64>, error: Option<&str>) -> Value {
    json!({"id": format!("d-{status}"), "endpoint": endpoint, "event": "DRIFT_DETECTED", "stack": "net",
           "runId": "run-9", "status": status, "attempts": if status == "DELIVERED" { 1 } else { 4 },
           "lastStatusCode": code, "lastError": error, "nextAttemptAt": null, "createdAt": T0,
           "deliveredAt": if status == "DELIVERED" { json!(T0) } else { Value::Null }})
}

fn answer(field: &str, vars: &Value) -> Value {
    match field {
        "notificationEndpoints" => json!([
            endpoint_json(&json!({"secret": "x", "stackLabels": ["prod"]})),
            endpoint_json(&json!({"id": "chat", "name": "Chat", "kind": "SLACK",
                                  "url": "https://hooks.slack.com/services/T0", "events": ["RUN_NEEDS_CONFIRMATION"]}))
        ]),
        "notificationEndpointCreate" => endpoint_json(&vars["input"]),
        "notificationEndpointDelete" => endpoint_json(&json!({"id": vars["id"]})),
        "notificationDeliveries" => json!([
            delivery_json("ops", "FAILED", Some(502), Some("bad gateway")),
            delivery_json("chat", "DELIVERED", Some(200), None)
        ]),
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
async fn endpoint_create_sends_the_input_with_api_event_names() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(
        &env,
        &[
            "notification",
            "endpoint",
            "create",
            "Ops pager",
            "--kind",
            "pagerduty",
            "--url",
            "https://events.pagerduty.com/v2/enqueue",
            "--secret",
            "routing-key-123",
            "--event",
            "drift-detected",
            "--event",
            "drift_resolved,run-failed",
            "--label",
            "prod",
            "--space",
            "prod",
            "--id",
            "ops-pager",
        ],
    )
    .await?;
    o.result?;
    assert_eq!(
        operations(&srv)[0],
        (
            "notificationEndpointCreate".to_owned(),
            json!({"input": {"id": "ops-pager", "name": "Ops pager", "kind": "PAGERDUTY",
                             "url": "https://events.pagerduty.com/v2/enqueue", "secret": "routing-key-123",
                             "events": ["DRIFT_DETECTED", "DRIFT_RESOLVED", "RUN_FAILED"],
                             "stackLabels": ["prod"], "space": "prod"}})
        )
    );
    assert_eq!(
        o.out,
        "\
Created notification endpoint ops-pager

ID:           ops-pager
Name:         Ops pager
Kind:         PAGERDUTY
URL:          https://events.pagerduty.com/v2/enqueue
Space:        prod
Events:       DRIFT_DETECTED, DRIFT_RESOLVED, RUN_FAILED
Stack labels: prod
Secret:       set
Created:      2026-03-01 12:00:00
"
    );
    assert!(!o.out.contains("routing-key-123") && !o.err.contains("routing-key-123"));

    // Unset options are left to the server.
    let o = tpctl(
        &env,
        &[
            "notification",
            "endpoint",
            "create",
            "Chat",
            "--kind",
            "slack",
            "--url",
            "https://hooks.slack.com/services/T0",
            "--event",
            "RUN_NEEDS_CONFIRMATION",
            "-o",
            "json",
        ],
    )
    .await?;
    o.result?;
    assert_eq!(
        operations(&srv)[1].1,
        json!({"input": {"name": "Chat", "kind": "SLACK", "url": "https://hooks.slack.com/services/T0",
                         "events": ["RUN_NEEDS_CONFIRMATION"]}})
    );
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!((&v["kind"], &v["hasSecret"]), (&json!("SLACK"), &json!(false)));
    Ok(())
}

#[tokio::test]
async fn a_dash_secret_is_read_from_stdin_and_never_printed() -> TestResult {
    let srv = server().await?;
    let out = tpctl_bin(
        &srv,
        &[
            "notification",
            "endpoint",
            "create",
            "Hook",
            "--kind",
            "webhook",
            "--url",
            "https://hooks.example.com/tp",
            "--secret",
            "-",
            "--event",
            "policy-denied",
        ],
        b"hmac s3cr3t\n",
    )
    .await?;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        operations(&srv)[0].1["input"]["secret"],
        "hmac s3cr3t",
        "the line break echo adds is dropped"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Secret:       set\n"), "{stdout}");
    assert!(!stdout.contains("s3cr3t"), "{stdout}");
    Ok(())
}

#[tokio::test]
async fn endpoint_list_and_delete() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["notification", "endpoint", "list"]).await?;
    o.result?;
    assert_eq!(
        o.out,
        "\
ID     NAME   KIND      SPACE   SECRET   LABELS   EVENTS                      URL
ops    Ops    WEBHOOK   root    yes      prod     DRIFT_DETECTED,RUN_FAILED   https://hooks.example.com/tp
chat   Chat   SLACK     root    no       -        RUN_NEEDS_CONFIRMATION      https://hooks.slack.com/services/T0
"
    );
    let o = tpctl(&env, &["notification", "endpoint", "list", "-o", "json"]).await?;
    o.result?;
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!(v[0]["stackLabels"], json!(["prod"]));
    assert_eq!(v[1]["events"], json!(["RUN_NEEDS_CONFIRMATION"]));

    let o = tpctl(&env, &["notification", "endpoint", "delete", "chat"]).await?;
    o.result?;
    assert_eq!(o.out, "Deleted notification endpoint chat\n");
    let ops = operations(&srv);
    assert_eq!(ops[0], ("notificationEndpoints".to_owned(), json!({})));
    assert_eq!(ops[2], ("notificationEndpointDelete".to_owned(), json!({"id": "chat"})));
    Ok(())
}

#[tokio::test]
async fn deliveries_show_status_attempts_and_the_last_error() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["notification", "deliveries"]).await?;
    o.result?;
    assert_eq!(
        o.out,
        "\
CREATED               ENDPOINT   EVENT            STACK   STATUS      ATTEMPTS   LAST-CODE   LAST-ERROR
2026-03-01 12:00:00   ops        DRIFT_DETECTED   net     FAILED      4          502         bad gateway
2026-03-01 12:00:00   chat       DRIFT_DETECTED   net     DELIVERED   1          200         -
"
    );
    let o = tpctl(
        &env,
        &["notification", "deliveries", "ops", "--limit", "10", "-o", "json"],
    )
    .await?;
    o.result?;
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!(
        (&v[0]["lastError"], &v[0]["attempts"]),
        (&json!("bad gateway"), &json!(4))
    );
    // Without --limit the server's default applies.
    assert_eq!(
        operations(&srv),
        [
            ("notificationDeliveries".to_owned(), json!({"endpoint": null})),
            (
                "notificationDeliveries".to_owned(),
                json!({"endpoint": "ops", "limit": 10})
            ),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn empty_notification_lists_say_so_on_stderr() -> TestResult {
    let srv = MockServer::start(|r| {
        let field = root_field(&query(r));
        data(json!({ field: [] }))
    })
    .await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    for (args, remark) in [
        (
            &["notification", "endpoint", "list"][..],
            "No notification endpoints.\n",
        ),
        (&["notification", "deliveries"], "No notification deliveries.\n"),
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
