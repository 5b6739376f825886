//! The audit trail. Events are appended through a [`TenantScope`] — inside the same
//! transaction as the change they record when the scope comes from [`crate::Tx`] — and
//! chained per organization: event `n` stores the hash of event `n-1`, and its own hash
//! covers every field. `verify_audit` recomputes the chain and names the first event that
//! was altered or removed.

use chrono::{DateTime, SubsecRound, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseBackend, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    Set, TransactionTrait,
};
use sha2::{Digest, Sha256};

use crate::entities::*;
use crate::error::{Result, StoreError};
use crate::tenant::TenantScope;

/// The hash before an organization's first event.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[derive(Clone, Debug, Default)]
pub struct NewAuditEvent {
    pub actor: String,
    /// Dotted verb, e.g. `stack.create`, `state.lock`, `login.failure`.
    pub action: String,
    pub target_kind: String,
    pub target: String,
    /// Redacted snapshots: never secrets.
    pub before: Option<serde_json::Value>,
    pub after: Option<serde_json::Value>,
    pub request_id: Option<String>,
    pub client_ip: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditEvent {
    pub id: String,
    pub seq: i64,
    pub actor: String,
    pub action: String,
    pub target_kind: String,
    pub target: String,
    pub before: Option<serde_json::Value>,
    pub after: Option<serde_json::Value>,
    pub request_id: Option<String>,
    pub client_ip: Option<String>,
    pub created_at: DateTime<Utc>,
    pub prev_hash: String,
    pub hash: String,
}

impl From<audit_events::Model> for AuditEvent {
    fn from(m: audit_events::Model) -> Self {
        Self {
            id: m.id,
            seq: m.seq,
            actor: m.actor,
            action: m.action,
            target_kind: m.target_kind,
            target: m.target,
            before: m.before.as_deref().and_then(|s| serde_json::from_str(s).ok()),
            after: m.after.as_deref().and_then(|s| serde_json::from_str(s).ok()),
            request_id: m.request_id,
            client_ip: m.client_ip,
            created_at: m.created_at,
            prev_hash: m.prev_hash,
            hash: m.hash,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    pub actor: Option<String>,
    pub action: Option<String>,
    pub target: Option<String>,
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    pub limit: u64,
}

/// Webhook delivery progress of one organization's audit events.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeliveryCursor {
    /// The last event delivered (0: none yet).
    pub last_seq: i64,
    /// Consecutive failed attempts at the next event.
    pub failures: i32,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

/// The outcome of `verify_audit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChainCheck {
    Intact {
        events: i64,
    },
    /// The first event whose content no longer matches its hash, or whose predecessor
    /// link is broken.
    Altered {
        seq: i64,
        id: String,
    },
    /// A gap: the event with this sequence number is gone.
    Missing {
        seq: i64,
    },
}

fn hash_of(m: &audit_events::Model) -> String {
    let fields = serde_json::json!([
        m.seq,
        m.org_id,
        m.actor,
        m.action,
        m.target_kind,
        m.target,
        m.before,
        m.after,
        m.request_id,
        m.client_ip,
        m.created_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        m.prev_hash,
    ]);
    hex::encode(Sha256::digest(fields.to_string().as_bytes()))
}

impl<C: ConnectionTrait + TransactionTrait> TenantScope<'_, C> {
    /// Appends an event to the organization's chain.
    pub async fn append_audit(&self, e: NewAuditEvent, now: DateTime<Utc>) -> Result<AuditEvent> {
        // One writer per organization chain at a time: PostgreSQL locks the organization
        // row for the rest of the transaction; SQLite serializes writers anyway.
        let mut org = organizations::Entity::find_by_id(self.org_s.clone());
        if self.db.get_database_backend() == DatabaseBackend::Postgres {
            org = org.lock_exclusive();
        }
        org.one(self.db).await?.ok_or(StoreError::NotFound("organization"))?;
        let last = audit_events::Entity::find()
            .filter(audit_events::Column::OrgId.eq(self.org_s.clone()))
            .order_by_desc(audit_events::Column::Seq)
            .one(self.db)
            .await?;
        let (seq, prev_hash) = match last {
            Some(l) => (l.seq + 1, l.hash),
            None => (1, GENESIS.to_owned()),
        };
        let mut m = audit_events::Model {
            id: uuid::Uuid::now_v7().to_string(),
            org_id: self.org_s.clone(),
            seq,
            actor: e.actor,
            action: e.action,
            target_kind: e.target_kind,
            target: e.target,
            before: e.before.map(|v| v.to_string()),
            after: e.after.map(|v| v.to_string()),
            request_id: e.request_id,
            client_ip: e.client_ip,
            // Both databases keep microseconds: hash what will be read back.
            created_at: now.trunc_subsecs(6),
            prev_hash,
            hash: String::new(),
        };
        m.hash = hash_of(&m);
        audit_events::ActiveModel {
            id: Set(m.id.clone()),
            org_id: Set(m.org_id.clone()),
            seq: Set(m.seq),
            actor: Set(m.actor.clone()),
            action: Set(m.action.clone()),
            target_kind: Set(m.target_kind.clone()),
            target: Set(m.target.clone()),
            before: Set(m.before.clone()),
            after: Set(m.after.clone()),
            request_id: Set(m.request_id.clone()),
            client_ip: Set(m.client_ip.clone()),
            created_at: Set(m.created_at),
            prev_hash: Set(m.prev_hash.clone()),
            hash: Set(m.hash.clone()),
        }
        .insert(self.db)
        .await?;
        Ok(m.into())
    }

    /// Events matching `f`, newest first.
    pub async fn list_audit(&self, f: &AuditFilter) -> Result<Vec<AuditEvent>> {
        let mut q = audit_events::Entity::find().filter(audit_events::Column::OrgId.eq(self.org_s.clone()));
        if let Some(a) = &f.actor {
            q = q.filter(audit_events::Column::Actor.eq(a.clone()));
        }
        if let Some(a) = &f.action {
            q = q.filter(audit_events::Column::Action.eq(a.clone()));
        }
        if let Some(t) = &f.target {
            q = q.filter(audit_events::Column::Target.eq(t.clone()));
        }
        if let Some(s) = f.since {
            q = q.filter(audit_events::Column::CreatedAt.gte(s));
        }
        if let Some(u) = f.until {
            q = q.filter(audit_events::Column::CreatedAt.lt(u));
        }
        Ok(q.order_by_desc(audit_events::Column::Seq)
            .limit(f.limit.clamp(1, 1000))
            .all(self.db)
            .await?
            .into_iter()
            .map(AuditEvent::from)
            .collect())
    }

    /// Events with `seq > after`, oldest first (for delivery).
    pub async fn list_audit_after(&self, after: i64, limit: u64) -> Result<Vec<AuditEvent>> {
        Ok(audit_events::Entity::find()
            .filter(audit_events::Column::OrgId.eq(self.org_s.clone()))
            .filter(audit_events::Column::Seq.gt(after))
            .order_by_asc(audit_events::Column::Seq)
            .limit(limit)
            .all(self.db)
            .await?
            .into_iter()
            .map(AuditEvent::from)
            .collect())
    }

    /// How far webhook delivery got for this organization.
    pub async fn audit_delivery(&self) -> Result<DeliveryCursor> {
        Ok(audit_delivery::Entity::find_by_id(self.org_s.clone())
            .one(self.db)
            .await?
            .map(|m| DeliveryCursor {
                last_seq: m.last_seq,
                failures: m.failures,
                next_attempt_at: m.next_attempt_at,
                last_error: m.last_error,
            })
            .unwrap_or_default())
    }

    pub async fn set_audit_delivery(&self, c: &DeliveryCursor, now: DateTime<Utc>) -> Result<()> {
        audit_delivery::Entity::delete_by_id(self.org_s.clone())
            .exec(self.db)
            .await?;
        audit_delivery::ActiveModel {
            org_id: Set(self.org_s.clone()),
            last_seq: Set(c.last_seq),
            failures: Set(c.failures),
            next_attempt_at: Set(c.next_attempt_at),
            last_error: Set(c.last_error.clone()),
            updated_at: Set(now),
        }
        .insert(self.db)
        .await?;
        Ok(())
    }

    /// Recomputes the organization's chain from the first event.
    pub async fn verify_audit(&self) -> Result<ChainCheck> {
        let events = audit_events::Entity::find()
            .filter(audit_events::Column::OrgId.eq(self.org_s.clone()))
            .order_by_asc(audit_events::Column::Seq)
            .all(self.db)
            .await?;
        let mut prev = GENESIS.to_owned();
        let mut expected = 1;
        for m in &events {
            if m.seq != expected {
                return Ok(ChainCheck::Missing { seq: expected });
            }
            if m.prev_hash != prev || hash_of(m) != m.hash {
                return Ok(ChainCheck::Altered {
                    seq: m.seq,
                    id: m.id.clone(),
                });
            }
            prev = m.hash.clone();
            expected += 1;
        }
        Ok(ChainCheck::Intact { events: expected - 1 })
    }
}
