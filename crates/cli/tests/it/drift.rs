//! Drift: what `tpctl stack drift` and `tpctl drift …` send and print, `drift check --wait`
//! following the check to its end, and drift in `stack list` and `stack show`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use terraplane_test_support::mock::{MockServer, Reply};

use super::{T0, TestResult, data, env_for, operations, query, root_field, run_json, tpctl, variables};

const T9: &str = "2026-03-01T12:00:09Z";

fn stack_json(id: &str, drift: &str, checked: Option<&str>) -> Value {
    json!({"id": id, "name": id.to_uppercase(), "description": "", "repository": "https://git/x", "branch": "main",
           "projectRoot": "", "tool": "terraform", "toolVersion": null, "autodeploy": false, "labels": [],
           "workerPool": "default", "lock": null, "driftStatus": drift, "driftReaction": "ALERT",
           "driftCheckedAt": checked, "createdAt": T0, "updatedAt": T0})
}

fn record_json(id: &str, stack: &str, open: bool) -> Value {
    json!({"id": id, "stack": stack, "open": open,
           "resources": [
               {"address": "sandbox_file.motd", "action": "update", "attributes": ["content", "mode"]},
               {"address": "sandbox_file.old", "action": "delete", "attributes": []}
           ],
           "lastRunId": "run-9", "firstSeenAt": T0, "lastSeenAt": T9,
           "resolvedAt": if open { Value::Null } else { json!(T9) },
           "resolvedByRunId": if open { Value::Null } else { json!("run-10") }})
}

fn schedule_json(vars: &Value) -> Value {
    json!({"id": "ds-1", "stack": vars["stackId"].as_str().unwrap_or("net"),
           "cron": vars["cron"].as_str().unwrap_or("0 */6 * * *"),
           "timezone": vars["timezone"].as_str().unwrap_or("Europe/Berlin"), "nextRunAt": T9})
}

fn check_json(state: &str, terminal: bool, events: &[&str], has_changes: bool) -> Value {
    let mut run = run_json(state, terminal, events);
    run["type"] = json!("PROPOSED");
    run["driftDetection"] = json!(true);
    run["planSummary"] = json!({"add": 0, "change": 0, "destroy": 0});
    run["hasChanges"] = json!(has_changes);
    run
}

/// The data a server with stacks `net` (drifted) and `app` (in sync) answers.
fn answer(q: &str, vars: &Value) -> Value {
    let field = root_field(q);
    let v = match field.as_str() {
        // `stack drift` asks for the stack and its open records in one request.
        "stack" if q.contains("driftRecords") => {
            return json!({
                "stack": {"id": vars["id"], "driftStatus": "DRIFTED", "driftReaction": "ALERT", "driftCheckedAt": T9},
                "driftRecords": [record_json("dr-1", "net", true)]
            });
        }
        "stack" => stack_json("net", "DRIFTED", Some(T9)),
        "stacks" => json!([
            stack_json("net", "DRIFTED", Some(T9)),
            stack_json("app", "IN_SYNC", Some(T0))
        ]),
        "driftRecords" if vars["openOnly"] == true => json!([record_json("dr-1", "net", true)]),
        "driftRecords" => json!([record_json("dr-1", "net", true), record_json("dr-0", "app", false)]),
        "driftSchedules" => json!([schedule_json(vars)]),
        "driftScheduleAdd" | "driftScheduleDelete" => schedule_json(vars),
        "driftCheck" => check_json("QUEUED", false, &[], false),
        _ => Value::Null,
    };
    json!({ field: v })
}

async fn server() -> std::io::Result<MockServer> {
    MockServer::start(|r| data(answer(&query(r), &variables(r)))).await
}

#[tokio::test]
async fn stack_drift_prints_the_drifted_resources_and_json_has_them() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["stack", "drift", "net"]).await?;
    o.result?;
    let expected = "\
Stack:    net
Drift:    DRIFTED (checked 2026-03-01 12:00:09)
On drift: ALERT

Drift dr-1: first seen 2026-03-01 12:00:00, last seen 2026-03-01 12:00:09 by run run-9
ADDRESS             ACTION   ATTRIBUTES
sandbox_file.motd   update   content, mode
sandbox_file.old    delete   -
";
    assert_eq!(o.out, expected);
    assert_eq!(operations(&srv), [("stack".to_owned(), json!({"id": "net"}))]);
    let q = query(&srv.requests()[0]);
    assert!(q.contains("driftRecords(stackId: $id, openOnly: true)"), "{q}");

    let o = tpctl(&env, &["stack", "drift", "net", "-o", "json"]).await?;
    o.result?;
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!(
        v,
        json!({"stack": "net", "driftStatus": "DRIFTED", "driftReaction": "ALERT", "driftCheckedAt": T9,
               "records": [record_json("dr-1", "net", true)]})
    );
    assert_eq!(
        v["records"][0]["resources"][0]["attributes"],
        json!(["content", "mode"])
    );
    Ok(())
}

#[tokio::test]
async fn stack_drift_of_a_stack_in_sync_or_unknown() -> TestResult {
    let srv = MockServer::start(|r| {
        let id = variables(r)["id"].as_str().unwrap_or_default().to_owned();
        if id == "gone" {
            return data(json!({"stack": null, "driftRecords": []}));
        }
        data(
            json!({"stack": {"id": id, "driftStatus": "UNKNOWN", "driftReaction": "RECONCILE", "driftCheckedAt": null},
                    "driftRecords": []}),
        )
    })
    .await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["stack", "drift", "app"]).await?;
    o.result?;
    assert_eq!(
        o.out,
        "Stack:    app\nDrift:    UNKNOWN (never checked)\nOn drift: RECONCILE\n\nNo open drift.\n"
    );
    let o = tpctl(&env, &["stack", "drift", "app", "-o", "json"]).await?;
    o.result?;
    assert_eq!(serde_json::from_str::<Value>(&o.out)?["records"], json!([]));
    let o = tpctl(&env, &["stack", "drift", "gone"]).await?;
    assert_eq!(
        o.result.err().map(|e| e.to_string()).as_deref(),
        Some("stack gone not found")
    );
    Ok(())
}

#[tokio::test]
async fn stack_list_and_show_include_the_drift_status() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["stack", "list"]).await?;
    o.result?;
    assert_eq!(
        o.out,
        "\
ID    NAME   REPOSITORY      BRANCH   AUTODEPLOY   LOCKED BY   DRIFT     LABELS
net   NET    https://git/x   main     no           -           DRIFTED   -
app   APP    https://git/x   main     no           -           IN_SYNC   -
"
    );
    assert!(query(&srv.requests()[0]).contains("driftStatus driftReaction driftCheckedAt"));
    let o = tpctl(&env, &["stack", "show", "net"]).await?;
    o.result?;
    assert!(
        o.out
            .contains("\nDrift:        DRIFTED (checked 2026-03-01 12:00:09)\nOn drift:     ALERT\n"),
        "{}",
        o.out
    );
    let o = tpctl(&env, &["stack", "show", "net", "-o", "json"]).await?;
    o.result?;
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!(
        (&v["driftStatus"], &v["driftCheckedAt"]),
        (&json!("DRIFTED"), &json!(T9))
    );
    Ok(())
}

#[tokio::test]
async fn drift_commands_send_their_variables() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let cases: &[(&[&str], &str, Value, &str)] = &[
        (
            &[
                "drift",
                "schedule",
                "net",
                "--cron",
                "0 */6 * * *",
                "--tz",
                "Europe/Berlin",
                "--reaction",
                "reconcile",
            ],
            "driftScheduleAdd",
            json!({"stackId": "net", "cron": "0 */6 * * *", "timezone": "Europe/Berlin", "reaction": "RECONCILE"}),
            "Added drift schedule ds-1 to stack net\n\n\
             ID:        ds-1\nStack:     net\nCron:      0 */6 * * *\nTime zone: Europe/Berlin\n\
             Next run:  2026-03-01 12:00:09 UTC\n\n\
             Stack net now reacts to drift with RECONCILE\n",
        ),
        (
            &["drift", "schedule", "net", "--cron", "*/30 * * * *"],
            "driftScheduleAdd",
            json!({"stackId": "net", "cron": "*/30 * * * *", "timezone": "UTC", "reaction": null}),
            "Added drift schedule ds-1 to stack net\n\n\
             ID:        ds-1\nStack:     net\nCron:      */30 * * * *\nTime zone: UTC\n\
             Next run:  2026-03-01 12:00:09 UTC\n",
        ),
        (
            &["drift", "schedules", "net"],
            "driftSchedules",
            json!({"stackId": "net"}),
            "ID     CRON          TIMEZONE        NEXT-RUN\nds-1   0 */6 * * *   Europe/Berlin   2026-03-01 12:00:09\n",
        ),
        (
            &["drift", "unschedule", "ds-1"],
            "driftScheduleDelete",
            json!({"id": "ds-1"}),
            "Deleted drift schedule ds-1 of stack net (0 */6 * * * in Europe/Berlin)\n",
        ),
        (
            &["drift", "list"],
            "driftRecords",
            json!({"stackId": null, "openOnly": true}),
            "\
STACK   OPEN   FIRST-SEEN            LAST-SEEN             RESOURCES
net     yes    2026-03-01 12:00:00   2026-03-01 12:00:09   2
",
        ),
        (
            &["drift", "list", "--all"],
            "driftRecords",
            json!({"stackId": null, "openOnly": false}),
            "\
STACK   OPEN   FIRST-SEEN            LAST-SEEN             RESOURCES
net     yes    2026-03-01 12:00:00   2026-03-01 12:00:09   2
app     no     2026-03-01 12:00:00   2026-03-01 12:00:09   2
",
        ),
        (
            &["drift", "check", "net"],
            "driftCheck",
            json!({"stackId": "net"}),
            "Queued drift check run run-1 on stack net: QUEUED\n",
        ),
    ];
    for (i, (args, field, vars, printed)) in cases.iter().enumerate() {
        let o = tpctl(&env, args).await?;
        o.result?;
        assert_eq!(o.out, *printed, "{args:?}");
        assert_eq!(operations(&srv)[i], (field.to_string(), vars.clone()), "{args:?}");
    }

    // JSON: the API's objects.
    let o = tpctl(&env, &["drift", "list", "--all", "-o", "json"]).await?;
    o.result?;
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!(v[1]["resolvedByRunId"], "run-10");
    assert_eq!(v[0]["resources"][1]["action"], "delete");
    let o = tpctl(&env, &["drift", "check", "net", "-o", "json"]).await?;
    o.result?;
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!((&v["type"], &v["driftDetection"]), (&json!("PROPOSED"), &json!(true)));
    let o = tpctl(&env, &["-o", "json", "drift", "schedule", "net", "--cron", "0 0 * * *"]).await?;
    o.result?;
    assert_eq!(serde_json::from_str::<Value>(&o.out)?["nextRunAt"], T9);
    Ok(())
}

/// A server whose drift check goes through `states` (one per poll), the last one repeated,
/// and ends with `has_changes`.
async fn check_server(states: &'static [(&'static str, bool)], has_changes: bool) -> std::io::Result<MockServer> {
    let polls = Arc::new(AtomicUsize::new(0));
    MockServer::start(move |r| {
        if root_field(&query(r)) == "driftCheck" {
            return data(json!({"driftCheck": check_json("QUEUED", false, &[], false)}));
        }
        let i = polls.fetch_add(1, Ordering::SeqCst).min(states.len() - 1);
        let seen: Vec<&str> = states[..=i].iter().map(|(s, _)| *s).collect();
        let (state, terminal) = states[i];
        data(json!({"run": check_json(state, terminal, &seen, has_changes)}))
    })
    .await
}

#[tokio::test]
async fn drift_check_wait_follows_the_check_and_says_whether_it_found_drift() -> TestResult {
    static STATES: &[(&str, bool)] = &[("QUEUED", false), ("PLANNING", false), ("FINISHED", true)];
    let srv = check_server(STATES, true).await?;
    let home = tempfile::tempdir()?;
    let o = tpctl(&env_for(&srv, &home), &["drift", "check", "net", "--wait"]).await?;
    o.result?;
    assert_eq!(
        o.out,
        "\
Queued drift check run run-1 on stack net
2026-03-01 12:00:00  QUEUED
2026-03-01 12:00:00  PLANNING
2026-03-01 12:00:00  FINISHED
Drift found on stack net by run run-1: see `tpctl stack drift net`
"
    );
    let ops = operations(&srv);
    assert_eq!(ops[0], ("driftCheck".to_owned(), json!({"stackId": "net"})));
    assert!(
        ops[1..]
            .iter()
            .all(|op| *op == ("run".to_owned(), json!({"id": "run-1"})))
    );

    let srv = check_server(STATES, false).await?;
    let o = tpctl(
        &env_for(&srv, &home),
        &["drift", "check", "net", "--wait", "-o", "json"],
    )
    .await?;
    o.result?;
    // JSON mode: the finished run on stdout, progress and the verdict on stderr.
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!((&v["state"], &v["hasChanges"]), (&json!("FINISHED"), &json!(false)));
    assert!(o.err.ends_with("No drift on stack net (run run-1)\n"), "{}", o.err);
    Ok(())
}

#[tokio::test]
async fn drift_check_wait_fails_when_the_check_does_not_finish() -> TestResult {
    static FAILED: &[(&str, bool)] = &[("PLANNING", false), ("FAILED", true)];
    let srv = check_server(FAILED, false).await?;
    let home = tempfile::tempdir()?;
    let o = tpctl(&env_for(&srv, &home), &["drift", "check", "net", "--wait"]).await?;
    let err = o.result.err().ok_or("expected a failure")?;
    assert_eq!(
        terraplane_cli::error_message(&err),
        "run run-1 ended FAILED: terraform plan exited 1"
    );
    assert!(
        !o.out.contains("Drift found") && !o.out.contains("No drift"),
        "{}",
        o.out
    );

    // A tracked run cancels a waiting check: nothing was checked.
    static CANCELED: &[(&str, bool)] = &[("CANCELED", true)];
    let srv = check_server(CANCELED, false).await?;
    let o = tpctl(&env_for(&srv, &home), &["drift", "check", "net", "--wait"]).await?;
    assert_eq!(
        o.result.err().map(|e| e.to_string()).as_deref(),
        Some("run run-1 ended CANCELED")
    );
    Ok(())
}

#[tokio::test]
async fn a_refused_check_is_reported_with_the_reason() -> TestResult {
    let srv = MockServer::start(|_| {
        Reply::json(
            200,
            json!({"data": null, "errors": [{"message": "stack net has no finished tracked run yet",
                                              "extensions": {"code": "drift_check_not_possible"}}]}),
        )
    })
    .await?;
    let home = tempfile::tempdir()?;
    let o = tpctl(&env_for(&srv, &home), &["drift", "check", "net", "--wait"]).await?;
    let err = o.result.err().ok_or("expected a refusal")?;
    assert_eq!(
        terraplane_cli::error_message(&err),
        "stack net has no finished tracked run yet"
    );
    assert_eq!(srv.requests().len(), 1, "no polling after a refusal");
    Ok(())
}

#[tokio::test]
async fn empty_drift_lists_say_so_on_stderr() -> TestResult {
    let srv = MockServer::start(|r| {
        let field = root_field(&query(r));
        data(json!({ field: [] }))
    })
    .await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    for (args, remark) in [
        (&["drift", "list"][..], "No open drift.\n"),
        (&["drift", "list", "--all"], "No drift recorded.\n"),
        (&["drift", "schedules", "net"], "Stack net has no drift schedules.\n"),
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
