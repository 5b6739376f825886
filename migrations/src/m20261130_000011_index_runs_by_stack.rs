//! Runs by stack and time without the organization: the scheduler asks, per due drift
//! schedule, about a stack's latest tracked run and any check in progress.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261130_000011_index_runs_by_stack"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_index(
            Index::create()
                .name("ix_runs_stack_created")
                .table(Alias::new("runs"))
                .col(Alias::new("stack_id"))
                .col(Alias::new("created_at"))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_index(
            Index::drop()
                .name("ix_runs_stack_created")
                .table(Alias::new("runs"))
                .to_owned(),
        )
        .await
    }
}
