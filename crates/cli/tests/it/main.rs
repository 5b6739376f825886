//! `tpctl` commands end to end against a scripted server: what they print, what they
//! write, and how they fail. Environment and home directory are fakes.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use clap::Parser;
use serde_json::{Value, json};
use terraplane_cli::{Cli, Context};
use terraplane_test_support::mock::{MockServer, Reply, Request};

mod drift;
mod notifications;
mod policies;
mod reviews;
mod sso;
mod variables;

type TestResult = Result<(), Box<dyn std::error::Error>>;

struct Outcome {
    result: anyhow::Result<()>,
    out: String,
    err: String,
}

async fn tpctl(env: &HashMap<String, String>, args: &[&str]) -> Result<Outcome, clap::Error> {
    let cli = Cli::try_parse_from(std::iter::once("tpctl").chain(args.iter().copied()))?;
    let lookup = |k: &str| env.get(k).cloned();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut ctx = Context {
        env: &lookup,
        out: &mut out,
        err: &mut err,
        poll_interval: Duration::from_millis(5),
    };
    let result = terraplane_cli::run(cli, &mut ctx).await;
    Ok(Outcome {
        result,
        out: String::from_utf8_lossy(&out).into_owned(),
        err: String::from_utf8_lossy(&err).into_owned(),
    })
}

/// Environment pointing at the server with a token, config in a temp dir.
fn env_for(srv: &MockServer, home: &tempfile::TempDir) -> HashMap<String, String> {
    HashMap::from([
        ("HOME".to_owned(), home.path().to_string_lossy().into_owned()),
        ("TPCTL_ENDPOINT".to_owned(), srv.url()),
        ("TPCTL_TOKEN".to_owned(), "tok".to_owned()),
    ])
}

fn query(r: &Request) -> String {
    let body: Value = serde_json::from_slice(&r.body).unwrap_or_default();
    body["query"].as_str().unwrap_or_default().to_owned()
}

fn data(v: Value) -> Reply {
    Reply::json(200, json!({ "data": v }))
}

fn run_json(state: &str, terminal: bool, events: &[&str]) -> Value {
    let events: Vec<Value> = events
        .iter()
        .map(|s| json!({"state": s, "note": null, "at": "2026-03-01T12:00:00Z"}))
        .collect();
    json!({
        "id": "run-1", "stackId": "net", "type": "TRACKED", "state": state, "terminal": terminal,
        "commitSha": null, "triggeredBy": "ada", "driftDetection": false,
        "planSummary": {"add": 1, "change": 0, "destroy": 0}, "hasChanges": true,
        "error": if state == "FAILED" { json!("terraform plan exited 1") } else { Value::Null },
        "outputs": null, "runnerId": null,
        "createdAt": "2026-03-01T12:00:00Z", "updatedAt": "2026-03-01T12:00:01Z", "events": events
    })
}

fn me_json() -> Value {
    json!({"id": "u1", "name": "ada@example.com", "role": "admin",
           "organization": {"id": "o1", "slug": "acme", "name": "Acme"}})
}

/// A server whose run goes through `states` (one per poll), the last one repeated.
async fn run_server(states: &'static [(&'static str, bool)]) -> std::io::Result<MockServer> {
    let polls = Arc::new(AtomicUsize::new(0));
    MockServer::start(move |r| {
        let q = query(r);
        if q.contains("runTrigger") {
            return data(json!({"runTrigger": run_json("QUEUED", false, &[])}));
        }
        let i = polls.fetch_add(1, Ordering::SeqCst).min(states.len() - 1);
        let seen: Vec<&str> = states[..=i].iter().map(|(s, _)| *s).collect();
        let (state, terminal) = states[i];
        data(json!({"run": run_json(state, terminal, &seen)}))
    })
    .await
}

#[tokio::test]
async fn trigger_wait_prints_transitions_and_stops_at_a_decision() -> TestResult {
    static STATES: &[(&str, bool)] = &[
        ("QUEUED", false),
        ("PLANNING", false),
        ("PLANNING", false),
        ("UNCONFIRMED", false),
    ];
    let srv = run_server(STATES).await?;
    let home = tempfile::tempdir()?;
    let o = tpctl(&env_for(&srv, &home), &["run", "trigger", "net", "--wait"]).await?;
    o.result?;
    let lines: Vec<&str> = o.out.lines().collect();
    assert_eq!(lines[0], "Triggered run run-1 (TRACKED) on stack net");
    assert_eq!(
        lines[1..4],
        [
            "2026-03-01 12:00:00  QUEUED",
            "2026-03-01 12:00:00  PLANNING",
            "2026-03-01 12:00:00  UNCONFIRMED"
        ]
    );
    assert!(
        lines[4].starts_with("Run run-1 is waiting for a decision (plan +1 ~0 -0)"),
        "{}",
        o.out
    );
    assert_eq!(lines.len(), 5);
    Ok(())
}

#[tokio::test]
async fn trigger_wait_trusts_events_newer_than_the_state() -> TestResult {
    // The server reads the run before its events: the state can lag the events.
    let polls = Arc::new(AtomicUsize::new(0));
    let srv = MockServer::start(move |r| {
        if query(r).contains("runTrigger") {
            return data(json!({"runTrigger": run_json("QUEUED", false, &[])}));
        }
        let v = match polls.fetch_add(1, Ordering::SeqCst) {
            0 => run_json("QUEUED", false, &["QUEUED", "PREPARING"]),
            1 => run_json("PREPARING", false, &["QUEUED", "PREPARING", "INITIALIZING"]),
            _ => run_json(
                "UNCONFIRMED",
                false,
                &["QUEUED", "PREPARING", "INITIALIZING", "UNCONFIRMED"],
            ),
        };
        data(json!({ "run": v }))
    })
    .await?;
    let home = tempfile::tempdir()?;
    let o = tpctl(&env_for(&srv, &home), &["run", "trigger", "net", "--wait"]).await?;
    o.result?;
    let states: Vec<&str> = o.out.lines().skip(1).filter_map(|l| l.split("  ").nth(1)).collect();
    assert_eq!(
        states,
        ["QUEUED", "PREPARING", "INITIALIZING", "UNCONFIRMED"],
        "{}",
        o.out
    );
    Ok(())
}

#[tokio::test]
async fn trigger_wait_fails_when_the_run_fails() -> TestResult {
    static STATES: &[(&str, bool)] = &[("PLANNING", false), ("FAILED", true)];
    let srv = run_server(STATES).await?;
    let home = tempfile::tempdir()?;
    let o = tpctl(
        &env_for(&srv, &home),
        &["-o", "json", "run", "trigger", "net", "--proposed", "--wait"],
    )
    .await?;
    let err = o.result.err().ok_or("expected a failure")?;
    assert_eq!(
        terraplane_cli::error_message(&err),
        "run run-1 ended FAILED: terraform plan exited 1"
    );
    // JSON mode: the final run on stdout, progress on stderr.
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!(v["state"], "FAILED");
    assert!(o.err.contains("PLANNING") && o.err.contains("FAILED"), "{}", o.err);
    assert!(query(&srv.requests()[0]).contains("type: PROPOSED"));
    Ok(())
}

#[tokio::test]
async fn trigger_wait_discarded_is_a_failure_and_finished_a_success() -> TestResult {
    static DISCARDED: &[(&str, bool)] = &[("DISCARDED", true)];
    let srv = run_server(DISCARDED).await?;
    let home = tempfile::tempdir()?;
    let o = tpctl(&env_for(&srv, &home), &["run", "trigger", "net", "--wait"]).await?;
    assert_eq!(
        o.result.err().map(|e| e.to_string()).as_deref(),
        Some("run run-1 ended DISCARDED")
    );

    static FINISHED: &[(&str, bool)] = &[("APPLYING", false), ("FINISHED", true)];
    let srv = run_server(FINISHED).await?;
    let o = tpctl(&env_for(&srv, &home), &["run", "trigger", "net", "--wait"]).await?;
    o.result?;
    assert!(o.out.ends_with("Run run-1 finished (plan +1 ~0 -0)\n"), "{}", o.out);
    Ok(())
}

#[tokio::test]
async fn logs_follow_prints_chunks_verbatim_until_the_run_ends() -> TestResult {
    // Poll n returns chunk n (if any); the run is terminal from the third poll on.
    let polls = Arc::new(AtomicUsize::new(0));
    let srv = MockServer::start(move |r| {
        let body: Value = serde_json::from_slice(&r.body).unwrap_or_default();
        let after = body["variables"]["afterSeq"].as_i64().unwrap_or(0);
        let n = polls.fetch_add(1, Ordering::SeqCst);
        let chunks: Vec<Value> = match n {
            0 => vec![json!({"seq": 1, "phase": "plan", "data": "Initializing...\n", "createdAt": "2026-03-01T12:00:00Z"})],
            1 => vec![],
            2 => vec![json!({"seq": after + 1, "phase": "plan", "data": "Plan: 1 to add.\n", "createdAt": "2026-03-01T12:00:00Z"})],
            _ => vec![],
        };
        data(json!({"run": {"state": if n >= 2 { "FINISHED" } else { "PLANNING" }, "terminal": n >= 2, "logs": chunks}}))
    })
    .await?;
    let home = tempfile::tempdir()?;
    let o = tpctl(&env_for(&srv, &home), &["run", "logs", "run-1", "--follow"]).await?;
    o.result?;
    assert_eq!(o.out, "Initializing...\nPlan: 1 to add.\n");
    let afters: Vec<Value> = srv
        .requests()
        .iter()
        .map(|r| {
            serde_json::from_slice::<Value>(&r.body)
                .map(|b| b["variables"]["afterSeq"].clone())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(afters, [Value::Null, json!(1), json!(1), json!(2)]);
    Ok(())
}

#[tokio::test]
async fn login_with_token_checks_it_and_saves_a_private_config() -> TestResult {
    let srv = MockServer::start(|r| {
        if r.header("authorization").as_deref() == Some("Bearer key-1") {
            data(json!({"me": me_json()}))
        } else {
            Reply::json(200, json!({"data": null, "errors": [{"message": "invalid token", "extensions": {"code": "unauthenticated"}}]}))
        }
    })
    .await?;
    let home = tempfile::tempdir()?;
    let env = HashMap::from([("HOME".to_owned(), home.path().to_string_lossy().into_owned())]);
    let endpoint = format!("{}/", srv.url());

    let o = tpctl(&env, &["login", "--endpoint", &endpoint, "--token", "bad"]).await?;
    let err = o.result.err().ok_or("bad token accepted")?;
    assert_eq!(
        terraplane_cli::error_message(&err),
        "the token was refused: invalid token"
    );
    let path = home.path().join(".config/tpctl/config.json");
    assert!(!path.exists());

    let o = tpctl(
        &env,
        &["login", "--endpoint", &endpoint, "--token", "key-1", "--org", "other"],
    )
    .await?;
    assert_eq!(
        o.result.err().map(|e| e.to_string()).as_deref(),
        Some("the token belongs to organization acme, not other")
    );

    let o = tpctl(&env, &["login", "--endpoint", &endpoint, "--token", "key-1"]).await?;
    o.result?;
    assert!(
        o.out.starts_with(&format!(
            "Logged in to {} as ada@example.com in organization acme\n",
            srv.url()
        )),
        "{}",
        o.out
    );
    let saved: Value = serde_json::from_slice(&std::fs::read(&path)?)?;
    assert_eq!(saved, json!({"endpoint": srv.url(), "token": "key-1"}));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path)?.permissions().mode() & 0o777, 0o600);
    }

    // Later commands need neither flag nor environment.
    let o = tpctl(&env, &["-o", "json", "whoami"]).await?;
    o.result?;
    assert_eq!(serde_json::from_str::<Value>(&o.out)?, me_json());
    Ok(())
}

#[tokio::test]
async fn login_with_password_sends_email_password_and_org() -> TestResult {
    let srv = MockServer::start(|_| {
        data(json!({"login": {"token": "jwt", "expiresAt": "2026-03-02T12:00:00Z",
                              "organization": {"id": "o1", "slug": "acme", "name": "Acme"}}}))
    })
    .await?;
    let home = tempfile::tempdir()?;
    let cfg = home.path().join("tp.json");
    let env = HashMap::from([
        ("TPCTL_CONFIG".to_owned(), cfg.to_string_lossy().into_owned()),
        ("TPCTL_ENDPOINT".to_owned(), srv.url()),
    ]);
    let o = tpctl(
        &env,
        &[
            "login",
            "--email",
            "ada@example.com",
            "--password",
            "pw",
            "--org",
            "acme",
        ],
    )
    .await?;
    o.result?;
    let body: Value = serde_json::from_slice(&srv.requests()[0].body)?;
    assert_eq!(
        body["variables"],
        json!({"email": "ada@example.com", "password": "pw", "organization": "acme"})
    );
    assert!(srv.requests()[0].header("authorization").is_none());
    assert_eq!(serde_json::from_slice::<Value>(&std::fs::read(&cfg)?)?["token"], "jwt");
    assert!(o.out.contains("session expires 2026-03-02 12:00:00 UTC"), "{}", o.out);
    Ok(())
}

#[tokio::test]
async fn state_unlock_without_force_refuses_and_names_the_holder() -> TestResult {
    let srv = MockServer::start(|r| {
        let q = query(r);
        if q.contains("stateForceUnlock") {
            return Reply::json(500, json!({"code": "internal", "message": "must not be called"}));
        }
        data(json!({"stack": {
            "id": "net", "name": "net", "description": "", "repository": "r", "branch": "main", "projectRoot": "",
            "tool": "terraform", "toolVersion": null, "autodeploy": false, "labels": [], "workerPool": "default",
            "lock": null, "driftStatus": "UNKNOWN", "driftReaction": "ALERT", "driftCheckedAt": null,
            "createdAt": "2026-03-01T12:00:00Z", "updatedAt": "2026-03-01T12:00:00Z",
            "stateLock": {"id": "L1", "holder": "runner-7", "info": {}, "runId": "run-9", "needsRecovery": true,
                          "createdAt": "2026-03-01T12:00:00Z"}
        }}))
    })
    .await?;
    let home = tempfile::tempdir()?;
    let o = tpctl(&env_for(&srv, &home), &["state", "unlock", "net"]).await?;
    let msg = o.result.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        msg.starts_with("refusing to release the state lock of stack net held by runner-7 (run run-9) without --force"),
        "{msg}"
    );
    assert!(srv.requests().iter().all(|r| !query(r).contains("stateForceUnlock")));
    Ok(())
}

#[tokio::test]
async fn state_pull_writes_the_raw_state_of_the_viewers_org() -> TestResult {
    let srv = MockServer::start(|r| match r.path.as_str() {
        "/graphql" => data(json!({"me": me_json()})),
        "/api/v1/orgs/acme/stacks/net/state" if r.query.as_deref() == Some("serial=4") => {
            Reply::bytes(200, b"{\"version\":4,\"serial\":4}\n".to_vec())
        }
        "/api/v1/orgs/acme/stacks/net/state" => Reply::text(204, ""),
        _ => Reply::json(404, json!({"code": "not_found", "message": "stack not found"})),
    })
    .await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["state", "pull", "net", "--serial", "4"]).await?;
    o.result?;
    assert_eq!(o.out, "{\"version\":4,\"serial\":4}\n");
    let o = tpctl(&env, &["state", "pull", "net"]).await?;
    assert_eq!(
        o.result.err().map(|e| e.to_string()).as_deref(),
        Some("stack net has no state yet")
    );
    let o = tpctl(&env, &["state", "pull", "gone"]).await?;
    assert_eq!(
        o.result.err().map(|e| e.to_string()).as_deref(),
        Some("stack not found")
    );
    for r in srv.requests() {
        assert_eq!(
            r.method,
            if r.path == "/graphql" { "POST" } else { "GET" },
            "{}",
            r.path
        );
        assert_eq!(r.header("authorization").as_deref(), Some("Bearer tok"));
    }
    Ok(())
}

#[tokio::test]
async fn missing_endpoint_or_token_is_explained() -> TestResult {
    let home = tempfile::tempdir()?;
    let env = HashMap::from([("HOME".to_owned(), home.path().to_string_lossy().into_owned())]);
    let o = tpctl(&env, &["stack", "list"]).await?;
    assert!(
        o.result
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
            .starts_with("no endpoint")
    );
    let o = tpctl(&env, &["--endpoint", "http://127.0.0.1:9", "stack", "list"]).await?;
    assert!(
        o.result
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
            .starts_with("not logged in to http://127.0.0.1:9")
    );
    Ok(())
}

#[tokio::test]
async fn api_errors_are_reported_with_the_server_message() -> TestResult {
    let srv = MockServer::start(|_| {
        Reply::json(200, json!({"data": null, "errors": [{"message": "stack net is locked by bob", "extensions": {"code": "stack_locked"}}]}))
    })
    .await?;
    let home = tempfile::tempdir()?;
    let o = tpctl(&env_for(&srv, &home), &["run", "trigger", "net"]).await?;
    let err = o.result.err().ok_or("expected an error")?;
    assert_eq!(terraplane_cli::error_message(&err), "stack net is locked by bob");
    Ok(())
}

#[tokio::test]
async fn empty_lists_say_so_on_stderr_and_json_prints_an_array() -> TestResult {
    let srv = MockServer::start(|_| data(json!({"stacks": []}))).await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["stack", "list"]).await?;
    o.result?;
    assert_eq!((o.out.as_str(), o.err.as_str()), ("", "No stacks.\n"));
    let o = tpctl(&env, &["stack", "list", "-o", "json"]).await?;
    o.result?;
    assert_eq!(o.out, "[]\n");
    Ok(())
}

// Organization management: orgs, spaces, users, teams, roles, API keys.

const T0: &str = "2026-03-01T12:00:00Z";

/// The root field an operation asks for (`spaceCreate` in `mutation(…) { spaceCreate(…) … }`).
fn root_field(q: &str) -> String {
    q.split_once('{')
        .map(|(_, rest)| rest.trim_start())
        .unwrap_or_default()
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect()
}

fn variables(r: &Request) -> Value {
    let body: Value = serde_json::from_slice(&r.body).unwrap_or_default();
    body["variables"].clone()
}

fn space_json(id: &str, parent: Option<&str>, inherit: bool) -> Value {
    json!({"id": id, "name": id.to_uppercase(), "description": "", "parent": parent, "inherit": inherit, "createdAt": T0})
}

fn key_json(id: &str, kind: &str, role: &str, revoked: bool) -> Value {
    json!({"id": id, "name": format!("{id}-name"), "kind": kind, "role": role,
           "owner": if kind == "personal" { json!("ada@example.com") } else { Value::Null },
           "createdAt": T0, "expiresAt": "2099-01-01T00:00:00Z", "lastUsedAt": null,
           "revokedAt": if revoked { json!("2026-03-02T00:00:00Z") } else { Value::Null }})
}

/// What a server that knows organization `acme` answers to each root field.
fn org_answer(field: &str, vars: &Value) -> Value {
    match field {
        "me" => me_json(),
        "organizations" => {
            json!([{"id": "o1", "slug": "acme", "name": "Acme"}, {"id": "o2", "slug": "beta", "name": "Beta Inc"}])
        }
        "orgCreate" => json!({"id": "o2", "slug": vars["slug"], "name": vars["name"].as_str().unwrap_or("beta")}),
        "spaces" => json!([space_json("root", None, false), space_json("prod", Some("root"), true)]),
        "spaceCreate" => {
            let mut s = space_json(
                vars["slug"].as_str().unwrap_or_default(),
                Some("root"),
                vars["inherit"] == true,
            );
            s["description"] = json!(vars["description"].as_str().unwrap_or_default());
            s
        }
        "spaceDelete" | "roleRevoke" => json!(true),
        "teams" => json!([{"id": "ops", "name": "Ops", "members": ["ada@example.com", "bob@example.com"]},
                          {"id": "dev", "name": "Dev", "members": []}]),
        "teamCreate" => json!({"id": vars["slug"], "name": vars["name"].as_str().unwrap_or("ops"), "members": []}),
        "teamAddMember" => json!({"id": vars["team"], "name": "Ops", "members": ["ada@example.com", vars["email"]]}),
        "users" => json!([{"id": "u1", "email": "ada@example.com", "name": "Ada", "role": "owner"},
                          {"id": "u2", "email": "bob@example.com", "name": "", "role": "member"}]),
        "userCreate" => json!({"id": "u3", "email": vars["email"], "name": "",
                               "role": if vars["owner"] == true { "owner" } else { "member" }}),
        "roleBindings" => {
            json!([{"space": "prod", "subjectKind": "team", "subject": "ops", "role": "writer", "createdAt": T0}])
        }
        "roleGrant" => {
            let (kind, subject) = vars["subject"]
                .as_object()
                .and_then(|o| o.iter().next())
                .map(|(k, v)| (k.clone(), v.clone()))
                .unwrap_or_default();
            json!({"space": vars["space"], "subjectKind": kind, "subject": subject, "role": vars["role"], "createdAt": T0})
        }
        "apiKeys" => json!([
            key_json("k1", "personal", "owner", false),
            key_json("k2", "service", "", true)
        ]),
        "apiKeyCreate" => json!({"secret": "tpk_SECRET_0123456789",
                                 "key": key_json("k9", vars["kind"].as_str().unwrap_or("personal"), "", false)}),
        "apiKeyRevoke" => key_json("k1", "personal", "owner", true),
        "memberSetRole" => json!({"id": "u2", "email": vars["email"], "name": "Bob",
                                  "role": if vars["owner"] == true { "owner" } else { "member" }}),
        "memberRemove" => json!(true),
        _ => Value::Null,
    }
}

async fn org_server() -> std::io::Result<MockServer> {
    MockServer::start(|r| {
        let field = root_field(&query(r));
        data(json!({ field.clone(): org_answer(&field, &variables(r)) }))
    })
    .await
}

/// The operations the server saw, as (root field, variables).
fn operations(srv: &MockServer) -> Vec<(String, Value)> {
    srv.requests()
        .iter()
        .map(|r| (root_field(&query(r)), variables(r)))
        .collect()
}

#[tokio::test]
async fn org_create_and_list() -> TestResult {
    let srv = org_server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["org", "create", "beta", "--name", "Beta Inc"]).await?;
    o.result?;
    assert_eq!(
        o.out,
        "Created organization beta (Beta Inc); you are its owner.\n\
         Tokens are per-organization: work in it after `tpctl login --org beta`.\n"
    );
    assert!(query(&srv.requests()[0]).contains("orgCreate(slug: $slug, name: $name)"));
    assert_eq!(
        operations(&srv)[0],
        ("orgCreate".into(), json!({"slug": "beta", "name": "Beta Inc"}))
    );

    let o = tpctl(&env, &["org", "list"]).await?;
    o.result?;
    assert_eq!(
        o.out,
        "SLUG   NAME       ID\nacme   Acme       o1\nbeta   Beta Inc   o2\n"
    );
    let o = tpctl(&env, &["org", "list", "-o", "json"]).await?;
    o.result?;
    assert_eq!(serde_json::from_str::<Value>(&o.out)?[1]["slug"], "beta");
    Ok(())
}

#[tokio::test]
async fn space_create_list_and_delete() -> TestResult {
    let srv = org_server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(
        &env,
        &[
            "space",
            "create",
            "prod",
            "--parent",
            "root",
            "--inherit",
            "--name",
            "Production",
            "--description",
            "live",
        ],
    )
    .await?;
    o.result?;
    assert!(
        o.out.starts_with("Created space prod\n\nID:          prod\n"),
        "{}",
        o.out
    );
    assert!(o.out.contains("Parent:      root\nInherit:     yes\n"), "{}", o.out);
    let q = query(&srv.requests()[0]);
    assert!(
        q.contains(
            "spaceCreate(slug: $slug, name: $name, parent: $parent, inherit: $inherit, description: $description)"
        ),
        "{q}"
    );
    assert_eq!(
        operations(&srv)[0].1,
        json!({"slug": "prod", "name": "Production", "parent": "root", "inherit": true, "description": "live"})
    );

    // Unset options are left to the server; inherit is always sent (Boolean!).
    let o = tpctl(&env, &["space", "create", "dev", "-o", "json"]).await?;
    o.result?;
    assert_eq!(operations(&srv)[1].1, json!({"slug": "dev", "inherit": false}));
    assert_eq!(serde_json::from_str::<Value>(&o.out)?["id"], "dev");

    let o = tpctl(&env, &["space", "list"]).await?;
    o.result?;
    assert_eq!(
        o.out,
        "ID     NAME   PARENT   INHERIT   DESCRIPTION\nroot   ROOT   -        no        -\nprod   PROD   root     yes       -\n"
    );
    let o = tpctl(&env, &["space", "list", "-o", "json"]).await?;
    o.result?;
    assert_eq!(serde_json::from_str::<Value>(&o.out)?[1]["parent"], "root");

    let o = tpctl(&env, &["space", "delete", "dev"]).await?;
    o.result?;
    assert_eq!(o.out, "Deleted space dev\n");
    assert_eq!(
        operations(&srv).last(),
        Some(&("spaceDelete".into(), json!({"id": "dev"})))
    );
    let o = tpctl(&env, &["-o", "json", "space", "delete", "dev"]).await?;
    o.result?;
    assert_eq!(
        serde_json::from_str::<Value>(&o.out)?,
        json!({"id": "dev", "deleted": true})
    );
    Ok(())
}

#[tokio::test]
async fn user_create_and_list() -> TestResult {
    let srv = org_server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(
        &env,
        &["user", "create", "carol@example.com", "--name", "Carol", "--owner"],
    )
    .await?;
    o.result?;
    assert_eq!(o.out, "Added carol@example.com to the organization as owner\n");
    let q = query(&srv.requests()[0]);
    assert!(
        q.contains("userCreate(email: $email, name: $name, password: $password, owner: $owner)"),
        "{q}"
    );
    // No password unless --password-stdin.
    assert_eq!(
        operations(&srv)[0].1,
        json!({"email": "carol@example.com", "name": "Carol", "owner": true})
    );
    let o = tpctl(&env, &["user", "create", "dan@example.com", "-o", "json"]).await?;
    o.result?;
    assert_eq!(
        operations(&srv)[1].1,
        json!({"email": "dan@example.com", "owner": false})
    );
    assert_eq!(serde_json::from_str::<Value>(&o.out)?["role"], "member");

    let o = tpctl(&env, &["user", "list"]).await?;
    o.result?;
    assert_eq!(
        o.out,
        "EMAIL             NAME   ROLE     ID\nada@example.com   Ada    owner    u1\nbob@example.com   -      member   u2\n"
    );
    let o = tpctl(&env, &["user", "list", "-o", "json"]).await?;
    o.result?;
    assert_eq!(serde_json::from_str::<Value>(&o.out)?.as_array().map(Vec::len), Some(2));
    Ok(())
}

#[tokio::test]
async fn team_create_add_member_and_list() -> TestResult {
    let srv = org_server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["team", "create", "ops", "--name", "Ops"]).await?;
    o.result?;
    assert_eq!(o.out, "Created team ops (Ops)\n");
    let o = tpctl(&env, &["team", "add-member", "ops", "bob@example.com"]).await?;
    o.result?;
    assert_eq!(o.out, "Added bob@example.com to team ops (2 members)\n");
    let o = tpctl(&env, &["team", "list"]).await?;
    o.result?;
    assert_eq!(
        o.out,
        "ID    NAME   MEMBERS\nops   Ops    ada@example.com,bob@example.com\ndev   Dev    -\n"
    );
    let o = tpctl(&env, &["-o", "json", "team", "add-member", "ops", "bob@example.com"]).await?;
    o.result?;
    assert_eq!(
        serde_json::from_str::<Value>(&o.out)?["members"],
        json!(["ada@example.com", "bob@example.com"])
    );

    let reqs = srv.requests();
    assert!(query(&reqs[0]).contains("teamCreate(slug: $slug, name: $name)"));
    assert!(query(&reqs[1]).contains("teamAddMember(team: $team, email: $email)"));
    let ops = operations(&srv);
    assert_eq!(ops[0].1, json!({"slug": "ops", "name": "Ops"}));
    assert_eq!(ops[1].1, json!({"team": "ops", "email": "bob@example.com"}));
    assert_eq!(ops[2], ("teams".into(), json!({})));
    Ok(())
}

#[tokio::test]
async fn role_grant_and_revoke_send_one_subject() -> TestResult {
    let srv = org_server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(
        &env,
        &[
            "role",
            "grant",
            "--space",
            "prod",
            "--user",
            "ada@example.com",
            "--role",
            "admin",
        ],
    )
    .await?;
    o.result?;
    assert_eq!(o.out, "Granted admin on space prod to user ada@example.com\n");
    let o = tpctl(
        &env,
        &[
            "role", "grant", "--space", "prod", "--team", "ops", "--role", "reader", "-o", "json",
        ],
    )
    .await?;
    o.result?;
    assert_eq!(
        serde_json::from_str::<Value>(&o.out)?,
        json!({"space": "prod", "subjectKind": "team", "subject": "ops", "role": "reader", "createdAt": T0})
    );
    let o = tpctl(&env, &["role", "revoke", "--space", "prod", "--api-key", "k1"]).await?;
    o.result?;
    assert_eq!(o.out, "Revoked the role of API key k1 on space prod\n");
    let o = tpctl(
        &env,
        &["-o", "json", "role", "revoke", "--space", "prod", "--user", "a@b.c"],
    )
    .await?;
    o.result?;
    assert_eq!(
        serde_json::from_str::<Value>(&o.out)?,
        json!({"space": "prod", "subject": {"user": "a@b.c"}, "revoked": true})
    );

    let reqs = srv.requests();
    assert!(
        query(&reqs[0]).contains("roleGrant(space: $space, subject: $subject, role: $role)"),
        "{}",
        query(&reqs[0])
    );
    assert!(query(&reqs[2]).contains("roleRevoke(space: $space, subject: $subject)"));
    let vars: Vec<Value> = operations(&srv).into_iter().map(|(_, v)| v).collect();
    assert_eq!(
        vars,
        [
            json!({"space": "prod", "subject": {"user": "ada@example.com"}, "role": "admin"}),
            json!({"space": "prod", "subject": {"team": "ops"}, "role": "reader"}),
            json!({"space": "prod", "subject": {"apiKey": "k1"}}),
            json!({"space": "prod", "subject": {"user": "a@b.c"}}),
        ]
    );

    let o = tpctl(&env, &["role", "list"]).await?;
    o.result?;
    assert_eq!(
        o.out,
        "SPACE   KIND   SUBJECT   ROLE     CREATED\nprod    team   ops       writer   2026-03-01 12:00:00\n"
    );
    Ok(())
}

#[tokio::test]
async fn apikey_create_shows_the_secret_once() -> TestResult {
    let srv = org_server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(
        &env,
        &[
            "apikey",
            "create",
            "ci",
            "--kind",
            "service",
            "--role",
            "writer",
            "--space",
            "prod",
            "--expires-in-days",
            "30",
        ],
    )
    .await?;
    o.result?;
    assert!(o.out.starts_with("Created API key k9-name\n\nID:"), "{}", o.out);
    assert!(
        o.out.ends_with(
            "Secret:\n\n    tpk_SECRET_0123456789\n\nStore it now: it is shown only this once and cannot be retrieved later.\n"
        ),
        "{}",
        o.out
    );
    assert_eq!(o.out.matches("tpk_SECRET").count(), 1);
    assert_eq!(o.err, "");
    let q = query(&srv.requests()[0]);
    assert!(
        q.contains(
            "apiKeyCreate(name: $name, kind: $kind, role: $role, space: $space, expiresInDays: $expiresInDays) { secret key {"
        ),
        "{q}"
    );
    assert_eq!(
        operations(&srv)[0].1,
        json!({"name": "ci", "kind": "service", "role": "writer", "space": "prod", "expiresInDays": 30})
    );

    // JSON: the object with its secret on stdout, the warning on stderr.
    let o = tpctl(&env, &["apikey", "create", "laptop", "-o", "json"]).await?;
    o.result?;
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!(v["secret"], "tpk_SECRET_0123456789");
    assert_eq!(v["key"]["id"], "k9");
    assert_eq!(o.err, "The secret is shown only this once; store it now.\n");
    assert_eq!(operations(&srv)[1].1, json!({"name": "laptop"}));
    Ok(())
}

#[tokio::test]
async fn apikey_list_and_revoke() -> TestResult {
    let srv = org_server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["apikey", "list"]).await?;
    o.result?;
    let lines: Vec<&str> = o.out.lines().collect();
    assert_eq!(lines.len(), 3, "{}", o.out);
    assert!(
        lines[0].starts_with("ID   NAME      KIND       ROLE    OWNER             STATUS"),
        "{}",
        o.out
    );
    assert!(
        lines[1].starts_with("k1   k1-name   personal   owner   ada@example.com   active"),
        "{}",
        o.out
    );
    assert!(
        lines[2].starts_with("k2   k2-name   service    -       -                 revoked"),
        "{}",
        o.out
    );
    assert!(!o.out.contains("tpk_"));
    let o = tpctl(&env, &["apikey", "list", "-o", "json"]).await?;
    o.result?;
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!(v[1]["revokedAt"], "2026-03-02T00:00:00Z");
    assert!(v[0].get("secret").is_none());

    let o = tpctl(&env, &["apikey", "revoke", "k1"]).await?;
    o.result?;
    assert_eq!(o.out, "Revoked API key k1 (k1-name)\n");
    let o = tpctl(&env, &["apikey", "revoke", "k1", "-o", "json"]).await?;
    o.result?;
    assert_eq!(
        serde_json::from_str::<Value>(&o.out)?["revokedAt"],
        "2026-03-02T00:00:00Z"
    );
    let ops = operations(&srv);
    assert_eq!(ops[2], ("apiKeyRevoke".into(), json!({"id": "k1"})));
    assert!(query(&srv.requests()[2]).contains("apiKeyRevoke(id: $id)"));
    Ok(())
}

#[tokio::test]
async fn empty_management_lists_say_so() -> TestResult {
    let srv = MockServer::start(|r| {
        let field = root_field(&query(r));
        data(json!({ field: [] }))
    })
    .await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    for (args, remark) in [
        (["org", "list"], "No organizations.\n"),
        (["space", "list"], "No spaces.\n"),
        (["user", "list"], "No members.\n"),
        (["team", "list"], "No teams.\n"),
        (["role", "list"], "No role bindings.\n"),
        (["apikey", "list"], "No API keys.\n"),
        (["audit", "list"], "No audit events.\n"),
    ] {
        let o = tpctl(&env, &args).await?;
        o.result?;
        assert_eq!((o.out.as_str(), o.err.as_str()), ("", remark));
        let o = tpctl(&env, &[args[0], args[1], "-o", "json"]).await?;
        o.result?;
        assert_eq!(o.out, "[]\n");
    }
    Ok(())
}

#[tokio::test]
async fn org_flag_must_match_the_credentials_organization() -> TestResult {
    let srv = org_server().await?;
    let home = tempfile::tempdir()?;
    let mut env = env_for(&srv, &home);

    let o = tpctl(&env, &["--org", "beta", "space", "create", "prod"]).await?;
    let err = o.result.err().ok_or("expected a mismatch")?;
    assert_eq!(
        terraplane_cli::error_message(&err),
        "the credential belongs to organization acme, not beta; tokens are per-organization: \
         run `tpctl login --org beta` (or use an API key of beta)"
    );
    // Nothing was changed: only `me` was asked.
    assert_eq!(operations(&srv), [("me".to_owned(), json!({}))]);
    assert!(query(&srv.requests()[0]).contains("organization { id slug name }"));

    env.insert("TPCTL_ORG".into(), "beta".into());
    let o = tpctl(&env, &["apikey", "list"]).await?;
    assert!(
        o.result
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
            .contains("not beta"),
        "TPCTL_ORG is checked too"
    );

    // The flag beats the environment; a match runs the command.
    let o = tpctl(&env, &["--org", "acme", "team", "list"]).await?;
    o.result?;
    assert!(o.out.starts_with("ID    NAME   MEMBERS\n"), "{}", o.out);
    let fields: Vec<String> = operations(&srv).into_iter().map(|(f, _)| f).collect();
    assert_eq!(fields[fields.len() - 2..], ["me", "teams"]);
    Ok(())
}

#[tokio::test]
async fn checked_org_is_reused_by_state_pull() -> TestResult {
    let srv = MockServer::start(|r| match r.path.as_str() {
        "/graphql" => data(json!({"me": me_json()})),
        "/api/v1/orgs/acme/stacks/net/state" => Reply::bytes(200, b"{}".to_vec()),
        _ => Reply::json(404, json!({"code": "not_found", "message": "not found"})),
    })
    .await?;
    let home = tempfile::tempdir()?;
    let o = tpctl(&env_for(&srv, &home), &["--org", "acme", "state", "pull", "net"]).await?;
    o.result?;
    let paths: Vec<String> = srv.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, ["/graphql", "/api/v1/orgs/acme/stacks/net/state"]);
    Ok(())
}

#[tokio::test]
async fn login_sends_the_org_from_tpctl_org() -> TestResult {
    let srv = MockServer::start(|r| {
        let org = variables(r)["organization"].as_str().unwrap_or("acme").to_owned();
        data(json!({"login": {"token": "jwt", "expiresAt": "2026-03-02T12:00:00Z",
                              "organization": {"id": "o2", "slug": org, "name": "Beta Inc"}}}))
    })
    .await?;
    let home = tempfile::tempdir()?;
    let cfg = home.path().join("tp.json");
    let mut env = HashMap::from([
        ("TPCTL_CONFIG".to_owned(), cfg.to_string_lossy().into_owned()),
        ("TPCTL_ENDPOINT".to_owned(), srv.url()),
        ("TPCTL_ORG".to_owned(), "beta".to_owned()),
    ]);
    let o = tpctl(&env, &["login", "--email", "ada@example.com", "--password", "pw"]).await?;
    o.result?;
    assert!(o.out.contains("in organization beta"), "{}", o.out);
    assert_eq!(variables(&srv.requests()[0])["organization"], "beta");

    // Without flag or environment, the server picks (organization: null).
    env.remove("TPCTL_ORG");
    let o = tpctl(&env, &["login", "--email", "ada@example.com", "--password", "pw"]).await?;
    o.result?;
    assert_eq!(variables(&srv.requests()[1])["organization"], Value::Null);
    Ok(())
}

#[tokio::test]
async fn server_refusals_are_reported_with_their_message() -> TestResult {
    let srv = MockServer::start(|r| {
        let (code, message) = match root_field(&query(r)).as_str() {
            "spaceCreate" => ("space_exists", "space prod already exists"),
            "teamCreate" => ("team_exists", "team ops already exists"),
            "spaceDelete" => ("space_not_empty", "the root space cannot be deleted"),
            "roleGrant" => ("not_found", "space not found"),
            _ => ("forbidden", "this needs the organization owner role"),
        };
        Reply::json(
            200,
            json!({"data": null, "errors": [{"message": message, "extensions": {"code": code}}]}),
        )
    })
    .await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let cases: [(&[&str], &str); 6] = [
        (&["space", "create", "prod"], "space prod already exists"),
        (&["team", "create", "ops"], "team ops already exists"),
        (&["space", "delete", "root"], "the root space cannot be deleted"),
        (
            &[
                "role", "grant", "--space", "nope", "--user", "a@b.c", "--role", "reader",
            ],
            "space not found",
        ),
        (&["user", "create", "a@b.c"], "this needs the organization owner role"),
        (
            &["apikey", "create", "ci", "--kind", "service", "--role", "reader"],
            "this needs the organization owner role",
        ),
    ];
    for (args, message) in cases {
        let o = tpctl(&env, args).await?;
        let err = o.result.err().ok_or("expected a refusal")?;
        assert_eq!(terraplane_cli::error_message(&err), message, "{args:?}");
        let code = err
            .downcast_ref::<terraplane_client::ClientError>()
            .and_then(|e| e.code().map(str::to_owned));
        assert!(code.is_some(), "{args:?}: the server's code is kept");
        assert_eq!(o.out, "");
    }
    Ok(())
}

/// Runs the real `tpctl` binary against the server, with `stdin` piped in.
async fn tpctl_bin(srv: &MockServer, args: &[&str], stdin: &[u8]) -> std::io::Result<std::process::Output> {
    use tokio::io::AsyncWriteExt;
    let home = tempfile::tempdir()?;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_tpctl"))
        .args(args)
        .env_clear()
        .env("HOME", home.path())
        .env("TPCTL_ENDPOINT", srv.url())
        .env("TPCTL_TOKEN", "tok")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    if let Some(mut i) = child.stdin.take() {
        i.write_all(stdin).await?;
    }
    child.wait_with_output().await
}

#[tokio::test]
async fn user_create_reads_the_password_from_stdin() -> TestResult {
    let srv = org_server().await?;
    let out = tpctl_bin(
        &srv,
        &["user", "create", "erin@example.com", "--password-stdin"],
        b"correct horse battery staple\n",
    )
    .await?;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Added erin@example.com to the organization as member\n"
    );
    assert_eq!(
        operations(&srv)[0].1,
        json!({"email": "erin@example.com", "password": "correct horse battery staple", "owner": false})
    );

    let out = tpctl_bin(&srv, &["user", "create", "erin@example.com", "--password-stdin"], b"\n").await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: --password-stdin: the password on stdin is empty\n"
    );
    assert_eq!(srv.requests().len(), 1, "nothing sent without a password");
    Ok(())
}

#[tokio::test]
async fn the_binary_prints_refusals_as_errors_and_exits_1() -> TestResult {
    let srv = MockServer::start(|_| {
        Reply::json(200, json!({"data": null, "errors": [{"message": "space prod already exists", "extensions": {"code": "space_exists"}}]}))
    })
    .await?;
    let out = tpctl_bin(&srv, &["space", "create", "prod"], b"").await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: space prod already exists\n"
    );
    assert!(out.stdout.is_empty());

    // Usage errors are clap's: exit 2, before any request.
    let out = tpctl_bin(
        &srv,
        &[
            "role", "grant", "--space", "p", "--user", "a", "--team", "t", "--role", "reader",
        ],
        b"",
    )
    .await?;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));
    assert_eq!(srv.requests().len(), 1);
    Ok(())
}

// Membership and the audit trail.

#[tokio::test]
async fn user_set_role_and_remove() -> TestResult {
    let srv = org_server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["user", "set-role", "bob@example.com", "--owner"]).await?;
    o.result?;
    assert_eq!(o.out, "bob@example.com is now an owner of the organization\n");
    let o = tpctl(&env, &["user", "set-role", "bob@example.com", "--member"]).await?;
    o.result?;
    assert_eq!(o.out, "bob@example.com is now a member of the organization\n");
    let o = tpctl(&env, &["-o", "json", "user", "set-role", "bob@example.com", "--member"]).await?;
    o.result?;
    assert_eq!(
        serde_json::from_str::<Value>(&o.out)?,
        json!({"id": "u2", "email": "bob@example.com", "name": "Bob", "role": "member"})
    );
    let o = tpctl(&env, &["user", "remove", "bob@example.com"]).await?;
    o.result?;
    assert_eq!(o.out, "Removed bob@example.com from the organization\n");
    let o = tpctl(&env, &["user", "remove", "bob@example.com", "-o", "json"]).await?;
    o.result?;
    assert_eq!(
        serde_json::from_str::<Value>(&o.out)?,
        json!({"email": "bob@example.com", "removed": true})
    );

    let reqs = srv.requests();
    assert!(query(&reqs[0]).contains("memberSetRole(email: $email, owner: $owner)"));
    assert!(query(&reqs[3]).contains("memberRemove(email: $email)"));
    let ops = operations(&srv);
    assert_eq!(
        ops,
        [
            (
                "memberSetRole".to_owned(),
                json!({"email": "bob@example.com", "owner": true})
            ),
            (
                "memberSetRole".to_owned(),
                json!({"email": "bob@example.com", "owner": false})
            ),
            (
                "memberSetRole".to_owned(),
                json!({"email": "bob@example.com", "owner": false})
            ),
            ("memberRemove".to_owned(), json!({"email": "bob@example.com"})),
            ("memberRemove".to_owned(), json!({"email": "bob@example.com"})),
        ]
    );
    Ok(())
}

fn audit_event_json(seq: i64, actor: &str, action: &str, kind: &str, target: &str, ip: Option<&str>) -> Value {
    json!({"id": format!("ev-{seq}"), "seq": seq, "actor": actor, "action": action, "targetKind": kind,
           "target": target, "before": if action == "stack.unlock" { json!({"locked_by": actor}) } else { Value::Null },
           "after": null, "requestId": format!("req-{seq}"), "clientIp": ip,
           "at": format!("2026-11-30T10:0{seq}:00Z"), "hash": format!("h{seq}"), "prevHash": format!("h{}", seq - 1)})
}

/// Two events whatever the filters; `auditVerify` answers as `verify` says.
async fn audit_server(verify: Value) -> std::io::Result<MockServer> {
    MockServer::start(move |r| match root_field(&query(r)).as_str() {
        "auditEvents" => data(json!({"auditEvents": [
            audit_event_json(8, "ada@example.com", "stack.unlock", "stack", "net", Some("10.0.0.7")),
            audit_event_json(7, "bob@example.com", "login.failure", "user", "bob@example.com", None),
        ]})),
        "auditVerify" => data(json!({ "auditVerify": verify.clone() })),
        f => Reply::json(200, json!({"errors": [{"message": format!("unexpected {f}")}]})),
    })
    .await
}

fn intact() -> Value {
    json!({"ok": true, "events": 14, "problem": null, "seq": null, "eventId": null})
}

fn altered() -> Value {
    json!({"ok": false, "events": 6, "problem": "event 7 (ev-7) was altered", "seq": 7, "eventId": "ev-7"})
}

#[tokio::test]
async fn audit_list_prints_a_table_or_the_events() -> TestResult {
    let srv = audit_server(intact()).await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["audit", "list"]).await?;
    o.result?;
    assert_eq!(
        o.out,
        "\
SEQ   TIME                  ACTOR             ACTION          TARGET                 IP
8     2026-11-30 10:08:00   ada@example.com   stack.unlock    stack:net              10.0.0.7
7     2026-11-30 10:07:00   bob@example.com   login.failure   user:bob@example.com   -
"
    );
    assert_eq!(o.err, "");
    // No filter given, none sent: the server's defaults apply.
    assert_eq!(operations(&srv)[0].1, json!({}));

    let o = tpctl(&env, &["audit", "list", "-o", "json"]).await?;
    o.result?;
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!(
        v[0],
        audit_event_json(8, "ada@example.com", "stack.unlock", "stack", "net", Some("10.0.0.7"))
    );
    assert_eq!(v[0]["before"], json!({"locked_by": "ada@example.com"}));
    assert_eq!(v.as_array().map(Vec::len), Some(2));
    Ok(())
}

#[tokio::test]
async fn audit_list_sends_filters_and_rfc3339_times() -> TestResult {
    let srv = audit_server(intact()).await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(
        &env,
        &[
            "audit",
            "list",
            "--actor",
            "ada@example.com",
            "--action",
            "stack.unlock",
            "--target",
            "net",
            "--since",
            "2026-11-30T10:00:00Z",
            "--until",
            "2026-11-30T12:30:00+02:00",
            "--limit",
            "5",
        ],
    )
    .await?;
    o.result?;
    assert!(
        query(&srv.requests()[0]).contains(
            "auditEvents(actor: $actor, action: $action, target: $target, since: $since, until: $until, limit: $limit)"
        ),
        "{}",
        query(&srv.requests()[0])
    );
    assert_eq!(
        operations(&srv)[0].1,
        json!({"actor": "ada@example.com", "action": "stack.unlock", "target": "net",
               "since": "2026-11-30T10:00:00Z", "until": "2026-11-30T10:30:00Z", "limit": 5})
    );
    Ok(())
}

#[tokio::test]
async fn audit_list_turns_durations_into_times_that_long_ago() -> TestResult {
    let srv = audit_server(intact()).await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let before = chrono::Utc::now();
    let o = tpctl(&env, &["audit", "list", "--since", "30d", "--until", "1d12h"]).await?;
    let after = chrono::Utc::now();
    o.result?;
    let vars = &operations(&srv)[0].1;
    let sent = |k: &str| -> Result<chrono::DateTime<chrono::Utc>, Box<dyn std::error::Error>> {
        let s = vars[k].as_str().ok_or(format!("{k} not sent as a string: {vars}"))?;
        assert!(s.ends_with('Z') && !s.contains('.'), "{k}: {s}");
        Ok(chrono::DateTime::parse_from_rfc3339(s)?.to_utc())
    };
    let (since, until) = (sent("since")?, sent("until")?);
    // In the past by (about) the durations given, whole seconds.
    let day = chrono::TimeDelta::days(1);
    assert!(
        since <= after - day * 30 && since > before - day * 30 - chrono::TimeDelta::seconds(2),
        "{since}"
    );
    assert!(
        until <= after - day * 3 / 2 && until > before - day * 3 / 2 - chrono::TimeDelta::seconds(2),
        "{until}"
    );
    assert_eq!(vars.as_object().map(|o| o.len()), Some(2), "{vars}");
    Ok(())
}

#[tokio::test]
async fn audit_list_refuses_bad_times_before_asking() -> TestResult {
    let srv = audit_server(intact()).await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let e = tpctl(&env, &["audit", "list", "--since", "last tuesday"])
        .await
        .err()
        .ok_or("accepted")?;
    assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation);
    assert!(
        e.to_string().contains(
            "invalid value 'last tuesday' for '--since <TIME>': \"last tuesday\" is not a time: \
             expected an RFC 3339 time like 2026-11-30T10:00:00Z, or a duration ago like 30m, 1h or 7d"
        ),
        "{e}"
    );
    let e = tpctl(&env, &["audit", "list", "--until", "2026-11-30 10:00"])
        .await
        .err()
        .ok_or("accepted")?;
    assert!(
        e.to_string()
            .contains("a time needs a date, a time of day and an offset"),
        "{e}"
    );

    // Well-formed but empty: --until must come after --since.
    let o = tpctl(&env, &["audit", "list", "--since", "1h", "--until", "2h"]).await?;
    let msg = o.result.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        msg.starts_with("--until (") && msg.contains(") is not after --since ("),
        "{msg}"
    );
    assert!(msg.ends_with("): no event can match"), "{msg}");
    assert!(srv.requests().is_empty(), "nothing sent");

    // The binary: a usage error, exit 2.
    let out = tpctl_bin(&srv, &["audit", "list", "--since", "7x"], b"").await?;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("\"7x\": unknown unit 'x'; use s, m, h, d or w"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(srv.requests().is_empty());
    Ok(())
}

#[tokio::test]
async fn audit_verify_succeeds_on_an_intact_chain() -> TestResult {
    let srv = audit_server(intact()).await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["audit", "verify"]).await?;
    o.result?;
    assert_eq!(
        (o.out.as_str(), o.err.as_str()),
        ("audit chain intact: 14 events\n", "")
    );
    let o = tpctl(&env, &["audit", "verify", "-o", "json"]).await?;
    o.result?;
    assert_eq!(serde_json::from_str::<Value>(&o.out)?, intact());
    assert!(query(&srv.requests()[0]).contains("auditVerify { ok events problem seq eventId }"));

    let out = tpctl_bin(&srv, &["audit", "verify"], b"").await?;
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "audit chain intact: 14 events\n");
    Ok(())
}

#[tokio::test]
async fn audit_verify_fails_on_a_broken_chain() -> TestResult {
    let srv = audit_server(altered()).await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["audit", "verify"]).await?;
    let err = o.result.err().ok_or("a broken chain passed")?;
    assert_eq!(
        terraplane_cli::error_message(&err),
        "audit chain broken: event 7 (ev-7) was altered"
    );
    assert_eq!(o.out, "");

    // JSON: the verification on stdout, and still a failure.
    let o = tpctl(&env, &["-o", "json", "audit", "verify"]).await?;
    assert_eq!(serde_json::from_str::<Value>(&o.out)?, altered());
    assert!(o.result.is_err());

    let out = tpctl_bin(&srv, &["audit", "verify", "-o", "json"], b"").await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout)?, altered());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: audit chain broken: event 7 (ev-7) was altered\n"
    );

    let removed = json!({"ok": false, "events": 6, "problem": "event 7 was removed", "seq": 7, "eventId": null});
    let srv = audit_server(removed).await?;
    let out = tpctl_bin(&srv, &["audit", "verify"], b"").await?;
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: audit chain broken: event 7 was removed\n"
    );
    Ok(())
}

#[tokio::test]
async fn last_owner_and_forbidden_are_reported() -> TestResult {
    let srv = MockServer::start(|r| {
        let (code, message) = match root_field(&query(r)).as_str() {
            "memberSetRole" => ("last_owner", "the last owner of an organization cannot be demoted"),
            "memberRemove" => ("last_owner", "the last owner of an organization cannot be removed"),
            _ => ("forbidden", "this needs the organization owner role"),
        };
        Reply::json(
            200,
            json!({"data": null, "errors": [{"message": message, "extensions": {"code": code}}]}),
        )
    })
    .await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let cases: [(&[&str], &str, &str); 5] = [
        (
            &["user", "set-role", "ada@example.com", "--member"],
            "last_owner",
            "the last owner of an organization cannot be demoted",
        ),
        (
            &["user", "remove", "ada@example.com"],
            "last_owner",
            "the last owner of an organization cannot be removed",
        ),
        (
            &["audit", "list"],
            "forbidden",
            "this needs the organization owner role",
        ),
        (
            &["audit", "list", "-o", "json"],
            "forbidden",
            "this needs the organization owner role",
        ),
        (
            &["audit", "verify"],
            "forbidden",
            "this needs the organization owner role",
        ),
    ];
    for (args, code, message) in cases {
        let o = tpctl(&env, args).await?;
        let err = o.result.err().ok_or("expected a refusal")?;
        assert_eq!(terraplane_cli::error_message(&err), message, "{args:?}");
        let got = err
            .downcast_ref::<terraplane_client::ClientError>()
            .and_then(|e| e.code().map(str::to_owned));
        assert_eq!(got.as_deref(), Some(code), "{args:?}");
        assert_eq!((o.out.as_str(), o.err.as_str()), ("", ""), "{args:?}");
    }
    let out = tpctl_bin(&srv, &["user", "remove", "ada@example.com"], b"").await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: the last owner of an organization cannot be removed\n"
    );
    Ok(())
}

// Login sessions: refresh tokens saved by `login`, renewed on expiry, ended by `logout`.

fn login_answer(field: &str, token: &str, refresh: &str) -> Reply {
    data(
        json!({field: {"token": token, "refreshToken": refresh, "expiresAt": "2026-03-01T12:15:00Z",
                        "organization": {"id": "o1", "slug": "acme", "name": "Acme"}}}),
    )
}

fn expired() -> Reply {
    Reply::json(
        200,
        json!({"data": null, "errors": [{"message": "token expired", "extensions": {"code": "unauthenticated"}}]}),
    )
}

fn read_config(path: &std::path::Path) -> Result<Value, Box<dyn std::error::Error>> {
    Ok(serde_json::from_slice(&std::fs::read(path)?)?)
}

/// A config file holding a login session for `srv`, and the environment that uses it.
fn session_env(
    srv: &MockServer,
    home: &tempfile::TempDir,
    token: &str,
    refresh: Option<&str>,
) -> Result<(HashMap<String, String>, std::path::PathBuf), Box<dyn std::error::Error>> {
    let path = home.path().join("tp.json");
    let mut cfg = json!({"endpoint": srv.url(), "token": token});
    if let Some(r) = refresh {
        cfg["refresh_token"] = json!(r);
    }
    std::fs::write(&path, cfg.to_string())?;
    let env = HashMap::from([("TPCTL_CONFIG".to_owned(), path.to_string_lossy().into_owned())]);
    Ok((env, path))
}

fn count(srv: &MockServer, field: &str) -> usize {
    srv.requests().iter().filter(|r| root_field(&query(r)) == field).count()
}

#[tokio::test]
async fn password_login_saves_the_refresh_token_and_an_api_key_clears_it() -> TestResult {
    let srv = MockServer::start(|r| match r.header("authorization").as_deref() {
        Some("Bearer tpk_key") => data(json!({"me": me_json()})),
        _ => login_answer("login", "access-1", "refresh-1"),
    })
    .await?;
    let home = tempfile::tempdir()?;
    let path = home.path().join("tp.json");
    let env = HashMap::from([
        ("TPCTL_CONFIG".to_owned(), path.to_string_lossy().into_owned()),
        ("TPCTL_ENDPOINT".to_owned(), srv.url()),
    ]);
    let o = tpctl(&env, &["login", "--email", "ada@example.com", "--password", "pw"]).await?;
    o.result?;
    assert!(query(&srv.requests()[0]).contains("refreshToken"));
    assert_eq!(
        read_config(&path)?,
        json!({"endpoint": srv.url(), "token": "access-1", "refresh_token": "refresh-1"})
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path)?.permissions().mode() & 0o777, 0o600);
    }

    let o = tpctl(&env, &["login", "--token", "tpk_key"]).await?;
    o.result?;
    assert_eq!(read_config(&path)?, json!({"endpoint": srv.url(), "token": "tpk_key"}));
    Ok(())
}

#[tokio::test]
async fn an_expired_session_is_refreshed_once_saved_and_the_request_retried() -> TestResult {
    let srv = MockServer::start(|r| match root_field(&query(r)).as_str() {
        "refresh" if variables(r)["refreshToken"] == "refresh-1" => login_answer("refresh", "access-2", "refresh-2"),
        "refresh" => Reply::json(
            200,
            json!({"data": null, "errors": [{"message": "refresh token was already used; the session is ended",
                                             "extensions": {"code": "unauthenticated"}}]}),
        ),
        _ if r.header("authorization").as_deref() == Some("Bearer access-2") => data(json!({"me": me_json()})),
        _ => expired(),
    })
    .await?;
    let home = tempfile::tempdir()?;
    let (env, path) = session_env(&srv, &home, "access-1", Some("refresh-1"))?;

    let o = tpctl(&env, &["-o", "json", "whoami"]).await?;
    o.result?;
    assert_eq!(serde_json::from_str::<Value>(&o.out)?, me_json());
    let reqs = srv.requests();
    let seen: Vec<(String, Option<String>)> = reqs
        .iter()
        .map(|r| (root_field(&query(r)), r.header("authorization")))
        .collect();
    assert_eq!(
        seen,
        [
            ("me".to_owned(), Some("Bearer access-1".to_owned())),
            ("refresh".to_owned(), None),
            ("me".to_owned(), Some("Bearer access-2".to_owned())),
        ]
    );
    assert_eq!(
        read_config(&path)?,
        json!({"endpoint": srv.url(), "token": "access-2", "refresh_token": "refresh-2"})
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path)?.permissions().mode() & 0o777, 0o600);
    }

    // The next command uses the rotated pair without refreshing.
    let o = tpctl(&env, &["whoami"]).await?;
    o.result?;
    assert_eq!(count(&srv, "refresh"), 1);
    assert_eq!(srv.requests().len(), 4);
    Ok(())
}

#[tokio::test]
async fn a_failed_refresh_asks_for_a_new_login() -> TestResult {
    let srv = MockServer::start(|r| match root_field(&query(r)).as_str() {
        "refresh" => Reply::json(
            200,
            json!({"data": null, "errors": [{"message": "refresh token was already used; the session is ended",
                                             "extensions": {"code": "unauthenticated"}}]}),
        ),
        _ => expired(),
    })
    .await?;
    let home = tempfile::tempdir()?;
    let (env, path) = session_env(&srv, &home, "access-1", Some("refresh-old"))?;
    let before = std::fs::read(&path)?;
    let o = tpctl(&env, &["stack", "list"]).await?;
    let err = o.result.err().ok_or("expected an error")?;
    assert_eq!(
        terraplane_cli::error_message(&err),
        "the login session expired and could not be renewed (refresh token was already used; the session is \
         ended): run `tpctl login` again"
    );
    assert_eq!(count(&srv, "refresh"), 1);
    assert_eq!(count(&srv, "stacks"), 1, "no retry without a new token");
    assert_eq!(std::fs::read(&path)?, before);
    Ok(())
}

#[tokio::test]
async fn tokens_from_flag_environment_or_an_api_key_are_never_refreshed() -> TestResult {
    let srv = MockServer::start(|_| expired()).await?;
    let home = tempfile::tempdir()?;
    let (env, path) = session_env(&srv, &home, "access-1", Some("refresh-1"))?;
    let before = std::fs::read(&path)?;

    let mut with_env_token = env.clone();
    with_env_token.insert("TPCTL_TOKEN".to_owned(), "env-token".to_owned());
    let o = tpctl(&with_env_token, &["whoami"]).await?;
    let err = o.result.err().ok_or("expected an error")?;
    assert!(
        terraplane_cli::error_message(&err).starts_with("token expired"),
        "{err:#}"
    );

    let o = tpctl(&env, &["--token", "flag-token", "whoami"]).await?;
    assert!(o.result.is_err());

    // An API key saved by `login --token` comes without a refresh token.
    let home2 = tempfile::tempdir()?;
    let (key_env, _) = session_env(&srv, &home2, "tpk_key", None)?;
    let o = tpctl(&key_env, &["whoami"]).await?;
    assert!(o.result.is_err());

    assert_eq!(count(&srv, "refresh"), 0);
    assert_eq!(srv.requests().len(), 3, "one request each, no retry");
    let auths: Vec<Option<String>> = srv.requests().iter().map(|r| r.header("authorization")).collect();
    assert_eq!(
        auths,
        [
            Some("Bearer env-token".to_owned()),
            Some("Bearer flag-token".to_owned()),
            Some("Bearer tpk_key".to_owned())
        ]
    );
    assert_eq!(std::fs::read(&path)?, before);
    Ok(())
}

#[tokio::test]
async fn logout_ends_the_session_and_forgets_its_tokens() -> TestResult {
    let srv = MockServer::start(|_| data(json!({"logout": true}))).await?;
    let home = tempfile::tempdir()?;
    let (env, path) = session_env(&srv, &home, "access-1", Some("refresh-1"))?;
    let o = tpctl(&env, &["logout"]).await?;
    o.result?;
    let reqs = srv.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(query(&reqs[0]), "mutation { logout }");
    assert_eq!(reqs[0].header("authorization").as_deref(), Some("Bearer access-1"));
    assert_eq!(read_config(&path)?, json!({"endpoint": srv.url()}));
    assert_eq!(
        o.out,
        format!(
            "Logged out of {}: the session is ended and its tokens are removed from {}\n",
            srv.url(),
            path.display()
        )
    );

    // Nothing saved any more: nothing to do, and no request.
    let o = tpctl(&env, &["logout"]).await?;
    o.result?;
    assert!(o.err.starts_with("Not logged in"), "{}", o.err);
    assert_eq!(srv.requests().len(), 1);
    Ok(())
}

#[tokio::test]
async fn logout_renews_an_expired_session_to_end_it() -> TestResult {
    let srv = MockServer::start(|r| match (root_field(&query(r)).as_str(), r.header("authorization")) {
        ("refresh", _) => login_answer("refresh", "access-2", "refresh-2"),
        ("logout", Some(a)) if a == "Bearer access-2" => data(json!({"logout": true})),
        _ => expired(),
    })
    .await?;
    let home = tempfile::tempdir()?;
    let (env, path) = session_env(&srv, &home, "access-1", Some("refresh-1"))?;
    let o = tpctl(&env, &["logout"]).await?;
    o.result?;
    assert_eq!(count(&srv, "refresh"), 1);
    assert_eq!(count(&srv, "logout"), 2);
    assert!(o.err.is_empty(), "{}", o.err);
    assert_eq!(read_config(&path)?, json!({"endpoint": srv.url()}));
    Ok(())
}

#[tokio::test]
async fn logout_forgets_locally_even_when_the_server_fails() -> TestResult {
    let srv = MockServer::start(|_| Reply::text(503, "down for maintenance")).await?;
    let home = tempfile::tempdir()?;
    let (env, path) = session_env(&srv, &home, "access-1", Some("refresh-1"))?;
    let o = tpctl(&env, &["logout"]).await?;
    o.result?;
    assert_eq!(count(&srv, "logout"), 1);
    assert!(
        o.err
            .starts_with("warning: could not end the session on the server (HTTP 503: down for maintenance)"),
        "{}",
        o.err
    );
    assert_eq!(read_config(&path)?, json!({"endpoint": srv.url()}));
    Ok(())
}

#[tokio::test]
async fn logout_with_an_api_key_only_forgets_it_locally() -> TestResult {
    let srv = MockServer::start(|_| data(json!({"logout": true}))).await?;
    let home = tempfile::tempdir()?;
    let (env, path) = session_env(&srv, &home, "tpk_key", None)?;
    let o = tpctl(&env, &["logout"]).await?;
    o.result?;
    assert!(srv.requests().is_empty(), "an API key is not logged out on the server");
    assert_eq!(read_config(&path)?, json!({"endpoint": srv.url()}));
    assert!(o.out.starts_with("Removed the API key saved for"), "{}", o.out);
    assert!(o.out.contains("the key itself stays valid"), "{}", o.out);

    // Another endpoint than the saved one is refused, changing nothing.
    let (env, path) = session_env(&srv, &home, "tpk_key", None)?;
    let o = tpctl(&env, &["--endpoint", "http://127.0.0.1:9", "logout"]).await?;
    assert!(o.result.is_err());
    assert_eq!(read_config(&path)?["token"], "tpk_key");
    Ok(())
}
