//! GraphQL for drift detection: schedules, on-demand checks and drift records (merged into
//! the root types); a stack's `driftStatus` lives on `Stack`.

use async_graphql::{Context, Enum, ID, Object, SimpleObject};
use chrono::{DateTime, Utc};

use crate::graphql::{Run, principal, state};

#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(name = "DriftStatus", remote = "terraplane_domain::drift::DriftStatus")]
pub enum GqlDriftStatus {
    InSync,
    Drifted,
    Unknown,
}

#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(name = "DriftReaction", remote = "terraplane_domain::drift::Reaction")]
pub enum GqlReaction {
    /// Record the drift and notify.
    Alert,
    /// Also trigger a tracked run that converges (confirmed like any run unless autodeploy).
    Reconcile,
}

#[derive(SimpleObject)]
pub struct DriftSchedule {
    id: ID,
    /// The stack's id.
    stack: String,
    cron: String,
    timezone: String,
    next_run_at: DateTime<Utc>,
}

fn schedule(s: terraplane_store::DriftSchedule, stack: String) -> DriftSchedule {
    DriftSchedule {
        id: ID(s.id),
        stack,
        cron: s.cron,
        timezone: s.timezone,
        next_run_at: s.next_run_at,
    }
}

#[derive(SimpleObject)]
pub struct DriftedResource {
    address: String,
    /// `update`, or `delete` when the resource is gone.
    action: String,
    /// Top-level attributes that differ.
    attributes: Vec<String>,
}

#[derive(SimpleObject)]
pub struct DriftRecord {
    id: ID,
    stack: String,
    /// Still drifted (no check has found the stack in sync since).
    open: bool,
    resources: Vec<DriftedResource>,
    last_run_id: String,
    first_seen_at: DateTime<Utc>,
    last_seen_at: DateTime<Utc>,
    resolved_at: Option<DateTime<Utc>>,
    resolved_by_run_id: Option<String>,
}

impl DriftRecord {
    fn new(r: terraplane_store::DriftRecord, stack: String) -> Self {
        Self {
            id: ID(r.id),
            stack,
            open: r.open,
            resources: r
                .resources
                .into_iter()
                .map(|d| DriftedResource {
                    address: d.address,
                    action: d.action,
                    attributes: d.attributes,
                })
                .collect(),
            last_run_id: r.last_run_id,
            first_seen_at: r.first_seen_at,
            last_seen_at: r.last_seen_at,
            resolved_at: r.resolved_at,
            resolved_by_run_id: r.resolved_by_run_id,
        }
    }
}

#[derive(Default)]
pub struct DriftQuery;

#[Object]
impl DriftQuery {
    async fn drift_schedules(&self, ctx: &Context<'_>, stack_id: ID) -> async_graphql::Result<Vec<DriftSchedule>> {
        let p = principal(ctx)?;
        Ok(crate::drift::schedules(state(ctx), p, &stack_id)
            .await?
            .into_iter()
            .map(|s| schedule(s, stack_id.to_string()))
            .collect())
    }

    /// Drift records, newest first: of one stack, or across the organization (the drift
    /// inbox); `openOnly` leaves out resolved ones.
    async fn drift_records(
        &self,
        ctx: &Context<'_>,
        stack_id: Option<ID>,
        #[graphql(default = false)] open_only: bool,
    ) -> async_graphql::Result<Vec<DriftRecord>> {
        let p = principal(ctx)?;
        Ok(
            crate::drift::records(state(ctx), p, stack_id.as_ref().map(|s| s.as_str()), open_only)
                .await?
                .into_iter()
                .map(|(r, s)| DriftRecord::new(r, s))
                .collect(),
        )
    }
}

#[derive(Default)]
pub struct DriftMutation;

#[Object]
impl DriftMutation {
    /// Adds a drift-check schedule (cron, 5 fields or 6 with seconds, in `timezone`) and
    /// sets the stack's reaction when given; needs admin on the stack's space.
    async fn drift_schedule_add(
        &self,
        ctx: &Context<'_>,
        stack_id: ID,
        cron: String,
        #[graphql(default_with = "\"UTC\".to_string()")] timezone: String,
        reaction: Option<GqlReaction>,
    ) -> async_graphql::Result<DriftSchedule> {
        let p = principal(ctx)?;
        let (s, stack) =
            crate::drift::add_schedule(state(ctx), p, &stack_id, &cron, &timezone, reaction.map(Into::into)).await?;
        Ok(schedule(s, stack.slug))
    }

    async fn drift_schedule_delete(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<DriftSchedule> {
        let p = principal(ctx)?;
        let s = crate::drift::delete_schedule(state(ctx), p, &id).await?;
        let stack = state(ctx)
            .store
            .scope(p.org)
            .get_stack(s.stack_id)
            .await
            .map_err(crate::error::ApiError::from)?;
        Ok(schedule(s, stack.slug))
    }

    /// Runs a drift check now (a proposed, refresh-only run); 409 while a tracked run or
    /// another check is in progress, or before the stack's first tracked run finished.
    async fn drift_check(&self, ctx: &Context<'_>, stack_id: ID) -> async_graphql::Result<Run> {
        let p = principal(ctx)?;
        let run = crate::drift::check_now(state(ctx), p, &stack_id).await?;
        Ok(Run::new(run, stack_id.to_string()))
    }
}
