//! A run's life: states and their order, plan summary, confirmation, state versions,
//! outputs, live logs, and the errors a user can run into.

use std::time::Duration;

use terraplane_client::{RunState, RunType};

use crate::both_backends;
use crate::harness::*;

fn states(run: &terraplane_client::Run) -> Vec<&str> {
    run.events.iter().map(|e| e.state.as_str()).collect()
}

async fn tracked_run_lifecycle(app: TestApp) {
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", TWO_RESOURCES)]);
    app.stack("net", &repo, false).await;
    let run = app.client.run_trigger("net", false).await.unwrap();
    assert_eq!(run.state, RunState::Queued);
    assert!(
        run.commit_sha.as_deref().is_some_and(|c| c.len() == 40),
        "commit pinned at trigger: {:?}",
        run.commit_sha
    );
    let run = app.wait_state(&run.id, RunState::Unconfirmed, 60).await;
    assert_eq!(
        states(&run),
        ["QUEUED", "PREPARING", "INITIALIZING", "PLANNING", "UNCONFIRMED"]
    );
    let s = run.plan_summary.unwrap();
    assert_eq!((s.add, s.change, s.destroy), (2, 0, 0));
    // The stored plan is redacted: the sensitive output's value never appears.
    let plan: serde_json::Value = app
        .client
        .graphql::<serde_json::Value>(
            "query($id: ID!) { run(id: $id) { plan } }",
            serde_json::json!({ "id": run.id }),
        )
        .await
        .unwrap();
    let plan_text = plan.to_string();
    assert!(plan_text.contains("terraform_data.a"), "{plan_text}");
    assert!(
        !plan_text.contains("hunter2"),
        "sensitive value leaked into the plan JSON"
    );
    assert!(
        app.client.state_versions("net").await.unwrap().is_empty(),
        "planning writes no state"
    );

    app.client.run_confirm(&run.id).await.unwrap();
    let run = app.wait_state(&run.id, RunState::Finished, 60).await;
    assert_eq!(
        states(&run),
        [
            "QUEUED",
            "PREPARING",
            "INITIALIZING",
            "PLANNING",
            "UNCONFIRMED",
            "CONFIRMED",
            "APPLYING",
            "FINISHED"
        ]
    );
    assert!(
        run.events.windows(2).all(|w| w[0].at <= w[1].at),
        "event times are ordered"
    );
    let outputs = run.outputs.clone().unwrap();
    assert_eq!(outputs["a"]["value"], "alpha");
    assert_eq!(outputs["secret"]["value"], "<sensitive>");
    let versions = app.client.state_versions("net").await.unwrap();
    assert_eq!(versions.len(), 1, "{versions:?}");
    assert_eq!(versions[0].version, 1);
    assert!(versions[0].serial.is_some_and(|s| s >= 1));
    assert_eq!(versions[0].outputs["a"]["value"], "alpha");
    assert_eq!(versions[0].run_id.as_deref(), Some(run.id.as_str()));
    let state = app.client.state_pull(app.org(), "net", None).await.unwrap().unwrap();
    let state: serde_json::Value = serde_json::from_slice(&state).unwrap();
    assert_eq!(state["resources"].as_array().map(Vec::len), Some(2));
    assert!(app.client.stack("net").await.unwrap().is_some());
    let lock: serde_json::Value = app
        .client
        .graphql("{ stack(id: \"net\") { stateLock { id } } }", serde_json::json!({}))
        .await
        .unwrap();
    assert!(
        lock["stack"]["stateLock"].is_null(),
        "terraform released its lock: {lock}"
    );

    // Nothing changed: the second run finishes right after planning.
    let second = app.client.run_trigger("net", false).await.unwrap();
    let second = app.wait_state(&second.id, RunState::Finished, 60).await;
    assert_eq!(
        states(&second),
        ["QUEUED", "PREPARING", "INITIALIZING", "PLANNING", "FINISHED"]
    );
    assert_eq!(second.has_changes, Some(false));
    assert_eq!(app.client.state_versions("net").await.unwrap().len(), 1);
    // The runner removed its work directories.
    let left = run_dirs_left(&app);
    assert!(left.is_empty(), "work directories left behind: {left:?}");
    app.teardown().await;
}
both_backends!(tracked_run, Options::default(), tracked_run_lifecycle);

async fn proposed_runs_never_apply(app: TestApp) {
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", TWO_RESOURCES)]);
    app.stack("prop", &repo, true).await;
    let run = app.client.run_trigger("prop", true).await.unwrap();
    assert_eq!(run.run_type, RunType::Proposed);
    let run = app.wait_state(&run.id, RunState::Finished, 60).await;
    assert_eq!(
        states(&run),
        ["QUEUED", "PREPARING", "INITIALIZING", "PLANNING", "FINISHED"]
    );
    assert_eq!(run.plan_summary.map(|s| s.add), Some(2));
    assert!(app.client.state_versions("prop").await.unwrap().is_empty());
    // Autodeploy: a tracked run with changes goes straight from planning to applying.
    let run = app.client.run_trigger("prop", false).await.unwrap();
    let run = app.wait_state(&run.id, RunState::Finished, 60).await;
    assert_eq!(
        states(&run),
        [
            "QUEUED",
            "PREPARING",
            "INITIALIZING",
            "PLANNING",
            "CONFIRMED",
            "APPLYING",
            "FINISHED"
        ]
    );
    app.teardown().await;
}
both_backends!(proposed_and_autodeploy, Options::default(), proposed_runs_never_apply);

/// Terraform wrapped so that its output arrives slowly (every line delayed), to observe
/// streaming while the plan is still running. Terraform itself is real and unchanged.
fn slow_terraform(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("slow-terraform");
    let real = terraform_bin();
    let script = format!(
        "#!/bin/bash\nset -o pipefail\nif [ \"$1\" = plan ]; then\n  \"{}\" \"$@\" 2>&1 | while IFS= read -r l; do printf '%s\\n' \"$l\"; sleep 0.05; done\n  exit ${{PIPESTATUS[0]}}\nfi\nexec \"{}\" \"$@\"\n",
        real.display(),
        real.display()
    );
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

async fn logs_stream_live(app: TestApp) {
    let many: String = (0..15)
        .map(|i| format!("resource \"terraform_data\" \"r{i}\" {{ input = \"{i}\" }}\n"))
        .collect();
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", &many)]);
    app.stack("logs", &repo, false).await;
    let run = app.client.run_trigger("logs", false).await.unwrap();
    // Follow like `tpctl run logs --follow`: poll for chunks after the last one seen.
    let mut seen = String::new();
    let mut last: Option<i64> = None;
    let mut seqs = Vec::new();
    let mut seen_while_planning = false;
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let page = app.client.run_logs(&run.id, last).await.unwrap();
        for c in &page.logs {
            if page.state == RunState::Planning && c.data.contains("will be created") {
                seen_while_planning = true;
            }
            seqs.push(c.seq);
            seen.push_str(&c.data);
            last = Some(c.seq);
        }
        if page.state == RunState::Unconfirmed || page.terminal {
            // State read before logs: one more read catches chunks written meanwhile.
            let rest = app.client.run_logs(&run.id, last).await.unwrap();
            for c in rest.logs {
                seqs.push(c.seq);
                seen.push_str(&c.data);
            }
            break;
        }
        assert!(std::time::Instant::now() < deadline, "run did not finish planning");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        seen_while_planning,
        "no plan output was visible while the run was PLANNING"
    );
    let expected: Vec<i64> = (0..seqs.len() as i64).collect();
    assert_eq!(seqs, expected, "chunks are gap-free and in order");
    assert_eq!(
        seen,
        app.log_text(&run.id).await,
        "the follower saw exactly the stored log"
    );
    // Terraform's lines arrive in the order terraform printed them.
    let order = [
        "Terraform has been successfully initialized!",
        "Terraform will perform the following actions:",
        "Plan: 15 to add, 0 to change, 0 to destroy.",
    ];
    let pos: Vec<usize> = order
        .iter()
        .map(|l| seen.find(l).unwrap_or_else(|| panic!("{l:?} missing:\n{seen}")))
        .collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "{pos:?}");
    for i in 0..15 {
        assert_eq!(
            seen.matches(&format!("# terraform_data.r{i} will be created")).count(),
            1,
            "r{i} once"
        );
    }
    app.teardown().await;
}
both_backends!(
    log_streaming,
    Options {
        terraform_bin: Some(slow_terraform(
            &std::env::temp_dir()
                .join(format!("tp-slow-{}", uuid::Uuid::new_v4()))
                .tap_mkdir()
        )),
        ..Options::default()
    },
    logs_stream_live
);

trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}

impl TapMkdir for std::path::PathBuf {
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}

async fn user_errors(app: TestApp) {
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", TWO_RESOURCES)]);
    app.stack("errs", &repo, false).await;

    // Confirming a run that is not UNCONFIRMED names its state.
    let run = app.client.run_trigger("errs", true).await.unwrap();
    let run = app.wait_state(&run.id, RunState::Finished, 60).await;
    let err = app.client.run_confirm(&run.id).await.unwrap_err();
    assert_eq!(err.code(), Some("invalid_run_state"));
    assert!(err.to_string().contains("FINISHED"), "{err}");

    // A tracked run on a stack locked by someone else names the holder.
    let other = app.store.scope(app.store.get_org_by_slug("default").await.unwrap().id);
    other
        .lock_stack(
            "errs",
            "alice@example.com",
            Some("maintenance".into()),
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    let err = app.client.run_trigger("errs", false).await.unwrap_err();
    assert_eq!(err.code(), Some("stack_locked"));
    assert!(err.to_string().contains("alice@example.com"), "{err}");
    let err = app.client.stack_unlock("errs", false).await.unwrap_err();
    assert!(err.to_string().contains("alice@example.com"), "{err}");
    app.client.stack_unlock("errs", true).await.unwrap();
    let locked = app.client.stack_lock("errs", Some("mine")).await.unwrap();
    assert_eq!(locked.lock.map(|l| l.note), Some(Some("mine".into())));
    app.client.stack_unlock("errs", false).await.unwrap();

    // A repository that cannot be cloned fails the run with git's message in the log.
    app.stack(
        "nogit",
        &format!("file://{}/does-not-exist", app.tmp.path().display()),
        false,
    )
    .await;
    let run = app.client.run_trigger("nogit", false).await.unwrap();
    let run = app.wait_state(&run.id, RunState::Failed, 60).await;
    assert!(
        run.error.as_deref().is_some_and(|e| e.contains("git clone")),
        "{:?}",
        run.error
    );
    let log = app.log_text(&run.id).await;
    assert!(
        log.contains("does-not-exist") && log.to_lowercase().contains("repository"),
        "git's message in log:\n{log}"
    );

    // Bad stack input is refused with a precise message and stores nothing.
    let bad = terraplane_client::StackCreateInput {
        slug: Some("Bad Slug".into()),
        name: "x".into(),
        repository: repo.clone(),
        ..Default::default()
    };
    let err = app.client.stack_create(&bad).await.unwrap_err();
    assert_eq!(err.code(), Some("bad_request"));
    assert!(err.to_string().contains("lowercase"), "{err}");
    let dup = terraplane_client::StackCreateInput {
        slug: Some("errs".into()),
        name: "x".into(),
        repository: repo,
        ..Default::default()
    };
    assert_eq!(
        app.client.stack_create(&dup).await.unwrap_err().code(),
        Some("stack_exists")
    );
    let slugs: Vec<String> = app.client.stacks().await.unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(slugs, ["errs", "nogit"]);

    // Updates are validated the same way and change only what they name.
    let upd = terraplane_client::StackUpdateInput {
        branch: Some("release".into()),
        ..Default::default()
    };
    let updated = app.client.stack_update("errs", &upd).await.unwrap();
    assert_eq!((updated.branch.as_str(), updated.autodeploy), ("release", false));
    let bad = terraplane_client::StackUpdateInput {
        project_root: Some("/etc".into()),
        ..Default::default()
    };
    assert_eq!(
        app.client.stack_update("errs", &bad).await.unwrap_err().code(),
        Some("bad_request")
    );
    assert_eq!(app.client.stack("errs").await.unwrap().unwrap().project_root, "");
    assert!(
        app.client
            .stack_update("missing", &upd)
            .await
            .unwrap_err()
            .is_not_found()
    );

    // Discarding: only an UNCONFIRMED run, and it then stays DISCARDED.
    app.client
        .stack_update(
            "errs",
            &terraplane_client::StackUpdateInput {
                branch: Some("main".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let run = app.client.run_trigger("errs", false).await.unwrap();
    let run = app.wait_state(&run.id, RunState::Unconfirmed, 60).await;
    // Deleting a stack with a run in progress is refused.
    let err = app.client.stack_delete("errs").await.unwrap_err();
    assert_eq!(err.code(), Some("stack_busy"), "{err}");
    let run = app.client.run_discard(&run.id).await.unwrap();
    assert_eq!(run.state, RunState::Discarded);
    assert_eq!(
        app.client.run_discard(&run.id).await.unwrap_err().code(),
        Some("invalid_run_state")
    );
    assert!(
        app.client.state_versions("errs").await.unwrap().is_empty(),
        "a discarded run applies nothing"
    );

    // A finished stack can be deleted; afterwards it is gone.
    app.client.stack_delete("nogit").await.unwrap();
    assert!(app.client.stack("nogit").await.unwrap().is_none());
    assert!(app.client.stack_delete("nogit").await.unwrap_err().is_not_found());
    app.teardown().await;
}
both_backends!(user_errors_are_precise, Options::default(), user_errors);

/// The runner works in the stack's project root, and applies only the plan that was
/// confirmed: a plan file changed after planning is refused, and nothing is applied.
async fn project_root_and_plan_integrity(app: TestApp) {
    let repo = git_repo(
        &app.tmp.path().join("repo"),
        &[("main.tf", "this is not HCL {"), ("infra/app/main.tf", TWO_RESOURCES)],
    );
    let input = terraplane_client::StackCreateInput {
        slug: Some("nested".into()),
        name: "nested".into(),
        repository: repo,
        project_root: Some("infra/app".into()),
        ..Default::default()
    };
    app.client.stack_create(&input).await.unwrap();
    let run = app.client.run_trigger("nested", false).await.unwrap();
    let run = app.wait_state(&run.id, RunState::Unconfirmed, 60).await;
    assert_eq!(run.plan_summary.map(|s| s.add), Some(2));

    let org = app.store.get_org_by_slug("default").await.unwrap();
    let scope = app.store.scope(org.id);
    let run_id: terraplane_domain::RunId = run.id.parse().unwrap();
    let planned = scope.get_plan(run_id).await.unwrap();
    scope
        .put_plan(
            run_id,
            b"not the confirmed plan".to_vec(),
            planned.plan_json,
            planned.sha256,
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    app.client.run_confirm(&run.id).await.unwrap();
    let run = app.wait_state(&run.id, RunState::Failed, 60).await;
    assert!(
        run.error.as_deref().is_some_and(|e| e.contains("does not match")),
        "{:?}",
        run.error
    );
    assert!(!app.log_text(&run.id).await.contains("Apply complete"));
    assert!(
        app.client.state_versions("nested").await.unwrap().is_empty(),
        "nothing applied"
    );

    // A project root that isn't in the repository fails the run saying so.
    let upd = terraplane_client::StackUpdateInput {
        project_root: Some("nope".into()),
        ..Default::default()
    };
    app.client.stack_update("nested", &upd).await.unwrap();
    let run = app.client.run_trigger("nested", true).await.unwrap();
    let run = app.wait_state(&run.id, RunState::Failed, 60).await;
    assert!(
        run.error
            .as_deref()
            .is_some_and(|e| e.contains("\"nope\" does not exist")),
        "{:?}",
        run.error
    );
    app.teardown().await;
}
both_backends!(
    project_root_and_integrity,
    Options::default(),
    project_root_and_plan_integrity
);
