//! Spaces (a tree per organization with a root space), teams, role bindings, and the
//! space of each stack. Every existing organization gets its root space and every existing
//! stack is moved into it; organization admins become owners.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, Statement};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261130_000002_create_spaces_teams_bindings"
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
                .table(n("spaces"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("slug"), 63))
                .col(string(n("name")))
                .col(text(n("description")))
                .col(string_len_null(n("parent_id"), 36))
                .col(boolean(n("inherit")))
                .col(timestamp_with_time_zone(n("created_at")))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(n("teams"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("slug"), 63))
                .col(string(n("name")))
                .col(timestamp_with_time_zone(n("created_at")))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(n("team_members"))
                .col(string_len(n("team_id"), 36))
                .col(string_len(n("user_id"), 36))
                .col(string_len(n("org_id"), 36))
                .col(timestamp_with_time_zone(n("created_at")))
                .primary_key(Index::create().col(n("team_id")).col(n("user_id")))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(n("role_bindings"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("space_id"), 36))
                .col(string(n("subject_kind")))
                .col(string_len(n("subject_id"), 36))
                .col(string(n("role")))
                .col(timestamp_with_time_zone(n("created_at")))
                .to_owned(),
        )
        .await?;
        for (table, name, cols, unique) in [
            ("spaces", "ux_spaces_org_slug", vec!["org_id", "slug"], true),
            ("spaces", "ix_spaces_parent", vec!["parent_id"], false),
            ("teams", "ux_teams_org_slug", vec!["org_id", "slug"], true),
            ("team_members", "ix_team_members_user", vec!["user_id"], false),
            (
                "role_bindings",
                "ux_role_bindings_subject",
                vec!["space_id", "subject_kind", "subject_id"],
                true,
            ),
            (
                "role_bindings",
                "ix_role_bindings_org",
                vec!["org_id", "subject_kind", "subject_id"],
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
                .table(n("stacks"))
                .add_column(string_len_null(n("space_id"), 36))
                .to_owned(),
        )
        .await?;
        m.alter_table(
            Table::alter()
                .table(n("api_keys"))
                .add_column(ColumnDef::new(n("kind")).string().not_null().default("service"))
                .to_owned(),
        )
        .await?;

        // Backfill: a root space per organization, existing stacks into it.
        let db = m.get_connection();
        let backend = db.get_database_backend();
        let orgs = db
            .query_all_raw(Statement::from_string(backend, "SELECT id FROM organizations"))
            .await?;
        for row in orgs {
            let org: String = row.try_get("", "id")?;
            let space = uuid::Uuid::now_v7().to_string();
            db.execute_raw(Statement::from_sql_and_values(
                backend,
                match backend {
                    sea_orm_migration::sea_orm::DatabaseBackend::Postgres => {
                        "INSERT INTO spaces (id, org_id, slug, name, description, parent_id, inherit, created_at) \
                         VALUES ($1, $2, 'root', 'Root', '', NULL, false, CURRENT_TIMESTAMP)"
                    }
                    _ => {
                        "INSERT INTO spaces (id, org_id, slug, name, description, parent_id, inherit, created_at) \
                         VALUES (?, ?, 'root', 'Root', '', NULL, false, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
                    }
                },
                [space.clone().into(), org.clone().into()],
            ))
            .await?;
            db.execute_raw(Statement::from_sql_and_values(
                backend,
                match backend {
                    sea_orm_migration::sea_orm::DatabaseBackend::Postgres => {
                        "UPDATE stacks SET space_id = $1 WHERE org_id = $2"
                    }
                    _ => "UPDATE stacks SET space_id = ? WHERE org_id = ?",
                },
                [space.into(), org.into()],
            ))
            .await?;
        }
        db.execute_unprepared("UPDATE memberships SET role = 'owner' WHERE role = 'admin'")
            .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(Table::alter().table(n("api_keys")).drop_column(n("kind")).to_owned())
            .await?;
        m.alter_table(Table::alter().table(n("stacks")).drop_column(n("space_id")).to_owned())
            .await?;
        for t in ["role_bindings", "team_members", "teams", "spaces"] {
            m.drop_table(Table::drop().table(n(t)).to_owned()).await?;
        }
        Ok(())
    }
}
