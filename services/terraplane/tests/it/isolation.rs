//! Tenant isolation matrix, generated from the GraphQL schema (introspection) and the REST
//! router's route lists (`terraplane_api::rest_routes()`), so fields and routes added later are
//! covered without touching this file. Every operation that takes a reference (an id, a
//! slug, a space, a team, a member) is called with organization B's owner credentials,
//! once with organization A's real references and once with references that exist
//! nowhere: the two answers must be identical ("not found" either way), and A's data must
//! be unchanged afterwards. Operations without references must not mention A's data.

use std::collections::BTreeMap;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use terraplane_client::Client;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::both_backends;
use crate::harness::*;

/// A's references and their never-existing twins.
struct Refs {
    stack: (String, String),
    run: (String, String),
    space: (String, String),
    team: (String, String),
    email: (String, String),
    key: (String, String),
    context: (String, String),
    aws: (String, String),
    endpoint: (String, String),
    policy: (String, String),
}

impl Refs {
    fn all(&self) -> Vec<&str> {
        [
            &self.stack,
            &self.run,
            &self.space,
            &self.team,
            &self.email,
            &self.key,
            &self.context,
            &self.aws,
            &self.endpoint,
            &self.policy,
        ]
        .iter()
        .flat_map(|(a, b)| [a.as_str(), b.as_str()])
        .collect()
    }

    fn a_values(&self) -> Vec<&str> {
        [
            &self.stack,
            &self.run,
            &self.space,
            &self.team,
            &self.email,
            &self.key,
            &self.context,
            &self.aws,
            &self.endpoint,
            &self.policy,
        ]
        .iter()
        .map(|(a, _)| a.as_str())
        .collect()
    }
}

const REF_ARGS: &[&str] = &[
    "id", "stackId", "runId", "space", "parent", "team", "subject", "context",
];
/// Fields whose `email` names an existing member (elsewhere it names someone new).
const EMAIL_REF_FIELDS: &[&str] = &["teamAddMember", "memberSetRole", "memberRemove"];

fn base_type(t: &Value) -> (&str, &str) {
    let mut t = t;
    while t["kind"] == "NON_NULL" || t["kind"] == "LIST" {
        t = &t["ofType"];
    }
    (t["kind"].as_str().unwrap_or(""), t["name"].as_str().unwrap_or(""))
}

fn is_reference(field: &str, arg: &str) -> bool {
    REF_ARGS.contains(&arg) || (arg == "email" && EMAIL_REF_FIELDS.contains(&field))
}

/// A GraphQL literal for `arg` of `field`: A's reference (`a`), its twin, or a plain value.
fn literal(field: &str, arg: &str, ty: &Value, refs: &Refs, a: bool) -> Option<String> {
    let pick = |p: &(String, String)| format!("{:?}", if a { &p.0 } else { &p.1 });
    let id_of = || {
        if field.starts_with("run") {
            pick(&refs.run)
        } else if field.starts_with("space") {
            pick(&refs.space)
        } else if field.starts_with("apiKey") {
            pick(&refs.key)
        } else if field.starts_with("context") {
            pick(&refs.context)
        } else if field.starts_with("awsIntegration") {
            pick(&refs.aws)
        } else if field.starts_with("notificationEndpoint") {
            pick(&refs.endpoint)
        } else if field.starts_with("policy") {
            pick(&refs.policy)
        } else {
            pick(&refs.stack)
        }
    };
    let required = ty["kind"] == "NON_NULL";
    let v = match arg {
        "id" => id_of(),
        "stackId" => pick(&refs.stack),
        "runId" => pick(&refs.run),
        "space" | "parent" => pick(&refs.space),
        "context" => pick(&refs.context),
        "endpoint" => pick(&refs.endpoint),
        "team" => pick(&refs.team),
        "email" if EMAIL_REF_FIELDS.contains(&field) => pick(&refs.email),
        "subject" => format!("{{user: {}}}", pick(&refs.email)),
        "input" if field == "stackCreate" => {
            format!(
                "{{slug: \"iso-new\", name: \"iso\", repository: \"file:///x\", space: {}}}",
                pick(&refs.space)
            )
        }
        "input" if field.ends_with("SetVariable") => "{name: \"ISO_VAR\", value: \"iso\"}".into(),
        "input" if field == "contextCreate" => format!("{{name: \"iso\", space: {}}}", pick(&refs.space)),
        "input" if field == "awsIntegrationCreate" => format!(
            "{{name: \"iso\", roleArn: \"arn:aws:iam::123456789012:role/iso\", space: {}}}",
            pick(&refs.space)
        ),
        "input" if field == "notificationEndpointCreate" => format!(
            "{{name: \"iso\", kind: WEBHOOK, url: \"http://127.0.0.1:9/x\", events: [RUN_FAILED], space: {}}}",
            pick(&refs.space)
        ),
        "input" if field == "policyCreate" => format!(
            "{{name: \"iso\", type: \"PLAN\", body: \"package spacelift\", space: {}}}",
            pick(&refs.space)
        ),
        "input" => "{name: \"renamed\"}".into(),
        _ if !required => return None,
        _ => match base_type(ty) {
            (_, "Boolean") => "false".into(),
            (_, "Int") => "1".into(),
            ("ENUM", _) => "TRACKED".into(),
            _ => "\"iso-value\"".into(),
        },
    };
    Some(v)
}

fn call_text(op: &str, f: &Value, refs: &Refs, a: bool) -> String {
    let name = f["name"].as_str().unwrap();
    let args: Vec<String> = f["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|arg| {
            let an = arg["name"].as_str().unwrap();
            literal(name, an, &arg["type"], refs, a).map(|v| format!("{an}: {v}"))
        })
        .collect();
    let args = if args.is_empty() {
        String::new()
    } else {
        format!("({})", args.join(", "))
    };
    let selection = match base_type(&f["type"]).0 {
        "OBJECT" => " { __typename }",
        _ => "",
    };
    format!("{op} {{ {name}{args}{selection} }}")
}

fn normalize(v: &Value, refs: &Refs) -> String {
    let mut s = v.to_string();
    for r in refs.all() {
        s = s.replace(r, "<ref>");
    }
    s
}

async fn raw(app: &TestApp, token: &str, query: &str) -> Value {
    app.http()
        .post(format!("{}/graphql", app.base))
        .bearer_auth(token)
        .json(&json!({ "query": query }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn first_ws_message(app: &TestApp, token: &str, query: &str) -> Value {
    let mut req = format!("{}/graphql/ws", app.base.replace("http://", "ws://"))
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("Sec-WebSocket-Protocol", "graphql-transport-ws".parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    ws.send(Message::Text(
        json!({"type": "connection_init", "payload": {"token": token}})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    loop {
        let m = ws.next().await.unwrap().unwrap();
        if let Message::Text(t) = m {
            let v: Value = serde_json::from_str(&t).unwrap();
            if v["type"] == "connection_ack" {
                break;
            }
        }
    }
    ws.send(Message::Text(
        json!({"id": "1", "type": "subscribe", "payload": {"query": query}})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    loop {
        let m = tokio::time::timeout(std::time::Duration::from_secs(20), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let Message::Text(t) = m {
            return serde_json::from_str(&t).unwrap();
        }
    }
}

/// Everything of A's that B's calls must leave as it was.
const A_SNAPSHOT: &str = "{ stacks { id name lock { holder } } runs(stackId: \"a-stack\") { id state } spaces { id } \
    teams { id members } users { email role } stateVersions(stackId: \"a-stack\") { serial } apiKeys { id revokedAt } \
    contexts { id labels variables { name checksum } attachments { stack priority } } \
    stackEnvironment(stackId: \"a-stack\") { name source checksum } awsIntegrations { id roleArn stacks } \
    notificationEndpoints { id url events } driftSchedules(stackId: \"a-stack\") { id cron } \
    policies { id version body labels attachedStacks } }";

async fn matrix(app: TestApp) {
    // Organization A (`default`): a stack with a run and state, a space, a team, a member, a key.
    let a = &app.client;
    let q = |c: &Client, text: &'static str| {
        let c = c.clone();
        async move { c.graphql::<Value>(text, json!({})).await.unwrap() }
    };
    q(a, "mutation { spaceCreate(slug: \"a-space\") { id } }").await;
    q(a, "mutation { teamCreate(slug: \"a-team\") { id } }").await;
    q(
        a,
        "mutation { userCreate(email: \"a-user@example.com\", password: \"a-long-password-1\") { id } }",
    )
    .await;
    q(
        a,
        "mutation { teamAddMember(team: \"a-team\", email: \"a-user@example.com\") { id } }",
    )
    .await;
    let input = terraplane_client::StackCreateInput {
        slug: Some("a-stack".into()),
        name: "a".into(),
        repository: "file:///x".into(),
        ..Default::default()
    };
    a.stack_create(&input).await.unwrap();
    let run = a.run_trigger("a-stack", false).await.unwrap();
    let key = q(
        a,
        "mutation { apiKeyCreate(name: \"a-key\", kind: \"service\", role: \"reader\") { key { id } } }",
    )
    .await;
    let key_id = key["apiKeyCreate"]["key"]["id"].as_str().unwrap().to_owned();
    let state_url = app.state_url("default", "a-stack");
    let body = json!({"version": 4, "serial": 1, "lineage": "A", "resources": []}).to_string();
    assert_eq!(
        app.http()
            .post(&state_url)
            .bearer_auth(ADMIN_TOKEN)
            .body(body)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    q(
        a,
        "mutation { contextCreate(input: {id: \"a-context\", name: \"a context\"}) { id } }",
    )
    .await;
    q(
        a,
        "mutation { contextSetVariable(context: \"a-context\", input: {name: \"A_VAR\", value: \"a\"}) { name } }",
    )
    .await;
    q(
        a,
        "mutation { contextAttach(context: \"a-context\", stackId: \"a-stack\") { priority } }",
    )
    .await;
    q(
        a,
        "mutation { stackSetVariable(stackId: \"a-stack\", input: {name: \"A_OWN\", value: \"a\"}) { name } }",
    )
    .await;
    q(
        a,
        "mutation { awsIntegrationCreate(input: {id: \"a-aws\", name: \"a aws\", roleArn: \"arn:aws:iam::123456789012:role/a\"}) { id } }",
    )
    .await;
    q(
        a,
        "mutation { awsIntegrationAttach(id: \"a-aws\", stackId: \"a-stack\") { id } }",
    )
    .await;
    q(
        a,
        "mutation { policyCreate(input: {id: \"a-policy\", name: \"a policy\", type: \"PLAN\", body: \"package spacelift\"}) { id } }",
    )
    .await;
    q(
        a,
        "mutation { policyAttach(id: \"a-policy\", stackId: \"a-stack\") { policy } }",
    )
    .await;
    let before_a = q(a, A_SNAPSHOT).await;

    // Organization B with an owner key.
    let other = app.store.create_org("bee", "Bee", chrono::Utc::now()).await.unwrap();
    let b_token = "tpk_isolation_owner_of_bee";
    app.store
        .create_api_key(
            other.id,
            None,
            "owner",
            &terraplane_api::auth::hash_secret(b_token),
            "owner",
            "service",
            None,
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    let refs = Refs {
        stack: ("a-stack".into(), "zz-no-stack".into()),
        run: (run.id.clone(), uuid::Uuid::now_v7().to_string()),
        space: ("a-space".into(), "zz-no-space".into()),
        team: ("a-team".into(), "zz-no-team".into()),
        email: ("a-user@example.com".into(), "zz-nobody@example.com".into()),
        key: (key_id.clone(), uuid::Uuid::now_v7().to_string()),
        context: ("a-context".into(), "zz-no-context".into()),
        aws: ("a-aws".into(), "zz-no-aws".into()),
        endpoint: ("a-endpoint".into(), "zz-no-endpoint".into()),
        policy: ("a-policy".into(), "zz-no-policy".into()),
    };

    let schema = raw(
        &app,
        b_token,
        "{ __schema { queryType { fields { ...F } } mutationType { fields { ...F } } subscriptionType { fields { ...F } } } } \
         fragment T on __Type { kind name ofType { kind name ofType { kind name ofType { kind name } } } } \
         fragment F on __Field { name type { ...T } args { name type { ...T } } }",
    )
    .await;
    let mut checked: BTreeMap<String, &str> = BTreeMap::new();
    for (op, key) in [
        ("query", "queryType"),
        ("mutation", "mutationType"),
        ("subscription", "subscriptionType"),
    ] {
        for f in schema["data"]["__schema"][key]["fields"].as_array().unwrap() {
            let name = f["name"].as_str().unwrap();
            if name == "login" {
                continue; // unauthenticated by design; covered by its own tests
            }
            let has_ref = f["args"]
                .as_array()
                .unwrap()
                .iter()
                .any(|arg| is_reference(name, arg["name"].as_str().unwrap()));
            let call = |is_a| call_text(op, f, &refs, is_a);
            if op == "subscription" {
                let ra = first_ws_message(&app, b_token, &call(true)).await;
                let rb = first_ws_message(&app, b_token, &call(false)).await;
                assert_eq!(
                    normalize(&ra, &refs),
                    normalize(&rb, &refs),
                    "{name}: A's ids answer differently:\n{ra}\n{rb}"
                );
                assert!(ra.to_string().contains("not found"), "{name}: {ra}");
                checked.insert(name.into(), "subscription");
                continue;
            }
            if !has_ref {
                if op == "query" {
                    let r = raw(&app, b_token, &call(true)).await;
                    for v in refs.a_values() {
                        assert!(!r.to_string().contains(v), "{name} leaks {v}: {r}");
                    }
                    checked.insert(name.into(), "no leak");
                }
                continue;
            }
            let ra = raw(&app, b_token, &call(true)).await;
            let rb = raw(&app, b_token, &call(false)).await;
            assert_eq!(
                normalize(&ra, &refs),
                normalize(&rb, &refs),
                "{name}: A's ids answer differently:\n{ra}\n{rb}"
            );
            let text = ra.to_string();
            let not_found =
                text.contains("\"not_found\"") || ra["data"][name].is_null() || ra["data"][name] == json!([]);
            assert!(not_found, "{name}: not a not-found answer: {ra}");
            checked.insert(name.into(), "same as missing");
        }
    }
    // The generated matrix really covers the API (and grows with it).
    for must in [
        "stack",
        "runs",
        "run",
        "runConfirm",
        "stackDelete",
        "stateForceUnlock",
        "roleGrant",
        "apiKeyRevoke",
        "runLogs",
        "spaceDelete",
        "memberRemove",
        "context",
        "contextAttach",
        "contextSetVariable",
        "stackSetVariable",
        "stackEnvironment",
        "awsIntegrationAttach",
        "notificationEndpointDelete",
        "notificationDeliveries",
        "driftCheck",
        "policy",
        "policyAttach",
        "policySimulate",
        "policyDelete",
        "runReview",
    ] {
        assert!(checked.contains_key(must), "{must} not covered: {checked:?}");
    }
    assert!(checked.len() >= 30, "{checked:?}");

    // REST: every route, A's ids vs ids that exist nowhere, with B's credentials.
    let http = app.http();
    for (method, path) in terraplane_api::rest_routes() {
        let url = |is_a: bool| {
            let (org, stack, run) = if is_a {
                ("default", "a-stack", refs.run.0.as_str())
            } else {
                ("zz-no-org", "zz-no-stack", refs.run.1.as_str())
            };
            format!(
                "{}{}",
                app.base,
                path.replace("{org}", org)
                    .replace("{stack}", stack)
                    .replace("{run}", run)
            )
        };
        // A body every route accepts, so that only authorization decides the answer.
        let body = json!({
            "runner_id": "iso", "phase": "plan", "fencing_token": 1, "seq": 0, "data": "",
            "state": "PLANNING", "plan_file": "", "plan_json": {}, "outcome": "failed", "reason": "iso",
            "version": 4, "serial": 1, "lineage": "B", "ID": "iso-lock", "Who": "iso@host",
            "Created": "2026-01-01T00:00:00Z"
        })
        .to_string();
        let send = |u: String| {
            let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
            http.request(m, u)
                .bearer_auth(b_token)
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
        };
        let ra = send(url(true)).await.unwrap();
        let rb = send(url(false)).await.unwrap();
        let (sa, sb) = (ra.status(), rb.status());
        let (ta, tb) = (ra.text().await.unwrap(), rb.text().await.unwrap());
        assert_eq!((sa, &ta), (sb, &tb), "{method} {path}: A's ids answer differently");
        if terraplane_api::identity::ROUTES.iter().any(|(_, p)| *p == path) {
            // The OIDC issuer's public documents: the same for everyone, naming no tenant.
            assert_eq!(sa.as_u16(), 200, "{method} {path}: {ta}");
            for v in refs.a_values() {
                assert!(!ta.contains(v), "{path} leaks {v}");
            }
            continue;
        }
        assert!(matches!(sa.as_u16(), 401 | 403 | 404), "{method} {path}: {sa} {ta}");
    }

    // A is exactly as it was.
    let after_a = q(a, A_SNAPSHOT).await;
    assert_eq!(before_a, after_a);
    app.teardown().await;
}
both_backends!(
    tenant_isolation,
    Options {
        runners: 0,
        ..Options::default()
    },
    matrix
);
