//! Stack slugs are unique per organization.

use terraplane_store::StoreError;

use crate::harness::{TestDb, db_tests, new_stack};

async fn duplicate_stack_slug_is_a_conflict_naming_the_slug(db: &TestDb) {
    let a = db.org("org-a").await;
    let b = db.org("org-b").await;
    db.stack(a.id, "network").await;
    let err = db
        .store
        .scope(a.id)
        .create_stack(new_stack("network"), db.now)
        .await
        .unwrap_err();
    match err {
        StoreError::Conflict(m) => assert!(m.contains("\"network\""), "message does not name the slug: {m}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(db.store.scope(a.id).list_stacks().await.unwrap().len(), 1);
    // The same slug in another organization is another stack.
    let other = db.stack(b.id, "network").await;
    assert_eq!(other.org_id, b.id);
}

async fn stack_update_lock_and_delete(db: &TestDb) {
    let a = db.org("org-a").await;
    let scope = db.store.scope(a.id);
    let stack = db.stack(a.id, "network").await;
    assert_eq!(stack.labels, vec!["team:core".to_owned()]);
    let patch = terraplane_store::StackPatch {
        name: Some("Net".into()),
        autodeploy: Some(true),
        ..Default::default()
    };
    let updated = scope.update_stack("network", patch, db.now).await.unwrap();
    assert_eq!((updated.name.as_str(), updated.autodeploy), ("Net", true));

    let locked = scope
        .lock_stack("network", "alice", Some("migrating".into()), db.now)
        .await
        .unwrap();
    assert_eq!(locked.lock.as_ref().map(|l| l.holder.as_str()), Some("alice"));
    match scope.lock_stack("network", "bob", None, db.now).await {
        Err(StoreError::Conflict(m)) => assert!(m.contains("alice"), "{m}"),
        other => panic!("expected a conflict naming alice, got {other:?}"),
    }
    // A tracked run by someone else than the lock holder is refused.
    let refused = scope
        .create_run(
            crate::harness::new_run(stack.id, terraplane_domain::RunType::Tracked),
            "bob",
            db.now,
        )
        .await;
    assert!(
        matches!(refused, Err(StoreError::Conflict(ref m)) if m.contains("alice")),
        "{refused:?}"
    );
    assert!(matches!(
        scope.unlock_stack("network", "bob", false).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(scope.unlock_stack("network", "bob", true).await.unwrap().lock.is_none());

    // Deleting is refused while a run is in progress.
    let run = db.run(a.id, stack.id, terraplane_domain::RunType::Tracked).await;
    assert!(matches!(
        scope.delete_stack("network").await,
        Err(StoreError::Conflict(_))
    ));
    scope.cancel_run(run.id, "alice", db.now).await.unwrap();
    scope.delete_stack("network").await.unwrap();
    assert!(matches!(scope.get_stack(stack.id).await, Err(StoreError::NotFound(_))));
    assert!(matches!(scope.get_run(run.id).await, Err(StoreError::NotFound(_))));
}

db_tests!(
    duplicate_stack_slug_is_a_conflict_naming_the_slug,
    stack_update_lock_and_delete
);
