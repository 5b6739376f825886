//! The client against a scripted HTTP server: what it sends, and how it reads answers
//! and refusals. The real server is exercised by the end-to-end tests.

use serde_json::json;
use terraplane_client::{Client, ClientError, RunState, RunType, StackCreateInput};
use terraplane_test_support::mock::{MockServer, Reply};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn run_json(state: &str) -> serde_json::Value {
    json!({
        "id": "0190f0a0-0000-7000-8000-000000000001", "stackId": "net", "type": "TRACKED",
        "state": state, "terminal": false, "commitSha": "abc", "triggeredBy": "ada@example.com",
        "driftDetection": false, "planSummary": null, "hasChanges": null, "error": null,
        "outputs": null, "runnerId": null,
        "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z"
    })
}

#[tokio::test]
async fn sends_bearer_token_query_and_variables() -> TestResult {
    let srv = MockServer::start(|_| Reply::json(200, json!({"data": {"runTrigger": run_json("QUEUED")}}))).await?;
    let c = Client::new(&srv.url(), Some("tok-123".into()))?;
    let run = c.run_trigger("net", true).await?;
    assert_eq!(run.state, RunState::Queued);
    assert_eq!(run.run_type, RunType::Tracked);

    let reqs = srv.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/graphql");
    assert_eq!(r.header("authorization").as_deref(), Some("Bearer tok-123"));
    let body: serde_json::Value = serde_json::from_slice(&r.body)?;
    let q = body["query"].as_str().unwrap_or_default();
    assert!(q.contains("runTrigger(stackId: $stackId, type: PROPOSED"), "{q}");
    assert_eq!(body["variables"], json!({"stackId": "net", "commitSha": null}));
    Ok(())
}

#[tokio::test]
async fn graphql_errors_become_api_errors_with_their_code() -> TestResult {
    let srv = MockServer::start(|_| {
        Reply::json(
            200,
            json!({"data": null, "errors": [{"message": "stack net is locked by bob", "extensions": {"code": "stack_locked"}}]}),
        )
    })
    .await?;
    let c = Client::new(&srv.url(), Some("t".into()))?;
    let input = StackCreateInput {
        name: "net".into(),
        repository: "r".into(),
        ..Default::default()
    };
    match c.stack_create(&input).await {
        Err(ClientError::Api { code, message }) => {
            assert_eq!(code, "stack_locked");
            assert_eq!(message, "stack net is locked by bob");
        }
        other => panic!("expected an api error, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn http_401_is_unauthenticated() -> TestResult {
    let srv = MockServer::start(|_| Reply::text(401, "")).await?;
    let err = Client::new(&srv.url(), None)?.me().await.err();
    assert!(err.as_ref().is_some_and(ClientError::is_unauthenticated), "{err:?}");
    Ok(())
}

#[tokio::test]
async fn missing_stack_and_run_are_none() -> TestResult {
    let srv = MockServer::start(|r| {
        let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
        let q = body["query"].as_str().unwrap_or_default();
        if q.contains("stack(id") {
            Reply::json(200, json!({"data": {"stack": null}}))
        } else {
            Reply::json(200, json!({"data": {"run": null}}))
        }
    })
    .await?;
    let c = Client::new(&srv.url(), Some("t".into()))?;
    assert!(c.stack("nope").await?.is_none());
    assert!(c.run("nope").await?.is_none());
    assert!(c.logs("nope", None).await.err().is_some_and(|e| e.is_not_found()));
    Ok(())
}

#[tokio::test]
async fn state_pull_reads_raw_bytes_no_content_and_errors() -> TestResult {
    let srv = MockServer::start(|r| match (r.path.as_str(), r.query.as_deref()) {
        ("/base/api/v1/orgs/acme/stacks/net/state", None) => Reply::bytes(200, b"{\"serial\":3}".to_vec()),
        ("/base/api/v1/orgs/acme/stacks/net/state", Some("serial=2")) => Reply::bytes(200, b"{\"serial\":2}".to_vec()),
        ("/base/api/v1/orgs/acme/stacks/empty/state", _) => Reply::text(204, ""),
        _ => Reply::json(404, json!({"code": "not_found", "message": "stack not found"})),
    })
    .await?;
    let c = Client::new(&format!("{}/base", srv.url()), Some("k".into()))?;
    assert_eq!(
        c.state_pull("acme", "net", None).await?,
        Some(b"{\"serial\":3}".to_vec())
    );
    assert_eq!(
        c.state_pull("acme", "net", Some(2)).await?,
        Some(b"{\"serial\":2}".to_vec())
    );
    assert_eq!(c.state_pull("acme", "empty", None).await?, None);
    let err = c.state_pull("acme", "gone", None).await.err();
    assert!(err.as_ref().is_some_and(ClientError::is_not_found), "{err:?}");
    assert!(
        srv.requests()
            .iter()
            .all(|r| r.header("authorization").as_deref() == Some("Bearer k"))
    );
    Ok(())
}

#[tokio::test]
async fn transport_failure_is_not_an_api_error() -> TestResult {
    // Bind and drop to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let err = Client::new(&format!("http://127.0.0.1:{port}"), None)?.me().await.err();
    assert!(matches!(err, Some(ClientError::Transport(_))), "{err:?}");
    Ok(())
}
