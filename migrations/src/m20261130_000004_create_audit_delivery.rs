//! Delivery of audit events to a webhook: one cursor per organization (the outbox is the
//! audit table itself; the cursor says how far delivery got).

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261130_000004_create_audit_delivery"
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
                .table(n("audit_delivery"))
                .col(string_len(n("org_id"), 36).primary_key())
                .col(big_integer(n("last_seq")))
                .col(integer(n("failures")))
                .col(timestamp_with_time_zone_null(n("next_attempt_at")))
                .col(text_null(n("last_error")))
                .col(timestamp_with_time_zone(n("updated_at")))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(n("audit_delivery")).to_owned()).await
    }
}
