//! Role matrix over every GraphQL operation: each field of the schema must be listed in
//! `NEEDS` with the least role it takes (so a new field without a decision fails this
//! test), and each is called as an owner, a space admin, writer and reader (bound on the
//! space `dev` that holds the fixtures), and a member without bindings. A call is
//! "allowed" when authorization let it through (it may still fail for other reasons, e.g.
//! a run in the wrong state), and "denied" when it answers forbidden or not-found.

use std::collections::HashMap;

use serde_json::{Value, json};
use terraplane_client::Client;

use crate::both_backends;
use crate::harness::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Who {
    None,
    Reader,
    Writer,
    Admin,
    Owner,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Need {
    /// No credentials needed (or none used): not part of the matrix.
    Public,
    /// Any member (results are filtered to what the caller may see).
    Member,
    At(Who),
}

const WHO: [Who; 5] = [Who::None, Who::Reader, Who::Writer, Who::Admin, Who::Owner];

fn needs() -> HashMap<&'static str, Need> {
    use Need::*;
    use Who as W;
    HashMap::from([
        // queries
        ("me", Member),
        ("stacks", Member),
        ("organizations", Member),
        ("spaces", Member),
        ("teams", Member),
        ("users", Member),
        ("roleBindings", Member),
        ("apiKeys", Member),
        ("stack", At(W::Reader)),
        ("runs", At(W::Reader)),
        ("run", At(W::Reader)),
        ("stateVersions", At(W::Reader)),
        ("space", At(W::Reader)),
        ("auditEvents", At(W::Owner)),
        ("auditVerify", At(W::Owner)),
        ("contexts", Member),
        ("awsIntegrations", Member),
        ("context", At(W::Reader)),
        ("stackVariables", At(W::Reader)),
        ("stackEnvironment", At(W::Reader)),
        ("driftSchedules", At(W::Reader)),
        ("driftRecords", Member),
        ("notificationEndpoints", Member),
        ("notificationDeliveries", Member),
        ("policies", Member),
        ("policy", At(W::Reader)),
        ("policySimulate", At(W::Reader)),
        // mutations
        ("login", Public),
        ("refresh", Public),
        ("signUp", Public),
        ("logout", Public),
        ("orgCreate", Public), // instance administrators only: tested in rbac::spaces
        ("apiKeyCreate", Member),
        ("apiKeyRevoke", Member),
        ("runTrigger", At(W::Writer)),
        ("runConfirm", At(W::Writer)),
        ("runDiscard", At(W::Writer)),
        ("runCancel", At(W::Writer)),
        ("stackLock", At(W::Writer)),
        ("stackUnlock", At(W::Writer)),
        ("stackUpdate", At(W::Writer)),
        ("stackCreate", At(W::Admin)),
        ("stackSetVariable", At(W::Writer)),
        ("stackUnsetVariable", At(W::Writer)),
        ("contextCreate", At(W::Admin)),
        ("contextDelete", At(W::Admin)),
        ("contextSetVariable", At(W::Admin)),
        ("contextUnsetVariable", At(W::Admin)),
        ("contextAttach", At(W::Admin)),
        ("contextDetach", At(W::Admin)),
        ("awsIntegrationCreate", At(W::Admin)),
        ("awsIntegrationDelete", At(W::Admin)),
        ("awsIntegrationAttach", At(W::Admin)),
        ("awsIntegrationDetach", At(W::Admin)),
        ("driftScheduleAdd", At(W::Admin)),
        ("driftScheduleDelete", At(W::Admin)), // ids are random: checked in drift::schedules
        ("driftCheck", At(W::Writer)),
        ("notificationEndpointCreate", At(W::Admin)),
        ("notificationEndpointDelete", At(W::Admin)),
        ("runReview", At(W::Reader)),
        ("policyCreate", At(W::Admin)),
        ("policyUpdate", At(W::Admin)),
        ("policyDelete", At(W::Admin)),
        ("policyAttach", At(W::Admin)),
        ("policyDetach", At(W::Admin)),
        ("stackDelete", At(W::Admin)),
        ("spaceCreate", At(W::Admin)),
        ("stateForceUnlock", At(W::Admin)),
        ("roleGrant", At(W::Admin)),
        ("roleRevoke", At(W::Admin)),
        ("spaceDelete", At(W::Admin)),
        ("teamCreate", At(W::Owner)),
        ("teamAddMember", At(W::Owner)),
        ("userCreate", At(W::Owner)),
        ("memberSetRole", At(W::Owner)),
        ("memberRemove", At(W::Owner)),
        // subscriptions
        ("runLogs", At(W::Reader)),
        ("runStateChanged", At(W::Reader)),
    ])
}

fn name(w: Who) -> &'static str {
    match w {
        Who::None => "none",
        Who::Reader => "reader",
        Who::Writer => "writer",
        Who::Admin => "admin",
        Who::Owner => "owner",
    }
}

/// The call of `field` made by `who` (each caller gets its own targets for operations
/// that create or destroy, so one caller's success doesn't change another's answer).
fn call(field: &str, who: Who, run: &str) -> Option<String> {
    let n = name(who);
    let q = match field {
        "stack" => r#"{ stack(id: "s-dev") { id } }"#.to_owned(),
        "runs" => r#"{ runs(stackId: "s-dev") { id } }"#.to_owned(),
        "run" => format!(r#"{{ run(id: "{run}") {{ id }} }}"#),
        "stateVersions" => r#"{ stateVersions(stackId: "s-dev") { serial } }"#.to_owned(),
        "space" => r#"{ space(id: "dev") { id } }"#.to_owned(),
        "auditEvents" => "{ auditEvents { seq } }".to_owned(),
        "auditVerify" => "{ auditVerify { ok } }".to_owned(),
        "runTrigger" => r#"mutation { runTrigger(stackId: "s-dev", type: PROPOSED) { id } }"#.to_owned(),
        "runConfirm" | "runDiscard" | "runCancel" => format!(r#"mutation {{ {field}(id: "{run}") {{ id }} }}"#),
        "stackLock" => format!(r#"mutation {{ stackLock(id: "lock-{n}") {{ id }} }}"#),
        "stackUnlock" => r#"mutation { stackUnlock(id: "s-dev") { id } }"#.to_owned(),
        "stackUpdate" => r#"mutation { stackUpdate(id: "s-dev", input: {description: "x"}) { id } }"#.to_owned(),
        "stackCreate" => {
            format!(r#"mutation {{ stackCreate(input: {{slug: "new-{n}", name: "n", repository: "file:///x", space: "dev"}}) {{ id }} }}"#)
        }
        "stackDelete" => format!(r#"mutation {{ stackDelete(id: "del-{n}") {{ id }} }}"#),
        "spaceCreate" => format!(r#"mutation {{ spaceCreate(slug: "sub-{n}", parent: "dev") {{ id }} }}"#),
        "spaceDelete" => format!(r#"mutation {{ spaceDelete(id: "gone-{n}") }}"#),
        "stateForceUnlock" => format!(r#"mutation {{ stateForceUnlock(stackId: "lock-{n}") {{ id }} }}"#),
        "roleGrant" => r#"mutation { roleGrant(space: "dev", subject: {user: "nobody-bound@example.com"}, role: "reader") { role } }"#.to_owned(),
        "roleRevoke" => format!(r#"mutation {{ roleRevoke(space: "dev", subject: {{user: "bound-{n}@example.com"}}) }}"#),
        "teamCreate" => format!(r#"mutation {{ teamCreate(slug: "team-{n}") {{ id }} }}"#),
        "teamAddMember" => r#"mutation { teamAddMember(team: "crew", email: "reader@example.com") { id } }"#.to_owned(),
        "userCreate" => format!(r#"mutation {{ userCreate(email: "added-{n}@example.com") {{ id }} }}"#),
        "memberSetRole" => r#"mutation { memberSetRole(email: "spare@example.com", owner: false) { id } }"#.to_owned(),
        "memberRemove" => format!(r#"mutation {{ memberRemove(email: "leaver-{n}@example.com") }}"#),
        "context" => r#"{ context(id: "ctx-dev") { id } }"#.to_owned(),
        "stackVariables" => r#"{ stackVariables(stackId: "s-dev") { name } }"#.to_owned(),
        "stackEnvironment" => r#"{ stackEnvironment(stackId: "s-dev") { name } }"#.to_owned(),
        "stackSetVariable" => {
            r#"mutation { stackSetVariable(stackId: "s-dev", input: {name: "SET_BY_ROLE", value: "x"}) { name } }"#.to_owned()
        }
        "stackUnsetVariable" => {
            format!(r#"mutation {{ stackUnsetVariable(stackId: "s-dev", name: "UNSET_{n}") {{ name }} }}"#)
        }
        "contextCreate" => {
            format!(r#"mutation {{ contextCreate(input: {{id: "ctx-new-{n}", name: "n", space: "dev"}}) {{ id }} }}"#)
        }
        "contextDelete" => format!(r#"mutation {{ contextDelete(id: "ctxdel-{n}") {{ id }} }}"#),
        "contextSetVariable" => {
            r#"mutation { contextSetVariable(context: "ctx-dev", input: {name: "SET_BY_ROLE", value: "x", secret: true}) { name } }"#.to_owned()
        }
        "contextUnsetVariable" => {
            format!(r#"mutation {{ contextUnsetVariable(context: "ctx-dev", name: "UNSET_{n}") {{ name }} }}"#)
        }
        "contextAttach" => r#"mutation { contextAttach(context: "ctx-dev", stackId: "s-dev", priority: 2) { priority } }"#.to_owned(),
        "contextDetach" => format!(r#"mutation {{ contextDetach(context: "ctx-dev", stackId: "lock-{n}") {{ priority }} }}"#),
        "awsIntegrationCreate" => format!(
            r#"mutation {{ awsIntegrationCreate(input: {{id: "aws-new-{n}", name: "n", roleArn: "arn:aws:iam::123456789012:role/r", space: "dev"}}) {{ id }} }}"#
        ),
        "awsIntegrationDelete" => format!(r#"mutation {{ awsIntegrationDelete(id: "awsdel-{n}") {{ id }} }}"#),
        "awsIntegrationAttach" => r#"mutation { awsIntegrationAttach(id: "aws-dev", stackId: "s-dev") { id } }"#.to_owned(),
        "awsIntegrationDetach" => format!(r#"mutation {{ awsIntegrationDetach(stackId: "lock-{n}") {{ id }} }}"#),
        "driftSchedules" => r#"{ driftSchedules(stackId: "s-dev") { id } }"#.to_owned(),
        "driftScheduleAdd" => {
            r#"mutation { driftScheduleAdd(stackId: "s-dev", cron: "0 6 * * *", timezone: "Europe/Paris") { id } }"#.to_owned()
        }
        "driftCheck" => r#"mutation { driftCheck(stackId: "s-dev") { id } }"#.to_owned(),
        "notificationEndpointCreate" => format!(
            r#"mutation {{ notificationEndpointCreate(input: {{id: "ne-{n}", name: "n", kind: SLACK, url: "http://127.0.0.1:9/x", events: [RUN_FAILED], space: "dev"}}) {{ id }} }}"#
        ),
        "notificationEndpointDelete" => format!(r#"mutation {{ notificationEndpointDelete(id: "nedel-{n}") {{ id }} }}"#),
        "runReview" => format!(r#"mutation {{ runReview(id: "{run}", decision: APPROVE, note: "{n}") {{ id }} }}"#),
        "policy" => r#"{ policy(id: "pol-dev") { id } }"#.to_owned(),
        // Allowed callers get "no recorded input" (a bad request), others not-found.
        "policySimulate" => format!(r#"{{ policySimulate(id: "pol-dev", runId: "{run}") {{ outcome }} }}"#),
        "policyCreate" => format!(
            r#"mutation {{ policyCreate(input: {{id: "pol-new-{n}", name: "n", type: "PLAN", body: "package spacelift", space: "dev"}}) {{ id }} }}"#
        ),
        "policyUpdate" => r#"mutation { policyUpdate(id: "pol-dev", input: {description: "x"}) { id } }"#.to_owned(),
        "policyDelete" => format!(r#"mutation {{ policyDelete(id: "poldel-{n}") {{ id }} }}"#),
        "policyAttach" => r#"mutation { policyAttach(id: "pol-dev", stackId: "s-dev") { policy } }"#.to_owned(),
        "policyDetach" => format!(r#"mutation {{ policyDetach(id: "pol-dev", stackId: "lock-{n}") {{ policy }} }}"#),
        "runLogs" | "runStateChanged" => return None, // subscriptions: checked below over GraphQL queries of the same run
        _ => return None,
    };
    Some(q)
}

async fn setup(app: &TestApp) -> (Vec<(Who, Client)>, String) {
    let c = &app.client;
    let g = |q: String| {
        let c = c.clone();
        async move { c.graphql::<Value>(&q, json!({})).await.unwrap() }
    };
    g(r#"mutation { spaceCreate(slug: "dev") { id } }"#.into()).await;
    g(r#"mutation { teamCreate(slug: "crew") { id } }"#.into()).await;
    for u in ["none", "reader", "writer", "admin", "spare", "nobody-bound"] {
        g(format!(
            r#"mutation {{ userCreate(email: "{u}@example.com", password: "a-long-password-1") {{ id }} }}"#
        ))
        .await;
    }
    for w in WHO {
        let n = name(w);
        g(format!(
            r#"mutation {{ userCreate(email: "leaver-{n}@example.com") {{ id }} }}"#
        ))
        .await;
        g(format!(
            r#"mutation {{ userCreate(email: "bound-{n}@example.com") {{ id }} }}"#
        ))
        .await;
        g(format!(r#"mutation {{ roleGrant(space: "dev", subject: {{user: "bound-{n}@example.com"}}, role: "reader") {{ role }} }}"#)).await;
        for (prefix, space) in [("del", "dev"), ("lock", "dev")] {
            g(format!(r#"mutation {{ stackCreate(input: {{slug: "{prefix}-{n}", name: "x", repository: "file:///x", space: "{space}"}}) {{ id }} }}"#)).await;
        }
        g(format!(
            r#"mutation {{ spaceCreate(slug: "gone-{n}", parent: "dev", inherit: true) {{ id }} }}"#
        ))
        .await;
        // A stuck state lock for each caller to try to force open.
        let r = app
            .http()
            .request(
                reqwest::Method::from_bytes(b"LOCK").unwrap(),
                app.state_url("default", &format!("lock-{n}")),
            )
            .bearer_auth(ADMIN_TOKEN)
            .body(r#"{"ID":"stuck","Operation":"OperationTypeApply","Who":"x@host","Created":"2026-01-01T00:00:00Z"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    for (u, role) in [("reader", "reader"), ("writer", "writer"), ("admin", "admin")] {
        g(format!(
            r#"mutation {{ roleGrant(space: "dev", subject: {{user: "{u}@example.com"}}, role: "{role}") {{ role }} }}"#
        ))
        .await;
    }
    g(r#"mutation { memberSetRole(email: "spare@example.com", owner: true) { id } }"#.into()).await;
    let input = terraplane_client::StackCreateInput {
        slug: Some("s-dev".into()),
        name: "s".into(),
        repository: "file:///x".into(),
        ..Default::default()
    };
    let mut v = serde_json::to_value(&input).unwrap();
    v["space"] = json!("dev");
    c.graphql::<Value>(
        "mutation($i: StackCreateInput!) { stackCreate(input: $i) { id } }",
        json!({"i": v}),
    )
    .await
    .unwrap();
    // Contexts, values and AWS integrations in `dev`: shared ones, and one of each per caller
    // to delete, unset or detach.
    g(r#"mutation { contextCreate(input: {id: "ctx-dev", name: "c", space: "dev"}) { id } }"#.into()).await;
    g(r#"mutation { awsIntegrationCreate(input: {id: "aws-dev", name: "a", roleArn: "arn:aws:iam::123456789012:role/r", space: "dev"}) { id } }"#.into()).await;
    g(r#"mutation { policyCreate(input: {id: "pol-dev", name: "p", type: "PLAN", body: "package spacelift", space: "dev"}) { id } }"#.into()).await;
    for w in WHO {
        let n = name(w);
        g(format!(
            r#"mutation {{ contextCreate(input: {{id: "ctxdel-{n}", name: "c", space: "dev"}}) {{ id }} }}"#
        ))
        .await;
        g(format!(r#"mutation {{ contextSetVariable(context: "ctx-dev", input: {{name: "UNSET_{n}", value: "x"}}) {{ name }} }}"#)).await;
        g(format!(
            r#"mutation {{ stackSetVariable(stackId: "s-dev", input: {{name: "UNSET_{n}", value: "x"}}) {{ name }} }}"#
        ))
        .await;
        g(format!(
            r#"mutation {{ contextAttach(context: "ctx-dev", stackId: "lock-{n}") {{ priority }} }}"#
        ))
        .await;
        g(format!(r#"mutation {{ awsIntegrationCreate(input: {{id: "awsdel-{n}", name: "a", roleArn: "arn:aws:iam::123456789012:role/r", space: "dev"}}) {{ id }} }}"#)).await;
        g(format!(
            r#"mutation {{ awsIntegrationAttach(id: "aws-dev", stackId: "lock-{n}") {{ id }} }}"#
        ))
        .await;
        g(format!(r#"mutation {{ policyCreate(input: {{id: "poldel-{n}", name: "p", type: "PLAN", body: "package spacelift", space: "dev"}}) {{ id }} }}"#)).await;
        g(format!(
            r#"mutation {{ policyAttach(id: "pol-dev", stackId: "lock-{n}") {{ policy }} }}"#
        ))
        .await;
        g(format!(r#"mutation {{ notificationEndpointCreate(input: {{id: "nedel-{n}", name: "n", kind: SLACK, url: "http://127.0.0.1:9/x", events: [RUN_FAILED], space: "dev"}}) {{ id }} }}"#)).await;
    }
    let run = c.run_trigger("s-dev", false).await.unwrap().id;
    let mut out = vec![(Who::Owner, app.client.clone())];
    for w in [Who::None, Who::Reader, Who::Writer, Who::Admin] {
        let email = format!("{}@example.com", name(w));
        let l = c
            .with_token(None)
            .login(&email, "a-long-password-1", None)
            .await
            .unwrap();
        out.push((w, c.with_token(Some(l.token))));
    }
    out.sort_by_key(|(w, _)| *w);
    (out, run)
}

fn allowed(r: &Result<Value, terraplane_client::ClientError>, field: &str) -> bool {
    match r {
        Ok(v) => !(v[field].is_null() && field != "spaceDelete"),
        Err(e) => !matches!(e.code(), Some("forbidden" | "not_found" | "unauthenticated")),
    }
}

async fn matrix(app: TestApp) {
    let (callers, run) = setup(&app).await;
    let needs = needs();
    let schema: Value = app
        .client
        .graphql("{ __schema { queryType { fields { name } } mutationType { fields { name } } subscriptionType { fields { name } } } }", json!({}))
        .await
        .unwrap();
    let mut fields = Vec::new();
    for t in ["queryType", "mutationType", "subscriptionType"] {
        for f in schema["__schema"][t]["fields"].as_array().unwrap() {
            fields.push(f["name"].as_str().unwrap().to_owned());
        }
    }
    let undecided: Vec<&String> = fields.iter().filter(|f| !needs.contains_key(f.as_str())).collect();
    assert!(
        undecided.is_empty(),
        "operations without a role decision in NEEDS: {undecided:?}"
    );
    let mut checked = 0;
    for field in &fields {
        let Need::At(least) = needs[field.as_str()] else {
            continue;
        };
        for (who, client) in &callers {
            let Some(q) = call(field, *who, &run) else { continue };
            let r = client.graphql::<Value>(&q, json!({})).await;
            let want = *who >= least;
            assert_eq!(allowed(&r, field), want, "{} calling {field}: {r:?}", name(*who));
            checked += 1;
        }
    }
    // 54 role-gated queries and mutations × 5 callers (driftScheduleDelete is checked in
    // drift::schedules: its ids are random). The two subscriptions go through the
    // same check as `run` (service::get_run) and are covered by the isolation matrix.
    assert_eq!(checked, 5 * 54, "calls checked");
    app.teardown().await;
}
both_backends!(
    every_operation,
    Options {
        runners: 0,
        ..Options::default()
    },
    matrix
);
