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

/// Data written before the spaces migration lands in each organization's root space, and
/// organization admins become owners.
async fn spaces_migration_backfills_existing_data(db: &TestDb) {
    let conn = Database::connect(&db.url).await.unwrap();
    Migrator::down(&conn, None).await.unwrap();
    Migrator::up(&conn, Some(1)).await.unwrap();
    let (org, user, stack) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    let ts = "'2026-01-01T00:00:00Z'";
    for sql in [
        format!("INSERT INTO organizations (id, slug, name, created_at) VALUES ('{org}', 'old', 'Old', {ts})"),
        format!(
            "INSERT INTO users (id, email, name, password_hash, is_admin, created_at) VALUES ('{user}', 'o@x.io', 'O', NULL, false, {ts})"
        ),
        format!(
            "INSERT INTO memberships (org_id, user_id, role, created_at) VALUES ('{org}', '{user}', 'admin', {ts})"
        ),
        format!(
            "INSERT INTO stacks (id, org_id, slug, name, description, repository, branch, project_root, tool, tool_version, \
             autodeploy, labels, worker_pool, locked_by, lock_note, locked_at, created_at, updated_at) VALUES \
             ('{stack}', '{org}', 'legacy', 'Legacy', '', 'file:///x', 'main', '', 'terraform', NULL, false, '[]', 'default', NULL, NULL, NULL, {ts}, {ts})"
        ),
    ] {
        conn.execute_unprepared(&sql).await.unwrap();
    }
    Migrator::up(&conn, None).await.unwrap();
    conn.close().await.unwrap();

    let store = Store::connect(&db.url, 2).await.unwrap();
    let org = store.get_org_by_slug("old").await.unwrap();
    let scope = store.scope(org.id);
    let root = scope.root_space().await.unwrap();
    assert_eq!(root.parent_id, None);
    let legacy = scope.get_stack_by_slug("legacy").await.unwrap();
    assert_eq!(legacy.space_id, root.id);
    let user = store.get_user_by_email("o@x.io").await.unwrap();
    assert_eq!(scope.member_role(user.id).await.unwrap().as_deref(), Some("owner"));
    let access = scope.user_access(user.id).await.unwrap().unwrap();
    assert!(access.is_owner());
}

db_tests!(
    migrations_go_down_and_up_again,
    spaces_migration_backfills_existing_data
);
