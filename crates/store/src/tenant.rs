//! Repositories scoped to one organization. Every query starts from a `*_q()` helper that
//! already filters on `org_id`, so a cross-tenant read cannot be written by accident; a row
//! of another organization is simply "not found".

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect, Select, Set, TransactionSession, TransactionTrait,
};
use terraplane_domain::{OrgId, RunId, RunState, SpaceId, StackId};

use crate::entities::*;
use crate::error::{Result, StoreError};
use crate::records::*;

/// Reaches one organization's data, on a connection or inside a transaction
/// ([`crate::Tx::scope`]) so that a change and its audit event commit together.
pub struct TenantScope<'a, C = DatabaseConnection> {
    pub(crate) db: &'a C,
    pub(crate) keys: Option<&'a crate::crypto::Keyring>,
    pub(crate) org: OrgId,
    pub(crate) org_s: String,
}

#[derive(Clone, Debug)]
pub struct NewStack {
    pub slug: String,
    pub name: String,
    pub description: String,
    pub repository: String,
    pub branch: String,
    pub project_root: String,
    pub tool: String,
    pub tool_version: Option<String>,
    pub autodeploy: bool,
    pub labels: Vec<String>,
    pub worker_pool: String,
    /// The root space when `None`.
    pub space_id: Option<SpaceId>,
}

#[derive(Clone, Debug, Default)]
pub struct StackPatch {
    pub name: Option<String>,
    pub description: Option<String>,
    pub repository: Option<String>,
    pub branch: Option<String>,
    pub project_root: Option<String>,
    pub tool_version: Option<Option<String>>,
    pub autodeploy: Option<bool>,
    pub labels: Option<Vec<String>>,
    pub worker_pool: Option<String>,
    pub space_id: Option<SpaceId>,
}

impl<'a, C: ConnectionTrait + TransactionTrait> TenantScope<'a, C> {
    pub(crate) fn with_keys(mut self, keys: Option<&'a crate::crypto::Keyring>) -> Self {
        self.keys = keys;
        self
    }

    /// This organization's data key, created (and stored wrapped) on first use.
    async fn data_key(&self) -> Result<Option<crate::crypto::KeyBytes>> {
        let Some(ring) = self.keys else { return Ok(None) };
        if let Some(k) = ring.cached(self.org) {
            return Ok(Some(k));
        }
        if let Some(row) = org_keys::Entity::find_by_id(self.org_s.clone()).one(self.db).await? {
            let k = ring.unwrap(self.org, &row.wrapped_key)?;
            ring.remember(self.org, k.clone());
            return Ok(Some(k));
        }
        let k = crate::crypto::KeyBytes::random();
        let sp = self.db.begin().await?;
        let inserted = org_keys::ActiveModel {
            org_id: Set(self.org_s.clone()),
            wrapped_key: Set(ring.wrap(self.org, &k)?),
            created_at: Set(chrono::Utc::now()),
            master_key_id: Set(ring.master_key_id()),
        }
        .insert(&sp)
        .await;
        match inserted {
            Ok(_) => {
                sp.commit().await?;
                ring.remember(self.org, k.clone());
                Ok(Some(k))
            }
            Err(_) => {
                // Created concurrently: use the stored one.
                sp.rollback().await?;
                let row = org_keys::Entity::find_by_id(self.org_s.clone())
                    .one(self.db)
                    .await?
                    .ok_or(StoreError::Invalid("data key vanished".into()))?;
                let k = ring.unwrap(self.org, &row.wrapped_key)?;
                ring.remember(self.org, k.clone());
                Ok(Some(k))
            }
        }
    }

    /// Seals a blob for storage (as is without a keyring).
    pub(crate) async fn seal(&self, plain: Vec<u8>) -> Result<Vec<u8>> {
        match self.data_key().await? {
            Some(k) => crate::crypto::seal(&k, self.org, &plain),
            None => Ok(plain),
        }
    }

    /// A short checksum that tells versions of a value apart without revealing it: HMAC
    /// keyed with the organization's data key (a plain hash of a short secret could be
    /// brute-forced), SHA-256 without a keyring.
    pub(crate) async fn checksum(&self, value: &[u8]) -> Result<String> {
        use hmac::Mac;
        let full = match self.data_key().await? {
            Some(k) => {
                let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(k.expose())
                    .map_err(|_| StoreError::Invalid("bad key size".into()))?;
                mac.update(value);
                mac.finalize().into_bytes().to_vec()
            }
            None => {
                use sha2::Digest;
                sha2::Sha256::digest(value).to_vec()
            }
        };
        Ok(hex::encode(&full[..6]))
    }

    /// Opens a stored blob; blobs written before encryption are returned as they are.
    pub(crate) async fn unseal(&self, stored: Vec<u8>) -> Result<Vec<u8>> {
        if !crate::crypto::is_sealed(&stored) {
            return Ok(stored);
        }
        match self.data_key().await? {
            Some(k) => crate::crypto::open(&k, self.org, &stored),
            None => Err(StoreError::Invalid(
                "encrypted data but no master key configured".into(),
            )),
        }
    }

    pub(crate) fn new(db: &'a C, org: OrgId) -> Self {
        Self {
            keys: None,
            db,
            org,
            org_s: org.to_string(),
        }
    }

    pub fn org_id(&self) -> OrgId {
        self.org
    }

    pub(crate) fn stacks_q(&self) -> Select<stacks::Entity> {
        stacks::Entity::find().filter(stacks::Column::OrgId.eq(self.org_s.clone()))
    }

    pub(crate) fn runs_q(&self) -> Select<runs::Entity> {
        runs::Entity::find().filter(runs::Column::OrgId.eq(self.org_s.clone()))
    }

    /// Calls that take a stack id from outside check it belongs to this organization.
    pub(crate) async fn ensure_stack(&self, db: &impl sea_orm::ConnectionTrait, id: StackId) -> Result<()> {
        let n = self
            .stacks_q()
            .filter(stacks::Column::Id.eq(id.to_string()))
            .count(db)
            .await?;
        if n == 0 {
            Err(StoreError::NotFound("stack"))
        } else {
            Ok(())
        }
    }

    /// Calls that take a run id from outside check it belongs to this organization.
    pub(crate) async fn ensure_run(&self, id: RunId) -> Result<()> {
        let n = self
            .runs_q()
            .filter(runs::Column::Id.eq(id.to_string()))
            .count(self.db)
            .await?;
        if n == 0 {
            Err(StoreError::NotFound("run"))
        } else {
            Ok(())
        }
    }

    // ---- stacks ----

    pub async fn create_stack(&self, s: NewStack, now: DateTime<Utc>) -> Result<Stack> {
        let space = match s.space_id {
            Some(id) => self.get_space(id).await?,
            None => self.root_space().await?,
        };
        let slug = s.slug.clone();
        let m = stacks::ActiveModel {
            id: Set(StackId::new().to_string()),
            org_id: Set(self.org_s.clone()),
            slug: Set(s.slug),
            name: Set(s.name),
            description: Set(s.description),
            repository: Set(s.repository),
            branch: Set(s.branch),
            project_root: Set(s.project_root),
            tool: Set(s.tool),
            tool_version: Set(s.tool_version),
            autodeploy: Set(s.autodeploy),
            labels: Set(serde_json::to_string(&s.labels).unwrap_or_else(|_| "[]".into())),
            worker_pool: Set(s.worker_pool),
            space_id: Set(Some(space.id.to_string())),
            locked_by: Set(None),
            lock_note: Set(None),
            locked_at: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
            drift_status: Set("UNKNOWN".into()),
            drift_reaction: Set("alert".into()),
            drift_checked_at: Set(None),
        }
        .insert(self.db)
        .await
        .map_err(|e| crate::conflict(e, format!("a stack with slug {slug:?} already exists")))?;
        m.try_into()
    }

    pub async fn get_stack_by_slug(&self, slug: &str) -> Result<Stack> {
        self.stack_model(slug).await?.try_into()
    }

    pub async fn get_stack(&self, id: StackId) -> Result<Stack> {
        self.stacks_q()
            .filter(stacks::Column::Id.eq(id.to_string()))
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("stack"))?
            .try_into()
    }

    async fn stack_model(&self, slug: &str) -> Result<stacks::Model> {
        self.stacks_q()
            .filter(stacks::Column::Slug.eq(slug))
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("stack"))
    }

    pub async fn list_stacks(&self) -> Result<Vec<Stack>> {
        self.stacks_q()
            .order_by_asc(stacks::Column::Slug)
            .all(self.db)
            .await?
            .into_iter()
            .map(Stack::try_from)
            .collect()
    }

    pub async fn update_stack(&self, slug: &str, p: StackPatch, now: DateTime<Utc>) -> Result<Stack> {
        let mut m: stacks::ActiveModel = self.stack_model(slug).await?.into();
        if let Some(v) = p.name {
            m.name = Set(v);
        }
        if let Some(v) = p.description {
            m.description = Set(v);
        }
        if let Some(v) = p.repository {
            m.repository = Set(v);
        }
        if let Some(v) = p.branch {
            m.branch = Set(v);
        }
        if let Some(v) = p.project_root {
            m.project_root = Set(v);
        }
        if let Some(v) = p.tool_version {
            m.tool_version = Set(v);
        }
        if let Some(v) = p.autodeploy {
            m.autodeploy = Set(v);
        }
        if let Some(v) = p.labels {
            m.labels = Set(serde_json::to_string(&v).unwrap_or_else(|_| "[]".into()));
        }
        if let Some(v) = p.worker_pool {
            m.worker_pool = Set(v);
        }
        if let Some(v) = p.space_id {
            self.get_space(v).await?;
            m.space_id = Set(Some(v.to_string()));
        }
        m.updated_at = Set(now);
        m.update(self.db).await?.try_into()
    }

    /// Deletes a stack with its runs, logs, plans and state history. Refused while a run
    /// of the stack is still in progress or its state is locked.
    pub async fn delete_stack(&self, slug: &str) -> Result<Stack> {
        let stack: Stack = self.stack_model(slug).await?.try_into()?;
        let sid = stack.id.to_string();
        let tx = self.db.begin().await?;
        let active = runs::Entity::find()
            .filter(runs::Column::OrgId.eq(self.org_s.clone()))
            .filter(runs::Column::StackId.eq(sid.clone()))
            .filter(runs::Column::State.is_not_in(terminal_states()))
            .count(&tx)
            .await?;
        if active > 0 {
            return Err(StoreError::Conflict(format!(
                "stack {slug:?} has {active} run(s) in progress; cancel or finish them first"
            )));
        }
        if let Some(lock) = state_locks::Entity::find_by_id(sid.clone()).one(&tx).await? {
            return Err(StoreError::Conflict(format!(
                "stack {slug:?} state is locked by {}",
                lock.holder
            )));
        }
        TenantScope::new(&tx, self.org).delete_stack_config(stack.id).await?;
        TenantScope::new(&tx, self.org).delete_stack_drift(stack.id).await?;
        TenantScope::new(&tx, self.org)
            .delete_stack_policy_attachments(stack.id)
            .await?;
        let run_ids: Vec<String> = runs::Entity::find()
            .filter(runs::Column::StackId.eq(sid.clone()))
            .select_only()
            .column(runs::Column::Id)
            .into_tuple()
            .all(&tx)
            .await?;
        run_events::Entity::delete_many()
            .filter(run_events::Column::RunId.is_in(run_ids.clone()))
            .exec(&tx)
            .await?;
        log_chunks::Entity::delete_many()
            .filter(log_chunks::Column::RunId.is_in(run_ids.clone()))
            .exec(&tx)
            .await?;
        plan_artifacts::Entity::delete_many()
            .filter(plan_artifacts::Column::RunId.is_in(run_ids))
            .exec(&tx)
            .await?;
        runs::Entity::delete_many()
            .filter(runs::Column::StackId.eq(sid.clone()))
            .exec(&tx)
            .await?;
        state_versions::Entity::delete_many()
            .filter(state_versions::Column::StackId.eq(sid.clone()))
            .exec(&tx)
            .await?;
        stacks::Entity::delete_many()
            .filter(stacks::Column::Id.eq(sid))
            .filter(stacks::Column::OrgId.eq(self.org_s.clone()))
            .exec(&tx)
            .await?;
        tx.commit().await?;
        Ok(stack)
    }

    /// Takes the stack's exclusive lock (Spacelift's stack lock). Re-locking by the same
    /// holder updates the note; someone else's lock is a conflict naming the holder.
    pub async fn lock_stack(
        &self,
        slug: &str,
        holder: &str,
        note: Option<String>,
        now: DateTime<Utc>,
    ) -> Result<Stack> {
        let m = self.stack_model(slug).await?;
        if let Some(h) = &m.locked_by
            && h != holder
        {
            return Err(StoreError::Conflict(format!("stack {slug:?} is locked by {h}")));
        }
        let res = stacks::Entity::update_many()
            .col_expr(stacks::Column::LockedBy, Expr::value(holder.to_owned()))
            .col_expr(stacks::Column::LockNote, Expr::value(note))
            .col_expr(stacks::Column::LockedAt, Expr::value(now))
            .filter(stacks::Column::Id.eq(m.id.clone()))
            .filter(stacks::Column::OrgId.eq(self.org_s.clone()))
            .filter(
                stacks::Column::LockedBy
                    .is_null()
                    .or(stacks::Column::LockedBy.eq(holder)),
            )
            .exec(self.db)
            .await?;
        if res.rows_affected == 0 {
            return Err(StoreError::Conflict(format!("stack {slug:?} was locked concurrently")));
        }
        self.get_stack_by_slug(slug).await
    }

    pub async fn unlock_stack(&self, slug: &str, holder: &str, force: bool) -> Result<Stack> {
        let m = self.stack_model(slug).await?;
        match &m.locked_by {
            None => {
                return Err(StoreError::Conflict(format!("stack {slug:?} is not locked")));
            }
            Some(h) if h != holder && !force => {
                return Err(StoreError::Conflict(format!("stack {slug:?} is locked by {h}")));
            }
            _ => {}
        }
        stacks::Entity::update_many()
            .col_expr(stacks::Column::LockedBy, Expr::value(Option::<String>::None))
            .col_expr(stacks::Column::LockNote, Expr::value(Option::<String>::None))
            .col_expr(stacks::Column::LockedAt, Expr::value(Option::<DateTime<Utc>>::None))
            .filter(stacks::Column::Id.eq(m.id.clone()))
            .filter(stacks::Column::OrgId.eq(self.org_s.clone()))
            .exec(self.db)
            .await?;
        self.get_stack_by_slug(slug).await
    }

    // ---- runs: reads ----

    pub async fn get_run(&self, id: RunId) -> Result<Run> {
        self.runs_q()
            .filter(runs::Column::Id.eq(id.to_string()))
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("run"))?
            .try_into()
    }

    pub async fn list_runs(&self, stack: StackId, limit: u64) -> Result<Vec<Run>> {
        self.runs_q()
            .filter(runs::Column::StackId.eq(stack.to_string()))
            .order_by_desc(runs::Column::CreatedAt)
            .order_by_desc(runs::Column::Id)
            .limit(limit)
            .all(self.db)
            .await?
            .into_iter()
            .map(Run::try_from)
            .collect()
    }

    pub async fn list_run_events(&self, run: RunId) -> Result<Vec<RunEventRecord>> {
        run_events::Entity::find()
            .filter(run_events::Column::OrgId.eq(self.org_s.clone()))
            .filter(run_events::Column::RunId.eq(run.to_string()))
            .order_by_asc(run_events::Column::CreatedAt)
            .order_by_asc(run_events::Column::Id)
            .all(self.db)
            .await?
            .into_iter()
            .map(|m| {
                Ok(RunEventRecord {
                    state: m.state.parse().map_err(StoreError::Invalid)?,
                    note: m.note,
                    at: m.created_at,
                })
            })
            .collect()
    }

    /// Log chunks with `seq > after`, in order.
    pub async fn list_logs(&self, run: RunId, after: Option<i64>, limit: u64) -> Result<Vec<LogChunk>> {
        let mut q = log_chunks::Entity::find()
            .filter(log_chunks::Column::OrgId.eq(self.org_s.clone()))
            .filter(log_chunks::Column::RunId.eq(run.to_string()));
        if let Some(a) = after {
            q = q.filter(log_chunks::Column::Seq.gt(a));
        }
        Ok(q.order_by_asc(log_chunks::Column::Seq)
            .limit(limit)
            .all(self.db)
            .await?
            .into_iter()
            .map(|m| LogChunk {
                seq: m.seq,
                phase: m.phase,
                data: m.data,
                created_at: m.created_at,
            })
            .collect())
    }

    /// Appends a log chunk. A retry of an already stored chunk (same seq, same bytes) is
    /// accepted; a different chunk with a used seq, or a gap, is refused.
    pub async fn append_log(&self, run: RunId, seq: i64, phase: &str, data: &str, now: DateTime<Utc>) -> Result<()> {
        self.ensure_run(run).await?;
        let rid = run.to_string();
        let existing = log_chunks::Entity::find_by_id((rid.clone(), seq))
            .filter(log_chunks::Column::OrgId.eq(self.org_s.clone()))
            .one(self.db)
            .await?;
        if let Some(e) = existing {
            return if e.data == data {
                Ok(())
            } else {
                Err(StoreError::Conflict(format!(
                    "log chunk {seq} already stored with different content"
                )))
            };
        }
        let expected = self.next_log_seq(run).await?;
        if seq != expected {
            return Err(StoreError::Conflict(format!(
                "log chunk {seq} out of order; expected {expected}"
            )));
        }
        log_chunks::ActiveModel {
            org_id: Set(self.org_s.clone()),
            run_id: Set(rid),
            seq: Set(seq),
            phase: Set(phase.to_owned()),
            data: Set(data.to_owned()),
            created_at: Set(now),
        }
        .insert(self.db)
        .await
        .map_err(|e| crate::conflict(e, format!("log chunk {seq} was appended concurrently")))?;
        Ok(())
    }

    /// The sequence number the run's next log chunk must have.
    pub async fn next_log_seq(&self, run: RunId) -> Result<i64> {
        let last: Option<i64> = log_chunks::Entity::find()
            .filter(log_chunks::Column::OrgId.eq(self.org_s.clone()))
            .filter(log_chunks::Column::RunId.eq(run.to_string()))
            .select_only()
            .column_as(log_chunks::Column::Seq.max(), "max")
            .into_tuple::<Option<i64>>()
            .one(self.db)
            .await?
            .flatten();
        Ok(last.map_or(0, |l| l + 1))
    }

    pub async fn get_plan(&self, run: RunId) -> Result<PlanArtifact> {
        let m = plan_artifacts::Entity::find_by_id(run.to_string())
            .filter(plan_artifacts::Column::OrgId.eq(self.org_s.clone()))
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("plan"))?;
        Ok(PlanArtifact {
            plan_file: self.unseal(m.plan_file).await?,
            plan_json: m.plan_json,
            sha256: m.sha256,
            size: m.size,
        })
    }

    pub async fn put_plan(
        &self,
        run: RunId,
        plan_file: Vec<u8>,
        plan_json: String,
        sha256: String,
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.ensure_run(run).await?;
        let size = i64::try_from(plan_file.len()).unwrap_or(i64::MAX);
        plan_artifacts::Entity::delete_many()
            .filter(plan_artifacts::Column::RunId.eq(run.to_string()))
            .filter(plan_artifacts::Column::OrgId.eq(self.org_s.clone()))
            .exec(self.db)
            .await?;
        plan_artifacts::ActiveModel {
            run_id: Set(run.to_string()),
            org_id: Set(self.org_s.clone()),
            plan_file: Set(self.seal(plan_file).await?),
            plan_json: Set(plan_json),
            sha256: Set(sha256),
            size: Set(size),
            created_at: Set(now),
        }
        .insert(self.db)
        .await?;
        Ok(())
    }
}

/// The states of runs not yet ended (point lookups in `ix_runs_stack_state`).
pub(crate) fn unfinished_states() -> Vec<String> {
    RunState::ALL
        .into_iter()
        .filter(|s| !s.is_terminal())
        .map(|s| s.as_str().to_owned())
        .collect()
}

pub(crate) fn terminal_states() -> Vec<String> {
    RunState::ALL
        .into_iter()
        .filter(|s| s.is_terminal())
        .map(|s| s.as_str().to_owned())
        .collect()
}
