//! The migrations go down and come back up on both backends, leaving a usable schema.

use sea_orm::{ConnectionTrait, Database};
use terraplane_migration::{Migrator, MigratorTrait};
use terraplane_store::{Store, StoreError};

use crate::harness::{TestDb, db_tests, new_stack};

async fn migrations_go_down_and_up_again(db: &TestDb) {
    let org = db.org("acme").await;
    let conn = Database::connect(&db.url).await.unwrap();
    assert!(Migrator::get_pending_migrations(&conn).await.unwrap().is_empty());
    let applied = Migrator::get_applied_migrations(&conn).await.unwrap().len();
    assert!(applied >= 1);

    Migrator::down(&conn, None).await.unwrap();
    assert!(Migrator::get_applied_migrations(&conn).await.unwrap().is_empty());
    for table in [
        "organizations",
        "stacks",
        "runs",
        "log_chunks",
        "state_versions",
        "state_locks",
    ] {
        let r = conn.execute_unprepared(&format!("SELECT 1 FROM {table}")).await;
        assert!(r.is_err(), "table {table} survived the down migration");
    }

    Migrator::up(&conn, None).await.unwrap();
    assert!(Migrator::get_pending_migrations(&conn).await.unwrap().is_empty());
    assert_eq!(Migrator::get_applied_migrations(&conn).await.unwrap().len(), applied);
    conn.close().await.unwrap();

    // A fresh connection sees an empty, fully working schema (indexes included).
    let store = Store::connect(&db.url, 2).await.unwrap();
    store.migrate().await.unwrap();
    assert!(matches!(store.get_org(org.id).await, Err(StoreError::NotFound(_))));
    let org = store.create_org("acme", "Acme", db.now).await.unwrap();
    store
        .scope(org.id)
        .create_stack(new_stack("net"), db.now)
        .await
        .unwrap();
    let dup = store.scope(org.id).create_stack(new_stack("net"), db.now).await;
    assert!(
        matches!(dup, Err(StoreError::Conflict(_))),
        "unique slug index missing after re-up: {dup:?}"
    );
}

db_tests!(migrations_go_down_and_up_again);
