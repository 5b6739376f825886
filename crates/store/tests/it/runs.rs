//! Run lifecycle persistence: transitions go through the domain state machine, claims are
//! exclusive, fencing tokens fence, and failing a held apply flags the state lock.

use chrono::Duration;
use terraplane_domain::{OrgId, RunEvent, RunPhase, RunState, RunType};
use terraplane_store::{LockOutcome, NewLock, Run, RunUpdate, StoreError};

use crate::harness::{TestDb, db_tests};

fn fenced(token: i64) -> RunUpdate {
    RunUpdate {
        fencing_token: Some(token),
        ..Default::default()
    }
}

fn conflict_message<T: std::fmt::Debug>(r: Result<T, StoreError>) -> String {
    match r {
        Err(StoreError::Conflict(m)) => m,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

/// Claims the run for planning and takes it to PLANNING.
async fn claim_and_plan(db: &TestDb, org: OrgId, run: &Run) -> Run {
    let scope = db.store.scope(org);
    let claimed = db
        .store
        .claim_run(
            run.id,
            RunPhase::Plan,
            "runner-1",
            db.now + Duration::seconds(30),
            db.now,
        )
        .await
        .unwrap();
    let t = claimed.fencing_token;
    scope
        .transition_run(run.id, RunEvent::Initializing, fenced(t), db.now)
        .await
        .unwrap();
    scope
        .transition_run(run.id, RunEvent::Planning, fenced(t), db.now)
        .await
        .unwrap()
}

/// A tracked run taken all the way to APPLYING (claimed twice, so fencing token 2).
async fn applying_run(db: &TestDb, org: OrgId) -> Run {
    let stack = db.stack(org, "applied").await;
    let run = db.run(org, stack.id, RunType::Tracked).await;
    let scope = db.store.scope(org);
    let planning = claim_and_plan(db, org, &run).await;
    let done = RunEvent::PlanFinished {
        has_changes: true,
        run_type: RunType::Tracked,
        autodeploy: false,
    };
    let unconfirmed = scope
        .transition_run(run.id, done, fenced(planning.fencing_token), db.now)
        .await
        .unwrap();
    assert_eq!(unconfirmed.state, RunState::Unconfirmed);
    let confirmed = scope
        .transition_run(run.id, RunEvent::Confirm, RunUpdate::default(), db.now)
        .await
        .unwrap();
    assert_eq!(confirmed.state, RunState::Confirmed);
    let applying = db
        .store
        .claim_run(
            run.id,
            RunPhase::Apply,
            "runner-2",
            db.now + Duration::seconds(30),
            db.now,
        )
        .await
        .unwrap();
    assert_eq!((applying.state, applying.fencing_token), (RunState::Applying, 2));
    applying
}

async fn illegal_transition_is_a_conflict_naming_the_current_state(db: &TestDb) {
    let a = db.org("org-a").await;
    let stack = db.stack(a.id, "network").await;
    let run = db.run(a.id, stack.id, RunType::Tracked).await;
    let scope = db.store.scope(a.id);
    let m = conflict_message(
        scope
            .transition_run(run.id, RunEvent::Confirm, RunUpdate::default(), db.now)
            .await,
    );
    assert!(m.contains("QUEUED"), "message does not name the state: {m}");
    assert_eq!(scope.get_run(run.id).await.unwrap().state, RunState::Queued);
    let events = scope.list_run_events(run.id).await.unwrap();
    assert_eq!(
        events.iter().map(|e| e.state).collect::<Vec<_>>(),
        vec![RunState::Queued]
    );

    // An apply in progress cannot be canceled, and the refusal says why.
    let applying = applying_run(db, a.id).await;
    let m = conflict_message(scope.cancel_run(applying.id, "alice", db.now).await);
    assert!(m.contains("APPLYING"), "{m}");
    assert_eq!(scope.get_run(applying.id).await.unwrap().state, RunState::Applying);
}

async fn claiming_twice_is_a_conflict(db: &TestDb) {
    let a = db.org("org-a").await;
    let stack = db.stack(a.id, "network").await;
    let run = db.run(a.id, stack.id, RunType::Tracked).await;
    let lease = db.now + Duration::seconds(30);
    // Apply cannot be claimed before a plan.
    conflict_message(
        db.store
            .claim_run(run.id, RunPhase::Apply, "runner-1", lease, db.now)
            .await,
    );

    let first = db
        .store
        .claim_run(run.id, RunPhase::Plan, "runner-1", lease, db.now)
        .await
        .unwrap();
    assert_eq!(first.state, RunState::Preparing);
    assert_eq!(first.fencing_token, 1);
    assert_eq!(first.runner_id.as_deref(), Some("runner-1"));
    assert_eq!(first.lease_expires_at, Some(lease));
    assert_eq!(first.held_since, Some(db.now));

    let m = conflict_message(
        db.store
            .claim_run(run.id, RunPhase::Plan, "runner-2", lease, db.now)
            .await,
    );
    assert!(m.contains("PREPARING"), "{m}");
    let stored = db.store.scope(a.id).get_run(run.id).await.unwrap();
    assert_eq!(
        (stored.runner_id.as_deref(), stored.fencing_token),
        (Some("runner-1"), 1)
    );
    assert_eq!(stored.lease_expires_at, Some(lease));
}

async fn stale_fencing_token_is_a_conflict(db: &TestDb) {
    let a = db.org("org-a").await;
    let stack = db.stack(a.id, "network").await;
    let run = db.run(a.id, stack.id, RunType::Tracked).await;
    let scope = db.store.scope(a.id);
    let claimed = db
        .store
        .claim_run(
            run.id,
            RunPhase::Plan,
            "runner-1",
            db.now + Duration::seconds(30),
            db.now,
        )
        .await
        .unwrap();
    let m = conflict_message(
        scope
            .transition_run(run.id, RunEvent::Initializing, fenced(0), db.now)
            .await,
    );
    assert!(m.contains("fencing"), "{m}");
    assert_eq!(scope.get_run(run.id).await.unwrap().state, RunState::Preparing);

    conflict_message(scope.renew_lease(run.id, 0, db.now + Duration::seconds(60)).await);
    let renewed = scope
        .renew_lease(run.id, claimed.fencing_token, db.now + Duration::seconds(60))
        .await
        .unwrap();
    assert_eq!(renewed.lease_expires_at, Some(db.now + Duration::seconds(60)));

    let next = scope
        .transition_run(run.id, RunEvent::Initializing, fenced(claimed.fencing_token), db.now)
        .await
        .unwrap();
    assert_eq!(next.state, RunState::Initializing);
    // The apply claim bumps the token: the plan claimant's token is dead from then on.
    let applying = applying_run(db, a.id).await;
    conflict_message(
        scope
            .transition_run(applying.id, RunEvent::ApplyFinished, fenced(1), db.now)
            .await,
    );
    conflict_message(scope.renew_lease(applying.id, 1, db.now + Duration::seconds(60)).await);
    let finished = scope
        .transition_run(applying.id, RunEvent::ApplyFinished, fenced(2), db.now)
        .await
        .unwrap();
    assert_eq!(finished.state, RunState::Finished);
    assert_eq!(finished.lease_expires_at, None);
    // A finished run holds no lease.
    conflict_message(scope.renew_lease(applying.id, 2, db.now + Duration::seconds(60)).await);
}

async fn failing_a_held_apply_marks_the_state_lock_for_recovery(db: &TestDb) {
    let a = db.org("org-a").await;
    let run = applying_run(db, a.id).await;
    let scope = db.store.scope(a.id);
    let lock = NewLock {
        lock_id: "lock-1".into(),
        info: "{}".into(),
        holder: "runner-2".into(),
        run_id: Some(run.id),
    };
    assert!(matches!(
        scope.lock_state(run.stack_id, lock, db.now).await.unwrap(),
        LockOutcome::Acquired(_)
    ));

    let failed = db
        .store
        .fail_held_run(&run, "runner-2 stopped heartbeating".into(), db.now)
        .await
        .unwrap();
    assert_eq!(failed.state, RunState::Failed);
    assert_eq!(failed.error.as_deref(), Some("runner-2 stopped heartbeating"));
    assert_eq!(failed.lease_expires_at, None);
    let held = scope
        .get_state_lock(run.stack_id)
        .await
        .unwrap()
        .expect("the lock is kept");
    assert_eq!(held.lock_id, "lock-1");
    assert!(held.needs_recovery);
}

async fn failing_a_held_plan_leaves_the_state_lock_alone(db: &TestDb) {
    let a = db.org("org-a").await;
    let stack = db.stack(a.id, "network").await;
    let run = db.run(a.id, stack.id, RunType::Tracked).await;
    let scope = db.store.scope(a.id);
    let planning = claim_and_plan(db, a.id, &run).await;
    let lock = NewLock {
        lock_id: "lock-1".into(),
        info: "{}".into(),
        holder: "runner-1".into(),
        run_id: Some(run.id),
    };
    scope.lock_state(stack.id, lock, db.now).await.unwrap();
    let failed = db
        .store
        .fail_held_run(&planning, "timed out".into(), db.now)
        .await
        .unwrap();
    assert_eq!(failed.state, RunState::Failed);
    assert!(!scope.get_state_lock(stack.id).await.unwrap().unwrap().needs_recovery);
}

/// The scheduler fails runs from a snapshot: if the run was claimed again since, failing
/// it must be refused.
async fn failing_a_held_run_from_a_stale_claim_is_a_conflict(db: &TestDb) {
    let a = db.org("org-a").await;
    let stack = db.stack(a.id, "network").await;
    let run = db.run(a.id, stack.id, RunType::Tracked).await;
    let snapshot = db
        .store
        .claim_run(
            run.id,
            RunPhase::Plan,
            "runner-1",
            db.now + Duration::seconds(30),
            db.now,
        )
        .await
        .unwrap();
    let scope = db.store.scope(a.id);
    let t = snapshot.fencing_token;
    scope
        .transition_run(run.id, RunEvent::Initializing, fenced(t), db.now)
        .await
        .unwrap();
    scope
        .transition_run(run.id, RunEvent::Planning, fenced(t), db.now)
        .await
        .unwrap();
    let done = RunEvent::PlanFinished {
        has_changes: true,
        run_type: RunType::Tracked,
        autodeploy: true,
    };
    scope.transition_run(run.id, done, fenced(t), db.now).await.unwrap();
    db.store
        .claim_run(
            run.id,
            RunPhase::Apply,
            "runner-2",
            db.now + Duration::seconds(30),
            db.now,
        )
        .await
        .unwrap();

    conflict_message(db.store.fail_held_run(&snapshot, "lease lost".into(), db.now).await);
    assert_eq!(scope.get_run(run.id).await.unwrap().state, RunState::Applying);
}

/// The scheduler's snapshot says PLANNING (lease expired); before it fails the run, the
/// runner reports the plan (same fencing token). The run is no longer held by anyone:
/// failing it for "stopped heartbeating while PLANNING" must be refused, like any other
/// report that raced the scheduler (`Scheduler::tick` expects a Conflict here).
async fn failing_a_held_run_that_left_the_held_state_is_a_conflict(db: &TestDb) {
    let a = db.org("org-a").await;
    let stack = db.stack(a.id, "network").await;
    let run = db.run(a.id, stack.id, RunType::Tracked).await;
    let scope = db.store.scope(a.id);
    let snapshot = claim_and_plan(db, a.id, &run).await;
    assert_eq!(snapshot.state, RunState::Planning);
    let done = RunEvent::PlanFinished {
        has_changes: true,
        run_type: RunType::Tracked,
        autodeploy: false,
    };
    let unconfirmed = scope
        .transition_run(run.id, done, fenced(snapshot.fencing_token), db.now)
        .await
        .unwrap();
    assert_eq!(unconfirmed.state, RunState::Unconfirmed);

    let r = db
        .store
        .fail_held_run(
            &snapshot,
            "runner runner-1 stopped heartbeating while the run was PLANNING".into(),
            db.now,
        )
        .await;
    assert!(
        matches!(r, Err(StoreError::Conflict(_))),
        "a run no runner holds was failed: {r:?}"
    );
    assert_eq!(scope.get_run(run.id).await.unwrap().state, RunState::Unconfirmed);
}

db_tests!(
    illegal_transition_is_a_conflict_naming_the_current_state,
    claiming_twice_is_a_conflict,
    stale_fencing_token_is_a_conflict,
    failing_a_held_apply_marks_the_state_lock_for_recovery,
    failing_a_held_plan_leaves_the_state_lock_alone,
    failing_a_held_run_from_a_stale_claim_is_a_conflict,
    failing_a_held_run_that_left_the_held_state_is_a_conflict,
);
