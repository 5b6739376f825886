//! Drift detection in the api: schedules and on-demand checks (GraphQL), and what happens
//! when a check's plan comes back (`after_check`, called by the runner protocol): the drift
//! record opens, updates or closes, and a stack set to `reconcile` gets a tracked run.

use terraplane_domain::drift::{Reaction, Schedule, drifted_resources};
use terraplane_domain::{RunType, StackId};
use terraplane_store::{DriftOutcome, DriftRecord, DriftSchedule, NewRun, Run, Stack};

use crate::AppState;
use crate::auth::{Action, Principal};
use crate::bus::BusEvent;
use crate::error::{ApiError, ApiResult};
use crate::service::{event, get_stack, store_err};

/// Adds a schedule (and sets the stack's reaction when given); needs admin on the stack.
pub async fn add_schedule(
    st: &AppState,
    p: &Principal,
    stack: &str,
    cron: &str,
    timezone: &str,
    reaction: Option<Reaction>,
) -> ApiResult<(DriftSchedule, Stack)> {
    let s = get_stack(st, p, stack, Action::Admin).await?;
    let schedule = Schedule::parse(cron, timezone).map_err(ApiError::BadRequest)?;
    let now = st.clock.now();
    let next = schedule
        .next_after(now)
        .ok_or_else(|| ApiError::BadRequest(format!("cron expression {cron:?} never fires")))?;
    let tx = st.store.begin().await?;
    let created = tx
        .scope(p.org)
        .add_drift_schedule(s.id, cron.trim(), timezone, next, now)
        .await?;
    if let Some(r) = reaction {
        tx.scope(p.org).set_drift_reaction(s.id, r).await?;
    }
    tx.scope(p.org)
        .append_audit(
            event(
                p,
                "drift.schedule.add",
                "stack",
                stack,
                None,
                Some(serde_json::json!({
                    "id": created.id, "cron": created.cron, "timezone": created.timezone,
                    "reaction": reaction.map(Reaction::as_str),
                })),
            ),
            now,
        )
        .await?;
    tx.commit().await?;
    let s = st.store.scope(p.org).get_stack(s.id).await?;
    Ok((created, s))
}

pub async fn delete_schedule(st: &AppState, p: &Principal, id: &str) -> ApiResult<DriftSchedule> {
    p.require_member()?;
    let scope = st.store.scope(p.org);
    let found = scope
        .delete_drift_schedule_preview(id)
        .await
        .map_err(|_| ApiError::NotFound("drift schedule"))?;
    let stack = scope.get_stack(found.stack_id).await?;
    p.require_in(stack.space_id, Action::Read, "drift schedule")?;
    p.require_in(stack.space_id, Action::Admin, "drift schedule")?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let gone = tx.scope(p.org).delete_drift_schedule(id).await?;
    tx.scope(p.org)
        .append_audit(
            event(
                p,
                "drift.schedule.delete",
                "stack",
                &stack.slug,
                Some(serde_json::json!({ "id": gone.id, "cron": gone.cron, "timezone": gone.timezone })),
                None,
            ),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(gone)
}

pub async fn schedules(st: &AppState, p: &Principal, stack: &str) -> ApiResult<Vec<DriftSchedule>> {
    let s = get_stack(st, p, stack, Action::Read).await?;
    Ok(st.store.scope(p.org).drift_schedules(s.id).await?)
}

/// Queues a drift check now; refused (409) when one couldn't run now.
pub async fn check_now(st: &AppState, p: &Principal, stack: &str) -> ApiResult<Run> {
    let s = get_stack(st, p, stack, Action::Write).await?;
    if let Some(why) = st.store.drift_check_blocker(s.id).await? {
        return Err(ApiError::conflict("drift_check_not_possible", why));
    }
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let run = tx
        .scope(p.org)
        .create_run(NewRun::drift_check(s.id, p.name(), "drift_check"), &p.name(), now)
        .await
        .map_err(store_err("stack_locked"))?;
    tx.scope(p.org)
        .append_audit(
            event(
                p,
                "drift.check",
                "run",
                run.id.to_string(),
                None,
                Some(serde_json::json!({ "stack": stack })),
            ),
            now,
        )
        .await?;
    tx.commit().await?;
    st.bus.publish(BusEvent::RunChanged(run.id));
    st.kick_scheduler();
    Ok(run)
}

/// Drift records of a stack, or of every stack the caller can see (the drift inbox).
pub async fn records(
    st: &AppState,
    p: &Principal,
    stack: Option<&str>,
    open_only: bool,
) -> ApiResult<Vec<(DriftRecord, String)>> {
    p.require_member()?;
    let scope = st.store.scope(p.org);
    let stack_id: Option<StackId> = match stack {
        Some(slug) => Some(get_stack(st, p, slug, Action::Read).await?.id),
        None => None,
    };
    let stacks = scope.list_stacks().await?;
    let recs = scope.drift_records(stack_id, open_only).await?;
    Ok(recs
        .into_iter()
        .filter_map(|r| {
            let s = stacks.iter().find(|s| s.id == r.stack_id)?;
            p.can_see(s.space_id).then(|| (r, s.slug.clone()))
        })
        .collect())
}

/// After a drift check's plan: records what it found and reacts.
pub async fn after_check(st: &AppState, run: &Run, stack: &Stack, has_changes: bool) -> ApiResult<DriftOutcome> {
    let scope = st.store.scope(run.org_id);
    let drifted = if has_changes {
        let plan = scope.get_plan(run.id).await?;
        let json: serde_json::Value = serde_json::from_str(&plan.plan_json).unwrap_or_default();
        drifted_resources(&json)
    } else {
        Vec::new()
    };
    let now = st.clock.now();
    let outcome = scope
        .record_drift_check(stack.id, &run.id.to_string(), drifted, now)
        .await?;
    let drifted_now = matches!(outcome, DriftOutcome::Opened(_) | DriftOutcome::StillDrifted(_));
    let note = match &outcome {
        DriftOutcome::Opened(r) | DriftOutcome::StillDrifted(r) => Some((
            terraplane_domain::notify::EventKind::DriftDetected,
            format!("drift in {} resource(s)", r.resources.len()),
            r.resources.clone(),
        )),
        DriftOutcome::Resolved(_) => Some((
            terraplane_domain::notify::EventKind::DriftResolved,
            "back in sync".to_owned(),
            Vec::new(),
        )),
        DriftOutcome::InSync => None,
    };
    if let Some((kind, summary, resources)) = note {
        crate::notify::emit(st, kind, stack, Some(run), summary, resources, None).await;
    }
    if drifted_now && stack.drift_reaction == Reaction::Reconcile {
        let active = st.store.drift_check_blocker(stack.id).await?;
        // Only a tracked run in progress stands in the way (this check is finishing).
        if active.as_deref().is_none_or(|w| !w.starts_with("tracked run")) {
            match scope
                .create_run(
                    NewRun {
                        stack_id: stack.id,
                        run_type: RunType::Tracked,
                        commit_sha: None,
                        triggered_by: format!("drift reconciliation (check {})", run.id),
                        trigger_kind: "drift_reconcile".into(),
                        drift_detection: false,
                    },
                    "terraplane",
                    now,
                )
                .await
            {
                Ok(r) => {
                    tracing::info!(run_id = %r.id, stack = %stack.slug, "reconciliation run queued");
                    st.bus.publish(BusEvent::RunChanged(r.id));
                    st.kick_scheduler();
                }
                Err(e) => tracing::warn!(stack = %stack.slug, error = %e, "cannot queue a reconciliation run"),
            }
        }
    }
    Ok(outcome)
}
