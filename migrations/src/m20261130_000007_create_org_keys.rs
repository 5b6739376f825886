//! Per-organization data keys for encryption at rest, stored wrapped by the master key.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261130_000007_create_org_keys"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(Alias::new("org_keys"))
                .col(string_len(Alias::new("org_id"), 36).primary_key())
                .col(blob(Alias::new("wrapped_key")))
                .col(timestamp_with_time_zone(Alias::new("created_at")))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(Alias::new("org_keys")).to_owned())
            .await
    }
}
