//! Drift schedules and records. The scheduler reads only schedules that are due (indexed
//! `next_run_at`), so ten thousand schedules cost one small query per tick.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder, QuerySelect,
    Set, TransactionTrait,
};
use terraplane_domain::drift::{DriftStatus, DriftedResource, Reaction};
use terraplane_domain::{OrgId, StackId};

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

impl crate::Store {
    /// Why a drift check can't start on `stack` now, if it can't: checks run only when the
    /// stack's last tracked run FINISHED, never beside a tracked run, one at a time.
    pub async fn drift_check_blocker(&self, stack: StackId) -> Result<Option<String>> {
        use terraplane_domain::{RunState, RunType};
        let runs = runs::Entity::find()
            .filter(runs::Column::StackId.eq(stack.to_string()))
            .filter(
                sea_orm::Condition::any()
                    .add(runs::Column::RunType.eq(RunType::Tracked.as_str()))
                    .add(runs::Column::DriftDetection.eq(true)),
            )
            .order_by_desc(runs::Column::CreatedAt)
            .limit(50)
            .all(&self.db)
            .await?;
        let terminal = |s: &str| s.parse::<RunState>().map(|s| s.is_terminal()).unwrap_or(true);
        if runs.iter().any(|r| r.drift_detection && !terminal(&r.state)) {
            return Ok(Some("a drift check is already queued or running".into()));
        }
        let tracked: Vec<_> = runs
            .iter()
            .filter(|r| r.run_type == RunType::Tracked.as_str())
            .collect();
        if let Some(r) = tracked.iter().find(|r| !terminal(&r.state)) {
            return Ok(Some(format!("tracked run {} is {}", r.id, r.state)));
        }
        match tracked.first() {
            None => Ok(Some("the stack has no finished tracked run yet".into())),
            Some(r) if r.state != RunState::Finished.as_str() => Ok(Some(format!(
                "the stack's last tracked run {} is {}, not FINISHED",
                r.id, r.state
            ))),
            Some(_) => Ok(None),
        }
    }

    /// Schedules due at `now`, oldest due first (for the scheduler; every organization).
    pub async fn due_drift_schedules(&self, now: DateTime<Utc>, limit: u64) -> Result<Vec<DriftSchedule>> {
        drift_schedules::Entity::find()
            .filter(drift_schedules::Column::NextRunAt.lte(now))
            .order_by_asc(drift_schedules::Column::NextRunAt)
            .limit(limit)
            .all(&self.db)
            .await?
            .into_iter()
            .map(DriftSchedule::try_from)
            .collect()
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
