//! Tenant isolation: whatever organization A owns does not exist for organization B's
//! scope, for reads and for writes alike.

use chrono::Duration;
use terraplane_domain::{RunEvent, RunPhase, RunState, RunType};
use terraplane_store::{LockOutcome, RunUpdate, StackPatch, StoreError, WriteOutcome};

use crate::harness::{TestDb, db_tests, new_run, new_stack};
use crate::state::{lock, state_body, write};

fn is_not_found<T: std::fmt::Debug>(r: &Result<T, StoreError>) -> bool {
    matches!(r, Err(StoreError::NotFound(_)))
}

async fn reads_across_organizations_find_nothing(db: &TestDb) {
    let a = db.org("org-a").await;
    let b = db.org("org-b").await;
    let sa = db.store.scope(a.id);
    let sb = db.store.scope(b.id);
    let stack = db.stack(a.id, "network").await;
    let run = db.run(a.id, stack.id, RunType::Tracked).await;
    sa.append_log(run.id, 0, "plan", "secret output\n", db.now)
        .await
        .unwrap();
    sa.put_plan(run.id, b"plan".to_vec(), "{}".into(), "0".repeat(64), db.now)
        .await
        .unwrap();
    write(db, a.id, stack.id, &state_body(1, "L", "one"), None).await;
    sa.lock_state(stack.id, lock("L1", "alice"), db.now).await.unwrap();

    assert!(is_not_found(&sb.get_stack(stack.id).await));
    assert!(is_not_found(&sb.get_stack_by_slug("network").await));
    assert!(sb.list_stacks().await.unwrap().is_empty());
    assert!(is_not_found(&sb.get_run(run.id).await));
    assert!(sb.list_runs(stack.id, 100).await.unwrap().is_empty());
    assert!(sb.list_run_events(run.id).await.unwrap().is_empty());
    assert!(sb.list_logs(run.id, None, 100).await.unwrap().is_empty());
    assert_eq!(sb.next_log_seq(run.id).await.unwrap(), 0);
    assert!(is_not_found(&sb.get_plan(run.id).await));
    assert!(sb.get_current_state(stack.id).await.unwrap().is_none());
    assert!(sb.list_state_versions(stack.id).await.unwrap().is_empty());
    assert!(is_not_found(&sb.get_state_by_serial(stack.id, 1).await));
    assert!(sb.get_state_lock(stack.id).await.unwrap().is_none());

    // B's own stack with the same slug is independent of A's.
    let mine = sb.create_stack(new_stack("network"), db.now).await.unwrap();
    assert_ne!(mine.id, stack.id);
    assert_eq!(
        sb.list_stacks().await.unwrap().iter().map(|s| s.id).collect::<Vec<_>>(),
        vec![mine.id]
    );
    assert_eq!(sa.get_stack_by_slug("network").await.unwrap().id, stack.id);
}

async fn writes_across_organizations_are_not_found(db: &TestDb) {
    let a = db.org("org-a").await;
    let b = db.org("org-b").await;
    let sa = db.store.scope(a.id);
    let sb = db.store.scope(b.id);
    let stack = db.stack(a.id, "network").await;
    let run = db.run(a.id, stack.id, RunType::Tracked).await;
    let held = db.run(a.id, stack.id, RunType::Proposed).await;
    let claimed = db
        .store
        .claim_run(
            held.id,
            RunPhase::Plan,
            "runner-1",
            db.now + Duration::seconds(30),
            db.now,
        )
        .await
        .unwrap();
    sa.lock_state(stack.id, lock("L1", "alice"), db.now).await.unwrap();

    let patch = StackPatch {
        name: Some("pwned".into()),
        ..Default::default()
    };
    assert!(is_not_found(&sb.update_stack("network", patch, db.now).await));
    assert!(is_not_found(&sb.lock_stack("network", "mallory", None, db.now).await));
    assert!(is_not_found(&sb.unlock_stack("network", "mallory", true).await));
    assert!(is_not_found(&sb.delete_stack("network").await));
    assert!(is_not_found(
        &sb.create_run(new_run(stack.id, RunType::Tracked), "mallory", db.now)
            .await
    ));
    assert!(is_not_found(
        &sb.transition_run(run.id, RunEvent::Cancel, RunUpdate::default(), db.now)
            .await
    ));
    assert!(is_not_found(&sb.cancel_run(run.id, "mallory", db.now).await));
    assert!(is_not_found(
        &sb.renew_lease(held.id, claimed.fencing_token, db.now + Duration::seconds(999))
            .await
    ));
    assert!(is_not_found(&sb.unlock_state(stack.id, Some("L1"), true).await));
    sb.mark_lock_recovery(stack.id).await.unwrap();

    // Nothing of A's changed.
    let s = sa.get_stack(stack.id).await.unwrap();
    assert_eq!((s.name.as_str(), s.lock.is_none()), ("Stack network", true));
    assert_eq!(sa.get_run(run.id).await.unwrap().state, RunState::Queued);
    assert_eq!(
        sa.get_run(held.id).await.unwrap().lease_expires_at,
        Some(db.now + Duration::seconds(30))
    );
    assert_eq!(sa.list_runs(stack.id, 100).await.unwrap().len(), 2);
    let l = sa.get_state_lock(stack.id).await.unwrap().unwrap();
    assert_eq!((l.lock_id.as_str(), l.needs_recovery), ("L1", false));
}

/// `lock_state` takes a stack id and must not lock another organization's stack.
async fn state_lock_through_another_organization_is_not_found(db: &TestDb) {
    let a = db.org("org-a").await;
    let b = db.org("org-b").await;
    let stack = db.stack(a.id, "network").await;
    let r = db
        .store
        .scope(b.id)
        .lock_state(stack.id, lock("M1", "mallory"), db.now)
        .await;
    assert!(is_not_found(&r), "org B locked org A's state: {r:?}");
    let mine = db
        .store
        .scope(a.id)
        .lock_state(stack.id, lock("L1", "alice"), db.now)
        .await
        .unwrap();
    assert!(
        matches!(mine, LockOutcome::Acquired(_)),
        "org A cannot lock its own state: {mine:?}"
    );
}

/// `write_state` takes a stack id and must not write another organization's state.
async fn state_write_through_another_organization_is_not_found(db: &TestDb) {
    let a = db.org("org-a").await;
    let b = db.org("org-b").await;
    let stack = db.stack(a.id, "network").await;
    let body = state_body(1, "M", "mallory");
    let meta = terraplane_domain::state::parse_state(&body).unwrap();
    let v = terraplane_store::NewStateVersion {
        body: &body,
        meta: &meta,
        md5: "0".repeat(32),
        sha256: "1".repeat(64),
        outputs: serde_json::json!({}),
        run_id: None,
        created_by: "mallory".into(),
    };
    let r = db.store.scope(b.id).write_state(stack.id, v, None, db.now).await;
    let a_sees = db
        .store
        .scope(a.id)
        .get_current_state(stack.id)
        .await
        .unwrap()
        .map(|(v, _)| v.version);
    assert!(
        is_not_found(&r),
        "org B wrote org A's state: {r:?}; A sees version {a_sees:?}"
    );
    let mine = write(db, a.id, stack.id, &state_body(1, "L", "one"), None).await;
    assert!(
        matches!(mine, WriteOutcome::Stored(ref v) if v.version == 1),
        "org A's first write: {mine:?}"
    );
}

/// `delete_state` takes a stack id: it must neither touch nor describe another
/// organization's state (today it answers with a conflict naming A's lock holder).
async fn state_delete_through_another_organization_is_not_found(db: &TestDb) {
    let a = db.org("org-a").await;
    let b = db.org("org-b").await;
    let stack = db.stack(a.id, "network").await;
    write(db, a.id, stack.id, &state_body(1, "L", "one"), None).await;
    db.store
        .scope(a.id)
        .lock_state(stack.id, lock("L1", "alice"), db.now)
        .await
        .unwrap();
    let r = db.store.scope(b.id).delete_state(stack.id).await;
    assert!(is_not_found(&r), "org B's delete of org A's state: {r:?}");
    assert_eq!(
        db.store.scope(a.id).list_state_versions(stack.id).await.unwrap().len(),
        1
    );
}

/// `put_plan` takes a run id and must not replace another organization's plan.
async fn run_plan_through_another_organization_is_not_found(db: &TestDb) {
    let a = db.org("org-a").await;
    let b = db.org("org-b").await;
    let sa = db.store.scope(a.id);
    let stack = db.stack(a.id, "network").await;
    let run = db.run(a.id, stack.id, RunType::Tracked).await;
    sa.put_plan(run.id, b"plan-a".to_vec(), "{}".into(), "a".repeat(64), db.now)
        .await
        .unwrap();

    let r = db
        .store
        .scope(b.id)
        .put_plan(run.id, b"plan-b".to_vec(), "{}".into(), "b".repeat(64), db.now)
        .await;
    let kept = sa.get_plan(run.id).await.map(|p| p.plan_file);
    assert!(
        is_not_found(&r),
        "org B's put_plan on org A's run: {r:?}; A's plan now: {kept:?}"
    );
    assert_eq!(kept.ok(), Some(b"plan-a".to_vec()));
}

/// `append_log` takes a run id and must not write to another organization's run log.
async fn run_log_through_another_organization_is_not_found(db: &TestDb) {
    let a = db.org("org-a").await;
    let b = db.org("org-b").await;
    let stack = db.stack(a.id, "network").await;
    let run = db.run(a.id, stack.id, RunType::Tracked).await;

    let r = db
        .store
        .scope(b.id)
        .append_log(run.id, 0, "plan", "injected\n", db.now)
        .await;
    let mine = db
        .store
        .scope(a.id)
        .append_log(run.id, 0, "plan", "line 0\n", db.now)
        .await;
    assert!(
        is_not_found(&r),
        "org B appended to org A's log: {r:?}; A's own first append then: {mine:?}"
    );
    assert!(mine.is_ok(), "org A cannot append its first log chunk: {mine:?}");
}

db_tests!(
    reads_across_organizations_find_nothing,
    writes_across_organizations_are_not_found,
    state_lock_through_another_organization_is_not_found,
    state_write_through_another_organization_is_not_found,
    state_delete_through_another_organization_is_not_found,
    run_plan_through_another_organization_is_not_found,
    run_log_through_another_organization_is_not_found,
);
