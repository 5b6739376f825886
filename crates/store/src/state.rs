//! Terraform state storage for the HTTP backend: versions (all kept) and the lock.
//! Writes are checked against the lock and against the latest version in one
//! transaction, so a rejected write leaves everything as it was.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set, TransactionSession,
    TransactionTrait,
};
use terraplane_domain::state::{StateError, StateMeta, WriteDecision, check_write};
use terraplane_domain::{RunId, StackId};

use crate::entities::*;
use crate::error::{Result, StoreError};
use crate::records::*;
use crate::tenant::TenantScope;

#[derive(Debug)]
pub enum WriteOutcome {
    Stored(StateVersion),
    AlreadyStored(StateVersion),
    /// The state is locked and the write did not carry the holder's lock id.
    Locked(StateLock),
    /// The lock id the write carried is not held by anybody.
    LockNotHeld,
    Rejected(StateError),
}

#[derive(Debug)]
pub enum LockOutcome {
    Acquired(StateLock),
    Held(StateLock),
}

#[derive(Clone, Debug)]
pub struct NewLock {
    pub lock_id: String,
    pub info: String,
    pub holder: String,
    pub run_id: Option<RunId>,
}

pub struct NewStateVersion<'a> {
    pub body: &'a [u8],
    pub meta: &'a StateMeta,
    pub md5: String,
    pub sha256: String,
    pub outputs: serde_json::Value,
    pub run_id: Option<RunId>,
    pub created_by: String,
}

impl<C: ConnectionTrait + TransactionTrait> TenantScope<'_, C> {
    async fn latest_model(&self, stack: StackId) -> Result<Option<state_versions::Model>> {
        Ok(state_versions::Entity::find()
            .filter(state_versions::Column::OrgId.eq(self.org_s.clone()))
            .filter(state_versions::Column::StackId.eq(stack.to_string()))
            .order_by_desc(state_versions::Column::Version)
            .one(self.db)
            .await?)
    }

    /// The latest state version and its bytes, or `None` when the stack has no state.
    pub async fn get_current_state(&self, stack: StackId) -> Result<Option<(StateVersion, Vec<u8>)>> {
        Ok(match self.latest_model(stack).await? {
            Some(m) => {
                let v = StateVersion::try_from(&m)?;
                Some((v, self.unseal(m.data).await?))
            }
            None => None,
        })
    }

    pub async fn get_state_by_serial(&self, stack: StackId, serial: i64) -> Result<(StateVersion, Vec<u8>)> {
        let m = state_versions::Entity::find()
            .filter(state_versions::Column::OrgId.eq(self.org_s.clone()))
            .filter(state_versions::Column::StackId.eq(stack.to_string()))
            .filter(state_versions::Column::Serial.eq(serial))
            .order_by_desc(state_versions::Column::Version)
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("state version"))?;
        let v = StateVersion::try_from(&m)?;
        Ok((v, self.unseal(m.data).await?))
    }

    pub async fn list_state_versions(&self, stack: StackId) -> Result<Vec<StateVersion>> {
        state_versions::Entity::find()
            .filter(state_versions::Column::OrgId.eq(self.org_s.clone()))
            .filter(state_versions::Column::StackId.eq(stack.to_string()))
            .order_by_desc(state_versions::Column::Version)
            .all(self.db)
            .await?
            .iter()
            .map(StateVersion::try_from)
            .collect()
    }

    pub async fn write_state(
        &self,
        stack: StackId,
        v: NewStateVersion<'_>,
        lock_id: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<WriteOutcome> {
        // Sealed before the transaction: the data key may have to be read or created, and on
        // SQLite the transaction holds the only connection.
        let sealed = self.seal(v.body.to_vec()).await?;
        let tx = self.db.begin().await?;
        self.ensure_stack(&tx, stack).await?;
        let lock = state_locks::Entity::find_by_id(stack.to_string())
            .filter(state_locks::Column::OrgId.eq(self.org_s.clone()))
            .one(&tx)
            .await?;
        match (&lock, lock_id) {
            (Some(l), Some(id)) if l.lock_id == id => {}
            (Some(l), _) => return Ok(WriteOutcome::Locked(l.clone().try_into()?)),
            (None, Some(_)) => return Ok(WriteOutcome::LockNotHeld),
            (None, None) => {}
        }
        let latest = state_versions::Entity::find()
            .filter(state_versions::Column::OrgId.eq(self.org_s.clone()))
            .filter(state_versions::Column::StackId.eq(stack.to_string()))
            .order_by_desc(state_versions::Column::Version)
            .one(&tx)
            .await?;
        let stored_meta = latest.as_ref().map(|m| StateMeta {
            serial: m.serial,
            lineage: m.lineage.clone(),
            terraform_version: None,
        });
        let decision = check_write(
            v.meta,
            &v.sha256,
            latest
                .as_ref()
                .zip(stored_meta.as_ref())
                .map(|(m, meta)| (meta, m.sha256.as_str())),
        );
        match decision {
            Err(e) => return Ok(WriteOutcome::Rejected(e)),
            Ok(WriteDecision::AlreadyStored) => {
                let m = latest.ok_or(StoreError::NotFound("state version"))?;
                return Ok(WriteOutcome::AlreadyStored(StateVersion::try_from(&m)?));
            }
            Ok(WriteDecision::Store) => {}
        }
        let version = latest.as_ref().map_or(1, |m| m.version + 1);
        let m = state_versions::ActiveModel {
            id: Set(uuid::Uuid::now_v7().to_string()),
            org_id: Set(self.org_s.clone()),
            stack_id: Set(stack.to_string()),
            version: Set(version),
            serial: Set(v.meta.serial),
            lineage: Set(v.meta.lineage.clone()),
            md5: Set(v.md5),
            sha256: Set(v.sha256),
            size: Set(i64::try_from(v.body.len()).unwrap_or(i64::MAX)),
            data: Set(sealed),
            outputs: Set(v.outputs.to_string()),
            run_id: Set(v.run_id.map(|r| r.to_string())),
            created_by: Set(v.created_by),
            created_at: Set(now),
        }
        .insert(&tx)
        .await
        .map_err(|e| crate::conflict(e, "state was written concurrently; retry".into()))?;
        tx.commit().await?;
        Ok(WriteOutcome::Stored(StateVersion::try_from(&m)?))
    }

    /// Removes the stack's state (Terraform's DELETE): refused while the state is locked.
    pub async fn delete_state(&self, stack: StackId) -> Result<u64> {
        let tx = self.db.begin().await?;
        self.ensure_stack(&tx, stack).await?;
        if let Some(l) = state_locks::Entity::find_by_id(stack.to_string())
            .filter(state_locks::Column::OrgId.eq(self.org_s.clone()))
            .one(&tx)
            .await?
        {
            return Err(StoreError::Conflict(format!("state is locked by {}", l.holder)));
        }
        let res = state_versions::Entity::delete_many()
            .filter(state_versions::Column::OrgId.eq(self.org_s.clone()))
            .filter(state_versions::Column::StackId.eq(stack.to_string()))
            .exec(&tx)
            .await?;
        tx.commit().await?;
        Ok(res.rows_affected)
    }

    pub async fn get_state_lock(&self, stack: StackId) -> Result<Option<StateLock>> {
        state_locks::Entity::find_by_id(stack.to_string())
            .filter(state_locks::Column::OrgId.eq(self.org_s.clone()))
            .one(self.db)
            .await?
            .map(StateLock::try_from)
            .transpose()
    }

    pub async fn lock_state(&self, stack: StackId, l: NewLock, now: DateTime<Utc>) -> Result<LockOutcome> {
        self.ensure_stack(self.db, stack).await?;
        // The insert runs in a savepoint: on PostgreSQL a failed statement would otherwise
        // abort the caller's whole transaction, and we still need to read the holder.
        let sp = self.db.begin().await?;
        let inserted = state_locks::ActiveModel {
            stack_id: Set(stack.to_string()),
            org_id: Set(self.org_s.clone()),
            lock_id: Set(l.lock_id.clone()),
            info: Set(l.info),
            holder: Set(l.holder),
            run_id: Set(l.run_id.map(|r| r.to_string())),
            needs_recovery: Set(false),
            created_at: Set(now),
        }
        .insert(&sp)
        .await;
        match inserted {
            Ok(m) => {
                sp.commit().await?;
                Ok(LockOutcome::Acquired(m.try_into()?))
            }
            Err(e) => match StoreError::from(e) {
                StoreError::Conflict(_) => {
                    sp.rollback().await?;
                    let held = self
                        .get_state_lock(stack)
                        .await?
                        .ok_or(StoreError::Conflict("lock changed concurrently; retry".into()))?;
                    if held.lock_id == l.lock_id {
                        Ok(LockOutcome::Acquired(held))
                    } else {
                        Ok(LockOutcome::Held(held))
                    }
                }
                other => Err(other),
            },
        }
    }

    /// Releases the lock if `lock_id` is the holder's, or unconditionally when `force`.
    /// Returns the released lock; `Err(Conflict)` names the holder otherwise.
    pub async fn unlock_state(
        &self,
        stack: StackId,
        lock_id: Option<&str>,
        force: bool,
    ) -> Result<Result<StateLock, StateLock>> {
        let Some(held) = self.get_state_lock(stack).await? else {
            return Err(StoreError::NotFound("state lock"));
        };
        if !force && lock_id != Some(held.lock_id.as_str()) {
            return Ok(Err(held));
        }
        state_locks::Entity::delete_many()
            .filter(state_locks::Column::StackId.eq(stack.to_string()))
            .filter(state_locks::Column::OrgId.eq(self.org_s.clone()))
            .filter(state_locks::Column::LockId.eq(held.lock_id.clone()))
            .exec(self.db)
            .await?;
        Ok(Ok(held))
    }

    pub async fn mark_lock_recovery(&self, stack: StackId) -> Result<()> {
        state_locks::Entity::update_many()
            .col_expr(state_locks::Column::NeedsRecovery, Expr::value(true))
            .filter(state_locks::Column::StackId.eq(stack.to_string()))
            .filter(state_locks::Column::OrgId.eq(self.org_s.clone()))
            .exec(self.db)
            .await?;
        Ok(())
    }
}
