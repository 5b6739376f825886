//! The client against a scripted HTTP server: what it sends, and how it reads answers
//! and refusals. The real server is exercised by the end-to-end tests.

use serde_json::{Value, json};
use terraplane_client::{
    ApiKeyCreate, ApiKeyKind, AuditQuery, AwsIntegrationInput, Client, ClientError, ContextCreateInput, DriftReaction,
    DriftStatus, NotificationEndpointInput, NotificationEvent, NotificationKind, POLICY_EVALUATIONS_LIMIT,
    PolicyCreateInput, PolicyType, PolicyUpdateInput, ReviewDecision, RunState, RunType, SpaceCreate, StackCreateInput,
    Subject, UserCreate, VariableInput, VariableKind,
};
use terraplane_test_support::mock::{MockServer, Reply, Request};

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

/// The query text and variables of a recorded GraphQL request.
fn operation(r: &Request) -> (String, Value) {
    let body: Value = serde_json::from_slice(&r.body).unwrap_or_default();
    (
        body["query"].as_str().unwrap_or_default().to_owned(),
        body["variables"].clone(),
    )
}

const T0: &str = "2026-01-01T00:00:00Z";

fn space_json(id: &str, parent: Option<&str>) -> Value {
    json!({"id": id, "name": id, "description": "", "parent": parent, "inherit": parent.is_some(), "createdAt": T0})
}

fn key_json(id: &str) -> Value {
    json!({"id": id, "name": "ci", "kind": "service", "role": "", "owner": null, "createdAt": T0,
           "expiresAt": "2026-04-01T00:00:00Z", "lastUsedAt": null, "revokedAt": null})
}

/// Answers each operation by its root field, the way the server names them.
async fn org_server() -> std::io::Result<MockServer> {
    MockServer::start(|r| {
        let (q, _) = operation(r);
        let field: String = q
            .split_once('{')
            .map(|(_, rest)| rest.trim_start())
            .unwrap_or_default()
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        let v = match field.as_str() {
            "organizations" => json!([{"id": "o1", "slug": "acme", "name": "Acme"}]),
            "orgCreate" => json!({"id": "o2", "slug": "beta", "name": "beta"}),
            "spaces" => json!([space_json("root", None), space_json("prod", Some("root"))]),
            "space" => Value::Null,
            "spaceCreate" => space_json("prod", Some("root")),
            "spaceDelete" | "roleRevoke" => json!(true),
            "teams" => json!([{"id": "ops", "name": "Ops", "members": []}]),
            "teamCreate" => json!({"id": "ops", "name": "Ops", "members": []}),
            "teamAddMember" => json!({"id": "ops", "name": "Ops", "members": ["ada@example.com"]}),
            "users" => json!([{"id": "u1", "email": "ada@example.com", "name": "Ada", "role": "owner"}]),
            "userCreate" => json!({"id": "u2", "email": "bob@example.com", "name": "Bob", "role": "member"}),
            "roleBindings" | "roleGrant" => {
                let b = json!({"space": "prod", "subjectKind": "team", "subject": "ops", "role": "writer", "createdAt": T0});
                if field == "roleGrant" { b } else { json!([b]) }
            }
            "apiKeys" => json!([key_json("k1")]),
            "apiKeyCreate" => json!({"secret": "tpk_secret", "key": key_json("k2")}),
            "apiKeyRevoke" => {
                let mut k = key_json("k1");
                k["revokedAt"] = json!("2026-01-02T00:00:00Z");
                k
            }
            _ => return Reply::json(200, json!({"errors": [{"message": format!("unknown field {field}")}]})),
        };
        Reply::json(200, json!({ "data": { field: v } }))
    })
    .await
}

#[tokio::test]
async fn organization_management_sends_each_operation_with_its_variables() -> TestResult {
    let srv = org_server().await?;
    let c = Client::new(&srv.url(), Some("t".into()))?;

    assert_eq!(c.organizations().await?[0].slug, "acme");
    assert_eq!(c.org_create("beta", None).await?.slug, "beta");
    let spaces = c.spaces().await?;
    assert_eq!(spaces[1].parent.as_deref(), Some("root"));
    assert!(spaces[1].inherit);
    assert_eq!(c.space("nope").await?, None);
    let space = c
        .space_create(&SpaceCreate {
            slug: "prod".into(),
            parent: Some("root".into()),
            inherit: true,
            description: Some("Production".into()),
            ..Default::default()
        })
        .await?;
    assert_eq!(space.id, "prod");
    c.space_delete("prod").await?;
    assert_eq!(c.teams().await?[0].id, "ops");
    c.team_create("ops", Some("Ops")).await?;
    assert_eq!(
        c.team_add_member("ops", "ada@example.com").await?.members,
        ["ada@example.com"]
    );
    assert_eq!(c.users().await?[0].role, "owner");
    let member = c
        .user_create(&UserCreate {
            email: "bob@example.com".into(),
            password: Some("correct horse battery".into()),
            owner: false,
            ..Default::default()
        })
        .await?;
    assert_eq!(member.role, "member");
    assert_eq!(c.role_bindings().await?[0].subject_kind, "team");
    let b = c.role_grant("prod", &Subject::Team("ops".into()), "writer").await?;
    assert_eq!((b.space.as_str(), b.role.as_str()), ("prod", "writer"));
    c.role_revoke("prod", &Subject::ApiKey("k1".into())).await?;
    assert_eq!(c.api_keys().await?[0].kind, ApiKeyKind::Service);
    let created = c
        .api_key_create(&ApiKeyCreate {
            name: "ci".into(),
            kind: Some(ApiKeyKind::Service),
            role: Some("writer".into()),
            space: Some("prod".into()),
            expires_in_days: Some(30),
        })
        .await?;
    assert_eq!((created.secret.as_str(), created.key.id.as_str()), ("tpk_secret", "k2"));
    assert!(c.api_key_revoke("k1").await?.revoked_at.is_some());

    let ops: Vec<(String, Value)> = srv.requests().iter().map(operation).collect();
    let expected: &[(&str, Value)] = &[
        ("organizations {", json!({})),
        (
            "orgCreate(slug: $slug, name: $name)",
            json!({"slug": "beta", "name": null}),
        ),
        ("spaces {", json!({})),
        ("space(id: $id)", json!({"id": "nope"})),
        (
            "spaceCreate(slug: $slug, name: $name, parent: $parent, inherit: $inherit, description: $description)",
            json!({"slug": "prod", "parent": "root", "inherit": true, "description": "Production"}),
        ),
        ("spaceDelete(id: $id)", json!({"id": "prod"})),
        ("teams {", json!({})),
        (
            "teamCreate(slug: $slug, name: $name)",
            json!({"slug": "ops", "name": "Ops"}),
        ),
        (
            "teamAddMember(team: $team, email: $email)",
            json!({"team": "ops", "email": "ada@example.com"}),
        ),
        ("users {", json!({})),
        (
            "userCreate(email: $email, name: $name, password: $password, owner: $owner)",
            json!({"email": "bob@example.com", "password": "correct horse battery", "owner": false}),
        ),
        ("roleBindings {", json!({})),
        (
            "roleGrant(space: $space, subject: $subject, role: $role)",
            json!({"space": "prod", "subject": {"team": "ops"}, "role": "writer"}),
        ),
        (
            "roleRevoke(space: $space, subject: $subject)",
            json!({"space": "prod", "subject": {"apiKey": "k1"}}),
        ),
        ("apiKeys {", json!({})),
        (
            "apiKeyCreate(name: $name, kind: $kind, role: $role, space: $space, expiresInDays: $expiresInDays) { secret key {",
            json!({"name": "ci", "kind": "service", "role": "writer", "space": "prod", "expiresInDays": 30}),
        ),
        ("apiKeyRevoke(id: $id)", json!({"id": "k1"})),
    ];
    assert_eq!(ops.len(), expected.len());
    for ((q, vars), (fragment, want)) in ops.iter().zip(expected) {
        assert!(q.contains(fragment), "{fragment:?} not in {q}");
        assert_eq!(vars, want, "{q}");
    }
    // The variables are declared with the schema's types.
    assert!(
        ops[12]
            .0
            .starts_with("mutation($space: ID!, $subject: SubjectInput!, $role: String!)")
    );
    assert!(ops[15].0.contains("$expiresInDays: Int"));
    Ok(())
}

#[tokio::test]
async fn boolean_mutations_answering_false_are_errors() -> TestResult {
    let srv = MockServer::start(|_| Reply::json(200, json!({"data": {"spaceDelete": false}}))).await?;
    let err = Client::new(&srv.url(), Some("t".into()))?
        .space_delete("prod")
        .await
        .err();
    assert!(matches!(err, Some(ClientError::Decode(_))), "{err:?}");
    Ok(())
}

#[tokio::test]
async fn management_refusals_keep_their_codes() -> TestResult {
    let srv = MockServer::start(|r| {
        let (q, _) = operation(r);
        let (code, message) = if q.contains("spaceCreate") {
            ("space_exists", "space prod already exists")
        } else {
            ("forbidden", "this needs the organization owner role")
        };
        Reply::json(
            200,
            json!({"data": null, "errors": [{"message": message, "extensions": {"code": code}}]}),
        )
    })
    .await?;
    let c = Client::new(&srv.url(), Some("t".into()))?;
    let err = c
        .space_create(&SpaceCreate {
            slug: "prod".into(),
            ..Default::default()
        })
        .await
        .err();
    assert_eq!(err.as_ref().and_then(ClientError::code), Some("space_exists"));
    let err = c
        .role_grant("prod", &Subject::User("a@b.c".into()), "admin")
        .await
        .err();
    assert_eq!(err.as_ref().and_then(ClientError::code), Some("forbidden"));
    assert_eq!(
        err.map(|e| e.to_string()).as_deref(),
        Some("this needs the organization owner role")
    );
    Ok(())
}

fn audit_event_json(seq: i64) -> Value {
    json!({"id": format!("ev-{seq}"), "seq": seq, "actor": "ada@example.com", "action": "stack.unlock",
           "targetKind": "stack", "target": "net", "before": {"locked_by": "ada@example.com"},
           "after": {"locked_by": null}, "requestId": null, "clientIp": "10.0.0.7", "at": T0,
           "hash": format!("h{seq}"), "prevHash": format!("h{}", seq - 1)})
}

#[tokio::test]
async fn audit_events_send_only_the_filters_given() -> TestResult {
    let srv = MockServer::start(|_| {
        Reply::json(
            200,
            json!({"data": {"auditEvents": [audit_event_json(2), audit_event_json(1)]}}),
        )
    })
    .await?;
    let c = Client::new(&srv.url(), Some("t".into()))?;
    let events = c.audit_events(&AuditQuery::default()).await?;
    assert_eq!(events.len(), 2);
    let e = &events[0];
    assert_eq!(
        (e.seq, e.action.as_str(), e.target_kind.as_str()),
        (2, "stack.unlock", "stack")
    );
    assert_eq!(e.before, Some(json!({"locked_by": "ada@example.com"})));
    assert_eq!(e.after, Some(json!({"locked_by": null})));
    assert_eq!(
        (e.request_id.as_deref(), e.client_ip.as_deref()),
        (None, Some("10.0.0.7"))
    );
    assert_eq!(e.prev_hash, "h1");

    let q = AuditQuery {
        actor: Some("ada@example.com".into()),
        action: Some("stack.unlock".into()),
        target: Some("net".into()),
        since: Some("2026-11-30T10:00:00Z".parse()?),
        until: Some("2026-11-30T12:30:00+02:00".parse()?),
        limit: Some(10),
    };
    c.audit_events(&q).await?;

    let ops: Vec<(String, Value)> = srv.requests().iter().map(operation).collect();
    assert!(
        ops[0].0.starts_with(
            "query($actor: String, $action: String, $target: String, $since: DateTime, $until: DateTime, $limit: Int = 100) { \
             auditEvents(actor: $actor, action: $action, target: $target, since: $since, until: $until, limit: $limit) { \
             id seq actor action targetKind target before after requestId clientIp at hash prevHash }"
        ),
        "{}",
        ops[0].0
    );
    assert_eq!(ops[0].1, json!({}));
    assert_eq!(
        ops[1].1,
        json!({"actor": "ada@example.com", "action": "stack.unlock", "target": "net",
               "since": "2026-11-30T10:00:00Z", "until": "2026-11-30T10:30:00Z", "limit": 10})
    );
    Ok(())
}

#[tokio::test]
async fn audit_verify_reads_intact_and_broken_chains() -> TestResult {
    let srv = MockServer::start(|r| {
        let v = if r.header("authorization").as_deref() == Some("Bearer intact") {
            json!({"ok": true, "events": 14, "problem": null, "seq": null, "eventId": null})
        } else {
            json!({"ok": false, "events": 6, "problem": "event 7 (ev-7) was altered", "seq": 7, "eventId": "ev-7"})
        };
        Reply::json(200, json!({"data": {"auditVerify": v}}))
    })
    .await?;
    let v = Client::new(&srv.url(), Some("intact".into()))?.audit_verify().await?;
    assert!(v.ok && v.events == 14 && v.problem.is_none() && v.seq.is_none());
    let v = Client::new(&srv.url(), Some("broken".into()))?.audit_verify().await?;
    assert!(!v.ok);
    assert_eq!((v.events, v.seq, v.event_id.as_deref()), (6, Some(7), Some("ev-7")));
    assert_eq!(v.problem.as_deref(), Some("event 7 (ev-7) was altered"));
    assert!(
        operation(&srv.requests()[0])
            .0
            .contains("auditVerify { ok events problem seq eventId }")
    );
    Ok(())
}

#[tokio::test]
async fn member_role_and_removal_send_their_variables() -> TestResult {
    let srv = MockServer::start(|r| {
        let (q, vars) = operation(r);
        if q.contains("memberRemove") {
            return Reply::json(200, json!({"data": {"memberRemove": true}}));
        }
        let role = if vars["owner"] == true { "owner" } else { "member" };
        Reply::json(
            200,
            json!({"data": {"memberSetRole": {"id": "u2", "email": vars["email"], "name": "Bob", "role": role}}}),
        )
    })
    .await?;
    let c = Client::new(&srv.url(), Some("t".into()))?;
    assert_eq!(c.member_set_role("bob@example.com", true).await?.role, "owner");
    assert_eq!(c.member_set_role("bob@example.com", false).await?.role, "member");
    c.member_remove("bob@example.com").await?;
    let ops: Vec<(String, Value)> = srv.requests().iter().map(operation).collect();
    assert!(ops[0].0.starts_with(
        "mutation($email: String!, $owner: Boolean!) { memberSetRole(email: $email, owner: $owner) { id email name role }"
    ));
    assert_eq!(ops[0].1, json!({"email": "bob@example.com", "owner": true}));
    assert_eq!(ops[1].1, json!({"email": "bob@example.com", "owner": false}));
    assert_eq!(
        ops[2],
        (
            "mutation($email: String!) { memberRemove(email: $email) }".to_owned(),
            json!({"email": "bob@example.com"})
        )
    );
    Ok(())
}

#[tokio::test]
async fn last_owner_and_forbidden_refusals_keep_their_codes() -> TestResult {
    let srv = MockServer::start(|r| {
        let (q, _) = operation(r);
        let (code, message) = if q.contains("member") {
            ("last_owner", "the last owner of an organization cannot be removed")
        } else {
            ("forbidden", "this needs the organization owner role")
        };
        Reply::json(
            200,
            json!({"data": null, "errors": [{"message": message, "extensions": {"code": code}}]}),
        )
    })
    .await?;
    let c = Client::new(&srv.url(), Some("t".into()))?;
    let err = c.member_remove("ada@example.com").await.err();
    assert_eq!(err.as_ref().and_then(ClientError::code), Some("last_owner"));
    assert_eq!(
        err.map(|e| e.to_string()).as_deref(),
        Some("the last owner of an organization cannot be removed")
    );
    let err = c.member_set_role("ada@example.com", false).await.err();
    assert_eq!(err.as_ref().and_then(ClientError::code), Some("last_owner"));
    let err = c.audit_events(&AuditQuery::default()).await.err();
    assert_eq!(err.as_ref().and_then(ClientError::code), Some("forbidden"));
    let err = c.audit_verify().await.err();
    assert_eq!(err.as_ref().and_then(ClientError::code), Some("forbidden"));
    Ok(())
}

// Login sessions: refresh tokens, renewal, logout.

fn gql_query(r: &Request) -> String {
    let body: Value = serde_json::from_slice(&r.body).unwrap_or_default();
    body["query"].as_str().unwrap_or_default().to_owned()
}

fn gql_variables(r: &Request) -> Value {
    let body: Value = serde_json::from_slice(&r.body).unwrap_or_default();
    body["variables"].clone()
}

fn login_json(token: &str, refresh: Option<&str>) -> Value {
    let mut v = json!({"token": token, "expiresAt": "2026-03-01T12:15:00Z",
                       "organization": {"id": "o1", "slug": "acme", "name": "Acme"}});
    if let Some(r) = refresh {
        v["refreshToken"] = json!(r);
    }
    v
}

fn expired() -> Reply {
    Reply::json(
        200,
        json!({"data": null, "errors": [{"message": "token expired", "extensions": {"code": "unauthenticated"}}]}),
    )
}

fn me_reply() -> Reply {
    Reply::json(
        200,
        json!({"data": {"me": {"id": "u1", "name": "ada@example.com", "role": "member",
                               "organization": {"id": "o1", "slug": "acme", "name": "Acme"}}}}),
    )
}

#[tokio::test]
async fn login_and_refresh_return_the_refresh_token() -> TestResult {
    let srv = MockServer::start(|r| {
        let q = gql_query(r);
        if q.contains("refresh(") {
            Reply::json(200, json!({"data": {"refresh": login_json("a2", Some("r2"))}}))
        } else if gql_variables(r)["email"] == "old@example.com" {
            // A server from before refresh tokens.
            Reply::json(200, json!({"data": {"login": login_json("a0", None)}}))
        } else {
            Reply::json(200, json!({"data": {"login": login_json("a1", Some("r1"))}}))
        }
    })
    .await?;
    let c = Client::new(&srv.url(), None)?;
    let r = c.login("ada@example.com", "pw", None).await?;
    assert_eq!((r.token.as_str(), r.refresh_token.as_deref()), ("a1", Some("r1")));
    assert!(gql_query(&srv.requests()[0]).contains("token refreshToken expiresAt"));
    let d = format!("{r:?}");
    assert!(!d.contains("a1") && !d.contains("r1"), "{d}");

    assert_eq!(c.login("old@example.com", "pw", None).await?.refresh_token, None);

    // `refresh` goes without any credential, even from a client holding one.
    let r = c.with_token(Some("expired-access".into())).refresh("r1").await?;
    assert_eq!((r.token.as_str(), r.refresh_token.as_deref()), ("a2", Some("r2")));
    let req = &srv.requests()[2];
    assert!(req.header("authorization").is_none());
    assert_eq!(gql_variables(req), json!({"refreshToken": "r1"}));
    Ok(())
}

#[tokio::test]
async fn an_expired_session_is_renewed_once_and_the_request_retried() -> TestResult {
    use std::sync::{Arc, Mutex};
    let srv = MockServer::start(|r| {
        if gql_query(r).contains("refresh(") {
            return match gql_variables(r)["refreshToken"].as_str() {
                Some("r1") => Reply::json(200, json!({"data": {"refresh": login_json("a2", Some("r2"))}})),
                _ => Reply::json(
                    200,
                    json!({"data": null, "errors": [{"message": "refresh token was already used; the session is ended",
                                                     "extensions": {"code": "unauthenticated"}}]}),
                ),
            };
        }
        match r.header("authorization").as_deref() {
            Some("Bearer a2") => me_reply(),
            _ => expired(),
        }
    })
    .await?;
    let saved: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = saved.clone();
    let c = Client::new(&srv.url(), Some("a1".into()))?.with_session("r1".into(), move |r| {
        sink.lock()
            .map_err(|e| e.to_string())?
            .push(format!("{} {:?}", r.token, r.refresh_token));
        Ok(())
    });
    // Two requests failing at once still renew once: the rotated refresh token is never
    // presented twice.
    let (a, b) = tokio::join!(c.me(), c.me());
    assert_eq!(a?.organization.slug, "acme");
    assert_eq!(b?.organization.slug, "acme");
    let refreshes = srv
        .requests()
        .iter()
        .filter(|r| gql_query(r).contains("refresh("))
        .count();
    assert_eq!(refreshes, 1);
    assert_eq!(saved.lock().map_err(|e| e.to_string())?.clone(), ["a2 Some(\"r2\")"]);
    assert_eq!(c.token().as_deref(), Some("a2"));
    assert_eq!(c.clone().token().as_deref(), Some("a2"), "clones share the session");

    // A refresh the server refuses fails the call as a renewal failure, without retrying.
    let c = Client::new(&srv.url(), Some("a0".into()))?.with_session("stale".into(), |_| Ok(()));
    let before = srv.requests().len();
    match c.me().await {
        Err(ClientError::SessionRenewal { source }) => {
            assert!(source.is_unauthenticated());
            assert!(source.to_string().contains("already used"), "{source}");
        }
        other => panic!("expected a renewal failure, got {other:?}"),
    }
    assert_eq!(srv.requests().len() - before, 2, "the request and one refresh");

    // Without a session an expired token is just refused.
    let err = Client::new(&srv.url(), Some("a1".into()))?.me().await.err();
    assert!(err.as_ref().is_some_and(ClientError::is_token_expired), "{err:?}");
    Ok(())
}

#[tokio::test]
async fn the_retry_happens_once_and_save_failures_are_reported() -> TestResult {
    // The renewed token is refused as expired too (a clock skew, say): no second round.
    let srv = MockServer::start(|r| {
        if gql_query(r).contains("refresh(") {
            Reply::json(200, json!({"data": {"refresh": login_json("a2", Some("r2"))}}))
        } else {
            expired()
        }
    })
    .await?;
    let c = Client::new(&srv.url(), Some("a1".into()))?.with_session("r1".into(), |_| Ok(()));
    let err = c.me().await.err();
    assert!(err.as_ref().is_some_and(ClientError::is_token_expired), "{err:?}");
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 3, "request, refresh, one retry");
    assert_eq!(reqs[2].header("authorization").as_deref(), Some("Bearer a2"));

    let c = Client::new(&srv.url(), Some("a1".into()))?.with_session("r1".into(), |_| Err("disk full".into()));
    let err = c.me().await.err();
    assert!(
        matches!(&err, Some(ClientError::SessionSave(m)) if m == "disk full"),
        "{err:?}"
    );
    Ok(())
}

#[tokio::test]
async fn logout_sends_the_mutation_with_the_token() -> TestResult {
    let srv = MockServer::start(|r| {
        if r.header("authorization").as_deref() == Some("Bearer tpk_key") {
            Reply::json(
                200,
                json!({"data": null, "errors": [{"message": "only a login session can log out",
                                                 "extensions": {"code": "bad_request"}}]}),
            )
        } else {
            Reply::json(200, json!({"data": {"logout": true}}))
        }
    })
    .await?;
    Client::new(&srv.url(), Some("a1".into()))?.logout().await?;
    let r = &srv.requests()[0];
    assert_eq!(gql_query(r), "mutation { logout }");
    assert_eq!(r.header("authorization").as_deref(), Some("Bearer a1"));
    let err = Client::new(&srv.url(), Some("tpk_key".into()))?.logout().await.err();
    assert_eq!(err.as_ref().and_then(ClientError::code), Some("bad_request"));
    Ok(())
}

/// The root field of an operation (`contextAttach` in `mutation(…) { contextAttach(…) … }`).
fn root_field(q: &str) -> String {
    q.split_once('{')
        .map(|(_, rest)| rest.trim_start())
        .unwrap_or_default()
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect()
}

fn variable_json(name: &str, secret: bool) -> Value {
    json!({"name": name, "kind": "TERRAFORM", "secret": secret, "applyOnly": false,
           "value": if secret { Value::Null } else { json!("v") }, "checksum": "c1", "updatedAt": T0})
}

fn context_json() -> Value {
    json!({"id": "aws", "name": "AWS", "description": "", "labels": [], "space": "root",
           "variables": [variable_json("token", true)],
           "attachments": [{"context": "aws", "stack": "net", "priority": 1, "autoAttached": false}],
           "createdAt": T0})
}

fn aws_json() -> Value {
    json!({"id": "aws", "name": "AWS", "space": "root", "roleArn": "arn:r", "readRoleArn": null,
           "audience": "sts.amazonaws.com", "durationSeconds": 3600, "stacks": ["net"]})
}

#[tokio::test]
async fn contexts_variables_and_aws_integrations_send_each_operation_with_its_variables() -> TestResult {
    let srv = MockServer::start(|r| {
        let field = root_field(&operation(r).0);
        let v = match field.as_str() {
            "contexts" => json!([context_json()]),
            "context" | "contextCreate" | "contextDelete" => context_json(),
            "contextSetVariable" | "stackSetVariable" => variable_json("token", true),
            "contextUnsetVariable" | "stackUnsetVariable" => variable_json("region", false),
            "contextAttach" | "contextDetach" => {
                json!({"context": "aws", "stack": "net", "priority": 1, "autoAttached": false})
            }
            "stackVariables" => json!([variable_json("region", false)]),
            "stackEnvironment" => json!([{"name": "token", "kind": "ENV", "secret": true, "applyOnly": false,
                                          "value": null, "checksum": "c1", "source": "context:aws",
                                          "priority": null, "autoAttached": true}]),
            "awsIntegrations" => json!([aws_json()]),
            "awsIntegrationCreate" | "awsIntegrationDelete" | "awsIntegrationAttach" | "awsIntegrationDetach" => {
                aws_json()
            }
            _ => return Reply::json(200, json!({"errors": [{"message": format!("unknown field {field}")}]})),
        };
        Reply::json(200, json!({ "data": { field: v } }))
    })
    .await?;
    let c = Client::new(&srv.url(), Some("t".into()))?;
    let secret = VariableInput {
        name: "token".into(),
        value: "s3cr3t".into(),
        kind: VariableKind::Terraform,
        secret: true,
        apply_only: false,
    };

    let ctx = c.contexts().await?;
    assert_eq!(ctx[0].variables[0].value, None);
    assert_eq!(c.context("aws").await?.attachments[0].priority, 1);
    let created = c
        .context_create(&ContextCreateInput {
            name: "AWS".into(),
            labels: Some(vec!["autoattach:prod".into()]),
            ..Default::default()
        })
        .await?;
    assert_eq!(created.id, "aws");
    assert!(c.context_set_variable("aws", &secret).await?.secret);
    assert_eq!(c.context_unset_variable("aws", "region").await?.name, "region");
    assert_eq!(c.context_attach("aws", "net", 1).await?.stack, "net");
    assert_eq!(c.context_detach("aws", "net").await?.context, "aws");
    assert_eq!(c.context_delete("aws").await?.id, "aws");
    assert_eq!(c.stack_variables("net").await?[0].kind, VariableKind::Terraform);
    let env = c.stack_environment("net").await?;
    assert!(env[0].auto_attached && env[0].priority.is_none() && env[0].value.is_none());
    assert!(c.stack_set_variable("net", &secret).await?.secret);
    assert_eq!(
        c.stack_unset_variable("net", "region").await?.value.as_deref(),
        Some("v")
    );
    assert_eq!(c.aws_integrations().await?[0].stacks, ["net"]);
    let input = AwsIntegrationInput {
        name: "AWS".into(),
        role_arn: "arn:r".into(),
        ..Default::default()
    };
    assert_eq!(c.aws_integration_create(&input).await?.duration_seconds, 3600);
    assert_eq!(c.aws_integration_attach("aws", "net").await?.id, "aws");
    assert_eq!(c.aws_integration_detach("net").await?.id, "aws");
    assert_eq!(c.aws_integration_delete("aws").await?.id, "aws");

    let sent: Vec<(String, Value)> = srv.requests().iter().map(operation).collect();
    let var_input =
        json!({"name": "token", "value": "s3cr3t", "kind": "TERRAFORM", "secret": true, "applyOnly": false});
    let expected = [
        ("contexts", json!({})),
        ("context", json!({"id": "aws"})),
        (
            "contextCreate",
            json!({"input": {"name": "AWS", "labels": ["autoattach:prod"]}}),
        ),
        ("contextSetVariable", json!({"context": "aws", "input": var_input})),
        ("contextUnsetVariable", json!({"context": "aws", "name": "region"})),
        (
            "contextAttach",
            json!({"context": "aws", "stackId": "net", "priority": 1}),
        ),
        ("contextDetach", json!({"context": "aws", "stackId": "net"})),
        ("contextDelete", json!({"id": "aws"})),
        ("stackVariables", json!({"stackId": "net"})),
        ("stackEnvironment", json!({"stackId": "net"})),
        ("stackSetVariable", json!({"stackId": "net", "input": var_input})),
        ("stackUnsetVariable", json!({"stackId": "net", "name": "region"})),
        ("awsIntegrations", json!({})),
        (
            "awsIntegrationCreate",
            json!({"input": {"name": "AWS", "roleArn": "arn:r"}}),
        ),
        ("awsIntegrationAttach", json!({"id": "aws", "stackId": "net"})),
        ("awsIntegrationDetach", json!({"stackId": "net"})),
        ("awsIntegrationDelete", json!({"id": "aws"})),
    ];
    assert_eq!(sent.len(), expected.len());
    for ((q, vars), (field, want)) in sent.iter().zip(&expected) {
        assert_eq!(root_field(q), *field, "{q}");
        assert_eq!(vars, want, "{q}");
        // The schema's arguments are `String!`, not `ID!`: a variable of another type is refused.
        assert!(!q.contains("ID!"), "{q}");
    }
    let q = &sent[3].0;
    assert!(
        q.contains("contextSetVariable(context: $context, input: $input) { name kind secret applyOnly value checksum updatedAt }"),
        "{q}"
    );
    let q = &sent[0].0;
    assert!(
        q.contains("variables { name kind secret applyOnly value checksum updatedAt } attachments { context stack priority autoAttached } createdAt"),
        "{q}"
    );
    Ok(())
}

fn drift_record_json(id: &str, stack: &str, open: bool) -> Value {
    json!({"id": id, "stack": stack, "open": open,
           "resources": [{"address": "sandbox_file.motd", "action": "update", "attributes": ["content"]}],
           "lastRunId": "run-9", "firstSeenAt": T0, "lastSeenAt": T0,
           "resolvedAt": if open { Value::Null } else { json!(T0) },
           "resolvedByRunId": if open { Value::Null } else { json!("run-10") }})
}

fn schedule_json(id: &str) -> Value {
    json!({"id": id, "stack": "net", "cron": "0 */6 * * *", "timezone": "Europe/Berlin", "nextRunAt": T0})
}

fn endpoint_json(id: &str) -> Value {
    json!({"id": id, "name": "Ops", "kind": "PAGERDUTY", "url": "https://events.pagerduty.com/v2/enqueue",
           "space": "root", "events": ["DRIFT_DETECTED", "DRIFT_RESOLVED"], "stackLabels": ["prod"],
           "hasSecret": true, "createdAt": T0})
}

#[tokio::test]
async fn drift_and_notifications_send_each_operation_with_its_variables() -> TestResult {
    let srv = MockServer::start(|r| {
        let (q, vars) = operation(r);
        let field = root_field(&q);
        let data = match field.as_str() {
            // `stack_drift` asks for the stack and its open records at once.
            "stack" => json!({
                "stack": {"id": vars["id"], "driftStatus": "DRIFTED", "driftReaction": "ALERT",
                          "driftCheckedAt": T0},
                "driftRecords": [drift_record_json("dr-1", "net", true)]
            }),
            "driftRecords" => json!({ "driftRecords": [drift_record_json("dr-2", "app", false)] }),
            "driftSchedules" => json!({ "driftSchedules": [schedule_json("ds-1")] }),
            "driftScheduleAdd" | "driftScheduleDelete" => json!({ field.clone(): schedule_json("ds-1") }),
            "driftCheck" => {
                let mut run = run_json("QUEUED");
                run["type"] = json!("PROPOSED");
                run["driftDetection"] = json!(true);
                json!({ "driftCheck": run })
            }
            "notificationEndpoints" => json!({ "notificationEndpoints": [endpoint_json("ops")] }),
            "notificationEndpointCreate" | "notificationEndpointDelete" => {
                json!({ field.clone(): endpoint_json("ops") })
            }
            "notificationDeliveries" => json!({ "notificationDeliveries": [{
                "id": "d1", "endpoint": "ops", "event": "DRIFT_DETECTED", "stack": "net", "runId": "run-9",
                "status": "FAILED", "attempts": 5, "lastStatusCode": 502, "lastError": "bad gateway",
                "nextAttemptAt": null, "createdAt": T0, "deliveredAt": null
            }] }),
            _ => return Reply::json(200, json!({"errors": [{"message": format!("unknown field {field}")}]})),
        };
        Reply::json(200, json!({ "data": data }))
    })
    .await?;
    let c = Client::new(&srv.url(), Some("t".into()))?;

    let d = c.stack_drift("net").await?;
    assert_eq!((d.stack.as_str(), &d.drift_status), ("net", &DriftStatus::Drifted));
    assert_eq!(d.records[0].resources[0].attributes, ["content"]);
    let inbox = c.drift_records(None, false).await?;
    assert_eq!(inbox[0].resolved_by_run_id.as_deref(), Some("run-10"));
    c.drift_records(Some("app"), true).await?;
    assert_eq!(c.drift_schedules("net").await?[0].timezone, "Europe/Berlin");
    let added = c
        .drift_schedule_add("net", "0 */6 * * *", "Europe/Berlin", Some(&DriftReaction::Reconcile))
        .await?;
    assert_eq!(added.id, "ds-1");
    c.drift_schedule_add("net", "0 0 * * *", "UTC", None).await?;
    assert_eq!(c.drift_schedule_delete("ds-1").await?.cron, "0 */6 * * *");
    let check = c.drift_check("net").await?;
    assert!(check.drift_detection && check.run_type == RunType::Proposed);

    let endpoints = c.notification_endpoints().await?;
    assert_eq!(endpoints[0].kind, NotificationKind::Pagerduty);
    assert!(endpoints[0].has_secret);
    let input = NotificationEndpointInput {
        name: "Ops".into(),
        kind: NotificationKind::Pagerduty,
        url: "https://events.pagerduty.com/v2/enqueue".into(),
        secret: Some("routing-key".into()),
        events: vec![NotificationEvent::DriftDetected, NotificationEvent::DriftResolved],
        stack_labels: Some(vec!["prod".into()]),
        ..Default::default()
    };
    assert_eq!(c.notification_endpoint_create(&input).await?.id, "ops");
    assert_eq!(c.notification_endpoint_delete("ops").await?.id, "ops");
    let deliveries = c.notification_deliveries(None, None).await?;
    assert_eq!(deliveries[0].event, NotificationEvent::DriftDetected);
    assert_eq!(deliveries[0].last_status_code, Some(502));
    c.notification_deliveries(Some("ops"), Some(5)).await?;

    let sent: Vec<(String, Value)> = srv.requests().iter().map(operation).collect();
    let expected = [
        ("stack", json!({"id": "net"})),
        ("driftRecords", json!({"stackId": null, "openOnly": false})),
        ("driftRecords", json!({"stackId": "app", "openOnly": true})),
        ("driftSchedules", json!({"stackId": "net"})),
        (
            "driftScheduleAdd",
            json!({"stackId": "net", "cron": "0 */6 * * *", "timezone": "Europe/Berlin", "reaction": "RECONCILE"}),
        ),
        (
            "driftScheduleAdd",
            json!({"stackId": "net", "cron": "0 0 * * *", "timezone": "UTC", "reaction": null}),
        ),
        ("driftScheduleDelete", json!({"id": "ds-1"})),
        ("driftCheck", json!({"stackId": "net"})),
        ("notificationEndpoints", json!({})),
        (
            "notificationEndpointCreate",
            json!({"input": {"name": "Ops", "kind": "PAGERDUTY", "url": "https://events.pagerduty.com/v2/enqueue",
                             "secret": "routing-key", "events": ["DRIFT_DETECTED", "DRIFT_RESOLVED"],
                             "stackLabels": ["prod"]}}),
        ),
        ("notificationEndpointDelete", json!({"id": "ops"})),
        // An unset limit is left to the schema's default.
        ("notificationDeliveries", json!({"endpoint": null})),
        ("notificationDeliveries", json!({"endpoint": "ops", "limit": 5})),
    ];
    assert_eq!(sent.len(), expected.len());
    for ((q, vars), (field, want)) in sent.iter().zip(&expected) {
        assert_eq!(root_field(q), *field, "{q}");
        assert_eq!(vars, want, "{q}");
    }
    // The variables are declared with the schema's types.
    for (i, declared) in [
        (0, "query($id: ID!) { stack(id: $id) {"),
        (1, "query($stackId: ID, $openOnly: Boolean!)"),
        (3, "query($stackId: ID!)"),
        (
            4,
            "mutation($stackId: ID!, $cron: String!, $timezone: String!, $reaction: DriftReaction)",
        ),
        (6, "mutation($id: ID!)"),
        (7, "mutation($stackId: ID!)"),
        (9, "mutation($input: NotificationEndpointInput!)"),
        (10, "mutation($id: ID!)"),
        (11, "query($endpoint: ID, $limit: Int = 50)"),
    ] {
        assert!(sent[i].0.starts_with(declared), "{declared:?} vs {}", sent[i].0);
    }
    assert!(
        sent[0].0.contains(
            "driftRecords(stackId: $id, openOnly: true) { id stack open resources { address action attributes }"
        ),
        "{}",
        sent[0].0
    );
    Ok(())
}

#[tokio::test]
async fn stack_drift_of_an_unknown_stack_and_refused_checks_keep_their_codes() -> TestResult {
    let srv = MockServer::start(|r| {
        if root_field(&operation(r).0) == "driftCheck" {
            return Reply::json(
                200,
                json!({"data": null, "errors": [{"message": "stack net has a tracked run in progress",
                                                  "extensions": {"code": "drift_check_not_possible"}}]}),
            );
        }
        Reply::json(200, json!({"data": {"stack": null, "driftRecords": []}}))
    })
    .await?;
    let c = Client::new(&srv.url(), Some("t".into()))?;
    let err = c.stack_drift("gone").await.err();
    assert!(err.as_ref().is_some_and(ClientError::is_not_found), "{err:?}");
    assert_eq!(err.map(|e| e.to_string()).as_deref(), Some("stack gone not found"));
    let err = c.drift_check("net").await.err();
    assert_eq!(
        err.as_ref().and_then(ClientError::code),
        Some("drift_check_not_possible")
    );
    assert_eq!(
        err.map(|e| e.to_string()).as_deref(),
        Some("stack net has a tracked run in progress")
    );
    Ok(())
}

fn policy_json(id: &str, details: bool) -> Value {
    let mut p = json!({"id": id, "name": "Deny big", "type": "PLAN", "description": "", "labels": ["autoattach:prod"],
                       "body": "package spacelift\n", "version": 2, "space": "root", "createdAt": T0, "updatedAt": T0});
    if details {
        p["versions"] = json!([{"version": 1, "body": "package spacelift\n", "labels": [], "createdBy": "ada",
                                "createdAt": T0}]);
        p["attachedStacks"] = json!(["net"]);
        p["evaluations"] = json!([evaluation_json(id)]);
        p["samples"] = json!([{"inputHash": "ab12", "createdAt": T0}]);
    }
    p
}

fn evaluation_json(policy: &str) -> Value {
    json!({"id": "e1", "policy": policy, "policyVersion": 2, "type": "PLAN", "runId": "run-1", "subject": "run:run-1",
           "inputHash": "ab12", "outcome": "deny", "messages": ["too big"], "result": {"deny": ["too big"]},
           "createdAt": T0})
}

#[tokio::test]
async fn policies_send_each_operation_with_its_variables() -> TestResult {
    let srv = MockServer::start(|r| {
        let (q, vars) = operation(r);
        let field = root_field(&q);
        let data = match field.as_str() {
            "policies" => json!([policy_json("deny-big", false)]),
            "policy" => policy_json("deny-big", true),
            "policyCreate" | "policyUpdate" | "policyDelete" => policy_json("deny-big", false),
            "policyAttach" | "policyDetach" => json!({"policy": vars["id"], "stack": vars["stackId"]}),
            "policySimulate" => json!({"outcome": "warn", "messages": ["no tags"], "result": {"warn": ["no tags"]}}),
            "run" => json!({"policyEvaluations": [evaluation_json("deny-big")]}),
            _ => return Reply::json(200, json!({"errors": [{"message": format!("unknown field {field}")}]})),
        };
        Reply::json(200, json!({ "data": { field: data } }))
    })
    .await?;
    let c = Client::new(&srv.url(), Some("t".into()))?;

    let list = c.policies().await?;
    assert_eq!(list[0].policy_type, PolicyType::Plan);
    assert_eq!((list[0].versions.as_ref(), list[0].evaluations.as_ref()), (None, None));
    let p = c.policy("deny-big").await?;
    assert_eq!(p.attached_stacks.as_deref(), Some(&["net".to_owned()][..]));
    let evaluations = p.evaluations.unwrap_or_default();
    assert_eq!(evaluations[0].result, json!({"deny": ["too big"]}));
    assert_eq!(p.versions.map(|v| v[0].created_by.clone()).as_deref(), Some("ada"));
    let input = PolicyCreateInput {
        name: "Deny big".into(),
        policy_type: PolicyType::Approval,
        body: "package spacelift\n".into(),
        labels: Some(vec!["autoattach:prod".into()]),
        ..Default::default()
    };
    c.policy_create(&input).await?;
    let update = PolicyUpdateInput {
        body: Some("package spacelift\n".into()),
        ..Default::default()
    };
    c.policy_update("deny-big", &update).await?;
    c.policy_delete("deny-big").await?;
    let a = c.policy_attach("deny-big", "net").await?;
    assert_eq!((a.policy.as_str(), a.stack.as_str()), ("deny-big", "net"));
    c.policy_detach("deny-big", "net").await?;
    let sim = c.policy_simulate("deny-big", "run-1").await?;
    assert_eq!(
        (sim.outcome.as_str(), sim.messages.as_slice()),
        ("warn", &["no tags".to_owned()][..])
    );
    let evaluations = c.run_policy_evaluations("run-1").await?;
    assert_eq!(
        (evaluations[0].policy_version, evaluations[0].run_id.as_deref()),
        (2, Some("run-1"))
    );

    let sent: Vec<(String, Value)> = srv.requests().iter().map(operation).collect();
    let expected = [
        ("policies", json!({})),
        ("policy", json!({"id": "deny-big", "limit": POLICY_EVALUATIONS_LIMIT})),
        (
            "policyCreate",
            json!({"input": {"name": "Deny big", "type": "APPROVAL", "body": "package spacelift\n",
                             "labels": ["autoattach:prod"]}}),
        ),
        (
            "policyUpdate",
            json!({"id": "deny-big", "input": {"body": "package spacelift\n"}}),
        ),
        ("policyDelete", json!({"id": "deny-big"})),
        ("policyAttach", json!({"id": "deny-big", "stackId": "net"})),
        ("policyDetach", json!({"id": "deny-big", "stackId": "net"})),
        ("policySimulate", json!({"id": "deny-big", "runId": "run-1"})),
        ("run", json!({"id": "run-1"})),
    ];
    assert_eq!(sent.len(), expected.len());
    for ((q, vars), (field, want)) in sent.iter().zip(&expected) {
        assert_eq!(root_field(q), *field, "{q}");
        assert_eq!(vars, want, "{q}");
    }
    // The variables are declared with the schema's types.
    for (i, declared) in [
        (1, "query($id: ID!, $limit: Int!) { policy(id: $id) {"),
        (
            2,
            "mutation($input: PolicyCreateInput!) { policyCreate(input: $input) {",
        ),
        (
            3,
            "mutation($id: ID!, $input: PolicyUpdateInput!) { policyUpdate(id: $id, input: $input) {",
        ),
        (4, "mutation($id: ID!) { policyDelete(id: $id) {"),
        (
            5,
            "mutation($id: ID!, $stackId: ID!) { policyAttach(id: $id, stackId: $stackId) {",
        ),
        (
            6,
            "mutation($id: ID!, $stackId: ID!) { policyDetach(id: $id, stackId: $stackId) {",
        ),
        (
            7,
            "query($id: ID!, $runId: ID!) { policySimulate(id: $id, runId: $runId) {",
        ),
        (8, "query($id: ID!) { run(id: $id) { policyEvaluations {"),
    ] {
        assert!(sent[i].0.starts_with(declared), "{declared:?} vs {}", sent[i].0);
    }
    assert!(
        sent[1].0.contains(
            "versions { version body labels createdBy createdAt } attachedStacks evaluations(limit: $limit) { id policy \
             policyVersion type runId subject inputHash outcome messages result createdAt } samples { inputHash createdAt }"
        ),
        "{}",
        sent[1].0
    );
    Ok(())
}

#[tokio::test]
async fn policy_refusals_keep_their_codes_and_an_unknown_run_is_not_found() -> TestResult {
    let srv = MockServer::start(|r| match root_field(&operation(r).0).as_str() {
        "run" => Reply::json(200, json!({"data": {"run": null}})),
        "policy" => Reply::json(
            200,
            json!({"data": null, "errors": [{"message": "policy not found", "extensions": {"code": "not_found"}}]}),
        ),
        _ => Reply::json(
            200,
            json!({"data": null, "errors": [{"message": "policy does not compile: line 3, column 7: unexpected token",
                                              "extensions": {"code": "bad_request"}}]}),
        ),
    })
    .await?;
    let c = Client::new(&srv.url(), Some("t".into()))?;
    let input = PolicyCreateInput {
        name: "broken".into(),
        body: "package spacelift\n\ndeny[ {\n".into(),
        ..Default::default()
    };
    let err = c.policy_create(&input).await.err();
    assert_eq!(err.as_ref().and_then(ClientError::code), Some("bad_request"));
    assert_eq!(
        err.map(|e| e.to_string()).as_deref(),
        Some("policy does not compile: line 3, column 7: unexpected token")
    );
    let err = c.policy("gone").await.err();
    assert!(err.as_ref().is_some_and(ClientError::is_not_found), "{err:?}");
    let err = c.run_policy_evaluations("gone").await.err();
    assert!(err.as_ref().is_some_and(ClientError::is_not_found), "{err:?}");
    assert_eq!(err.map(|e| e.to_string()).as_deref(), Some("run gone not found"));
    Ok(())
}

#[tokio::test]
async fn reviews_send_the_decision_and_read_a_runs_reviews() -> TestResult {
    let srv = MockServer::start(|r| {
        let (q, vars) = operation(r);
        let field = root_field(&q);
        let data = match field.as_str() {
            "runReview" if vars["id"] == "gone" => {
                return Reply::json(
                    200,
                    json!({"data": null, "errors": [{"message": "run is FINISHED; reviews are taken while a run is \
                                                                 QUEUED, PENDING_REVIEW or UNCONFIRMED",
                                                      "extensions": {"code": "invalid_run_state"}}]}),
                );
            }
            "runReview" => run_json(if vars["decision"] == "APPROVE" {
                "QUEUED"
            } else {
                "FAILED"
            }),
            "run" if vars["id"] == "gone" => Value::Null,
            "run" => json!({"reviews": [
                {"reviewer": "ada@example.com", "teams": ["infra-leads"], "stage": "UNCONFIRMED",
                 "decision": "REJECT", "note": "too big", "createdAt": T0},
                {"reviewer": "bob@example.com", "teams": [], "stage": "QUEUED", "decision": "MAYBE", "note": "",
                 "createdAt": T0}
            ]}),
            _ => return Reply::json(200, json!({"errors": [{"message": format!("unknown field {field}")}]})),
        };
        Reply::json(200, json!({ "data": { field: data } }))
    })
    .await?;
    let c = Client::new(&srv.url(), Some("t".into()))?;

    assert_eq!(c.run_review("run-1", true, None).await?.state, RunState::Queued);
    assert_eq!(
        c.run_review("run-1", false, Some("too big")).await?.state,
        RunState::Failed
    );
    let reviews = c.run_reviews("run-1").await?;
    assert_eq!(
        (&reviews[0].stage, &reviews[0].decision, reviews[0].note.as_str()),
        (&RunState::Unconfirmed, &ReviewDecision::Reject, "too big")
    );
    assert_eq!(reviews[0].teams, ["infra-leads"]);
    // A decision this client doesn't know is kept.
    assert_eq!(reviews[1].decision, ReviewDecision::Other("MAYBE".into()));

    let sent: Vec<(String, Value)> = srv.requests().iter().map(operation).collect();
    assert_eq!(sent[0].1, json!({"id": "run-1", "decision": "APPROVE", "note": null}));
    assert_eq!(
        sent[1].1,
        json!({"id": "run-1", "decision": "REJECT", "note": "too big"})
    );
    assert_eq!(sent[2].1, json!({"id": "run-1"}));
    assert!(
        sent[0].0.starts_with(
            "mutation($id: ID!, $decision: ReviewDecision!, $note: String) { \
             runReview(id: $id, decision: $decision, note: $note) {"
        ),
        "{}",
        sent[0].0
    );
    assert!(
        sent[2]
            .0
            .starts_with("query($id: ID!) { run(id: $id) { reviews { reviewer teams stage decision note createdAt } }"),
        "{}",
        sent[2].0
    );

    let err = c.run_review("gone", true, None).await.err();
    assert_eq!(err.as_ref().and_then(ClientError::code), Some("invalid_run_state"));
    let err = c.run_reviews("gone").await.err();
    assert!(err.as_ref().is_some_and(ClientError::is_not_found), "{err:?}");
    assert_eq!(err.map(|e| e.to_string()).as_deref(), Some("run gone not found"));
    Ok(())
}
