//! Policies: `tpctl policy test` evaluating Rego files here (the real binary, no server), and
//! what the other `tpctl policy …` commands and `run show` send and print.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Value, json};
use terraplane_test_support::mock::{MockServer, Reply};

use super::{T0, TestResult, data, env_for, operations, query, root_field, run_json, tpctl, tpctl_bin, variables};

const PLAN: &str = r#"package spacelift

import rego.v1

deny contains msg if {
	some r in input.terraform.resource_changes
	r.type == "aws_instance"
	r.change.after.instance_type == "m5.24xlarge"
	msg := sprintf("%s: instance type m5.24xlarge is not allowed", [r.address])
}

warn contains msg if {
	some r in input.terraform.resource_changes
	not r.change.after.tags.team
	msg := sprintf("%s has no team tag", [r.address])
}
"#;

fn change(address: &str, kind: &str, after: Value) -> Value {
    json!({"address": address, "type": kind, "change": {"actions": ["create"], "after": after}})
}

fn plan_input(changes: Vec<Value>) -> String {
    json!({"terraform": {"resource_changes": changes}}).to_string()
}

/// A big instance (denied) and an untagged bucket (warned about).
fn denied_and_warned() -> String {
    plan_input(vec![
        change(
            "aws_instance.big",
            "aws_instance",
            json!({"instance_type": "m5.24xlarge", "tags": {"team": "net"}}),
        ),
        change("aws_s3_bucket.logs", "aws_s3_bucket", json!({"tags": {}})),
    ])
}

/// Runs the real binary in `dir` with nothing but a home directory: no endpoint, no token.
async fn tpctl_local(dir: &Path, args: &[&str]) -> std::io::Result<std::process::Output> {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_tpctl"))
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir)
        .stdin(std::process::Stdio::null())
        .output()
        .await
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn files(files: &[(&str, &str)]) -> std::io::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    for (name, content) in files {
        std::fs::write(dir.path().join(name), content)?;
    }
    Ok(dir)
}

#[tokio::test]
async fn policy_test_prints_each_rule_the_messages_and_the_verdict() -> TestResult {
    let dir = files(&[("plan.rego", PLAN), ("input.json", &denied_and_warned())])?;
    let out = tpctl_local(dir.path(), &["policy", "test", "plan.rego", "--input", "input.json"]).await?;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "\
RULE   VALUE
deny   [\"aws_instance.big: instance type m5.24xlarge is not allowed\"]
warn   [\"aws_s3_bucket.logs has no team tag\"]

deny: aws_instance.big: instance type m5.24xlarge is not allowed
warn: aws_s3_bucket.logs has no team tag

Verdict: DENY
"
    );
    assert_eq!(text(&out.stderr), "");

    let out = tpctl_local(
        dir.path(),
        &["policy", "test", "plan.rego", "--input", "input.json", "-o", "json"],
    )
    .await?;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(
        v,
        json!({
            "type": "PLAN",
            "outcome": "deny",
            "deny": ["aws_instance.big: instance type m5.24xlarge is not allowed"],
            "warn": ["aws_s3_bucket.logs has no team tag"],
            "rules": {
                "deny": ["aws_instance.big: instance type m5.24xlarge is not allowed"],
                "warn": ["aws_s3_bucket.logs has no team tag"]
            }
        })
    );
    Ok(())
}

#[tokio::test]
async fn policy_test_exits_0_whatever_the_verdict() -> TestResult {
    let tagged = json!({"tags": {"team": "net"}});
    let dir = files(&[
        ("plan.rego", PLAN),
        (
            "warn.json",
            &plan_input(vec![change("aws_s3_bucket.logs", "aws_s3_bucket", json!({}))]),
        ),
        (
            "allow.json",
            &plan_input(vec![change("aws_s3_bucket.logs", "aws_s3_bucket", tagged)]),
        ),
    ])?;
    let out = tpctl_local(
        dir.path(),
        &["policy", "test", "plan.rego", "--input", "warn.json", "--type", "PLAN"],
    )
    .await?;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.ends_with("\nwarn: aws_s3_bucket.logs has no team tag\n\nVerdict: WARN\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("deny:"), "{stdout}");

    let out = tpctl_local(dir.path(), &["policy", "test", "plan.rego", "--input", "allow.json"]).await?;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "RULE   VALUE\ndeny   []\nwarn   []\n\nVerdict: ALLOW\n"
    );
    Ok(())
}

#[tokio::test]
async fn policy_test_refuses_a_file_that_does_not_compile_with_its_position() -> TestResult {
    let dir = files(&[
        ("input.json", "{}"),
        ("broken.rego", "package spacelift\n\ndeny[msg] {\n\tmsg := \n}\n"),
        ("main.rego", "package main\n\ndeny[msg] { msg := \"x\" }\n"),
        (
            "clock.rego",
            "package spacelift\n\nimport rego.v1\n\ndeny contains \"late\" if time.now_ns() > 0\n",
        ),
    ])?;
    let out = tpctl_local(dir.path(), &["policy", "test", "main.rego", "--input", "input.json"]).await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: main.rego does not compile: line 1, column 1: policies must be in package \"spacelift\", not \"main\"\n"
    );
    assert_eq!(text(&out.stdout), "");

    let out = tpctl_local(dir.path(), &["policy", "test", "broken.rego", "--input", "input.json"]).await?;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("error: broken.rego does not compile: line 3, column "),
        "{stderr}"
    );
    assert_eq!(text(&out.stdout), "");

    let out = tpctl_local(dir.path(), &["policy", "test", "clock.rego", "--input", "input.json"]).await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: clock.rego does not compile: line 5, column 25: builtin time.now_ns is disabled in Terraplane \
         policies; use input.spacelift.request.timestamp_ns\n"
    );
    Ok(())
}

#[tokio::test]
async fn policy_test_refuses_input_that_is_not_json_and_files_it_cannot_read() -> TestResult {
    let dir = files(&[("plan.rego", PLAN), ("bad.json", "{\"terraform\": ")])?;
    let out = tpctl_local(dir.path(), &["policy", "test", "plan.rego", "--input", "bad.json"]).await?;
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("error: bad.json is not valid JSON: EOF while parsing a value at line 1"),
        "{stderr}"
    );
    assert_eq!(text(&out.stdout), "");

    let out = tpctl_local(dir.path(), &["policy", "test", "plan.rego", "--input", "nope.json"]).await?;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("error: cannot read nope.json: "),
        "{}",
        text(&out.stderr)
    );
    let out = tpctl_local(dir.path(), &["policy", "test", "nope.rego", "--input", "bad.json"]).await?;
    assert!(
        text(&out.stderr).starts_with("error: cannot read nope.rego: "),
        "{}",
        text(&out.stderr)
    );

    // A usage error is clap's: exit 2.
    let out = tpctl_local(dir.path(), &["policy", "test", "plan.rego"]).await?;
    assert_eq!(out.status.code(), Some(2));
    let out = tpctl_local(
        dir.path(),
        &["policy", "test", "plan.rego", "--input", "bad.json", "--type", "access"],
    )
    .await?;
    assert_eq!(out.status.code(), Some(2));
    Ok(())
}

#[tokio::test]
async fn policy_test_stops_an_evaluation_beyond_its_limits() -> TestResult {
    let huge = "package spacelift\n\nimport rego.v1\n\n\
                deny contains sprintf(\"%d\", [n]) if some n in numbers.range(1, 1000000000000)\n";
    let dir = files(&[("huge.rego", huge), ("input.json", "{}")])?;
    let path = |f: &str| dir.path().join(f).to_string_lossy().into_owned();
    // In process, with an empty environment: no server is needed.
    let o = tpctl(
        &HashMap::new(),
        &["policy", "test", &path("huge.rego"), "--input", &path("input.json")],
    )
    .await?;
    let err = o.result.err().ok_or("expected the limit to stop it")?;
    let msg = terraplane_cli::error_message(&err);
    assert!(
        msg.starts_with(
            "policy evaluation exceeded its limit: memory: numbers.range would build 1000000000000 elements"
        ),
        "{msg}"
    );
    assert_eq!(o.out, "");
    Ok(())
}

#[tokio::test]
async fn policy_test_reads_the_rules_of_the_type_asked_for() -> TestResult {
    // Rego v0, as most Spacelift policies are written.
    let approval = "package spacelift\n\napprove { input.reviews.current.approvals[_] }\n\n\
                    reject { count(input.reviews.current.rejections) > 0 }\n";
    let trigger = "package spacelift\n\ntrigger[\"app\"] { true }\ntrigger[\"db\"] { true }\n";
    let dir = files(&[
        ("approval.rego", approval),
        ("trigger.rego", trigger),
        (
            "approved.json",
            r#"{"reviews": {"current": {"approvals": [{"author": "ada"}], "rejections": []}}}"#,
        ),
        (
            "rejected.json",
            r#"{"reviews": {"current": {"approvals": [{"author": "ada"}], "rejections": [{"author": "bob"}]}}}"#,
        ),
        ("empty.json", "{}"),
    ])?;
    let path = |f: &str| dir.path().join(f).to_string_lossy().into_owned();
    let env = HashMap::new();
    let run = |file: &str, input: &str, kind: &str| {
        let (file, input, kind) = (path(file), path(input), kind.to_owned());
        let env = &env;
        async move {
            let o = tpctl(env, &["policy", "test", &file, "--input", &input, "--type", &kind]).await?;
            o.result?;
            Ok::<String, Box<dyn std::error::Error>>(o.out)
        }
    };

    assert_eq!(
        run("approval.rego", "approved.json", "approval").await?,
        "RULE      VALUE\napprove   true\n\nVerdict: APPROVE\n"
    );
    assert_eq!(
        run("approval.rego", "rejected.json", "APPROVAL").await?,
        "RULE      VALUE\napprove   true\nreject    true\n\nVerdict: REJECT\n"
    );
    assert_eq!(
        run("approval.rego", "empty.json", "approval").await?,
        "No rule of the APPROVAL type has a value (approve, reject, sample, flag).\n\nVerdict: UNDECIDED\n"
    );
    assert_eq!(
        run("trigger.rego", "empty.json", "trigger").await?,
        "RULE      VALUE\ntrigger   [\"app\",\"db\"]\n\ntrigger: app\ntrigger: db\n\nVerdict: TRIGGER\n"
    );
    // Read as a plan policy, an approval policy decides nothing.
    assert_eq!(
        run("approval.rego", "approved.json", "plan").await?,
        "No rule of the PLAN type has a value (deny, warn, sample, flag).\n\nVerdict: ALLOW\n"
    );
    let o = tpctl(
        &env,
        &[
            "policy",
            "test",
            &path("approval.rego"),
            "--input",
            &path("rejected.json"),
            "--type",
            "approval",
            "-o",
            "json",
        ],
    )
    .await?;
    o.result?;
    assert_eq!(
        serde_json::from_str::<Value>(&o.out)?,
        json!({"type": "APPROVAL", "outcome": "reject", "deny": [], "warn": [],
               "rules": {"approve": true, "reject": true}})
    );
    Ok(())
}

// The commands that talk to the server.

fn policy_json(id: &str, vars: &Value) -> Value {
    let input = &vars["input"];
    let or = |k: &str, d: Value| if input[k].is_null() { d } else { input[k].clone() };
    json!({"id": or("id", json!(id)), "name": or("name", json!("Deny big")), "type": or("type", json!("PLAN")),
           "description": or("description", json!("")), "labels": or("labels", json!(["autoattach:prod"])),
           "body": or("body", json!(PLAN)), "version": if vars["id"].is_null() { 1 } else { 2 },
           "space": or("space", json!("root")), "createdAt": T0, "updatedAt": T0})
}

fn evaluation_json(outcome: &str, messages: &[&str], result: Value) -> Value {
    json!({"id": "e1", "policy": "deny-big", "policyVersion": 2, "type": "PLAN", "runId": "run-1",
           "subject": "run:run-1", "inputHash": "ab12", "outcome": outcome, "messages": messages,
           "result": result, "createdAt": T0})
}

fn denied() -> Value {
    evaluation_json(
        "deny",
        &["aws_instance.big: too big", "no team tag"],
        json!({"deny": ["aws_instance.big: too big"], "warn": ["no team tag"]}),
    )
}

fn answer(q: &str, vars: &Value) -> Value {
    match root_field(q).as_str() {
        "policies" => json!([
            policy_json("deny-big", &json!({})),
            policy_json(
                "approvals",
                &json!({"input": {"type": "APPROVAL", "labels": [], "space": "prod"}})
            )
        ]),
        "policy" => {
            let mut p = policy_json("deny-big", vars);
            p["versions"] = json!([
                {"version": 1, "body": PLAN, "labels": [], "createdBy": "ada@example.com", "createdAt": T0},
                {"version": 2, "body": PLAN, "labels": ["autoattach:prod"], "createdBy": "bob@example.com",
                 "createdAt": "2026-03-02T08:30:00Z"}
            ]);
            p["attachedStacks"] = json!(["net", "app"]);
            p["evaluations"] = json!([denied()]);
            p["samples"] = json!([{"inputHash": "ab12", "createdAt": T0}]);
            p
        }
        "policyCreate" | "policyUpdate" | "policyDelete" => policy_json("deny-big", vars),
        "policyAttach" | "policyDetach" => json!({"policy": vars["id"], "stack": vars["stackId"]}),
        "policySimulate" => {
            json!({"outcome": "warn", "messages": ["no team tag"], "result": {"deny": [], "warn": ["no team tag"]}})
        }
        "run" if q.contains("policyEvaluations") => json!({"policyEvaluations": [denied()]}),
        "run" if q.contains("reviews {") => json!({"reviews": []}),
        "run" => run_json("FAILED", true, &["QUEUED", "FAILED"]),
        _ => Value::Null,
    }
}

async fn server() -> std::io::Result<MockServer> {
    MockServer::start(|r| {
        let q = query(r);
        data(json!({ root_field(&q): answer(&q, &variables(r)) }))
    })
    .await
}

#[tokio::test]
async fn policy_create_reads_the_file_and_prints_the_policy() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let dir = files(&[("plan.rego", PLAN)])?;
    let file = dir.path().join("plan.rego").to_string_lossy().into_owned();
    let o = tpctl(
        &env,
        &[
            "policy",
            "create",
            "Deny big",
            "--type",
            "PLAN",
            "--file",
            &file,
            "--label",
            "autoattach:prod",
            "--label",
            "cost",
            "--id",
            "deny-big",
            "--space",
            "prod",
            "--description",
            "No huge instances",
        ],
    )
    .await?;
    o.result?;
    assert_eq!(
        operations(&srv)[0],
        (
            "policyCreate".to_owned(),
            json!({"input": {"id": "deny-big", "name": "Deny big", "type": "PLAN", "body": PLAN,
                             "labels": ["autoattach:prod", "cost"], "description": "No huge instances",
                             "space": "prod"}})
        )
    );
    assert_eq!(
        o.out,
        "\
Created policy deny-big (version 1)

ID:          deny-big
Name:        Deny big
Type:        PLAN
Description: No huge instances
Space:       prod
Labels:      autoattach:prod, cost
Version:     1
Created:     2026-03-01 12:00:00
Updated:     2026-03-01 12:00:00
"
    );

    // Unset options are left to the server; `-` reads the source from stdin.
    let out = tpctl_bin(
        &srv,
        &["policy", "create", "Approvals", "--type", "approval", "--file", "-"],
        b"package spacelift\n",
    )
    .await?;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        operations(&srv)[1].1,
        json!({"input": {"name": "Approvals", "type": "APPROVAL", "body": "package spacelift\n"}})
    );

    let o = tpctl(
        &env,
        &[
            "policy",
            "create",
            "x",
            "--type",
            "plan",
            "--file",
            "/nonexistent/x.rego",
        ],
    )
    .await?;
    let err = o.result.err().ok_or("expected an error")?;
    assert!(
        terraplane_cli::error_message(&err).starts_with("cannot read /nonexistent/x.rego: "),
        "{err:#}"
    );
    assert_eq!(srv.requests().len(), 2, "nothing sent without a source");
    Ok(())
}

#[tokio::test]
async fn policy_update_sends_only_what_changes() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let dir = files(&[("plan.rego", PLAN)])?;
    let file = dir.path().join("plan.rego").to_string_lossy().into_owned();
    let o = tpctl(
        &env,
        &[
            "policy", "update", "deny-big", "--file", &file, "--label", "a", "--label", "b",
        ],
    )
    .await?;
    o.result?;
    assert!(
        o.out.starts_with("Updated policy deny-big (version 2)\n\nID:"),
        "{}",
        o.out
    );
    tpctl(&env, &["policy", "update", "deny-big", "--name", "Deny huge"])
        .await?
        .result?;
    tpctl(&env, &["policy", "update", "deny-big", "--clear-labels"])
        .await?
        .result?;
    let sent: Vec<Value> = operations(&srv).into_iter().map(|(_, v)| v).collect();
    assert_eq!(
        sent,
        [
            json!({"id": "deny-big", "input": {"body": PLAN, "labels": ["a", "b"]}}),
            json!({"id": "deny-big", "input": {"name": "Deny huge"}}),
            json!({"id": "deny-big", "input": {"labels": []}}),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn policy_list_show_delete_attach_and_detach() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["policy", "list"]).await?;
    o.result?;
    assert_eq!(
        o.out,
        "\
ID          NAME       TYPE       SPACE   VERSION   LABELS
deny-big    Deny big   PLAN       root    1         autoattach:prod
approvals   Deny big   APPROVAL   prod    1         -
"
    );

    let o = tpctl(&env, &["policy", "show", "deny-big"]).await?;
    o.result?;
    assert_eq!(
        o.out,
        "\
ID:          deny-big
Name:        Deny big
Type:        PLAN
Description: -
Space:       root
Labels:      autoattach:prod
Version:     2
Attached to: net, app
Samples:     1
Created:     2026-03-01 12:00:00
Updated:     2026-03-01 12:00:00

Versions:
VERSION   LABELS            CREATED BY        CREATED
1         -                 ada@example.com   2026-03-01 12:00:00
2         autoattach:prod   bob@example.com   2026-03-02 08:30:00

Latest evaluations:
CREATED               SUBJECT     VERSION   OUTCOME   MESSAGES
2026-03-01 12:00:00   run:run-1   2         deny      aws_instance.big: too big; no team tag
"
    );
    let o = tpctl(&env, &["policy", "show", "deny-big", "-o", "json"]).await?;
    o.result?;
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!(v["body"], PLAN);
    assert_eq!(v["attachedStacks"], json!(["net", "app"]));
    assert_eq!(
        v["evaluations"][0]["result"]["deny"],
        json!(["aws_instance.big: too big"])
    );

    let cases: [(&[&str], &str, Value, &str); 3] = [
        (
            &["policy", "delete", "deny-big"],
            "policyDelete",
            json!({"id": "deny-big"}),
            "Deleted policy deny-big\n",
        ),
        (
            &["policy", "attach", "deny-big", "net"],
            "policyAttach",
            json!({"id": "deny-big", "stackId": "net"}),
            "Attached policy deny-big to stack net\n",
        ),
        (
            &["policy", "detach", "deny-big", "net"],
            "policyDetach",
            json!({"id": "deny-big", "stackId": "net"}),
            "Detached policy deny-big from stack net\n",
        ),
    ];
    for (args, field, vars, printed) in cases {
        let o = tpctl(&env, args).await?;
        o.result?;
        assert_eq!(o.out, printed, "{args:?}");
        let last = operations(&srv).pop().ok_or("no request")?;
        assert_eq!(last, (field.to_owned(), vars), "{args:?}");
    }
    let o = tpctl(&env, &["policy", "attach", "deny-big", "net", "-o", "json"]).await?;
    o.result?;
    assert_eq!(
        serde_json::from_str::<Value>(&o.out)?,
        json!({"policy": "deny-big", "stack": "net"})
    );
    Ok(())
}

#[tokio::test]
async fn policy_simulate_prints_rules_messages_and_the_verdict() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["policy", "simulate", "deny-big", "--run", "run-1"]).await?;
    o.result?;
    assert_eq!(
        o.out,
        "\
Policy deny-big, as it is now, on the input of run run-1:

RULE   VALUE
deny   []
warn   [\"no team tag\"]

warn: no team tag

Verdict: WARN
"
    );
    assert_eq!(
        operations(&srv)[0],
        ("policySimulate".to_owned(), json!({"id": "deny-big", "runId": "run-1"}))
    );
    let o = tpctl(
        &env,
        &["policy", "simulate", "deny-big", "--run", "run-1", "-o", "json"],
    )
    .await?;
    o.result?;
    assert_eq!(
        serde_json::from_str::<Value>(&o.out)?,
        json!({"outcome": "warn", "messages": ["no team tag"], "result": {"deny": [], "warn": ["no team tag"]}})
    );
    Ok(())
}

#[tokio::test]
async fn a_simulation_that_fails_is_an_error() -> TestResult {
    let srv = MockServer::start(|_| {
        data(json!({"policySimulate": {"outcome": "error",
                                       "messages": ["policy evaluation failed: deny-big, line 5, column 3: boom"],
                                       "result": {"error": "policy evaluation failed: deny-big, line 5, column 3: boom"}}}))
    })
    .await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["policy", "simulate", "deny-big", "--run", "run-1"]).await?;
    let err = o.result.err().ok_or("expected an error")?;
    assert_eq!(
        terraplane_cli::error_message(&err),
        "policy deny-big failed on the input of run run-1: policy evaluation failed: deny-big, line 5, column 3: boom"
    );
    assert_eq!(o.out, "");
    // JSON still gets the simulation.
    let o = tpctl(
        &env,
        &["policy", "simulate", "deny-big", "--run", "run-1", "-o", "json"],
    )
    .await?;
    assert!(o.result.is_err());
    assert_eq!(serde_json::from_str::<Value>(&o.out)?["outcome"], "error");
    Ok(())
}

#[tokio::test]
async fn refusals_keep_the_servers_message_and_exit_1() -> TestResult {
    let srv = MockServer::start(|r| {
        let (code, message) = match root_field(&query(r)).as_str() {
            "policyCreate" => ("bad_request", "policy does not compile: line 3, column 11: expecting }"),
            "policySimulate" => (
                "bad_request",
                "run run-1 has no recorded PLAN policy input (no PLAN policy was evaluated for it)",
            ),
            _ => ("not_found", "policy not found"),
        };
        Reply::json(
            200,
            json!({"data": null, "errors": [{"message": message, "extensions": {"code": code}}]}),
        )
    })
    .await?;
    let out = tpctl_bin(
        &srv,
        &["policy", "create", "broken", "--type", "plan", "--file", "-"],
        b"package spacelift\n\ndeny[msg] {\n",
    )
    .await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: policy does not compile: line 3, column 11: expecting }\n"
    );
    assert!(out.stdout.is_empty());

    let out = tpctl_bin(&srv, &["policy", "simulate", "deny-big", "--run", "run-1"], b"").await?;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: run run-1 has no recorded PLAN policy input (no PLAN policy was evaluated for it)\n"
    );
    let out = tpctl_bin(&srv, &["policy", "show", "gone"], b"").await?;
    assert_eq!(text(&out.stderr), "error: policy not found\n");
    Ok(())
}

#[tokio::test]
async fn run_show_lists_the_policy_evaluations() -> TestResult {
    let srv = server().await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["run", "show", "run-1"]).await?;
    o.result?;
    assert!(
        o.out.ends_with(
            "\n\
Policy evaluations:
POLICY     VERSION   TYPE   OUTCOME   MESSAGES
deny-big   2         PLAN   deny      aws_instance.big: too big; no team tag
"
        ),
        "{}",
        o.out
    );
    assert!(o.out.starts_with("ID:           run-1\n"), "{}", o.out);
    assert_eq!(operations(&srv)[1], ("run".to_owned(), json!({"id": "run-1"})));
    assert!(query(&srv.requests()[1]).contains("policyEvaluations {"));

    let o = tpctl(&env, &["run", "show", "run-1", "-o", "json"]).await?;
    o.result?;
    let v: Value = serde_json::from_str(&o.out)?;
    assert_eq!((&v["id"], &v["state"]), (&json!("run-1"), &json!("FAILED")));
    assert_eq!(v["policyEvaluations"], json!([denied()]));
    Ok(())
}

#[tokio::test]
async fn run_show_says_when_no_policy_was_evaluated() -> TestResult {
    let srv = MockServer::start(|r| {
        if query(r).contains("policyEvaluations") {
            return data(json!({"run": {"policyEvaluations": []}}));
        }
        if query(r).contains("reviews {") {
            return data(json!({"run": {"reviews": []}}));
        }
        data(json!({"run": run_json("FINISHED", true, &[])}))
    })
    .await?;
    let home = tempfile::tempdir()?;
    let env = env_for(&srv, &home);
    let o = tpctl(&env, &["run", "show", "run-1"]).await?;
    o.result?;
    assert!(o.out.ends_with("\n\nPolicy evaluations: none\n"), "{}", o.out);
    let o = tpctl(&env, &["run", "show", "run-1", "-o", "json"]).await?;
    o.result?;
    assert_eq!(serde_json::from_str::<Value>(&o.out)?["policyEvaluations"], json!([]));
    Ok(())
}
