//! Run lifecycle persistence. Every state change is a conditional update (`WHERE state =
//! <old> AND fencing_token = <old>`) plus a run event in one transaction, with the next
//! state computed by the domain state machine, so two writers can never both win.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, SimpleExpr};
use std::collections::HashMap;

use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect, Set,
    TransactionSession, TransactionTrait,
};
use terraplane_domain::plan::PlanSummary;
use terraplane_domain::{RunEvent, RunId, RunPhase, RunState, RunType, StackId};

use crate::Store;
use crate::entities::*;
use crate::error::{Result, StoreError};
use crate::records::*;
use crate::tenant::TenantScope;

#[derive(Clone, Debug)]
pub struct NewRun {
    pub stack_id: StackId,
    pub run_type: RunType,
    pub commit_sha: Option<String>,
    pub triggered_by: String,
    pub trigger_kind: String,
    pub drift_detection: bool,
}

impl NewRun {
    /// A drift check: a proposed run of the branch head with `drift_detection`, which the
    /// runner plans with `-refresh-only`.
    pub fn drift_check(stack_id: StackId, triggered_by: String, trigger_kind: &str) -> Self {
        Self {
            stack_id,
            run_type: RunType::Proposed,
            commit_sha: None,
            triggered_by,
            trigger_kind: trigger_kind.into(),
            drift_detection: true,
        }
    }
}

/// Extra columns written together with a transition.
#[derive(Clone, Debug, Default)]
pub struct RunUpdate {
    pub note: Option<String>,
    pub error: Option<String>,
    pub plan: Option<(PlanSummary, bool)>,
    pub outputs: Option<serde_json::Value>,
    pub commit_sha: Option<String>,
    /// Only transitions whose caller holds this fencing token succeed.
    pub fencing_token: Option<i64>,
    /// Only a run still in this state moves (a decision taken on a snapshot).
    pub expect_state: Option<RunState>,
    /// Where approval policies now hold or released the run (see `Run::review_stage`).
    pub review_stage: Option<String>,
}

impl<C: ConnectionTrait + TransactionTrait> TenantScope<'_, C> {
    /// Queues a run. A tracked run on a stack locked by someone else is refused, naming
    /// the lock holder.
    pub async fn create_run(&self, r: NewRun, actor: &str, now: DateTime<Utc>) -> Result<Run> {
        let stack = self.get_stack(r.stack_id).await?;
        if r.run_type == RunType::Tracked
            && let Some(lock) = &stack.lock
            && lock.holder != actor
        {
            return Err(StoreError::Conflict(format!(
                "stack {:?} is locked by {}",
                stack.slug, lock.holder
            )));
        }
        let id = RunId::new();
        let tx = self.db.begin().await?;
        queued_run_model(&self.org_s, id, r, now).insert(&tx).await?;
        event_model(&self.org_s, &id.to_string(), RunState::Queued, None, now)
            .insert(&tx)
            .await?;
        tx.commit().await?;
        self.get_run(id).await
    }

    /// Applies `event` to a run of this organization.
    pub async fn transition_run(&self, id: RunId, event: RunEvent, upd: RunUpdate, now: DateTime<Utc>) -> Result<Run> {
        let tx = self.db.begin().await?;
        let run = transition(&tx, Some(&self.org_s), id, &event, upd, now).await?;
        tx.commit().await?;
        Ok(run)
    }

    /// Asks the runner holding a run to stop (seen on its next heartbeat), or cancels a run
    /// no runner holds yet.
    pub async fn cancel_run(&self, id: RunId, actor: &str, now: DateTime<Utc>) -> Result<Run> {
        let run = self.get_run(id).await?;
        let upd = RunUpdate {
            note: Some(format!("canceled by {actor}")),
            ..Default::default()
        };
        let run = self
            .transition_run(id, RunEvent::Cancel, upd, now)
            .await
            .map_err(|e| match e {
                StoreError::Conflict(_) => StoreError::Conflict(format!("run is {}; it cannot be canceled", run.state)),
                e => e,
            })?;
        Ok(run)
    }

    pub async fn renew_lease(&self, id: RunId, fencing: i64, until: DateTime<Utc>) -> Result<Run> {
        let res = runs::Entity::update_many()
            .col_expr(runs::Column::LeaseExpiresAt, Expr::value(until))
            .filter(runs::Column::Id.eq(id.to_string()))
            .filter(runs::Column::OrgId.eq(self.org_s.clone()))
            .filter(runs::Column::FencingToken.eq(fencing))
            .filter(runs::Column::State.is_in(held_states()))
            .exec(self.db)
            .await?;
        let run = self.get_run(id).await?;
        if res.rows_affected == 0 {
            return Err(StoreError::Conflict(format!("lease lost: run is {}", run.state)));
        }
        Ok(run)
    }
}

fn held_states() -> Vec<&'static str> {
    RunState::ALL
        .into_iter()
        .filter(|s| s.is_runner_held())
        .map(RunState::as_str)
        .collect()
}

/// A new run, QUEUED.
pub(crate) fn queued_run_model(org: &str, id: RunId, r: NewRun, now: DateTime<Utc>) -> runs::ActiveModel {
    runs::ActiveModel {
        id: Set(id.to_string()),
        org_id: Set(org.to_owned()),
        stack_id: Set(r.stack_id.to_string()),
        run_type: Set(r.run_type.as_str().to_owned()),
        state: Set(RunState::Queued.as_str().to_owned()),
        commit_sha: Set(r.commit_sha),
        triggered_by: Set(r.triggered_by),
        trigger_kind: Set(r.trigger_kind),
        drift_detection: Set(r.drift_detection),
        fencing_token: Set(0),
        cancel_requested: Set(false),
        created_at: Set(now),
        updated_at: Set(now),
        // The rest start NULL; left out of the statement.
        ..Default::default()
    }
}

/// A run event: the run entered `state`.
pub(crate) fn event_model(
    org: &str,
    run: &str,
    state: RunState,
    note: Option<String>,
    now: DateTime<Utc>,
) -> run_events::ActiveModel {
    run_events::ActiveModel {
        id: Set(uuid::Uuid::now_v7().to_string()),
        org_id: Set(org.to_owned()),
        run_id: Set(run.to_owned()),
        state: Set(state.as_str().to_owned()),
        note: Set(note),
        created_at: Set(now),
    }
}

async fn insert_event(
    db: &impl ConnectionTrait,
    org: &str,
    run: &str,
    state: RunState,
    note: Option<String>,
    now: DateTime<Utc>,
) -> Result<()> {
    event_model(org, run, state, note, now).insert(db).await?;
    Ok(())
}

async fn load(db: &impl ConnectionTrait, org: Option<&str>, id: RunId) -> Result<runs::Model> {
    let mut q = runs::Entity::find_by_id(id.to_string());
    if let Some(org) = org {
        q = q.filter(runs::Column::OrgId.eq(org));
    }
    q.one(db).await?.ok_or(StoreError::NotFound("run"))
}

async fn transition(
    db: &impl ConnectionTrait,
    org: Option<&str>,
    id: RunId,
    event: &RunEvent,
    upd: RunUpdate,
    now: DateTime<Utc>,
) -> Result<Run> {
    let m = load(db, org, id).await?;
    let current: RunState = m.state.parse().map_err(StoreError::Invalid)?;
    let next = current.apply(event).map_err(|e| StoreError::Conflict(e.to_string()))?;
    if let Some(expected) = upd.expect_state
        && expected != current
    {
        return Err(StoreError::Conflict(format!("run is {current}, no longer {expected}")));
    }
    if let Some(token) = upd.fencing_token
        && token != m.fencing_token
    {
        return Err(StoreError::Conflict(format!(
            "stale fencing token {token}: the run was claimed again (token {})",
            m.fencing_token
        )));
    }
    let mut cols: Vec<(runs::Column, SimpleExpr)> = vec![
        (runs::Column::State, Expr::value(next.as_str())),
        (runs::Column::UpdatedAt, Expr::value(now)),
    ];
    let mut token = m.fencing_token;
    match event {
        RunEvent::ClaimPlan | RunEvent::ClaimApply => {
            token += 1;
            cols.push((runs::Column::FencingToken, Expr::value(token)));
            cols.push((runs::Column::HeldSince, Expr::value(now)));
        }
        _ => {}
    }
    if !next.is_runner_held() {
        cols.push((runs::Column::LeaseExpiresAt, Expr::value(Option::<DateTime<Utc>>::None)));
        cols.push((runs::Column::HeldSince, Expr::value(Option::<DateTime<Utc>>::None)));
    }
    if let Some(r) = &upd.review_stage {
        cols.push((runs::Column::ReviewStage, Expr::value(r.clone())));
    }
    if next == RunState::Confirmed || (next == RunState::Queued && current == RunState::PendingReview) {
        // The apply phase, or a run released by its reviewers, is dispatched afresh.
        cols.push((runs::Column::DispatchedAt, Expr::value(Option::<DateTime<Utc>>::None)));
    }
    if let Some(e) = &upd.error {
        cols.push((runs::Column::Error, Expr::value(e.clone())));
    }
    if let Some((s, has_changes)) = upd.plan {
        cols.push((runs::Column::PlanAdd, Expr::value(s.add)));
        cols.push((runs::Column::PlanChange, Expr::value(s.change)));
        cols.push((runs::Column::PlanDestroy, Expr::value(s.destroy)));
        cols.push((runs::Column::HasChanges, Expr::value(has_changes)));
    }
    if let Some(o) = &upd.outputs {
        cols.push((runs::Column::Outputs, Expr::value(o.to_string())));
    }
    if let Some(c) = &upd.commit_sha {
        cols.push((runs::Column::CommitSha, Expr::value(c.clone())));
    }
    let mut q = runs::Entity::update_many()
        .filter(runs::Column::Id.eq(m.id.clone()))
        .filter(runs::Column::State.eq(m.state.clone()))
        .filter(runs::Column::FencingToken.eq(m.fencing_token));
    for (c, v) in cols {
        q = q.col_expr(c, v);
    }
    let res = q.exec(db).await?;
    if res.rows_affected == 0 {
        return Err(StoreError::Conflict("run changed concurrently; retry".into()));
    }
    let note = upd.note.or(upd.error);
    insert_event(db, &m.org_id, &m.id, next, note, now).await?;
    load(db, None, id).await?.try_into()
}

/// Outcome of a lease expiry sweep, for logging and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpiredRun {
    pub run_id: RunId,
    pub was: RunState,
}

impl Store {
    /// Claims a run for a phase: QUEUED → PREPARING (plan) or CONFIRMED → APPLYING (apply),
    /// bumping the fencing token and setting the lease. Any other state is a conflict, and
    /// the runner drops the delivery. Unscoped: the runner knows only the run id.
    pub async fn claim_run(
        &self,
        id: RunId,
        phase: RunPhase,
        runner_id: &str,
        lease_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Run> {
        let event = match phase {
            RunPhase::Plan => RunEvent::ClaimPlan,
            RunPhase::Apply => RunEvent::ClaimApply,
        };
        let tx = self.db.begin().await?;
        let upd = RunUpdate {
            note: Some(format!("claimed by runner {runner_id}")),
            ..Default::default()
        };
        let run = transition(&tx, None, id, &event, upd, now).await?;
        runs::Entity::update_many()
            .col_expr(runs::Column::RunnerId, Expr::value(runner_id.to_owned()))
            .col_expr(runs::Column::LeaseExpiresAt, Expr::value(lease_until))
            .filter(runs::Column::Id.eq(id.to_string()))
            .exec(&tx)
            .await?;
        tx.commit().await?;
        Ok(Run {
            runner_id: Some(runner_id.to_owned()),
            lease_expires_at: Some(lease_until),
            ..run
        })
    }

    /// Stacks whose unfinished runs need the scheduler now: a run waiting to be published
    /// (never published, or published before `republish_before` and still waiting), or a
    /// run held by a runner whose lease expired or that was taken before `held_before`.
    /// Runs published and waiting for a runner cost nothing here until they are due again.
    pub async fn stacks_needing_dispatch(
        &self,
        now: DateTime<Utc>,
        republish_before: DateTime<Utc>,
        held_before: DateTime<Utc>,
    ) -> Result<Vec<StackId>> {
        let waiting = [RunState::Queued.as_str(), RunState::Confirmed.as_str()];
        let due = Condition::all().add(runs::Column::State.is_in(waiting)).add(
            Condition::any()
                .add(runs::Column::DispatchedAt.is_null())
                .add(runs::Column::DispatchedAt.lt(republish_before)),
        );
        let expired = Condition::all().add(runs::Column::State.is_in(held_states())).add(
            Condition::any()
                .add(runs::Column::LeaseExpiresAt.lt(now))
                .add(runs::Column::HeldSince.lt(held_before)),
        );
        runs::Entity::find()
            .select_only()
            .column(runs::Column::StackId)
            .distinct()
            .filter(Condition::any().add(due).add(expired))
            .into_tuple::<String>()
            .all(&self.db)
            .await?
            .iter()
            .map(|s| parse_id(s))
            .collect()
    }

    /// The unfinished runs of `stacks`, oldest first.
    pub async fn unfinished_runs_of(&self, stacks: &[StackId]) -> Result<Vec<Run>> {
        let mut out = Vec::new();
        for chunk in stacks.chunks(crate::IN_CHUNK) {
            let rows = runs::Entity::find()
                .filter(runs::Column::StackId.is_in(chunk.iter().map(ToString::to_string)))
                .filter(runs::Column::State.is_in(crate::tenant::unfinished_states()))
                .all(&self.db)
                .await?;
            for m in rows {
                out.push(Run::try_from(m)?);
            }
        }
        out.sort_by_key(|r| (r.created_at, r.id));
        Ok(out)
    }

    /// The worker pool of each of `stacks` that exists.
    pub async fn worker_pools(&self, stacks: &[StackId]) -> Result<HashMap<StackId, String>> {
        let mut out = HashMap::new();
        for chunk in stacks.chunks(crate::IN_CHUNK) {
            let rows: Vec<(String, String)> = stacks::Entity::find()
                .select_only()
                .column(stacks::Column::Id)
                .column(stacks::Column::WorkerPool)
                .filter(stacks::Column::Id.is_in(chunk.iter().map(ToString::to_string)))
                .into_tuple()
                .all(&self.db)
                .await?;
            for (id, pool) in rows {
                out.insert(parse_id(&id)?, pool);
            }
        }
        Ok(out)
    }

    /// A run of any organization (scheduler and benchmarks).
    pub async fn get_run_any(&self, id: RunId) -> Result<Run> {
        runs::Entity::find_by_id(id.to_string())
            .one(&self.db)
            .await?
            .ok_or(StoreError::NotFound("run"))?
            .try_into()
    }

    pub async fn get_stack_any(&self, id: StackId) -> Result<Stack> {
        stacks::Entity::find_by_id(id.to_string())
            .one(&self.db)
            .await?
            .ok_or(StoreError::NotFound("stack"))?
            .try_into()
    }

    /// Records that runs were published, each in the state it was published in, unless it
    /// moved on meanwhile. Returns how many were marked.
    pub async fn mark_dispatched(&self, published: &[(RunId, RunState)], now: DateTime<Utc>) -> Result<u64> {
        let mut by_state: HashMap<RunState, Vec<String>> = HashMap::new();
        for (id, state) in published {
            by_state.entry(*state).or_default().push(id.to_string());
        }
        let mut marked = 0;
        for (state, ids) in by_state {
            for chunk in ids.chunks(crate::IN_CHUNK) {
                marked += runs::Entity::update_many()
                    .col_expr(runs::Column::DispatchedAt, Expr::value(now))
                    .filter(runs::Column::Id.is_in(chunk.to_vec()))
                    .filter(runs::Column::State.eq(state.as_str()))
                    .exec(&self.db)
                    .await?
                    .rows_affected;
            }
        }
        Ok(marked)
    }

    /// Fails a run held by a runner (lease expiry, timeout). When it was applying, the
    /// stack's state lock is kept and marked as needing recovery: nobody knows how far
    /// the apply got.
    pub async fn fail_held_run(&self, run: &Run, reason: String, now: DateTime<Utc>) -> Result<Run> {
        let tx = self.db.begin().await?;
        let upd = RunUpdate {
            error: Some(reason),
            fencing_token: Some(run.fencing_token),
            expect_state: Some(run.state),
            ..Default::default()
        };
        let failed = transition(&tx, None, run.id, &RunEvent::Fail, upd, now).await?;
        if run.state == RunState::Applying {
            state_locks::Entity::update_many()
                .col_expr(state_locks::Column::NeedsRecovery, Expr::value(true))
                .filter(state_locks::Column::StackId.eq(run.stack_id.to_string()))
                .exec(&tx)
                .await?;
        }
        tx.commit().await?;
        Ok(failed)
    }

    /// Fails a run outside any runner's hold (e.g. a stack deleted under it).
    pub async fn fail_run(&self, id: RunId, reason: String, now: DateTime<Utc>) -> Result<Run> {
        let tx = self.db.begin().await?;
        let upd = RunUpdate {
            error: Some(reason),
            ..Default::default()
        };
        let run = transition(&tx, None, id, &RunEvent::Fail, upd, now).await?;
        tx.commit().await?;
        Ok(run)
    }
}
