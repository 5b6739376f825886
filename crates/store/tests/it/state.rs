//! State storage for the HTTP backend: versions are checked against the latest one and
//! the lock in one transaction; a rejected write changes nothing.

use sha2::{Digest, Sha256};
use terraplane_domain::state::{StateError, StateMeta, parse_state};
use terraplane_domain::{OrgId, StackId};
use terraplane_store::{LockOutcome, NewLock, NewStateVersion, StoreError, WriteOutcome};

use crate::harness::{TestDb, db_tests};

pub fn state_body(serial: i64, lineage: &str, marker: &str) -> Vec<u8> {
    format!(r#"{{"version":4,"serial":{serial},"lineage":"{lineage}","outputs":{{"m":{{"value":"{marker}","type":"string"}}}}}}"#)
        .into_bytes()
}

/// Writes `body` to the stack's state through `org`'s scope.
pub async fn write(db: &TestDb, org: OrgId, stack: StackId, body: &[u8], lock_id: Option<&str>) -> WriteOutcome {
    let meta: StateMeta = parse_state(body).unwrap();
    let v = NewStateVersion {
        body,
        meta: &meta,
        md5: "0".repeat(32),
        sha256: hex::encode(Sha256::digest(body)),
        outputs: terraplane_domain::state::outputs(body),
        run_id: None,
        created_by: "alice".into(),
    };
    db.store
        .scope(org)
        .write_state(stack, v, lock_id, db.now)
        .await
        .unwrap()
}

pub fn lock(id: &str, holder: &str) -> NewLock {
    NewLock {
        lock_id: id.into(),
        info: format!(r#"{{"ID":"{id}","Who":"{holder}"}}"#),
        holder: holder.into(),
        run_id: None,
    }
}

async fn current_body(db: &TestDb, org: OrgId, stack: StackId) -> Option<Vec<u8>> {
    db.store
        .scope(org)
        .get_current_state(stack)
        .await
        .unwrap()
        .map(|(_, b)| b)
}

async fn version_count(db: &TestDb, org: OrgId, stack: StackId) -> usize {
    db.store.scope(org).list_state_versions(stack).await.unwrap().len()
}

async fn state_write_rules(db: &TestDb) {
    let a = db.org("org-a").await;
    let stack = db.stack(a.id, "network").await.id;
    assert!(current_body(db, a.id, stack).await.is_none());

    let v1 = state_body(1, "L", "one");
    match write(db, a.id, stack, &v1, None).await {
        WriteOutcome::Stored(v) => {
            assert_eq!((v.version, v.serial, v.lineage.as_deref()), (1, Some(1), Some("L")));
            assert_eq!(v.size, v1.len() as i64);
            assert_eq!(v.outputs["m"]["value"], "one");
        }
        other => panic!("expected Stored, got {other:?}"),
    }
    // An identical retry stores nothing.
    assert!(matches!(write(db, a.id, stack, &v1, None).await, WriteOutcome::AlreadyStored(v) if v.version == 1));

    let rejected = [
        (state_body(1, "L", "other"), StateError::SerialReused(1)),
        (
            state_body(0, "L", "older"),
            StateError::StaleSerial { new: 0, stored: 1 },
        ),
        (
            state_body(5, "M", "foreign"),
            StateError::LineageMismatch {
                new: "M".into(),
                stored: "L".into(),
            },
        ),
    ];
    for (body, expected) in rejected {
        match write(db, a.id, stack, &body, None).await {
            WriteOutcome::Rejected(e) => assert_eq!(e, expected),
            other => panic!("expected Rejected({expected:?}), got {other:?}"),
        }
        assert_eq!(version_count(db, a.id, stack).await, 1);
        assert_eq!(current_body(db, a.id, stack).await.as_deref(), Some(v1.as_slice()));
    }

    let v2 = state_body(2, "L", "two");
    assert!(matches!(write(db, a.id, stack, &v2, None).await, WriteOutcome::Stored(v) if v.version == 2));
    assert_eq!(current_body(db, a.id, stack).await.as_deref(), Some(v2.as_slice()));
    let (old, bytes) = db.store.scope(a.id).get_state_by_serial(stack, 1).await.unwrap();
    assert_eq!((old.version, bytes), (1, v1));
    let versions: Vec<i64> = db
        .store
        .scope(a.id)
        .list_state_versions(stack)
        .await
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(versions, vec![2, 1]);
}

async fn state_writes_respect_the_lock(db: &TestDb) {
    let a = db.org("org-a").await;
    let stack = db.stack(a.id, "network").await.id;
    let scope = db.store.scope(a.id);
    write(db, a.id, stack, &state_body(1, "L", "one"), None).await;
    assert!(matches!(
        scope.lock_state(stack, lock("L1", "alice"), db.now).await.unwrap(),
        LockOutcome::Acquired(_)
    ));

    let v2 = state_body(2, "L", "two");
    for lock_id in [None, Some("someone-else")] {
        match write(db, a.id, stack, &v2, lock_id).await {
            WriteOutcome::Locked(l) => assert_eq!((l.lock_id.as_str(), l.holder.as_str()), ("L1", "alice")),
            other => panic!("write with lock id {lock_id:?} over a held lock: {other:?}"),
        }
        assert_eq!(version_count(db, a.id, stack).await, 1);
    }
    assert!(matches!(write(db, a.id, stack, &v2, Some("L1")).await, WriteOutcome::Stored(v) if v.version == 2));

    assert!(scope.unlock_state(stack, Some("L1"), false).await.unwrap().is_ok());
    let v3 = state_body(3, "L", "three");
    assert!(matches!(
        write(db, a.id, stack, &v3, Some("L1")).await,
        WriteOutcome::LockNotHeld
    ));
    assert_eq!(version_count(db, a.id, stack).await, 2);
    assert!(matches!(write(db, a.id, stack, &v3, None).await, WriteOutcome::Stored(v) if v.version == 3));
}

async fn lock_and_unlock(db: &TestDb) {
    let a = db.org("org-a").await;
    let stack = db.stack(a.id, "network").await.id;
    let scope = db.store.scope(a.id);
    assert!(scope.get_state_lock(stack).await.unwrap().is_none());

    match scope.lock_state(stack, lock("L1", "alice"), db.now).await.unwrap() {
        LockOutcome::Acquired(l) => {
            assert_eq!(
                (l.lock_id.as_str(), l.holder.as_str(), l.needs_recovery),
                ("L1", "alice", false)
            );
            assert!(l.info.contains("alice"));
        }
        other => panic!("{other:?}"),
    }
    // Re-locking with the same id is idempotent; another id sees the holder.
    assert!(
        matches!(scope.lock_state(stack, lock("L1", "alice"), db.now).await.unwrap(), LockOutcome::Acquired(l) if l.lock_id == "L1")
    );
    match scope.lock_state(stack, lock("L2", "bob"), db.now).await.unwrap() {
        LockOutcome::Held(l) => assert_eq!((l.lock_id.as_str(), l.holder.as_str()), ("L1", "alice")),
        other => panic!("a second lock was granted: {other:?}"),
    }

    // Unlocking needs the holder's id unless forced.
    for id in [Some("L2"), None] {
        let held = scope.unlock_state(stack, id, false).await.unwrap().unwrap_err();
        assert_eq!(held.lock_id, "L1");
    }
    assert!(scope.get_state_lock(stack).await.unwrap().is_some());
    match scope.delete_state(stack).await {
        Err(StoreError::Conflict(m)) => assert!(m.contains("alice"), "{m}"),
        other => panic!("state deleted under a lock: {other:?}"),
    }
    let released = scope.unlock_state(stack, Some("L1"), false).await.unwrap().unwrap();
    assert_eq!(released.lock_id, "L1");
    assert!(scope.get_state_lock(stack).await.unwrap().is_none());
    assert!(matches!(
        scope.unlock_state(stack, Some("L1"), false).await,
        Err(StoreError::NotFound(_))
    ));

    assert!(matches!(
        scope.lock_state(stack, lock("L2", "bob"), db.now).await.unwrap(),
        LockOutcome::Acquired(_)
    ));
    let forced = scope.unlock_state(stack, None, true).await.unwrap().unwrap();
    assert_eq!(forced.holder, "bob");
    assert!(scope.get_state_lock(stack).await.unwrap().is_none());

    // Without a lock, the state can be deleted.
    write(db, a.id, stack, &state_body(1, "L", "one"), None).await;
    assert_eq!(scope.delete_state(stack).await.unwrap(), 1);
    assert!(current_body(db, a.id, stack).await.is_none());
}

async fn needs_recovery_flag_is_set_and_cleared_by_unlock(db: &TestDb) {
    let a = db.org("org-a").await;
    let stack = db.stack(a.id, "network").await.id;
    let scope = db.store.scope(a.id);
    scope.lock_state(stack, lock("L1", "runner"), db.now).await.unwrap();
    scope.mark_lock_recovery(stack).await.unwrap();
    assert!(scope.get_state_lock(stack).await.unwrap().unwrap().needs_recovery);
    scope.unlock_state(stack, None, true).await.unwrap().unwrap();
    let fresh = scope.lock_state(stack, lock("L2", "alice"), db.now).await.unwrap();
    assert!(matches!(fresh, LockOutcome::Acquired(l) if !l.needs_recovery));
}

db_tests!(
    state_write_rules,
    state_writes_respect_the_lock,
    lock_and_unlock,
    needs_recovery_flag_is_set_and_cleared_by_unlock
);
