//! The walking skeleton's tables: tenants, users, keys, stacks, runs and their artifacts,
//! state versions and locks. Ids are UUID text; every tenant-owned table has `org_id`.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261130_000001_create_core_tables"
    }
}

fn n(s: &'static str) -> Alias {
    Alias::new(s)
}

fn id() -> ColumnDef {
    string_len(n("id"), 36).primary_key().to_owned()
}

fn org() -> ColumnDef {
    string_len(n("org_id"), 36)
}

fn created() -> ColumnDef {
    timestamp_with_time_zone(n("created_at"))
}

fn index(table: &'static str, name: &'static str, cols: &[&'static str], unique: bool) -> IndexCreateStatement {
    let mut i = Index::create();
    i.name(name).table(n(table));
    for c in cols {
        i.col(n(c));
    }
    if unique {
        i.unique();
    }
    i.to_owned()
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let tables = [
            Table::create()
                .table(n("organizations"))
                .col(id())
                .col(string_len_uniq(n("slug"), 63))
                .col(string(n("name")))
                .col(created())
                .to_owned(),
            Table::create()
                .table(n("users"))
                .col(id())
                .col(string_uniq(n("email")))
                .col(string(n("name")))
                .col(string_null(n("password_hash")))
                .col(boolean(n("is_admin")))
                .col(created())
                .to_owned(),
            Table::create()
                .table(n("memberships"))
                .col(org())
                .col(string_len(n("user_id"), 36))
                .col(string(n("role")))
                .col(created())
                .primary_key(Index::create().col(n("org_id")).col(n("user_id")))
                .to_owned(),
            Table::create()
                .table(n("api_keys"))
                .col(id())
                .col(org())
                .col(string_len_null(n("user_id"), 36))
                .col(string(n("name")))
                .col(string_len_uniq(n("secret_hash"), 64))
                .col(string(n("role")))
                .col(created())
                .col(timestamp_with_time_zone_null(n("expires_at")))
                .col(timestamp_with_time_zone_null(n("revoked_at")))
                .col(timestamp_with_time_zone_null(n("last_used_at")))
                .to_owned(),
            Table::create()
                .table(n("stacks"))
                .col(id())
                .col(org())
                .col(string_len(n("slug"), 63))
                .col(string(n("name")))
                .col(text(n("description")))
                .col(text(n("repository")))
                .col(string(n("branch")))
                .col(string(n("project_root")))
                .col(string(n("tool")))
                .col(string_null(n("tool_version")))
                .col(boolean(n("autodeploy")))
                .col(text(n("labels")))
                .col(string(n("worker_pool")))
                .col(string_null(n("locked_by")))
                .col(text_null(n("lock_note")))
                .col(timestamp_with_time_zone_null(n("locked_at")))
                .col(created())
                .col(timestamp_with_time_zone(n("updated_at")))
                .to_owned(),
            Table::create()
                .table(n("runs"))
                .col(id())
                .col(org())
                .col(string_len(n("stack_id"), 36))
                .col(string(n("run_type")))
                .col(string(n("state")))
                .col(string_null(n("commit_sha")))
                .col(string(n("triggered_by")))
                .col(string(n("trigger_kind")))
                .col(boolean(n("drift_detection")))
                .col(integer_null(n("plan_add")))
                .col(integer_null(n("plan_change")))
                .col(integer_null(n("plan_destroy")))
                .col(boolean_null(n("has_changes")))
                .col(text_null(n("error")))
                .col(text_null(n("outputs")))
                .col(big_integer(n("fencing_token")))
                .col(string_null(n("runner_id")))
                .col(timestamp_with_time_zone_null(n("lease_expires_at")))
                .col(timestamp_with_time_zone_null(n("dispatched_at")))
                .col(timestamp_with_time_zone_null(n("held_since")))
                .col(boolean(n("cancel_requested")))
                .col(created())
                .col(timestamp_with_time_zone(n("updated_at")))
                .to_owned(),
            Table::create()
                .table(n("run_events"))
                .col(id())
                .col(org())
                .col(string_len(n("run_id"), 36))
                .col(string(n("state")))
                .col(text_null(n("note")))
                .col(created())
                .to_owned(),
            Table::create()
                .table(n("log_chunks"))
                .col(org())
                .col(string_len(n("run_id"), 36))
                .col(big_integer(n("seq")))
                .col(string(n("phase")))
                .col(text(n("data")))
                .col(created())
                .primary_key(Index::create().col(n("run_id")).col(n("seq")))
                .to_owned(),
            Table::create()
                .table(n("plan_artifacts"))
                .col(string_len(n("run_id"), 36).primary_key())
                .col(org())
                .col(blob(n("plan_file")))
                .col(text(n("plan_json")))
                .col(string_len(n("sha256"), 64))
                .col(big_integer(n("size")))
                .col(created())
                .to_owned(),
            Table::create()
                .table(n("state_versions"))
                .col(id())
                .col(org())
                .col(string_len(n("stack_id"), 36))
                .col(big_integer(n("version")))
                .col(big_integer_null(n("serial")))
                .col(string_null(n("lineage")))
                .col(string_len(n("md5"), 32))
                .col(string_len(n("sha256"), 64))
                .col(big_integer(n("size")))
                .col(blob(n("data")))
                .col(text(n("outputs")))
                .col(string_len_null(n("run_id"), 36))
                .col(string(n("created_by")))
                .col(created())
                .to_owned(),
            Table::create()
                .table(n("state_locks"))
                .col(string_len(n("stack_id"), 36).primary_key())
                .col(org())
                .col(string(n("lock_id")))
                .col(text(n("info")))
                .col(string(n("holder")))
                .col(string_len_null(n("run_id"), 36))
                .col(boolean(n("needs_recovery")))
                .col(created())
                .to_owned(),
        ];
        for t in tables {
            m.create_table(t).await?;
        }
        let indexes = [
            index("stacks", "ux_stacks_org_slug", &["org_id", "slug"], true),
            index("api_keys", "ix_api_keys_org", &["org_id", "id"], false),
            index(
                "runs",
                "ix_runs_org_stack",
                &["org_id", "stack_id", "created_at"],
                false,
            ),
            index("runs", "ix_runs_state", &["state"], false),
            index("run_events", "ix_run_events_run", &["run_id", "created_at"], false),
            index(
                "state_versions",
                "ux_state_versions_stack_version",
                &["stack_id", "version"],
                true,
            ),
            index("memberships", "ix_memberships_user", &["user_id"], false),
        ];
        for i in indexes {
            m.create_index(i).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for t in [
            "state_locks",
            "state_versions",
            "plan_artifacts",
            "log_chunks",
            "run_events",
            "runs",
            "stacks",
            "api_keys",
            "memberships",
            "users",
            "organizations",
        ] {
            m.drop_table(Table::drop().table(n(t)).to_owned()).await?;
        }
        Ok(())
    }
}
