//! Reviews: what `tpctl run review` sends and prints, `run show` listing a run's reviews, and
//! `run trigger --wait` stopping at a run held for review.

use serde_json::{Value, json};
use terraplane_test_support::mock::{MockServer, Reply};

use super::{
    T0, TestResult, data, env_for, operations, query, root_field, run_json, run_server, tpctl, tpctl_bin, variables,
};

fn review_json(reviewer: &str, teams: &[&str], stage: &str, decision: &str, note: &str) -> Value {
    json!({"reviewer": reviewer, "teams": teams, "stage": stage, "decision": decision, "note": note,
           "createdAt": T0})
}

fn reviews() -> Value {
    json!([
        review_json("ada@example.com", &["infra-leads", "ops"], "QUEUED", "APPROVE", ""),
        review_json("bob@example.com", &[], "UNCONFIRMED", "REJECT", "too big: split it"),
    ])
}

/// A server where an approval lets the run go on (QUEUED) and a rejection fails it.
async fn server() -> std::io::Result<MockServer> {
    MockServer::start(|r| {
        let q = query(r);
        let vars = variables(r);
        let v = match root_field(&q).as_str() {
            "runReview" if vars["decision"] == "APPROVE" => run_json("QUEUED", false, &[]),
            "runReview" => run_json("FAILED", true, &[]),
            "run" if q.contains("reviews {") => json!({"reviews": reviews()}),
            "run" if q.contains("policyEvaluations {") => json!({"policyEvaluations": []}),
            "run" => run_json("UNCONFIRMED", false, &["QUEUED", "PLANNING", "UNCONFIRMED"]),
            _ => Value::Null,
        };
        data(json!({ root_field(&q): v }))
    })
    .await
}

#[tokio::test]
async fn run_review_sends_the_decision_and_the_note_and_prints_the_new_state() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);

    let o = tpctl(&env, &["run", "review", "run-1", "--approve"]).await?;
    o.result?;
    assert_eq!(o.out, "Run run-1 approved: QUEUED\n");
    let o = tpctl(
        &env,
        &["run", "review", "run-1", "--reject", "--note", "too big: split it"],
    )
    .await?;
    o.result?;
    assert_eq!(o.out, "Run run-1 rejected: FAILED\n");
    assert_eq!(
        operations(&srv),
        [
            (
                "runReview".to_owned(),
                json!({"id": "run-1", "decision": "APPROVE", "note": null})
            ),
            (
                "runReview".to_owned(),
                json!({"id": "run-1", "decision": "REJECT", "note": "too big: split it"})
            ),
        ]
    );
    // The decision is a variable of the schema's enum type.
    assert!(
        query(&srv.requests()[0]).starts_with(
            "mutation($id: ID!, $decision: ReviewDecision!, $note: String) { \
             runReview(id: $id, decision: $decision, note: $note) { id stackId type state "
        ),
        "{}",
        query(&srv.requests()[0])
    );

    let o = tpctl(&env, &["run", "review", "run-1", "--approve", "-o", "json"]).await?;
    o.result?;
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!((&v["id"], &v["state"]), (&json!("run-1"), &json!("QUEUED")));
    Ok(())
}

#[tokio::test]
async fn run_review_takes_exactly_one_decision() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    for (args, kind) in [
        (
            &["run", "review", "run-1", "--approve", "--reject"][..],
            clap::error::ErrorKind::ArgumentConflict,
        ),
        (
            &["run", "review", "run-1", "--note", "ok"][..],
            clap::error::ErrorKind::MissingRequiredArgument,
        ),
    ] {
        let e = tpctl(&env, args).await.err().ok_or("accepted")?;
        assert_eq!(e.kind(), kind, "{args:?}");
    }
    // The binary: usage errors, exit 2, nothing sent.
    let out = tpctl_bin(&srv, &["run", "review", "run-1", "--approve", "--reject"], b"").await?;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot be used with"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = tpctl_bin(&srv, &["run", "review", "run-1"], b"").await?;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--approve|--reject"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(srv.requests().is_empty());
    Ok(())
}

#[tokio::test]
async fn a_review_of_a_run_in_another_state_is_refused_with_the_servers_message() -> TestResult {
    let srv = MockServer::start(|_| {
        Reply::json(
            200,
            json!({"data": null, "errors": [{
                "message": "run is FINISHED; reviews are taken while a run is QUEUED, PENDING_REVIEW or UNCONFIRMED",
                "extensions": {"code": "invalid_run_state"}}]}),
        )
    })
    .await?;
    let out = tpctl_bin(&srv, &["run", "review", "run-1", "--approve"], b"").await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: run is FINISHED; reviews are taken while a run is QUEUED, PENDING_REVIEW or UNCONFIRMED\n"
    );
    assert!(out.stdout.is_empty());
    Ok(())
}

#[tokio::test]
async fn run_show_lists_the_reviews() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["run", "show", "run-1"]).await?;
    o.result?;
    assert!(
        o.out.ends_with(
            "\n\
Reviews:
AT                    REVIEWER          TEAMS             STAGE         DECISION   NOTE
2026-03-01 12:00:00   ada@example.com   infra-leads,ops   QUEUED        APPROVE    -
2026-03-01 12:00:00   bob@example.com   -                 UNCONFIRMED   REJECT     too big: split it

Policy evaluations: none
"
        ),
        "{}",
        o.out
    );
    assert!(o.out.starts_with("ID:           run-1\n"), "{}", o.out);
    let sent = operations(&srv);
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[2], ("run".to_owned(), json!({"id": "run-1"})));
    assert!(query(&srv.requests()[2]).contains("reviews { reviewer teams stage decision note createdAt }"));

    let o = tpctl(&env, &["run", "show", "run-1", "-o", "json"]).await?;
    o.result?;
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!((&v["id"], &v["state"]), (&json!("run-1"), &json!("UNCONFIRMED")));
    assert_eq!(v["reviews"], reviews());
    assert_eq!(v["policyEvaluations"], json!([]));
    Ok(())
}

#[tokio::test]
async fn run_show_says_when_nobody_reviewed() -> TestResult {
    let srv = MockServer::start(|r| {
        let q = query(r);
        if q.contains("reviews {") {
            return data(json!({"run": {"reviews": []}}));
        }
        if q.contains("policyEvaluations {") {
            return data(json!({"run": {"policyEvaluations": []}}));
        }
        data(json!({"run": run_json("FINISHED", true, &[])}))
    })
    .await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["run", "show", "run-1"]).await?;
    o.result?;
    assert!(
        o.out.ends_with("\n\nReviews: none\n\nPolicy evaluations: none\n"),
        "{}",
        o.out
    );
    let o = tpctl(&env, &["run", "show", "run-1", "-o", "json"]).await?;
    o.result?;
    assert_eq!(serde_json::from_str::<Value>(&o.out)?["reviews"], json!([]));
    Ok(())
}

#[tokio::test]
async fn trigger_wait_stops_at_a_run_held_for_review() -> TestResult {
    static STATES: &[(&str, bool)] = &[("QUEUED", false), ("PENDING_REVIEW", false)];
    let srv = run_server(STATES).await?;
    let home = tempfile::tempdir()?;
    let o = tpctl(&env_for(&srv, &home), &["run", "trigger", "net", "--wait"]).await?;
    o.result?;
    let lines: Vec<&str> = o.out.lines().collect();
    assert_eq!(
        lines[1..],
        [
            "2026-03-01 12:00:00  QUEUED",
            "2026-03-01 12:00:00  PENDING_REVIEW",
            "Run run-1 is waiting for review (plan +1 ~0 -0): `tpctl run review run-1 --approve` or `--reject`",
        ],
        "{}",
        o.out
    );
    // Two polls: it stops as soon as the run waits for a person.
    assert_eq!(srv.requests().len(), 3);
    Ok(())
}
