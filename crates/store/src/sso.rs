//! Single sign-on bookkeeping: logins in flight (each state usable once, for ten minutes)
//! and provider identities linked to users.

use chrono::{DateTime, Duration, Utc};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
use terraplane_domain::UserId;

use crate::entities::{sso_identities, sso_logins};
use crate::error::Result;
use crate::{Store, records::parse_id};

pub const SSO_LOGIN_TTL_MINUTES: i64 = 10;

impl Store {
    pub async fn create_sso_login(
        &self,
        state: &str,
        nonce: &str,
        verifier: &str,
        return_to: Option<String>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        // Abandoned logins don't pile up.
        sso_logins::Entity::delete_many()
            .filter(sso_logins::Column::CreatedAt.lt(now - Duration::minutes(SSO_LOGIN_TTL_MINUTES)))
            .exec(&self.db)
            .await?;
        sso_logins::ActiveModel {
            state: Set(state.to_owned()),
            nonce: Set(nonce.to_owned()),
            verifier: Set(verifier.to_owned()),
            return_to: Set(return_to),
            created_at: Set(now),
        }
        .insert(&self.db)
        .await?;
        Ok(())
    }

    /// The (nonce, verifier, return_to) of a login in flight, consumed: a state works once.
    pub async fn take_sso_login(
        &self,
        state: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<(String, String, Option<String>)>> {
        let Some(m) = sso_logins::Entity::find_by_id(state.to_owned()).one(&self.db).await? else {
            return Ok(None);
        };
        let res = sso_logins::Entity::delete_many()
            .filter(sso_logins::Column::State.eq(state))
            .exec(&self.db)
            .await?;
        if res.rows_affected != 1 || m.created_at < now - Duration::minutes(SSO_LOGIN_TTL_MINUTES) {
            return Ok(None);
        }
        Ok(Some((m.nonce, m.verifier, m.return_to)))
    }

    pub async fn find_sso_identity(&self, issuer: &str, subject: &str) -> Result<Option<UserId>> {
        sso_identities::Entity::find_by_id((issuer.to_owned(), subject.to_owned()))
            .one(&self.db)
            .await?
            .map(|m| parse_id(&m.user_id))
            .transpose()
    }

    pub async fn link_sso_identity(&self, issuer: &str, subject: &str, user: UserId, now: DateTime<Utc>) -> Result<()> {
        sso_identities::ActiveModel {
            issuer: Set(issuer.to_owned()),
            subject: Set(subject.to_owned()),
            user_id: Set(user.to_string()),
            created_at: Set(now),
        }
        .insert(&self.db)
        .await?;
        Ok(())
    }
}
