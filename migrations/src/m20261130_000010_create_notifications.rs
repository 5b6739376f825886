//! Notification endpoints (per space: kind, URL, sealed secret, subscribed events, stack
//! labels) and the delivery outbox (one row per event and endpoint, retried until delivered
//! or out of attempts; indexed by when it is next due).

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261130_000010_create_notifications"
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
                .table(n("notification_endpoints"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("space_id"), 36))
                .col(string_len(n("slug"), 63))
                .col(string(n("name")))
                .col(string_len(n("kind"), 16))
                .col(string_len(n("url"), 2048))
                .col(blob_null(n("secret")))
                .col(text(n("events")))
                .col(text(n("stack_labels")))
                .col(timestamp_with_time_zone(n("created_at")))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(n("notification_deliveries"))
                .col(string_len(n("id"), 36).primary_key())
                .col(string_len(n("org_id"), 36))
                .col(string_len(n("endpoint_id"), 36))
                .col(string_len(n("event"), 32))
                .col(string_len_null(n("stack_id"), 36))
                .col(string_len_null(n("run_id"), 36))
                .col(text(n("payload")))
                .col(string_len(n("status"), 16))
                .col(integer(n("attempts")))
                .col(integer_null(n("last_status_code")))
                .col(text_null(n("last_error")))
                .col(timestamp_with_time_zone_null(n("next_attempt_at")))
                .col(timestamp_with_time_zone(n("created_at")))
                .col(timestamp_with_time_zone_null(n("delivered_at")))
                .to_owned(),
        )
        .await?;
        for (table, name, cols, unique) in [
            (
                "notification_endpoints",
                "ux_notification_endpoints_org_slug",
                vec!["org_id", "slug"],
                true,
            ),
            (
                "notification_deliveries",
                "ix_notification_deliveries_due",
                vec!["status", "next_attempt_at"],
                false,
            ),
            (
                "notification_deliveries",
                "ix_notification_deliveries_endpoint",
                vec!["endpoint_id", "created_at"],
                false,
            ),
            (
                "notification_deliveries",
                "ix_notification_deliveries_org",
                vec!["org_id", "created_at"],
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
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for t in ["notification_deliveries", "notification_endpoints"] {
            m.drop_table(Table::drop().table(n(t)).to_owned()).await?;
        }
        Ok(())
    }
}
