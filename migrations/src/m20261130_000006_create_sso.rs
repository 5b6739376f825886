//! Single sign-on: logins in flight (state, nonce and PKCE verifier, used once) and the
//! link from a provider identity (issuer, subject) to a user.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261130_000006_create_sso"
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
                .table(n("sso_logins"))
                .col(string_len(n("state"), 128).primary_key())
                .col(string_len(n("nonce"), 128))
                .col(string_len(n("verifier"), 128))
                .col(string_null(n("return_to")))
                .col(timestamp_with_time_zone(n("created_at")))
                .to_owned(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(n("sso_identities"))
                .col(string(n("issuer")))
                .col(string(n("subject")))
                .col(string_len(n("user_id"), 36))
                .col(timestamp_with_time_zone(n("created_at")))
                .primary_key(Index::create().col(n("issuer")).col(n("subject")))
                .to_owned(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(n("sso_identities")).to_owned())
            .await?;
        m.drop_table(Table::drop().table(n("sso_logins")).to_owned()).await
    }
}
