//! Login sessions behind short-lived access tokens. The refresh token is stored hashed and
//! rotated on each use; presenting the previous (already rotated) token means it was
//! stolen or replayed, and revokes the session.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
use terraplane_domain::{OrgId, UserId};

use crate::entities::sessions;
use crate::error::{Result, StoreError};
use crate::{Store, records::parse_id};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    pub id: String,
    pub org_id: OrgId,
    pub user_id: UserId,
    pub expires_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// A login policy made this session an organization owner.
    pub policy_admin: bool,
}

impl TryFrom<sessions::Model> for Session {
    type Error = StoreError;
    fn try_from(m: sessions::Model) -> Result<Self> {
        Ok(Self {
            id: m.id,
            org_id: parse_id(&m.org_id)?,
            user_id: parse_id(&m.user_id)?,
            expires_at: m.expires_at,
            revoked_at: m.revoked_at,
            policy_admin: m.policy_admin,
        })
    }
}

/// What a refresh attempt found.
#[derive(Debug)]
pub enum Refresh {
    Rotated(Session),
    /// Unknown, expired or revoked.
    Invalid,
    /// The token had already been rotated: the session is now revoked.
    Reused,
}

impl Store {
    pub async fn create_session(
        &self,
        org: OrgId,
        user: UserId,
        refresh_hash: &str,
        expires_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Session> {
        sessions::ActiveModel {
            id: Set(uuid::Uuid::now_v7().to_string()),
            org_id: Set(org.to_string()),
            user_id: Set(user.to_string()),
            refresh_hash: Set(refresh_hash.to_owned()),
            previous_hash: Set(None),
            created_at: Set(now),
            expires_at: Set(expires_at),
            revoked_at: Set(None),
            policy_admin: Set(false),
        }
        .insert(&self.db)
        .await?
        .try_into()
    }

    /// Marks a session as an organization owner's (a login policy's `admin`).
    pub async fn set_session_admin(&self, id: &str) -> Result<()> {
        sessions::Entity::update_many()
            .col_expr(sessions::Column::PolicyAdmin, sea_orm::sea_query::Expr::value(true))
            .filter(sessions::Column::Id.eq(id))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    pub async fn get_session(&self, id: &str) -> Result<Session> {
        sessions::Entity::find_by_id(id.to_owned())
            .one(&self.db)
            .await?
            .ok_or(StoreError::NotFound("session"))?
            .try_into()
    }

    /// Swaps the refresh token `presented_hash` for `new_hash` (conditionally, so two
    /// concurrent refreshes can't both win).
    pub async fn rotate_session(&self, presented_hash: &str, new_hash: &str, now: DateTime<Utc>) -> Result<Refresh> {
        if let Some(m) = sessions::Entity::find()
            .filter(sessions::Column::RefreshHash.eq(presented_hash))
            .one(&self.db)
            .await?
        {
            if m.revoked_at.is_some() || m.expires_at <= now {
                return Ok(Refresh::Invalid);
            }
            let res = sessions::Entity::update_many()
                .col_expr(sessions::Column::RefreshHash, Expr::value(new_hash.to_owned()))
                .col_expr(sessions::Column::PreviousHash, Expr::value(presented_hash.to_owned()))
                .filter(sessions::Column::Id.eq(m.id.clone()))
                .filter(sessions::Column::RefreshHash.eq(presented_hash))
                .exec(&self.db)
                .await?;
            return Ok(if res.rows_affected == 1 {
                Refresh::Rotated(m.try_into()?)
            } else {
                Refresh::Reused
            });
        }
        if let Some(m) = sessions::Entity::find()
            .filter(sessions::Column::PreviousHash.eq(presented_hash))
            .one(&self.db)
            .await?
        {
            self.revoke_session(&m.id, now).await?;
            return Ok(Refresh::Reused);
        }
        Ok(Refresh::Invalid)
    }

    pub async fn revoke_session(&self, id: &str, now: DateTime<Utc>) -> Result<()> {
        sessions::Entity::update_many()
            .col_expr(sessions::Column::RevokedAt, Expr::value(now))
            .filter(sessions::Column::Id.eq(id.to_owned()))
            .filter(sessions::Column::RevokedAt.is_null())
            .exec(&self.db)
            .await?;
        Ok(())
    }
}
