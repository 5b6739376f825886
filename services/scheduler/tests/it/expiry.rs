//! Runs whose runner went silent, or that run too long, are failed; an apply is never
//! re-dispatched and leaves the state lock flagged for recovery.

use terraplane_domain::{RunPhase, RunState, RunType};
use terraplane_protocol::JobMessage;
use terraplane_store::{LockOutcome, NewLock};

use crate::harness::{Env, LEASE_SECS, REPUBLISH_SECS, TIMEOUT_SECS, env_tests};

async fn expired_lease_fails_the_run_naming_runner_and_state(env: &mut Env) {
    let stack = env.stack("network", "default").await;
    let run = env.run(&stack, RunType::Tracked).await;
    let next = env.run(&stack, RunType::Tracked).await;
    env.tick().await;
    let claimed = env.claim(run.id, RunPhase::Plan, "runner-7").await;
    env.event(&claimed, terraplane_domain::RunEvent::Initializing).await;
    env.event(&claimed, terraplane_domain::RunEvent::Planning).await;

    env.advance(LEASE_SECS - 1);
    let report = env.tick().await;
    assert!(report.failed.is_empty(), "failed within its lease: {report:?}");
    assert_eq!(env.get(run.id).await.state, RunState::Planning);

    env.advance(2);
    let report = env.tick().await;
    assert_eq!(report.failed.len(), 1, "{report:?}");
    let (id, reason) = &report.failed[0];
    assert_eq!(*id, run.id);
    assert!(reason.contains("runner-7"), "reason does not name the runner: {reason}");
    assert!(reason.contains("PLANNING"), "reason does not name the state: {reason}");
    let failed = env.get(run.id).await;
    assert_eq!(failed.state, RunState::Failed);
    assert_eq!(failed.error.as_deref(), Some(reason.as_str()));

    // The failed run is not published again; the stack's next run goes instead.
    let mut published = report.published;
    published.extend(env.tick().await.published);
    assert_eq!(published, vec![(next.id, RunPhase::Plan)]);
    assert!(env.tick().await.failed.is_empty());
}

/// A run the scheduler fails raises RunFailed like the api's events do, and the stack's
/// notification policies route it: here to an endpoint that subscribes only to drift.
async fn runs_it_fails_pass_through_notification_policies(env: &mut Env) {
    use terraplane_domain::notify::{EndpointKind, EventKind};
    let stack = env.stack("network", "default").await;
    let scope = env.store.scope(env.org);
    let root = scope.root_space().await.unwrap();
    let ops = scope
        .create_endpoint(
            terraplane_store::NewEndpoint {
                slug: "ops".into(),
                name: "ops".into(),
                kind: EndpointKind::Webhook,
                url: "http://127.0.0.1:9/hook".into(),
                secret: None,
                events: vec![EventKind::DriftDetected],
                stack_labels: vec![],
                space_id: root.id,
            },
            env.now(),
        )
        .await
        .unwrap();
    let policy = scope
        .create_policy(
            terraplane_store::NewPolicy {
                slug: "route".into(),
                name: "route".into(),
                policy_type: "NOTIFICATION".into(),
                description: String::new(),
                labels: vec![],
                body: "package spacelift\n\nwebhook[{\"endpoint_id\": \"ops\", \"payload\": {\"lost\": input.run_updated.run.id}}] {\n  input.run_updated.state == \"FAILED\"\n}\n".into(),
                space_id: root.id,
            },
            "alice",
            env.now(),
        )
        .await
        .unwrap();
    scope.attach_policy(&policy.id, stack.id, env.now()).await.unwrap();
    let run = env.run(&stack, RunType::Tracked).await;
    env.tick().await;
    env.claim(run.id, RunPhase::Plan, "runner-7").await;
    env.advance(LEASE_SECS + 1);
    assert_eq!(env.tick().await.failed.len(), 1);

    let deliveries = scope.deliveries(None, 10).await.unwrap();
    assert_eq!(deliveries.len(), 1, "{deliveries:?}");
    assert_eq!(deliveries[0].endpoint_id, ops.id);
    assert_eq!(deliveries[0].event, EventKind::RunFailed);
    let ev: serde_json::Value = serde_json::from_str(&deliveries[0].payload).unwrap();
    assert_eq!(ev["payload"], serde_json::json!({"lost": run.id.to_string()}));
    let evs = scope.run_policy_evaluations(&run.id.to_string()).await.unwrap();
    assert_eq!(evs.len(), 1);
    assert_eq!(
        (evs[0].policy_type.as_str(), evs[0].outcome.as_str()),
        ("NOTIFICATION", "decided")
    );
}

async fn renewed_lease_keeps_the_run(env: &mut Env) {
    let stack = env.stack("network", "default").await;
    let run = env.run(&stack, RunType::Proposed).await;
    env.tick().await;
    let claimed = env.claim(run.id, RunPhase::Plan, "runner-1").await;
    for _ in 0..10 {
        env.advance(LEASE_SECS - 5);
        env.heartbeat(&claimed).await;
        let report = env.tick().await;
        assert!(report.failed.is_empty() && report.published.is_empty(), "{report:?}");
    }
    assert_eq!(env.get(run.id).await.state, RunState::Preparing);
}

async fn apply_that_loses_its_lease_fails_and_is_never_republished(env: &mut Env) {
    let stack = env.stack("network", "default").await;
    let run = env.run(&stack, RunType::Tracked).await;
    env.tick().await;
    let claimed = env.claim(run.id, RunPhase::Plan, "runner-1").await;
    env.finish_plan(&claimed, true, true).await;
    assert_eq!(env.tick().await.published, vec![(run.id, RunPhase::Apply)]);
    let applying = env.claim(run.id, RunPhase::Apply, "runner-9").await;
    let lock = NewLock {
        lock_id: "tf-lock-1".into(),
        info: "{}".into(),
        holder: "runner-9".into(),
        run_id: Some(run.id),
    };
    let locked = env
        .store
        .scope(env.org)
        .lock_state(stack.id, lock, env.now())
        .await
        .unwrap();
    assert!(matches!(locked, LockOutcome::Acquired(_)));
    env.heartbeat(&applying).await;
    env.published("default").await;

    env.advance(LEASE_SECS + 1);
    let report = env.tick().await;
    assert_eq!(report.failed.len(), 1, "{report:?}");
    let (id, reason) = &report.failed[0];
    assert_eq!(*id, run.id);
    assert!(reason.contains("runner-9") && reason.contains("APPLYING"), "{reason}");
    assert!(report.published.is_empty(), "{report:?}");
    assert_eq!(env.get(run.id).await.state, RunState::Failed);

    let lock = env
        .store
        .scope(env.org)
        .get_state_lock(stack.id)
        .await
        .unwrap()
        .expect("the state lock is kept");
    assert_eq!(lock.lock_id, "tf-lock-1");
    assert!(lock.needs_recovery, "the state lock is not flagged for recovery");

    // However long we wait, the apply is not dispatched again.
    for _ in 0..3 {
        env.advance(REPUBLISH_SECS + 1);
        let report = env.tick().await;
        assert!(report.published.is_empty() && report.failed.is_empty(), "{report:?}");
    }
    assert!(env.published("default").await.is_empty());
}

async fn run_timeout_fails_a_run_despite_heartbeats(env: &mut Env) {
    let stack = env.stack("network", "default").await;
    let run = env.run(&stack, RunType::Tracked).await;
    env.tick().await;
    let claimed = env.claim(run.id, RunPhase::Plan, "runner-3").await;
    let step = 20;
    let mut elapsed = 0;
    while elapsed + step < TIMEOUT_SECS {
        env.advance(step);
        elapsed += step;
        env.heartbeat(&claimed).await;
        let report = env.tick().await;
        assert!(report.failed.is_empty(), "failed after {elapsed} s: {report:?}");
    }
    env.advance(TIMEOUT_SECS - elapsed + step);
    env.heartbeat(&claimed).await;
    let report = env.tick().await;
    assert_eq!(report.failed.len(), 1, "{report:?}");
    let (id, reason) = &report.failed[0];
    assert_eq!(*id, run.id);
    assert!(reason.contains("timed out") && reason.contains("PREPARING"), "{reason}");
    let failed = env.get(run.id).await;
    assert_eq!(
        (failed.state, failed.error.as_deref()),
        (RunState::Failed, Some(reason.as_str()))
    );
    assert!(env.tick().await.published.is_empty());
    assert_eq!(
        env.published("default").await,
        vec![JobMessage::new(run.id, RunPhase::Plan)]
    );
}

env_tests!(
    expired_lease_fails_the_run_naming_runner_and_state,
    runs_it_fails_pass_through_notification_policies,
    renewed_lease_keeps_the_run,
    apply_that_loses_its_lease_fails_and_is_never_republished,
    run_timeout_fails_a_run_despite_heartbeats,
);
