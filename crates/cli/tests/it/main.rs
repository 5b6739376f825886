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
            "lock": null, "createdAt": "2026-03-01T12:00:00Z", "updatedAt": "2026-03-01T12:00:00Z",
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
