//! GraphQL details: subscriptions over `graphql-transport-ws`, error codes, health.

use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::both_backends;
use crate::harness::*;

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(app: &TestApp, token: &str) -> Ws {
    let mut req = format!("{}/graphql/ws", app.base.replace("http://", "ws://"))
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("Sec-WebSocket-Protocol", "graphql-transport-ws".parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let init = serde_json::json!({"type": "connection_init", "payload": {"token": token}});
    ws.send(Message::Text(init.to_string().into())).await.unwrap();
    let ack = next_json(&mut ws).await;
    assert_eq!(ack["type"], "connection_ack", "{ack}");
    ws
}

async fn next_json(ws: &mut Ws) -> serde_json::Value {
    loop {
        let m = tokio::time::timeout(std::time::Duration::from_secs(60), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        match m {
            Message::Text(t) => return serde_json::from_str(&t).unwrap(),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected websocket message {other:?}"),
        }
    }
}

async fn subscribe(ws: &mut Ws, id: &str, query: &str) {
    let msg = serde_json::json!({"id": id, "type": "subscribe", "payload": {"query": query}});
    ws.send(Message::Text(msg.to_string().into())).await.unwrap();
}

async fn subscriptions(app: TestApp) {
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", TWO_RESOURCES)]);
    app.stack("sub", &repo, true).await;
    // Subscribe before the run starts moving: a run held in QUEUED by having no runner
    // would be simplest, but the runner is fast, so follow from seq -1 and collect all.
    let run = app.client.run_trigger("sub", false).await.unwrap();
    let mut ws = connect(&app, ADMIN_TOKEN).await;
    subscribe(
        &mut ws,
        "states",
        &format!("subscription {{ runStateChanged(runId: \"{}\") {{ state }} }}", run.id),
    )
    .await;
    subscribe(
        &mut ws,
        "logs",
        &format!("subscription {{ runLogs(runId: \"{}\") {{ seq data }} }}", run.id),
    )
    .await;
    let mut states = Vec::new();
    let mut seqs = Vec::new();
    let mut text = String::new();
    let mut done = 0;
    while done < 2 {
        let m = next_json(&mut ws).await;
        match (m["type"].as_str(), m["id"].as_str()) {
            (Some("next"), Some("states")) => states.push(
                m["payload"]["data"]["runStateChanged"]["state"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            ),
            (Some("next"), Some("logs")) => {
                let c = &m["payload"]["data"]["runLogs"];
                seqs.push(c["seq"].as_i64().unwrap());
                text.push_str(c["data"].as_str().unwrap());
            }
            (Some("complete"), _) => done += 1,
            _ => panic!("unexpected {m}"),
        }
    }
    assert_eq!(states.last().map(String::as_str), Some("FINISHED"), "{states:?}");
    let mut sorted = states.clone();
    sorted.dedup();
    assert_eq!(sorted, states, "no state repeated");
    assert_eq!(
        seqs,
        (0..seqs.len() as i64).collect::<Vec<_>>(),
        "every chunk once, in order"
    );
    assert_eq!(text, app.log_text(&run.id).await);
    assert!(text.contains("Apply complete!"));

    // Bad credentials on the socket are refused; another org's run is not found.
    let mut req = format!("{}/graphql/ws", app.base.replace("http://", "ws://"))
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("Sec-WebSocket-Protocol", "graphql-transport-ws".parse().unwrap());
    let (mut bad, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let init = serde_json::json!({"type": "connection_init", "payload": {"token": "tpk_nope"}});
    bad.send(Message::Text(init.to_string().into())).await.unwrap();
    let refused = tokio::time::timeout(std::time::Duration::from_secs(10), bad.next())
        .await
        .unwrap();
    assert!(
        !matches!(&refused, Some(Ok(Message::Text(t))) if t.contains("connection_ack")),
        "connection with a bad token was acknowledged: {refused:?}"
    );
    let org = app
        .store
        .create_org("elsewhere", "Elsewhere", chrono::Utc::now())
        .await
        .unwrap();
    let key = "tpk_elsewhere_key";
    app.store
        .create_api_key(
            org.id,
            None,
            "k",
            &terraplane_api::auth::hash_secret(key),
            "admin",
            "service",
            None,
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    let mut theirs = connect(&app, key).await;
    subscribe(
        &mut theirs,
        "x",
        &format!("subscription {{ runLogs(runId: \"{}\") {{ seq }} }}", run.id),
    )
    .await;
    let m = next_json(&mut theirs).await;
    assert_eq!(m["payload"]["errors"][0]["message"], "run not found", "{m}");
    assert_eq!(m["payload"]["errors"][0]["extensions"]["code"], "not_found", "{m}");
    app.teardown().await;
}
both_backends!(graphql_subscriptions, Options::default(), subscriptions);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_error_codes() {
    let app = spawn(
        Backend::Sqlite,
        Options {
            runners: 0,
            ..Options::default()
        },
    )
    .await
    .unwrap();
    let http = app.http();
    let r = http.get(format!("{}/healthz", app.base)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = http.get(format!("{}/readyz", app.base)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body, serde_json::json!({"database": "ok", "queue": "ok"}));
    // Errors carry stable codes; unknown ids are "not found", not leaks.
    let q = r#"mutation { runConfirm(id: "not-a-uuid") { id } }"#;
    let r: serde_json::Value = http
        .post(format!("{}/graphql", app.base))
        .bearer_auth(ADMIN_TOKEN)
        .json(&serde_json::json!({"query": q}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["errors"][0]["extensions"]["code"], "not_found", "{r}");
    let q = r#"{ stacks { id } }"#;
    let r: serde_json::Value = http
        .post(format!("{}/graphql", app.base))
        .json(&serde_json::json!({"query": q}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["errors"][0]["extensions"]["code"], "unauthenticated", "{r}");
    let r: serde_json::Value = http
        .post(format!("{}/graphql", app.base))
        .bearer_auth(ADMIN_TOKEN)
        .json(&serde_json::json!({"query": r#"mutation { stackCreate(input: {name: "x", repository: "r", projectRoot: "../etc"}) { id } }"#}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["errors"][0]["extensions"]["code"], "bad_request", "{r}");
    assert!(
        r["errors"][0]["message"].as_str().unwrap().contains("relative path"),
        "{r}"
    );
    // Login with a wrong password and with an unknown email look the same.
    let login = |email: &str| {
        let q = format!(r#"mutation {{ login(email: "{email}", password: "nope") {{ token }} }}"#);
        http.post(format!("{}/graphql", app.base))
            .json(&serde_json::json!({"query": q}))
            .send()
    };
    let a: serde_json::Value = login("admin@terraplane.local").await.unwrap().json().await.unwrap();
    let b: serde_json::Value = login("ghost@terraplane.local").await.unwrap().json().await.unwrap();
    assert_eq!(a["errors"][0]["message"], b["errors"][0]["message"]);
    assert_eq!(a["errors"][0]["extensions"]["code"], "unauthenticated");
    // Repeated failures throttle that email from this address, even with the right password.
    for _ in 0..4 {
        login("admin@terraplane.local").await.unwrap();
    }
    let q = r#"mutation { login(email: "admin@terraplane.local", password: "admin-password") { token } }"#;
    let r: serde_json::Value = http
        .post(format!("{}/graphql", app.base))
        .json(&serde_json::json!({"query": q}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["errors"][0]["extensions"]["code"], "rate_limited", "{r}");
    assert!(
        r["errors"][0]["message"].as_str().unwrap().contains("try again in"),
        "{r}"
    );
    app.teardown().await;
}
