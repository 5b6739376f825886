//! Contexts and variables (environment, Terraform and file values, plain or sealed),
//! context attachments, the OIDC issuer's signing keys, AWS integrations, and which master
//! key wraps each organization's data key (for `terraplane keys rotate`).

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261130_000008_create_contexts_and_identity"
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
                .table(n("contexts"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("space_id"), 36))
                .col(string_len(n("slug"), 63))
                .col(string(n("name")))
                .col(text(n("description")))
                .col(text(n("labels")))
                .col(timestamp_with_time_zone(n("created_at")))
                .col(timestamp_with_time_zone(n("updated_at")))
                .to_owned(),
        )
        .await?;
        // One table for the values of stacks and of contexts: `owner` is "stack:<id>" or
        // "context:<id>". A secret's value is sealed with the organization's data key.
        m.create_table(
            Table::create()
                .table(n("config_values"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("owner"), 64))
                .col(string_len(n("kind"), 16))
                .col(string_len(n("name"), 512))
                .col(blob(n("value")))
                .col(boolean(n("secret")))
                .col(boolean(n("apply_only")))
                .col(string_len(n("checksum"), 64))
                .col(timestamp_with_time_zone(n("created_at")))
                .col(timestamp_with_time_zone(n("updated_at")))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(n("context_attachments"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("context_id"), 36))
                .col(string_len(n("stack_id"), 36))
                .col(integer(n("priority")))
                .col(timestamp_with_time_zone(n("created_at")))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(n("oidc_keys"))
                .col(string_len(n("kid"), 64).primary_key())
                .col(blob(n("private_key")))
                .col(text(n("public_jwk")))
                .col(string_len(n("master_key_id"), 16))
                .col(timestamp_with_time_zone(n("created_at")))
                .col(timestamp_with_time_zone_null(n("retired_at")))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(n("aws_integrations"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("space_id"), 36))
                .col(string_len(n("slug"), 63))
                .col(string(n("name")))
                .col(string_len(n("role_arn"), 2048))
                .col(string_len_null(n("read_role_arn"), 2048))
                .col(string_len_null(n("audience"), 512))
                .col(integer(n("duration_secs")))
                .col(timestamp_with_time_zone(n("created_at")))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(n("aws_attachments"))
                .col(string_len(n("stack_id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("integration_id"), 36))
                .col(timestamp_with_time_zone(n("created_at")))
                .to_owned(),
        )
        .await?;
        for (table, name, cols, unique) in [
            ("contexts", "ux_contexts_org_slug", vec!["org_id", "slug"], true),
            (
                "config_values",
                "ux_config_values_owner_name",
                vec!["owner", "name"],
                true,
            ),
            ("config_values", "ix_config_values_org", vec!["org_id"], false),
            (
                "context_attachments",
                "ux_context_attachments",
                vec!["context_id", "stack_id"],
                true,
            ),
            (
                "context_attachments",
                "ix_context_attachments_stack",
                vec!["stack_id"],
                false,
            ),
            (
                "aws_integrations",
                "ux_aws_integrations_org_slug",
                vec!["org_id", "slug"],
                true,
            ),
            (
                "aws_attachments",
                "ix_aws_attachments_integration",
                vec!["integration_id"],
                false,
            ),
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
        m.alter_table(
            Table::alter()
                .table(n("org_keys"))
                .add_column(ColumnDef::new(n("master_key_id")).string_len(16).not_null().default(""))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for t in [
            "aws_attachments",
            "aws_integrations",
            "oidc_keys",
            "context_attachments",
            "config_values",
            "contexts",
        ] {
            m.drop_table(Table::drop().table(n(t)).to_owned()).await?;
        }
        m.alter_table(
            Table::alter()
                .table(n("org_keys"))
                .drop_column(n("master_key_id"))
                .to_owned(),
        )
        .await
    }
}
