//! Failure and concurrency: a runner killed mid-apply, and many runs over few runners.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use terraplane_client::RunState;

use crate::both_backends;
use crate::harness::*;

const SLOW_APPLY: &str = r#"
resource "terraform_data" "a" { input = "alpha" }
resource "terraform_data" "slow" {
  input = "beta"
  provisioner "local-exec" { command = "sleep 30" }
}
"#;

fn commit(dir: &std::path::Path, file: &str, text: &str) {
    std::fs::write(dir.join(file), text).unwrap();
    for args in [
        vec!["add", "-A"],
        vec![
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "--quiet",
            "-m",
            "change",
        ],
    ] {
        assert!(
            std::process::Command::new("git")
                .args(&args)
                .current_dir(dir)
                .status()
                .unwrap()
                .success()
        );
    }
}

/// Starts `terraplane runner` as its own process group, like a runner host.
fn external_runner(app: &TestApp) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    std::process::Command::new(env!("CARGO_BIN_EXE_terraplane"))
        .arg("runner")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", app.tmp.path())
        .env("AMQP_URL", &app.cfg.queue.url)
        .env("TERRAPLANE_QUEUE__PREFIX", &app.cfg.queue.prefix)
        .env("TERRAPLANE_RUNNER__POOL_TOKEN", POOL_TOKEN)
        .env("TERRAPLANE_RUNNER__API_URL", &app.base)
        .env("TERRAPLANE_RUNNER__ID", "external-runner")
        .env("TERRAPLANE_LOG", "warn")
        .env("TERRAPLANE_RUNNER__WORK_DIR", app.tmp.path().join("ext-work"))
        .env("TERRAFORM_BIN", terraform_bin())
        .env("TERRAPLANE_SCHEDULER__HEARTBEAT_SECS", "2")
        .process_group(0)
        .spawn()
        .unwrap()
}

async fn runner_killed_mid_apply(mut app: TestApp) {
    let dir = app.tmp.path().join("repo");
    let repo = git_repo(&dir, &[("main.tf", TWO_RESOURCES)]);
    app.stack("crash", &repo, true).await;
    let mut external = None;
    if app.backend == Backend::Postgres {
        external = Some(external_runner(&app));
    } else {
        app.add_runner();
    }
    let first = app.client.run_trigger("crash", false).await.unwrap();
    app.wait_state(&first.id, RunState::Finished, 60).await;
    let before = app.client.state_versions("crash").await.unwrap();
    assert_eq!(before.len(), 1);

    commit(&dir, "main.tf", SLOW_APPLY);
    let run = app.client.run_trigger("crash", false).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = app.client.run(&run.id).await.unwrap().unwrap();
        if r.state == RunState::Applying
            && app
                .log_text(&run.id)
                .await
                .contains("terraform_data.slow: Provisioning with 'local-exec'")
        {
            break;
        }
        assert!(
            !r.terminal && Instant::now() < deadline,
            "never reached the slow apply: {} {:?}",
            r.state,
            r.error
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let killed_at = Instant::now();
    match external.as_mut() {
        Some(child) => {
            let pgid = child.id();
            let st = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pgid}")])
                .status()
                .unwrap();
            assert!(st.success());
            let _ = child.wait();
        }
        None => app.kill_runner(app.runners.len() - 1),
    }
    let failed = app.wait_run(&run.id, 60, |r| r.terminal).await;
    let took = killed_at.elapsed();
    assert_eq!(failed.state, RunState::Failed);
    assert!(took < Duration::from_secs(45), "failed after {took:?}");
    let reason = failed.error.clone().unwrap();
    assert!(
        reason.contains("stopped heartbeating") && reason.contains("APPLYING"),
        "{reason}"
    );
    assert!(reason.contains("not retried"), "{reason}");
    // The apply is never re-dispatched: exactly one APPLYING event.
    let applying = failed.events.iter().filter(|e| e.state == RunState::Applying).count();
    assert_eq!(applying, 1);
    // No state version lost; the lock is visible and marked for recovery.
    let after = app.client.state_versions("crash").await.unwrap();
    assert!(after.len() >= before.len());
    assert!(after.iter().any(|v| v.sha256 == before[0].sha256));
    let lock: serde_json::Value = app
        .client
        .graphql(
            "{ stack(id: \"crash\") { stateLock { id holder needsRecovery runId } } }",
            serde_json::json!({}),
        )
        .await
        .unwrap();
    let lock = &lock["stack"]["stateLock"];
    assert_eq!(lock["needsRecovery"], true, "{lock}");
    assert_eq!(lock["runId"], run.id.as_str(), "{lock}");
    // The next run can't take the state until someone releases it.
    let blocked = app.client.run_trigger("crash", false).await.unwrap();
    app.add_runner();
    let blocked = app.wait_run(&blocked.id, 60, |r| r.terminal).await;
    assert_eq!(blocked.state, RunState::Failed);
    assert!(
        app.log_text(&blocked.id)
            .await
            .contains("Error acquiring the state lock")
    );
    // `tpctl state unlock --force` does this.
    let released = app.client.state_force_unlock("crash").await.unwrap();
    assert_eq!(released.run_id.as_deref(), Some(run.id.as_str()));
    commit(&dir, "main.tf", TWO_RESOURCES);
    let next = app.client.run_trigger("crash", false).await.unwrap();
    let next = app.wait_state(&next.id, RunState::Finished, 90).await;
    assert_ne!(next.runner_id.as_deref(), Some("external-runner"));
    app.teardown().await;
}
both_backends!(
    runner_crash,
    Options {
        runners: 0,
        lease_secs: 6,
        heartbeat_secs: 2,
        ..Options::default()
    },
    runner_killed_mid_apply
);

/// When a run held its stack: from its claim to its last event.
type Interval = (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>, String);

async fn two_runners_ten_runs(app: TestApp) {
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", TWO_RESOURCES)]);
    let stacks = ["s0", "s1", "s2", "s3", "s4"];
    for s in stacks {
        app.stack(s, &repo, true).await;
    }
    let mut ids = Vec::new();
    for _ in 0..2 {
        for s in stacks {
            ids.push((s, app.client.run_trigger(s, false).await.unwrap().id));
        }
    }
    let mut intervals: HashMap<&str, Vec<Interval>> = HashMap::new();
    for (stack, id) in &ids {
        let run = app.wait_run(id, 120, |r| r.terminal).await;
        assert_eq!(run.state, RunState::Finished, "{id}: {:?}", run.error);
        let claims = run.events.iter().filter(|e| e.state == RunState::Preparing).count();
        assert_eq!(claims, 1, "run {id} was claimed once");
        let log = app.log_text(id).await;
        assert_eq!(log.matches("[terraplane] terraform plan").count(), 1, "planned once");
        assert!(
            log.matches("[terraplane] terraform apply").count() <= 1,
            "applied at most once"
        );
        let start = run.events.iter().find(|e| e.state == RunState::Preparing).unwrap().at;
        let end = run.events.last().unwrap().at;
        intervals.entry(stack).or_default().push((start, end, id.clone()));
    }
    for (stack, mut iv) in intervals {
        iv.sort();
        for w in iv.windows(2) {
            assert!(w[0].1 <= w[1].0, "runs {} and {} of {stack} overlapped", w[0].2, w[1].2);
        }
        // The first run of each stack applied; the second found nothing to change.
    }
    let total_versions: usize = {
        let mut n = 0;
        for s in stacks {
            n += app.client.state_versions(s).await.unwrap().len();
        }
        n
    };
    assert_eq!(total_versions, 5, "one apply per stack");
    app.teardown().await;
}
both_backends!(
    many_runs,
    Options {
        runners: 2,
        ..Options::default()
    },
    two_runners_ten_runs
);
