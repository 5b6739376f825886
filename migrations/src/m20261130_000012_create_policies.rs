//! Rego policies (per space, typed, with labels for `autoattach:<label>`), every version of
//! each, attachments to stacks, stored evaluations (policy version, input hash, outcome,
//! messages) with the inputs they read, samples for policy development, and run reviews.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261130_000012_create_policies"
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
                .table(n("policies"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("space_id"), 36))
                .col(string_len(n("slug"), 63))
                .col(string(n("name")))
                .col(string_len(n("policy_type"), 16))
                .col(text(n("description")))
                .col(text(n("labels")))
                .col(text(n("body")))
                .col(integer(n("version")))
                .col(timestamp_with_time_zone(n("created_at")))
                .col(timestamp_with_time_zone(n("updated_at")))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(n("policy_versions"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("policy_id"), 36))
                .col(integer(n("version")))
                .col(text(n("body")))
                .col(text(n("labels")))
                .col(string(n("created_by")))
                .col(timestamp_with_time_zone(n("created_at")))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(n("policy_attachments"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("policy_id"), 36))
                .col(string_len(n("stack_id"), 36))
                .col(timestamp_with_time_zone(n("created_at")))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(n("policy_evaluations"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("policy_id"), 36))
                .col(integer(n("policy_version")))
                .col(string_len(n("policy_type"), 16))
                .col(string_len_null(n("run_id"), 36))
                .col(string_len_null(n("stack_id"), 36))
                .col(string_len(n("subject"), 255))
                .col(string_len(n("input_hash"), 64))
                .col(string_len(n("outcome"), 16))
                .col(text(n("messages")))
                .col(text(n("result")))
                .col(timestamp_with_time_zone(n("created_at")))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(n("policy_inputs"))
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("input_hash"), 64))
                .col(string_len(n("policy_type"), 16))
                .col(text(n("input")))
                .col(timestamp_with_time_zone(n("created_at")))
                .primary_key(Index::create().col(n("org_id")).col(n("input_hash")))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(n("policy_samples"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("policy_id"), 36))
                .col(string_len(n("evaluation_id"), 36))
                .col(string_len(n("input_hash"), 64))
                .col(timestamp_with_time_zone(n("created_at")))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(n("run_reviews"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("run_id"), 36))
                .col(string(n("reviewer")))
                .col(string(n("reviewer_name")))
                .col(text(n("teams")))
                .col(string_len(n("stage"), 16))
                .col(string_len(n("decision"), 16))
                .col(text(n("note")))
                .col(string_len_null(n("remote_ip"), 64))
                .col(timestamp_with_time_zone(n("created_at")))
                .to_owned(),
        )
        .await?;
        m.alter_table(
            Table::alter()
                .table(n("runs"))
                .add_column(string_len_null(n("review_stage"), 32))
                .to_owned(),
        )
        .await?;
        // A login policy's `admin`: the session acts as an organization owner.
        m.alter_table(
            Table::alter()
                .table(n("sessions"))
                .add_column(boolean(n("policy_admin")).default(false))
                .to_owned(),
        )
        .await?;
        for (table, name, cols, unique) in [
            ("policies", "ux_policies_org_slug", vec!["org_id", "slug"], true),
            (
                "policy_versions",
                "ux_policy_versions",
                vec!["policy_id", "version"],
                true,
            ),
            (
                "policy_attachments",
                "ux_policy_attachments",
                vec!["policy_id", "stack_id"],
                true,
            ),
            (
                "policy_attachments",
                "ix_policy_attachments_stack",
                vec!["stack_id"],
                false,
            ),
            (
                "policy_evaluations",
                "ix_policy_evaluations_run",
                vec!["run_id", "created_at"],
                false,
            ),
            (
                "policy_evaluations",
                "ix_policy_evaluations_policy",
                vec!["policy_id", "created_at"],
                false,
            ),
            (
                "policy_samples",
                "ix_policy_samples_policy",
                vec!["policy_id", "created_at"],
                false,
            ),
            ("run_reviews", "ix_run_reviews_run", vec!["run_id", "created_at"], false),
            // A stack's unfinished runs (the scheduler's blocker and dispatch reads) by point
            // lookups, however long its history.
            ("runs", "ix_runs_stack_state", vec!["stack_id", "state"], false),
        ] {
            let mut i = Index::create();
            i.name(name).table(n(table));
            for c in cols {
                i.col(n(c));
            }
            if unique {
                i.unique();
            }
            m.create_index(i.to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(n("sessions"))
                .drop_column(n("policy_admin"))
                .to_owned(),
        )
        .await?;
        m.drop_index(Index::drop().name("ix_runs_stack_state").table(n("runs")).to_owned())
            .await?;
        m.alter_table(
            Table::alter()
                .table(n("runs"))
                .drop_column(n("review_stage"))
                .to_owned(),
        )
        .await?;
        for t in [
            "run_reviews",
            "policy_samples",
            "policy_inputs",
            "policy_evaluations",
            "policy_attachments",
            "policy_versions",
            "policies",
        ] {
            m.drop_table(Table::drop().table(n(t)).to_owned()).await?;
        }
        Ok(())
    }
}
