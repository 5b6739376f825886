//! Drift schedules and records. The scheduler reads only schedules that are due (indexed
//! `next_run_at`), so ten thousand schedules cost one small query per tick.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use std::collections::{BTreeMap, HashMap};

use sea_orm::sea_query::{LockBehavior, LockType};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder,
    QuerySelect, Set, Statement, TransactionTrait,
};
use terraplane_domain::drift::{DriftStatus, DriftedResource, Reaction};
use terraplane_domain::{OrgId, RunId, RunState, StackId};

use crate::runs::{NewRun, event_model, queued_run_model};
use crate::tenant::unfinished_states;

use crate::entities::*;
use crate::error::{Result, StoreError};
use crate::records::parse_id;
use crate::tenant::TenantScope;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriftSchedule {
    pub id: String,
    pub org_id: OrgId,
    pub stack_id: StackId,
    pub cron: String,
    pub timezone: String,
    pub next_run_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<drift_schedules::Model> for DriftSchedule {
    type Error = StoreError;
    fn try_from(m: drift_schedules::Model) -> Result<Self> {
        Ok(Self {
            org_id: parse_id(&m.org_id)?,
            stack_id: parse_id(&m.stack_id)?,
            id: m.id,
            cron: m.cron,
            timezone: m.timezone,
            next_run_at: m.next_run_at,
            created_at: m.created_at,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriftRecord {
    pub id: String,
    pub stack_id: StackId,
    pub open: bool,
    pub resources: Vec<DriftedResource>,
    /// The last check that saw it.
    pub last_run_id: String,
    pub first_seen_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub resolved_by_run_id: Option<String>,
}

impl TryFrom<drift_records::Model> for DriftRecord {
    type Error = StoreError;
    fn try_from(m: drift_records::Model) -> Result<Self> {
        Ok(Self {
            stack_id: parse_id(&m.stack_id)?,
            resources: serde_json::from_str(&m.resources).unwrap_or_default(),
            id: m.id,
            open: m.open,
            last_run_id: m.last_run_id,
            first_seen_at: m.first_seen_at,
            last_seen_at: m.last_seen_at,
            resolved_at: m.resolved_at,
            resolved_by_run_id: m.resolved_by_run_id,
        })
    }
}

/// What a finished check changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriftOutcome {
    /// Drift seen for the first time since the stack was last in sync.
    Opened(DriftRecord),
    /// Still drifted (the record's resources and last sighting are updated).
    StillDrifted(DriftRecord),
    /// In sync again: the open record is closed.
    Resolved(DriftRecord),
    /// In sync, as before.
    InSync,
}

impl<C: ConnectionTrait + TransactionTrait> TenantScope<'_, C> {
    pub async fn add_drift_schedule(
        &self,
        stack: StackId,
        cron: &str,
        timezone: &str,
        next_run_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<DriftSchedule> {
        self.get_stack(stack).await?;
        drift_schedules::ActiveModel {
            id: Set(uuid::Uuid::new_v4().to_string()),
            org_id: Set(self.org_s.clone()),
            stack_id: Set(stack.to_string()),
            cron: Set(cron.to_owned()),
            timezone: Set(timezone.to_owned()),
            next_run_at: Set(next_run_at),
            created_at: Set(now),
        }
        .insert(self.db)
        .await?
        .try_into()
    }

    pub async fn drift_schedules(&self, stack: StackId) -> Result<Vec<DriftSchedule>> {
        drift_schedules::Entity::find()
            .filter(drift_schedules::Column::OrgId.eq(self.org_s.clone()))
            .filter(drift_schedules::Column::StackId.eq(stack.to_string()))
            .order_by_asc(drift_schedules::Column::CreatedAt)
            .all(self.db)
            .await?
            .into_iter()
            .map(DriftSchedule::try_from)
            .collect()
    }

    /// The schedule `delete_drift_schedule` would delete.
    pub async fn delete_drift_schedule_preview(&self, id: &str) -> Result<DriftSchedule> {
        drift_schedules::Entity::find_by_id(id.to_owned())
            .filter(drift_schedules::Column::OrgId.eq(self.org_s.clone()))
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("drift schedule"))?
            .try_into()
    }

    pub async fn delete_drift_schedule(&self, id: &str) -> Result<DriftSchedule> {
        let m = drift_schedules::Entity::find_by_id(id.to_owned())
            .filter(drift_schedules::Column::OrgId.eq(self.org_s.clone()))
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("drift schedule"))?;
        drift_schedules::Entity::delete_by_id(m.id.clone())
            .exec(self.db)
            .await?;
        m.try_into()
    }

    pub async fn set_drift_reaction(&self, stack: StackId, reaction: Reaction) -> Result<()> {
        stacks::Entity::update_many()
            .col_expr(stacks::Column::DriftReaction, Expr::value(reaction.as_str()))
            .filter(stacks::Column::OrgId.eq(self.org_s.clone()))
            .filter(stacks::Column::Id.eq(stack.to_string()))
            .exec(self.db)
            .await?;
        Ok(())
    }

    /// Records what a check of `stack` (run `run`) found.
    pub async fn record_drift_check(
        &self,
        stack: StackId,
        run: &str,
        drifted: Vec<DriftedResource>,
        now: DateTime<Utc>,
    ) -> Result<DriftOutcome> {
        let open = drift_records::Entity::find()
            .filter(drift_records::Column::OrgId.eq(self.org_s.clone()))
            .filter(drift_records::Column::StackId.eq(stack.to_string()))
            .filter(drift_records::Column::Open.eq(true))
            .one(self.db)
            .await?;
        let status = if drifted.is_empty() {
            DriftStatus::InSync
        } else {
            DriftStatus::Drifted
        };
        stacks::Entity::update_many()
            .col_expr(stacks::Column::DriftStatus, Expr::value(status.as_str()))
            .col_expr(stacks::Column::DriftCheckedAt, Expr::value(Some(now)))
            .filter(stacks::Column::OrgId.eq(self.org_s.clone()))
            .filter(stacks::Column::Id.eq(stack.to_string()))
            .exec(self.db)
            .await?;
        let resources = serde_json::to_string(&drifted).unwrap_or_else(|_| "[]".into());
        Ok(match (open, drifted.is_empty()) {
            (None, true) => DriftOutcome::InSync,
            (Some(m), true) => {
                let mut a = m.into_active_model();
                a.open = Set(false);
                a.resolved_at = Set(Some(now));
                a.resolved_by_run_id = Set(Some(run.to_owned()));
                DriftOutcome::Resolved(a.update(self.db).await?.try_into()?)
            }
            (Some(m), false) => {
                let mut a = m.into_active_model();
                a.resources = Set(resources);
                a.last_run_id = Set(run.to_owned());
                a.last_seen_at = Set(now);
                DriftOutcome::StillDrifted(a.update(self.db).await?.try_into()?)
            }
            (None, false) => DriftOutcome::Opened(
                drift_records::ActiveModel {
                    id: Set(uuid::Uuid::new_v4().to_string()),
                    org_id: Set(self.org_s.clone()),
                    stack_id: Set(stack.to_string()),
                    open: Set(true),
                    resources: Set(resources),
                    last_run_id: Set(run.to_owned()),
                    first_seen_at: Set(now),
                    last_seen_at: Set(now),
                    resolved_at: Set(None),
                    resolved_by_run_id: Set(None),
                }
                .insert(self.db)
                .await?
                .try_into()?,
            ),
        })
    }

    /// Drift records, newest first: of one stack or the whole organization, open ones only
    /// when asked.
    pub async fn drift_records(&self, stack: Option<StackId>, open_only: bool) -> Result<Vec<DriftRecord>> {
        let mut q = drift_records::Entity::find().filter(drift_records::Column::OrgId.eq(self.org_s.clone()));
        if let Some(s) = stack {
            q = q.filter(drift_records::Column::StackId.eq(s.to_string()));
        }
        if open_only {
            q = q.filter(drift_records::Column::Open.eq(true));
        }
        q.order_by_desc(drift_records::Column::LastSeenAt)
            .limit(500)
            .all(self.db)
            .await?
            .into_iter()
            .map(DriftRecord::try_from)
            .collect()
    }

    pub(crate) async fn delete_stack_drift(&self, stack: StackId) -> Result<()> {
        drift_schedules::Entity::delete_many()
            .filter(drift_schedules::Column::OrgId.eq(self.org_s.clone()))
            .filter(drift_schedules::Column::StackId.eq(stack.to_string()))
            .exec(self.db)
            .await?;
        drift_records::Entity::delete_many()
            .filter(drift_records::Column::OrgId.eq(self.org_s.clone()))
            .filter(drift_records::Column::StackId.eq(stack.to_string()))
            .exec(self.db)
            .await?;
        Ok(())
    }
}

/// What one pass over due drift schedules did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FiredSchedules {
    /// Checks queued, one per stack: (organization, stack, run).
    pub queued: Vec<(OrgId, StackId, RunId)>,
    /// Stacks whose check could not start, and why.
    pub skipped: Vec<(StackId, String)>,
    /// Due schedules read; equal to the limit when more may be waiting.
    pub due: usize,
}

/// Why a drift check can't start on a stack, from its unfinished tracked runs and drift
/// checks (`unfinished`, any order) and its newest tracked run.
fn blocker(unfinished: &[&runs::Model], last_tracked: Option<&(String, String)>) -> Option<String> {
    use terraplane_domain::RunType;
    if unfinished.iter().any(|r| r.drift_detection) {
        return Some("a drift check is already queued or running".into());
    }
    if let Some(r) = unfinished
        .iter()
        .filter(|r| r.run_type == RunType::Tracked.as_str())
        .min_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)))
    {
        return Some(format!("tracked run {} is {}", r.id, r.state));
    }
    match last_tracked {
        None => Some("the stack has no finished tracked run yet".into()),
        Some((id, state)) if state != RunState::Finished.as_str() => {
            Some(format!("the stack's last tracked run {id} is {state}, not FINISHED"))
        }
        Some(_) => None,
    }
}

/// `?, ?, ?` or `$3, $4, $5`: `n` placeholders for `backend`, numbered from `first`.
fn placeholders(backend: DbBackend, first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| match backend {
            DbBackend::Postgres => format!("${i}"),
            _ => "?".to_owned(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why drift checks can't start now, for each of `stacks` that is blocked: checks run only
/// when the stack's last tracked run FINISHED, never beside a tracked run, one at a time.
/// Two queries per few hundred stacks, whatever their history.
async fn drift_check_blockers(db: &impl ConnectionTrait, stacks: &[StackId]) -> Result<HashMap<StackId, String>> {
    use terraplane_domain::RunType;
    let mut out = HashMap::new();
    for chunk in stacks.chunks(crate::IN_CHUNK) {
        let ids: Vec<String> = chunk.iter().map(ToString::to_string).collect();
        let unfinished = runs::Entity::find()
            .filter(runs::Column::StackId.is_in(ids.clone()))
            .filter(runs::Column::State.is_in(unfinished_states()))
            .filter(
                sea_orm::Condition::any()
                    .add(runs::Column::RunType.eq(RunType::Tracked.as_str()))
                    .add(runs::Column::DriftDetection.eq(true)),
            )
            .all(db)
            .await?;
        // The newest tracked run of each stack, found through the (stack_id, created_at) index.
        let backend = db.get_database_backend();
        let sql = format!(
            "SELECT r.stack_id, r.id, r.state FROM runs r WHERE r.stack_id IN ({}) AND r.run_type = {} \
             AND r.created_at = (SELECT MAX(r2.created_at) FROM runs r2 \
             WHERE r2.stack_id = r.stack_id AND r2.run_type = r.run_type)",
            placeholders(backend, 1, ids.len()),
            placeholders(backend, ids.len() + 1, 1),
        );
        let mut values: Vec<sea_orm::Value> = ids.iter().map(|s| s.clone().into()).collect();
        values.push(RunType::Tracked.as_str().into());
        let mut last: HashMap<String, (String, String)> = HashMap::new();
        for row in db
            .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
            .await?
        {
            let stack: String = row.try_get("", "stack_id")?;
            let id: String = row.try_get("", "id")?;
            let state: String = row.try_get("", "state")?;
            // Same timestamp: the greater id is the newer run (ids are time-ordered).
            match last.get(&stack) {
                Some((other, _)) if *other >= id => {}
                _ => {
                    last.insert(stack, (id, state));
                }
            }
        }
        for (stack, key) in chunk.iter().zip(&ids) {
            let mine: Vec<&runs::Model> = unfinished.iter().filter(|r| &r.stack_id == key).collect();
            if let Some(why) = blocker(&mine, last.get(key)) {
                out.insert(*stack, why);
            }
        }
    }
    Ok(out)
}

impl crate::Store {
    /// Why a drift check can't start on `stack` now, if it can't: checks run only when the
    /// stack's last tracked run FINISHED, never beside a tracked run, one at a time.
    pub async fn drift_check_blocker(&self, stack: StackId) -> Result<Option<String>> {
        Ok(drift_check_blockers(&self.db, &[stack]).await?.remove(&stack))
    }

    /// Fires up to `limit` due schedules in one transaction: moves each to its next firing
    /// (`next`), then queues one drift check per stack that may start one. A handful of
    /// statements per few hundred schedules: one read of the due schedules (locked with
    /// `SKIP LOCKED` on PostgreSQL, so schedulers never fire a slot twice), one update per
    /// distinct next firing, two reads for the blockers and multi-row inserts of the runs
    /// and their first events.
    pub async fn fire_due_drift_schedules(
        &self,
        now: DateTime<Utc>,
        limit: u64,
        mut next: impl FnMut(&DriftSchedule) -> DateTime<Utc>,
    ) -> Result<FiredSchedules> {
        let tx = self.db.begin().await?;
        let due: Vec<DriftSchedule> = drift_schedules::Entity::find()
            .filter(drift_schedules::Column::NextRunAt.lte(now))
            .order_by_asc(drift_schedules::Column::NextRunAt)
            .limit(limit)
            .lock_with_behavior(LockType::Update, LockBehavior::SkipLocked)
            .all(&tx)
            .await?
            .into_iter()
            .map(DriftSchedule::try_from)
            .collect::<Result<_>>()?;
        let mut fired = FiredSchedules {
            due: due.len(),
            ..FiredSchedules::default()
        };
        if due.is_empty() {
            return Ok(fired);
        }
        let mut by_next: BTreeMap<DateTime<Utc>, Vec<String>> = BTreeMap::new();
        for s in &due {
            by_next.entry(next(s)).or_default().push(s.id.clone());
        }
        let mut moved = 0;
        for (at, ids) in &by_next {
            for chunk in ids.chunks(crate::IN_CHUNK) {
                moved += drift_schedules::Entity::update_many()
                    .col_expr(drift_schedules::Column::NextRunAt, Expr::value(*at))
                    .filter(drift_schedules::Column::Id.is_in(chunk.to_vec()))
                    .filter(drift_schedules::Column::NextRunAt.lte(now))
                    .exec(&tx)
                    .await?
                    .rows_affected;
            }
        }
        if moved != due.len() as u64 {
            // Another scheduler moved some of them meanwhile (possible only without row
            // locks): leave this pass to it.
            tx.rollback().await?;
            return Err(StoreError::Conflict(format!(
                "{} of {} due drift schedules were fired by someone else",
                due.len() as u64 - moved,
                due.len()
            )));
        }
        // One check per stack, however many of its schedules came due.
        let mut stacks: Vec<(OrgId, StackId, &str)> = Vec::new();
        for s in &due {
            if !stacks.iter().any(|(_, id, _)| *id == s.stack_id) {
                stacks.push((s.org_id, s.stack_id, &s.cron));
            }
        }
        let ids: Vec<StackId> = stacks.iter().map(|(_, id, _)| *id).collect();
        // Concurrent passes (or schedulers) firing schedules of the same stack take turns
        // here, in one order, so the second sees the first's check as a blocker.
        let mut locked: Vec<String> = ids.iter().map(ToString::to_string).collect();
        locked.sort();
        for chunk in locked.chunks(crate::IN_CHUNK) {
            let _: Vec<String> = stacks::Entity::find()
                .select_only()
                .column(stacks::Column::Id)
                .filter(stacks::Column::Id.is_in(chunk.to_vec()))
                .order_by_asc(stacks::Column::Id)
                .lock(LockType::Update)
                .into_tuple()
                .all(&tx)
                .await?;
        }
        let mut blocked = drift_check_blockers(&tx, &ids).await?;
        let mut runs = Vec::new();
        let mut events = Vec::new();
        for (org, stack, cron) in stacks {
            if let Some(why) = blocked.remove(&stack) {
                fired.skipped.push((stack, why));
                continue;
            }
            let id = RunId::new();
            let org_s = org.to_string();
            let new = NewRun::drift_check(stack, format!("drift schedule {cron}"), "drift_schedule");
            runs.push(queued_run_model(&org_s, id, new, now));
            events.push(event_model(&org_s, &id.to_string(), RunState::Queued, None, now));
            fired.queued.push((org, stack, id));
        }
        while !runs.is_empty() {
            let rest = runs.split_off(runs.len().min(crate::RUN_INSERT_CHUNK));
            runs::Entity::insert_many(std::mem::replace(&mut runs, rest))
                .exec_without_returning(&tx)
                .await?;
        }
        while !events.is_empty() {
            let rest = events.split_off(events.len().min(crate::EVENT_INSERT_CHUNK));
            run_events::Entity::insert_many(std::mem::replace(&mut events, rest))
                .exec_without_returning(&tx)
                .await?;
        }
        tx.commit().await?;
        Ok(fired)
    }

    /// Moves a schedule to its next firing, if nobody else did since `seen` (so two
    /// schedulers never fire the same slot twice). True when this caller moved it.
    pub async fn advance_drift_schedule(&self, id: &str, seen: DateTime<Utc>, next: DateTime<Utc>) -> Result<bool> {
        let r = drift_schedules::Entity::update_many()
            .col_expr(drift_schedules::Column::NextRunAt, Expr::value(next))
            .filter(drift_schedules::Column::Id.eq(id))
            .filter(drift_schedules::Column::NextRunAt.eq(seen))
            .exec(&self.db)
            .await?;
        Ok(r.rows_affected == 1)
    }
}
