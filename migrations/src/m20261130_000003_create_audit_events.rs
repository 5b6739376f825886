//! The audit trail: one hash chain per organization (`seq` 1, 2, …; each event's hash
//! covers its fields and the previous event's hash).

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261130_000003_create_audit_events"
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
                .table(n("audit_events"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(big_integer(n("seq")))
                .col(string(n("actor")))
                .col(string(n("action")))
                .col(string(n("target_kind")))
                .col(string(n("target")))
                .col(text_null(n("before")))
                .col(text_null(n("after")))
                .col(string_null(n("request_id")))
                .col(string_null(n("client_ip")))
                .col(timestamp_with_time_zone(n("created_at")))
                .col(string_len(n("prev_hash"), 64))
                .col(string_len(n("hash"), 64))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ux_audit_events_org_seq")
                .table(n("audit_events"))
                .col(n("org_id"))
                .col(n("seq"))
                .unique()
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_audit_events_org_time")
                .table(n("audit_events"))
                .col(n("org_id"))
                .col(n("created_at"))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(n("audit_events")).to_owned()).await
    }
}
