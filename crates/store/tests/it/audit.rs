//! The audit chain: appended in the same transaction as the change (or not at all),
//! verified end to end, and a row altered or deleted behind the store's back is named.

use sea_orm::{ConnectionTrait, Database};
use terraplane_store::{AuditFilter, ChainCheck, NewAuditEvent};

use crate::harness::{TestDb, db_tests, new_stack};

fn ev(action: &str, target: &str) -> NewAuditEvent {
    NewAuditEvent {
        actor: "alice@example.com".into(),
        action: action.into(),
        target_kind: "stack".into(),
        target: target.into(),
        after: Some(serde_json::json!({ "slug": target })),
        request_id: Some("req-1".into()),
        client_ip: Some("127.0.0.1".into()),
        ..Default::default()
    }
}

async fn chain_verifies_and_names_tampering(db: &TestDb) {
    let org = db.org("acme").await;
    let other = db.org("other").await;
    let scope = db.store.scope(org.id);
    for i in 0..5 {
        scope
            .append_audit(ev("stack.create", &format!("s{i}")), db.now)
            .await
            .unwrap();
    }
    db.store
        .scope(other.id)
        .append_audit(ev("stack.create", "theirs"), db.now)
        .await
        .unwrap();
    assert_eq!(scope.verify_audit().await.unwrap(), ChainCheck::Intact { events: 5 });
    let all = scope
        .list_audit(&AuditFilter {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [5, 4, 3, 2, 1],
        "own chain, newest first"
    );
    assert_eq!(all[4].prev_hash, terraplane_store::audit::GENESIS);
    assert_eq!(all[0].prev_hash, all[1].hash);
    let filtered = scope
        .list_audit(&AuditFilter {
            target: Some("s3".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(filtered.len(), 1);
    assert_eq!(filtered[0].seq, 4);

    let conn = Database::connect(&db.url).await.unwrap();
    // Altering one row's content breaks its own hash.
    conn.execute_unprepared(&format!(
        "UPDATE audit_events SET actor = 'mallory' WHERE org_id = '{}' AND seq = 3",
        org.id
    ))
    .await
    .unwrap();
    match scope.verify_audit().await.unwrap() {
        ChainCheck::Altered { seq, id } => {
            assert_eq!(seq, 3);
            assert_eq!(id, all[2].id);
        }
        other => panic!("tampering not detected: {other:?}"),
    }
    // Removing a row leaves a gap that is named too (after restoring the altered one).
    conn.execute_unprepared(&format!(
        "UPDATE audit_events SET actor = 'alice@example.com' WHERE org_id = '{}' AND seq = 3",
        org.id
    ))
    .await
    .unwrap();
    assert_eq!(scope.verify_audit().await.unwrap(), ChainCheck::Intact { events: 5 });
    conn.execute_unprepared(&format!(
        "DELETE FROM audit_events WHERE org_id = '{}' AND seq = 2",
        org.id
    ))
    .await
    .unwrap();
    assert_eq!(scope.verify_audit().await.unwrap(), ChainCheck::Missing { seq: 2 });
    // The other organization's chain is untouched.
    assert_eq!(
        db.store.scope(other.id).verify_audit().await.unwrap(),
        ChainCheck::Intact { events: 1 }
    );
    conn.close().await.unwrap();
}

async fn audit_commits_with_the_change_or_not_at_all(db: &TestDb) {
    let org = db.org("acme").await;
    // Committed: the stack and its event are both there.
    let tx = db.store.begin().await.unwrap();
    tx.scope(org.id).create_stack(new_stack("kept"), db.now).await.unwrap();
    tx.scope(org.id)
        .append_audit(ev("stack.create", "kept"), db.now)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    // Dropped without commit: neither is.
    let tx = db.store.begin().await.unwrap();
    tx.scope(org.id).create_stack(new_stack("lost"), db.now).await.unwrap();
    tx.scope(org.id)
        .append_audit(ev("stack.create", "lost"), db.now)
        .await
        .unwrap();
    drop(tx);
    let scope = db.store.scope(org.id);
    assert!(scope.get_stack_by_slug("kept").await.is_ok());
    assert!(scope.get_stack_by_slug("lost").await.is_err());
    let events = scope
        .list_audit(&AuditFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(events.iter().map(|e| e.target.as_str()).collect::<Vec<_>>(), ["kept"]);
    assert_eq!(scope.verify_audit().await.unwrap(), ChainCheck::Intact { events: 1 });
}

db_tests!(
    chain_verifies_and_names_tampering,
    audit_commits_with_the_change_or_not_at_all
);
