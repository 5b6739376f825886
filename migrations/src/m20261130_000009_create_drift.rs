//! Drift detection: schedules per stack (cron + time zone, next firing indexed so the
//! scheduler reads only what is due), drift records (open until a check finds the stack in
//! sync again), and each stack's drift status and reaction.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261130_000009_create_drift"
    }
}

fn n(s: &'static str) -> Alias {
    Alias::new(s)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(n("drift_schedules"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("stack_id"), 36))
                .col(string_len(n("cron"), 255))
                .col(string_len(n("timezone"), 64))
                .col(timestamp_with_time_zone(n("next_run_at")))
                .col(timestamp_with_time_zone(n("created_at")))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(n("drift_records"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("stack_id"), 36))
                .col(boolean(n("open")))
                .col(text(n("resources")))
                .col(string_len(n("last_run_id"), 36))
                .col(timestamp_with_time_zone(n("first_seen_at")))
                .col(timestamp_with_time_zone(n("last_seen_at")))
                .col(timestamp_with_time_zone_null(n("resolved_at")))
                .col(string_len_null(n("resolved_by_run_id"), 36))
                .to_owned(),
        )
        .await?;
        for (table, name, cols) in [
            ("drift_schedules", "ix_drift_schedules_due", vec!["next_run_at"]),
            ("drift_schedules", "ix_drift_schedules_stack", vec!["stack_id"]),
            ("drift_records", "ix_drift_records_stack", vec!["stack_id", "open"]),
            ("drift_records", "ix_drift_records_org", vec!["org_id", "open"]),
        ] {
            let mut i = Index::create();
            i.name(name).table(n(table));
            for c in cols {
                i.col(n(c));
            }
            m.create_index(i.to_owned()).await?;
        }
        for col in [
            ColumnDef::new(n("drift_status"))
                .string_len(16)
                .not_null()
                .default("UNKNOWN")
                .to_owned(),
            ColumnDef::new(n("drift_reaction"))
                .string_len(16)
                .not_null()
                .default("alert")
                .to_owned(),
            ColumnDef::new(n("drift_checked_at"))
                .timestamp_with_time_zone()
                .null()
                .to_owned(),
        ] {
            m.alter_table(Table::alter().table(n("stacks")).add_column(col).to_owned())
                .await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for t in ["drift_records", "drift_schedules"] {
            m.drop_table(Table::drop().table(n(t)).to_owned()).await?;
        }
        for c in ["drift_status", "drift_reaction", "drift_checked_at"] {
            m.alter_table(Table::alter().table(n("stacks")).drop_column(n(c)).to_owned())
                .await?;
        }
        Ok(())
    }
}
