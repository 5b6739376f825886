//! Database migrations, shared by SQLite and PostgreSQL. A merged migration is never
//! edited: add a new one.

pub use sea_orm_migration::prelude::*;

mod m20261130_000001_create_core_tables;
mod m20261130_000002_create_spaces_teams_bindings;
mod m20261130_000003_create_audit_events;
mod m20261130_000004_create_audit_delivery;
mod m20261130_000005_create_sessions;
mod m20261130_000006_create_sso;
mod m20261130_000007_create_org_keys;
mod m20261130_000008_create_contexts_and_identity;
mod m20261130_000009_create_drift;
mod m20261130_000010_create_notifications;
mod m20261130_000011_index_runs_by_stack;
mod m20261130_000012_create_policies;

pub struct Migrator;

impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261130_000001_create_core_tables::Migration),
            Box::new(m20261130_000002_create_spaces_teams_bindings::Migration),
            Box::new(m20261130_000003_create_audit_events::Migration),
            Box::new(m20261130_000004_create_audit_delivery::Migration),
            Box::new(m20261130_000005_create_sessions::Migration),
            Box::new(m20261130_000006_create_sso::Migration),
            Box::new(m20261130_000007_create_org_keys::Migration),
            Box::new(m20261130_000008_create_contexts_and_identity::Migration),
            Box::new(m20261130_000009_create_drift::Migration),
            Box::new(m20261130_000010_create_notifications::Migration),
            Box::new(m20261130_000011_index_runs_by_stack::Migration),
            Box::new(m20261130_000012_create_policies::Migration),
        ]
    }
}
