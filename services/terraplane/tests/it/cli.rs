//! `tpctl` against the real server: the commands a user types, through the same code the
//! binary runs (`terraplane_cli::run` with this test's environment and output buffers).

use std::time::Duration;

use clap::Parser;
use terraplane_cli::{Cli, Context};

use crate::harness::*;

struct Tpctl {
    config: std::path::PathBuf,
}

impl Tpctl {
    /// Runs `tpctl ARGS…`; returns stdout, or the error message as tpctl prints it.
    async fn run(&self, args: &[&str]) -> Result<String, String> {
        let cli =
            Cli::try_parse_from(std::iter::once("tpctl").chain(args.iter().copied())).map_err(|e| e.to_string())?;
        let config = self.config.display().to_string();
        let env = move |k: &str| (k == "TPCTL_CONFIG").then(|| config.clone());
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut ctx = Context {
            env: &env,
            out: &mut out,
            err: &mut err,
            poll_interval: Duration::from_millis(100),
        };
        let r = terraplane_cli::run(cli, &mut ctx).await;
        let out = String::from_utf8(out).unwrap();
        r.map(|()| out).map_err(|e| terraplane_cli::error_message(&e))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tpctl_drives_a_run_end_to_end() {
    let app = spawn(Backend::Sqlite, Options::default()).await.unwrap();
    let tp = Tpctl {
        config: app.tmp.path().join("tpctl.json"),
    };
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", TWO_RESOURCES)]);

    let err = tp.run(&["whoami"]).await.unwrap_err();
    assert!(err.contains("no endpoint"), "{err}");
    let err = tp
        .run(&[
            "login",
            "--endpoint",
            &app.base,
            "--email",
            "admin@terraplane.local",
            "--password",
            "wrong",
        ])
        .await
        .unwrap_err();
    assert!(err.contains("invalid email or password"), "{err}");
    tp.run(&[
        "login",
        "--endpoint",
        &app.base,
        "--email",
        "admin@terraplane.local",
        "--password",
        "admin-password",
    ])
    .await
    .unwrap();
    let me = tp.run(&["whoami", "-o", "json"]).await.unwrap();
    let me: serde_json::Value = serde_json::from_str(&me).unwrap();
    assert_eq!(me["organization"]["slug"], "default");
    assert_eq!(me["role"], "owner");

    tp.run(&[
        "stack",
        "create",
        "--name",
        "Web",
        "--slug",
        "web",
        "--repository",
        &repo,
    ])
    .await
    .unwrap();
    let list = tp.run(&["stack", "list"]).await.unwrap();
    assert!(list.contains("web"), "{list}");
    let err = tp
        .run(&[
            "stack",
            "create",
            "--name",
            "Web",
            "--slug",
            "web",
            "--repository",
            &repo,
        ])
        .await
        .unwrap_err();
    assert!(err.contains("already exists"), "{err}");

    // --wait returns when the run needs a decision.
    let out = tp
        .run(&["run", "trigger", "web", "--wait", "-o", "json"])
        .await
        .unwrap();
    let run: serde_json::Value = serde_json::from_str(out.trim().lines().last().unwrap_or_default())
        .or_else(|_| serde_json::from_str(&out))
        .unwrap();
    assert_eq!(run["state"], "UNCONFIRMED", "{out}");
    let id = run["id"].as_str().unwrap().to_owned();
    let show = tp.run(&["run", "show", &id]).await.unwrap();
    assert!(show.contains("UNCONFIRMED") && show.contains("PLANNING"), "{show}");
    tp.run(&["run", "confirm", &id]).await.unwrap();
    let logs = tp.run(&["run", "logs", &id, "--follow"]).await.unwrap();
    assert!(
        logs.contains("Plan: 2 to add") && logs.contains("Apply complete!"),
        "{logs}"
    );
    assert_eq!(logs, app.log_text(&id).await, "--follow prints the stored log exactly");
    let err = tp.run(&["run", "confirm", &id]).await.unwrap_err();
    assert!(err.contains("FINISHED"), "{err}");
    let runs = tp.run(&["run", "list", "web"]).await.unwrap();
    assert!(runs.contains(&id) && runs.contains("FINISHED"), "{runs}");

    let versions = tp.run(&["state", "versions", "web"]).await.unwrap();
    assert!(versions.lines().count() >= 2, "{versions}");
    let state = tp.run(&["state", "pull", "web"]).await.unwrap();
    let state: serde_json::Value = serde_json::from_str(&state).unwrap();
    assert_eq!(state["outputs"]["a"]["value"], "alpha");
    let serial = state["serial"].as_i64().unwrap().to_string();
    let again = tp.run(&["state", "pull", "web", "--serial", &serial]).await.unwrap();
    assert_eq!(serde_json::from_str::<serde_json::Value>(&again).unwrap(), state);

    // A stuck state lock is released with --force only.
    let http = app.http();
    let r = http
        .request(
            reqwest::Method::from_bytes(b"LOCK").unwrap(),
            app.state_url("default", "web"),
        )
        .bearer_auth(ADMIN_TOKEN)
        .body(r#"{"ID":"stuck","Operation":"OperationTypeApply","Who":"gone@host","Created":"2026-01-01T00:00:00Z"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let err = tp.run(&["state", "unlock", "web"]).await.unwrap_err();
    assert!(err.contains("--force"), "{err}");
    tp.run(&["state", "unlock", "web", "--force"]).await.unwrap();
    let stack = app.client.stack("web").await.unwrap().unwrap();
    assert!(stack.state_lock.is_none(), "released");

    // Stack lock: a tracked run by someone else is refused while it holds.
    tp.run(&["stack", "lock", "web", "--note", "migrating"]).await.unwrap();
    let shown = tp.run(&["stack", "show", "web"]).await.unwrap();
    assert!(shown.contains("migrating"), "{shown}");
    tp.run(&["stack", "unlock", "web"]).await.unwrap();

    // A proposed run with --wait ends FINISHED; a failing one exits with an error.
    tp.run(&["run", "trigger", "web", "--proposed", "--wait"])
        .await
        .unwrap();
    tp.run(&[
        "stack",
        "create",
        "--name",
        "Broken",
        "--slug",
        "broken",
        "--repository",
        "file:///nowhere",
    ])
    .await
    .unwrap();
    let err = tp.run(&["run", "trigger", "broken", "--wait"]).await.unwrap_err();
    assert!(err.contains("FAILED"), "{err}");
    let err = tp
        .run(&["run", "show", "00000000-0000-0000-0000-000000000000"])
        .await
        .unwrap_err();
    assert!(err.contains("not found"), "{err}");
    tp.run(&["stack", "delete", "broken"]).await.unwrap();
    app.teardown().await;
}

/// Contexts, stack values and the effective set through tpctl, against the real server and
/// a real run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tpctl_manages_contexts_and_stack_env() {
    let app = spawn(Backend::Sqlite, Options::default()).await.unwrap();
    let tp = Tpctl {
        config: app.tmp.path().join("tpctl.json"),
    };
    let tf = "variable \"greeting\" { type = string }\nvariable \"who\" { type = string }\noutput \"msg\" { value = \"${var.greeting}, ${var.who}\" }\n";
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", tf)]);
    tp.run(&[
        "login",
        "--endpoint",
        &app.base,
        "--email",
        "admin@terraplane.local",
        "--password",
        "admin-password",
    ])
    .await
    .unwrap();
    tp.run(&[
        "stack",
        "create",
        "--name",
        "Web",
        "--slug",
        "web",
        "--repository",
        &repo,
        "--autodeploy",
    ])
    .await
    .unwrap();
    tp.run(&["context", "create", "Shared Config", "--label", "team:web"])
        .await
        .unwrap();
    let list = tp.run(&["context", "list"]).await.unwrap();
    assert!(list.contains("shared-config"), "{list}");
    tp.run(&[
        "context",
        "set",
        "shared-config",
        "greeting",
        "hello",
        "--type",
        "terraform",
    ])
    .await
    .unwrap();
    tp.run(&[
        "context",
        "set",
        "shared-config",
        "who",
        "context",
        "--type",
        "terraform",
    ])
    .await
    .unwrap();
    tp.run(&[
        "context",
        "set",
        "shared-config",
        "API_TOKEN",
        "tpctl-secret-value-123",
        "--secret",
    ])
    .await
    .unwrap();
    tp.run(&["context", "attach", "shared-config", "web", "--priority", "2"])
        .await
        .unwrap();
    tp.run(&["stack", "env", "set", "web", "who", "world", "--type", "terraform"])
        .await
        .unwrap();
    let env = tp.run(&["stack", "env", "web"]).await.unwrap();
    assert!(!env.contains("tpctl-secret-value-123"), "{env}");
    assert!(env.contains("*****"), "{env}");
    assert!(env.contains("world") && env.contains("context:shared-config"), "{env}");
    let json: serde_json::Value =
        serde_json::from_str(&tp.run(&["stack", "env", "list", "web", "-o", "json"]).await.unwrap()).unwrap();
    let who = json.as_array().unwrap().iter().find(|v| v["name"] == "who").unwrap();
    assert_eq!(who["source"], "stack");
    let show = tp.run(&["context", "show", "shared-config"]).await.unwrap();
    assert!(
        show.contains("API_TOKEN") && !show.contains("tpctl-secret-value-123"),
        "{show}"
    );
    let err = tp
        .run(&["stack", "env", "set", "web", "9bad", "x", "--type", "terraform"])
        .await
        .unwrap_err();
    assert!(err.contains("not a valid Terraform variable name"), "{err}");

    let run = app.client.run_trigger("web", false).await.unwrap();
    let run = app
        .wait_state(&run.id, terraplane_client::RunState::Finished, 120)
        .await;
    assert_eq!(run.outputs.unwrap()["msg"]["value"], "hello, world");

    tp.run(&["stack", "env", "unset", "web", "who"]).await.unwrap();
    tp.run(&["context", "detach", "shared-config", "web"]).await.unwrap();
    let env = tp.run(&["stack", "env", "list", "web", "-o", "json"]).await.unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&env).unwrap(),
        serde_json::json!([])
    );
    tp.run(&["context", "unset", "shared-config", "API_TOKEN"])
        .await
        .unwrap();
    tp.run(&["context", "delete", "shared-config"]).await.unwrap();
    assert!(!tp.run(&["context", "list"]).await.unwrap().contains("shared-config"));
    app.teardown().await;
}

/// Drift and notifications through tpctl against the real server, on sandbox resources.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tpctl_checks_drift_and_lists_notifications() {
    let app = spawn(Backend::Sqlite, Options::default()).await.unwrap();
    let tp = Tpctl {
        config: app.tmp.path().join("tpctl.json"),
    };
    let tf = "terraform {\n  required_providers {\n    sandbox = { source = \"terraplane/sandbox\" }\n  }\n}\nresource \"sandbox_instance\" \"web\" {\n  name          = \"web\"\n  instance_type = \"t3.small\"\n  tags          = { env = \"prod\" }\n}\n";
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", tf)]);
    tp.run(&[
        "login",
        "--endpoint",
        &app.base,
        "--email",
        "admin@terraplane.local",
        "--password",
        "admin-password",
    ])
    .await
    .unwrap();
    tp.run(&[
        "stack",
        "create",
        "--name",
        "Cloud",
        "--slug",
        "cloud",
        "--repository",
        &repo,
        "--autodeploy",
    ])
    .await
    .unwrap();
    let hook =
        terraplane_test_support::mock::MockServer::start(|_| terraplane_test_support::mock::Reply::text(200, "ok"))
            .await
            .unwrap();
    tp.run(&[
        "notification",
        "endpoint",
        "create",
        "ops",
        "--kind",
        "webhook",
        "--url",
        &hook.url(),
        "--secret",
        "s3cret",
        "--event",
        "drift-detected",
    ])
    .await
    .unwrap();
    let err = tp
        .run(&["drift", "schedule", "cloud", "--cron", "99 * * * *"])
        .await
        .unwrap_err();
    assert!(err.contains("invalid cron expression"), "{err}");
    let out = tp
        .run(&[
            "drift",
            "schedule",
            "cloud",
            "--cron",
            "0 6 * * *",
            "--tz",
            "Europe/Paris",
            "--reaction",
            "alert",
        ])
        .await
        .unwrap();
    assert!(out.contains("0 6 * * *"), "{out}");
    let err = tp.run(&["drift", "check", "cloud"]).await.unwrap_err();
    assert!(err.contains("no finished tracked run"), "{err}");
    let run = app.client.run_trigger("cloud", false).await.unwrap();
    app.wait_state(&run.id, terraplane_client::RunState::Finished, 120)
        .await;
    // A console change.
    let dir = app
        .tmp
        .path()
        .join("sandbox")
        .join(app.org())
        .join("cloud")
        .join("instance");
    let file = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    v["instance_type"] = serde_json::json!("t3.2xlarge");
    std::fs::write(&file, v.to_string()).unwrap();
    let out = tp.run(&["drift", "check", "cloud", "--wait"]).await.unwrap();
    assert!(out.to_lowercase().contains("drift"), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&tp.run(&["stack", "drift", "cloud", "-o", "json"]).await.unwrap()).unwrap();
    assert_eq!(json["driftStatus"], "DRIFTED", "{json}");
    assert_eq!(
        json["records"][0]["resources"],
        serde_json::json!([{"address": "sandbox_instance.web", "action": "update", "attributes": ["instance_type"]}])
    );
    let inbox = tp.run(&["drift", "list"]).await.unwrap();
    assert!(inbox.contains("cloud"), "{inbox}");
    let mut delivered = String::new();
    for _ in 0..100 {
        delivered = tp.run(&["notification", "deliveries"]).await.unwrap();
        if delivered.contains("DELIVERED") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        delivered.contains("DRIFT_DETECTED") && delivered.contains("DELIVERED"),
        "{delivered}"
    );
    app.teardown().await;
}

/// `tpctl policy …` and `tpctl run review` against the real api: create, attach, a run
/// denied by the policy with the evaluation in `run show`, simulate with a new version,
/// local `policy test`, and a review releasing a held run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tpctl_manages_policies_and_reviews() {
    let app = spawn(Backend::Sqlite, Options::default()).await.unwrap();
    let tp = Tpctl {
        config: app.tmp.path().join("tpctl.json"),
    };
    let tf = "terraform {\n  required_providers {\n    sandbox = { source = \"terraplane/sandbox\" }\n  }\n}\nresource \"sandbox_bucket\" \"logs\" {\n  name = \"logs\"\n}\n";
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", tf)]);
    tp.run(&[
        "login",
        "--endpoint",
        &app.base,
        "--email",
        "admin@terraplane.local",
        "--password",
        "admin-password",
    ])
    .await
    .unwrap();
    for slug in ["guarded", "held"] {
        tp.run(&[
            "stack",
            "create",
            "--name",
            slug,
            "--slug",
            slug,
            "--repository",
            &repo,
            "--autodeploy",
        ])
        .await
        .unwrap();
    }
    let dir = app.tmp.path();
    let no_buckets = dir.join("no-buckets.rego");
    std::fs::write(
        &no_buckets,
        "package spacelift\n\ndeny[sprintf(\"no buckets: %s\", [rc.address])] {\n  rc := input.terraform.resource_changes[_]\n  rc.type == \"sandbox_bucket\"\n}\n\nsample { true }\n",
    )
    .unwrap();
    let broken = dir.join("broken.rego");
    std::fs::write(
        &broken,
        "package spacelift\n\ndeny[msg] {\n  msg := \"a\"\n  1 +* 2\n}\n",
    )
    .unwrap();
    let err = tp
        .run(&[
            "policy",
            "create",
            "broken",
            "--type",
            "plan",
            "--file",
            broken.to_str().unwrap(),
        ])
        .await
        .unwrap_err();
    assert!(err.contains("line 5, column 6"), "{err}");
    tp.run(&[
        "policy",
        "create",
        "no-buckets",
        "--type",
        "plan",
        "--file",
        no_buckets.to_str().unwrap(),
    ])
    .await
    .unwrap();
    tp.run(&["policy", "attach", "no-buckets", "guarded"]).await.unwrap();
    let list = tp.run(&["policy", "list"]).await.unwrap();
    assert!(list.contains("no-buckets") && list.contains("PLAN"), "{list}");

    let run = app.client.run_trigger("guarded", false).await.unwrap();
    let failed = app.wait_state(&run.id, terraplane_client::RunState::Failed, 120).await;
    assert_eq!(
        failed.error.as_deref(),
        Some("denied by plan policy: no buckets: sandbox_bucket.logs")
    );
    let show = tp.run(&["run", "show", &run.id]).await.unwrap();
    assert!(show.contains("no-buckets") && show.contains("deny"), "{show}");
    let json: serde_json::Value =
        serde_json::from_str(&tp.run(&["policy", "show", "no-buckets", "-o", "json"]).await.unwrap()).unwrap();
    assert_eq!(json["samples"].as_array().map(Vec::len), Some(1), "{json}");

    // A new version that only warns, replayed on the same run's input.
    std::fs::write(
        &no_buckets,
        "package spacelift\n\nwarn[sprintf(\"bucket: %s\", [rc.address])] {\n  rc := input.terraform.resource_changes[_]\n  rc.type == \"sandbox_bucket\"\n}\n",
    )
    .unwrap();
    tp.run(&["policy", "update", "no-buckets", "--file", no_buckets.to_str().unwrap()])
        .await
        .unwrap();
    let sim: serde_json::Value = serde_json::from_str(
        &tp.run(&["policy", "simulate", "no-buckets", "--run", &run.id, "-o", "json"])
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(sim["outcome"], "warn", "{sim}");
    assert_eq!(sim["messages"], serde_json::json!(["bucket: sandbox_bucket.logs"]));

    // Local evaluation, no server involved.
    let input = dir.join("input.json");
    std::fs::write(
        &input,
        r#"{"terraform": {"resource_changes": [{"address": "sandbox_bucket.x", "type": "sandbox_bucket", "change": {"actions": ["create"]}}]}}"#,
    )
    .unwrap();
    let out = tp
        .run(&[
            "policy",
            "test",
            no_buckets.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
        ])
        .await
        .unwrap();
    assert!(out.contains("warn: bucket: sandbox_bucket.x"), "{out}");

    // An approval policy holds runs of `held` until someone approves.
    let approve = dir.join("approve.rego");
    std::fs::write(
        &approve,
        "package spacelift\n\napprove { count(input.reviews.current.approvals) > 0 }\nreject { count(input.reviews.current.rejections) > 0 }\n",
    )
    .unwrap();
    tp.run(&[
        "policy",
        "create",
        "one-ok",
        "--type",
        "approval",
        "--file",
        approve.to_str().unwrap(),
    ])
    .await
    .unwrap();
    tp.run(&["policy", "attach", "one-ok", "held"]).await.unwrap();
    let run = app.client.run_trigger("held", false).await.unwrap();
    assert_eq!(run.state, terraplane_client::RunState::PendingReview);
    let out = tp
        .run(&["run", "review", &run.id, "--approve", "--note", "looks fine"])
        .await
        .unwrap();
    assert!(out.contains("QUEUED"), "{out}");
    app.wait_state(&run.id, terraplane_client::RunState::Finished, 120)
        .await;
    let show = tp.run(&["run", "show", &run.id]).await.unwrap();
    assert!(
        show.contains("looks fine") && show.contains("admin@terraplane.local"),
        "{show}"
    );
    app.teardown().await;
}
