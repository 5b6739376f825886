//! Login sessions: a refresh token (stored hashed, rotated on every use; the previous
//! one is remembered to detect reuse) behind short-lived access tokens.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261130_000005_create_sessions"
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
                .table(n("sessions"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("user_id"), 36))
                .col(string_len_uniq(n("refresh_hash"), 64))
                .col(string_len_null(n("previous_hash"), 64))
                .col(timestamp_with_time_zone(n("created_at")))
                .col(timestamp_with_time_zone(n("expires_at")))
                .col(timestamp_with_time_zone_null(n("revoked_at")))
                .to_owned(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("ix_sessions_previous")
                .table(n("sessions"))
                .col(n("previous_hash"))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(n("sessions")).to_owned()).await
    }
}
