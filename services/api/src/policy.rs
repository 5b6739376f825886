//! Rego policies: the operations behind GraphQL (create, update with a new version per
//! change, attach, detach, delete), which policies apply to a stack (attached, or
//! `autoattach:<label>` from the stack's space or an ancestor it inherits), and evaluation:
//! bounded in time and memory, off the async threads, every result stored with the policy
//! version, the input hash, the outcome and the messages.

use terraplane_domain::RunId;
use terraplane_policy::input::{self as pin, PlanContext};
use terraplane_policy::{Limits, PolicyType};
use terraplane_scheduler::policies::ns;
pub use terraplane_scheduler::policies::{self as shared, Verdict, run_info, stack_info};
use terraplane_store::{NewPolicy, Policy, PolicyEvaluation, PolicyPatch, Run, Stack, TenantScope};

use crate::AppState;
use crate::auth::{Action, Principal};
use crate::error::{ApiError, ApiResult};
use crate::service::{admin_space, event, get_stack, slug_or_name, store_err};
use crate::vars::{check_labels, check_reachable};

pub struct PolicyInput {
    pub slug: Option<String>,
    pub name: String,
    pub policy_type: String,
    pub body: String,
    pub labels: Vec<String>,
    pub description: Option<String>,
    pub space: Option<String>,
}

/// Largest policy source accepted.
const MAX_BODY_BYTES: usize = 256 * 1024;

fn parse_type(t: &str) -> ApiResult<PolicyType> {
    t.parse::<PolicyType>().map_err(|e| ApiError::BadRequest(e.to_string()))
}

/// Compiles `body` as policy `name`, or says where it is wrong.
fn check_body(name: &str, body: &str) -> ApiResult<terraplane_policy::Policy> {
    if body.len() > MAX_BODY_BYTES {
        return Err(ApiError::BadRequest(format!(
            "the policy is {} bytes; the limit is {MAX_BODY_BYTES}",
            body.len()
        )));
    }
    terraplane_policy::Policy::compile(name, body)
        .map_err(|e| ApiError::BadRequest(format!("policy does not compile: {e}")))
}

fn check_policy_labels(kind: PolicyType, labels: &[String]) -> ApiResult<()> {
    check_labels(labels)?;
    if kind == PolicyType::Login && labels.iter().any(|l| l.starts_with("autoattach:")) {
        return Err(ApiError::BadRequest(
            "login policies apply to the whole organization; autoattach labels do not apply to them".into(),
        ));
    }
    Ok(())
}

fn policy_json(p: &Policy) -> serde_json::Value {
    serde_json::json!({
        "name": p.name,
        "type": p.policy_type,
        "labels": p.labels,
        "version": p.version,
    })
}

pub async fn list_policies(st: &AppState, p: &Principal) -> ApiResult<Vec<Policy>> {
    p.require_member()?;
    let all = st.store.scope(p.org).list_policies().await?;
    Ok(all.into_iter().filter(|x| p.can_see(x.space_id)).collect())
}

pub async fn get_policy(st: &AppState, p: &Principal, slug: &str, action: Action) -> ApiResult<Policy> {
    p.require_member()?;
    let x = st.store.scope(p.org).get_policy_by_slug(slug).await?;
    p.require_in(x.space_id, Action::Read, "policy")?;
    p.require_in(x.space_id, action, "policy")?;
    Ok(x)
}

pub async fn create_policy(st: &AppState, p: &Principal, i: PolicyInput) -> ApiResult<Policy> {
    let space = admin_space(st, p, i.space.as_deref()).await?;
    if i.name.trim().is_empty() {
        return Err(ApiError::BadRequest("name must not be empty".into()));
    }
    let slug = slug_or_name(i.slug.as_deref(), &i.name)?;
    let kind = parse_type(&i.policy_type)?;
    if kind == PolicyType::Login {
        // A login policy can make anyone an owner: only owners write them.
        p.require_owner()?;
    }
    check_policy_labels(kind, &i.labels)?;
    check_body(slug.as_str(), &i.body)?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let x = tx
        .scope(p.org)
        .create_policy(
            NewPolicy {
                slug: slug.to_string(),
                name: i.name,
                policy_type: kind.as_str().into(),
                description: i.description.unwrap_or_default(),
                labels: i.labels,
                body: i.body,
                space_id: space.id,
            },
            &p.name(),
            now,
        )
        .await
        .map_err(store_err("policy_exists"))?;
    tx.scope(p.org)
        .append_audit(
            event(p, "policy.create", "policy", &x.slug, None, Some(policy_json(&x))),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(x)
}

pub async fn update_policy(st: &AppState, p: &Principal, slug: &str, patch: PolicyPatch) -> ApiResult<Policy> {
    let before = get_policy(st, p, slug, Action::Admin).await?;
    let kind = parse_type(&before.policy_type)?;
    if kind == PolicyType::Login {
        p.require_owner()?;
    }
    if let Some(n) = &patch.name
        && n.trim().is_empty()
    {
        return Err(ApiError::BadRequest("name must not be empty".into()));
    }
    if let Some(l) = &patch.labels {
        check_policy_labels(kind, l)?;
    }
    if let Some(b) = &patch.body {
        check_body(slug, b)?;
    }
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let x = tx.scope(p.org).update_policy(slug, patch, &p.name(), now).await?;
    tx.scope(p.org)
        .append_audit(
            event(
                p,
                "policy.update",
                "policy",
                slug,
                Some(policy_json(&before)),
                Some(policy_json(&x)),
            ),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(x)
}

pub async fn delete_policy(st: &AppState, p: &Principal, slug: &str) -> ApiResult<Policy> {
    let x = get_policy(st, p, slug, Action::Admin).await?;
    if x.policy_type == PolicyType::Login.as_str() {
        p.require_owner()?;
    }
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let x = tx.scope(p.org).delete_policy(slug).await?;
    tx.scope(p.org)
        .append_audit(
            event(p, "policy.delete", "policy", slug, Some(policy_json(&x)), None),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(x)
}

pub async fn attach_policy(st: &AppState, p: &Principal, policy: &str, stack: &str) -> ApiResult<(Policy, Stack)> {
    let s = get_stack(st, p, stack, Action::Admin).await?;
    let x = get_policy(st, p, policy, Action::Read).await?;
    if x.policy_type == PolicyType::Login.as_str() {
        return Err(ApiError::BadRequest(
            "login policies apply to the whole organization and are not attached to stacks".into(),
        ));
    }
    check_reachable(st, p, &s, x.space_id, "policy").await?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    tx.scope(p.org).attach_policy(&x.id, s.id, now).await?;
    tx.scope(p.org)
        .append_audit(
            event(
                p,
                "policy.attach",
                "stack",
                stack,
                None,
                Some(serde_json::json!({ "policy": x.slug })),
            ),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok((x, s))
}

pub async fn detach_policy(st: &AppState, p: &Principal, policy: &str, stack: &str) -> ApiResult<(Policy, Stack)> {
    let s = get_stack(st, p, stack, Action::Admin).await?;
    let x = get_policy(st, p, policy, Action::Read).await?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    tx.scope(p.org).detach_policy(&x.id, s.id).await?;
    tx.scope(p.org)
        .append_audit(
            event(
                p,
                "policy.detach",
                "stack",
                stack,
                Some(serde_json::json!({ "policy": x.slug })),
                None,
            ),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok((x, s))
}

/// The policies of `kind` that apply to `stack` (see [`shared::stack_policies`]).
pub async fn stack_policies(scope: &TenantScope<'_>, stack: &Stack, kind: PolicyType) -> ApiResult<Vec<Policy>> {
    Ok(shared::stack_policies(scope, stack, kind).await?)
}

fn limits(st: &AppState) -> Limits {
    shared::limits(&st.cfg.policy)
}

/// Evaluates `policies` on `input` within the configured limits (see [`shared::evaluate`]).
pub async fn evaluate(
    st: &AppState,
    kind: PolicyType,
    policies: Vec<Policy>,
    input: &serde_json::Value,
) -> Vec<Verdict> {
    shared::evaluate(limits(st), kind, policies, input).await
}

/// Stores verdicts on one input.
pub async fn record(
    scope: &TenantScope<'_>,
    kind: PolicyType,
    input: &serde_json::Value,
    subject: &str,
    run: Option<&Run>,
    verdicts: &[Verdict],
    now: chrono::DateTime<chrono::Utc>,
) -> ApiResult<Vec<PolicyEvaluation>> {
    Ok(shared::record(scope, kind, input, subject, run, verdicts, now).await?)
}

/// Evaluates the plan policies of a run's stack on its plan (Terraform's JSON plan, before
/// any redaction: sensitive values are hashed here) and stores the verdicts. The run's
/// result applies them ([`plan_decision`]).
pub async fn evaluate_plan(st: &AppState, run: &Run, stack: &Stack, plan_json: &serde_json::Value) -> ApiResult<()> {
    let scope = st.store.scope(run.org_id);
    let policies = stack_policies(&scope, stack, PolicyType::Plan).await?;
    if policies.is_empty() {
        return Ok(());
    }
    let now = st.clock.now();
    let previous = scope.list_runs(stack.id, 20).await?.into_iter().find(|r| {
        r.id != run.id && r.run_type == terraplane_domain::RunType::Tracked && r.created_at <= run.created_at
    });
    let ctx = PlanContext {
        request_timestamp_ns: ns(now),
        run: run_info(run, stack),
        previous_run: previous.as_ref().map(|r| run_info(r, stack)),
        stack: stack_info(stack),
    };
    let input = pin::plan_input(&ctx, plan_json);
    let verdicts = evaluate(st, PolicyType::Plan, policies, &input).await;
    for v in &verdicts {
        tracing::info!(run_id = %run.id, policy = %v.policy.slug, outcome = v.outcome_word(PolicyType::Plan), "plan policy evaluated");
    }
    record(
        &scope,
        PolicyType::Plan,
        &input,
        &format!("run:{}", run.id),
        Some(run),
        &verdicts,
        now,
    )
    .await?;
    Ok(())
}

/// What the plan policies decided for a run's latest plan.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PlanDecision {
    /// Why the run fails (a deny or an evaluation error), if it does.
    pub fail: Option<String>,
    /// Warnings: the run waits for confirmation even on an autodeploy stack.
    pub warnings: Vec<String>,
}

/// Reads the verdicts stored for the run's latest plan.
pub async fn plan_decision(st: &AppState, run: &Run) -> ApiResult<PlanDecision> {
    let all = run_evaluations(st, run.org_id, run.id).await?;
    let plan: Vec<&(PolicyEvaluation, String)> = all
        .iter()
        .filter(|(e, _)| e.policy_type == PolicyType::Plan.as_str())
        .collect();
    let Some(latest) = plan.iter().map(|(e, _)| e.created_at).max() else {
        return Ok(PlanDecision::default());
    };
    let latest: Vec<&&(PolicyEvaluation, String)> = plan.iter().filter(|(e, _)| e.created_at == latest).collect();
    let errors: Vec<String> = latest
        .iter()
        .filter(|(e, _)| e.outcome == "error")
        .flat_map(|(e, slug)| e.messages.iter().map(move |m| format!("plan policy {slug}: {m}")))
        .collect();
    let denies: Vec<String> = latest
        .iter()
        .filter(|(e, _)| e.outcome == "deny")
        .flat_map(|(e, _)| rule_strings(e, "deny"))
        .collect();
    let fail = if !errors.is_empty() {
        Some(errors.join("; "))
    } else if !denies.is_empty() {
        Some(format!("denied by plan policy: {}", denies.join("; ")))
    } else {
        None
    };
    Ok(PlanDecision {
        fail,
        warnings: latest.iter().flat_map(|(e, _)| rule_strings(e, "warn")).collect(),
    })
}

/// The messages of a set rule in a stored result.
fn rule_strings(e: &PolicyEvaluation, rule: &str) -> Vec<String> {
    match e.result.get(rule) {
        Some(serde_json::Value::Array(a)) => a.iter().filter_map(|m| m.as_str().map(str::to_owned)).collect(),
        _ => Vec::new(),
    }
}

/// The run's stored evaluations with their policies' slugs (a deleted policy shows its id).
pub async fn run_evaluations(
    st: &AppState,
    org: terraplane_domain::OrgId,
    run: RunId,
) -> ApiResult<Vec<(PolicyEvaluation, String)>> {
    let scope = st.store.scope(org);
    let policies = scope.list_policies().await?;
    Ok(scope
        .run_policy_evaluations(&run.to_string())
        .await?
        .into_iter()
        .map(|e| {
            let slug = policies
                .iter()
                .find(|x| x.id == e.policy_id)
                .map(|x| x.slug.clone())
                .unwrap_or_else(|| e.policy_id.clone());
            (e, slug)
        })
        .collect())
}

/// Replays a run's recorded input of the policy's type through the policy's current body,
/// without storing anything: how the policy, as it is now, would have judged that run.
pub async fn simulate(st: &AppState, p: &Principal, policy: &str, run: RunId) -> ApiResult<(Verdict, PolicyType)> {
    let x = get_policy(st, p, policy, Action::Read).await?;
    let kind = parse_type(&x.policy_type)?;
    crate::service::get_run(st, p, run, Action::Read).await?;
    let scope = st.store.scope(p.org);
    let hash = scope
        .run_policy_evaluations(&run.to_string())
        .await?
        .into_iter()
        .rev()
        .find(|e| e.policy_type == kind.as_str())
        .map(|e| e.input_hash)
        .ok_or_else(|| {
            ApiError::BadRequest(format!(
                "run {run} has no recorded {} policy input (no {} policy was evaluated for it)",
                kind.as_str(),
                kind.as_str()
            ))
        })?;
    let (_, input) = scope.policy_input(&hash).await?;
    let mut verdicts = evaluate(st, kind, vec![x], &input).await;
    let v = verdicts
        .pop()
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("the policy evaluation did not run")))?;
    Ok((v, kind))
}

/// A judgment of a queued run unfinished after this long (its api process died) is taken
/// over by the next claim.
pub const JUDGING_STALE_SECS: i64 = 60;

/// What the approval policies of a stack say about a run.
#[derive(Debug, PartialEq, Eq)]
pub enum Approval {
    Approve,
    /// A policy rejected the run (or failed): why.
    Reject(String),
    Undecided,
}

/// Evaluates the stack's approval policies on a run at `stage`, with the reviews given at
/// that stage (each reviewer's latest) as current and the rest as older, and stores the
/// verdicts. Any reject (or failed evaluation) rejects; all of `policies` (those that apply,
/// at least one: see [`apply_approval`]) must approve to approve.
pub async fn judge_approval(
    st: &AppState,
    run: &Run,
    stack: &Stack,
    stage: terraplane_domain::ReviewStage,
    policies: Vec<Policy>,
) -> ApiResult<Approval> {
    let scope = st.store.scope(run.org_id);
    let reviews = scope.run_reviews(&run.id.to_string()).await?;
    let mut current: Vec<&terraplane_store::RunReview> = Vec::new();
    let mut older: Vec<&terraplane_store::RunReview> = Vec::new();
    for r in reviews.iter().rev() {
        if r.stage == stage.as_str() && !current.iter().any(|c| c.reviewer == r.reviewer) {
            current.push(r);
        } else {
            older.push(r);
        }
    }
    let review = |r: &&terraplane_store::RunReview| pin::Review {
        author: r.reviewer.clone(),
        state: r.stage.clone(),
        request: pin::RequestInfo {
            remote_ip: r.remote_ip.clone(),
            timestamp_ns: ns(r.created_at),
        },
        session: pin::SessionInfo {
            login: r.reviewer.clone(),
            name: r.reviewer_name.clone(),
            teams: r.teams.clone(),
        },
    };
    let changes = shared::stored_run_changes(&scope, run).await;
    let ctx = pin::ApprovalContext {
        approvals: current.iter().filter(|r| r.decision == "APPROVE").map(review).collect(),
        rejections: current.iter().filter(|r| r.decision == "REJECT").map(review).collect(),
        older: older.iter().map(review).collect(),
        run: run_info(run, stack),
        run_changes: changes,
        stack: stack_info(stack),
    };
    let input = pin::approval_input(&ctx);
    let verdicts = evaluate(st, PolicyType::Approval, policies, &input).await;
    record(
        &scope,
        PolicyType::Approval,
        &input,
        &format!("run:{}", run.id),
        Some(run),
        &verdicts,
        st.clock.now(),
    )
    .await?;
    let mut rejected = Vec::new();
    let mut all_approve = true;
    for v in &verdicts {
        match &v.outcome {
            Err(e) => rejected.push(format!("approval policy {}: {e}", v.policy.slug)),
            Ok(e) if e.reject => rejected.push(format!("rejected by approval policy {}", v.policy.slug)),
            Ok(e) => all_approve &= e.approve,
        }
    }
    Ok(if !rejected.is_empty() {
        Approval::Reject(rejected.join("; "))
    } else if all_approve {
        Approval::Approve
    } else {
        Approval::Undecided
    })
}

/// Applies the approval policies to a run at `stage` (the run is in that stage's state, or
/// PENDING_REVIEW from it): approve releases or keeps it, undecided holds it in
/// PENDING_REVIEW, reject fails it. Returns the run as it is afterwards.
pub async fn apply_approval(
    st: &AppState,
    run: Run,
    stack: &Stack,
    stage: terraplane_domain::ReviewStage,
) -> ApiResult<Run> {
    use terraplane_domain::{ReviewStage, RunEvent, RunState};
    use terraplane_store::RunUpdate;
    let scope = st.store.scope(run.org_id);
    let policies = stack_policies(&scope, stack, PolicyType::Approval).await?;
    if policies.is_empty() {
        return Ok(run);
    }
    // A queued run is judged once, by whoever marks it first (its trigger, or a runner's
    // claim when something else queued it).
    let now = st.clock.now();
    let stale_before = now - chrono::Duration::seconds(JUDGING_STALE_SECS);
    if stage == ReviewStage::Queued
        && run.state == RunState::Queued
        && !scope.begin_review_judgment(run.id, now, stale_before).await?
    {
        return Ok(scope.get_run(run.id).await?);
    }
    let decision = judge_approval(st, &run, stack, stage, policies).await?;
    let upd = |note: &str, review: Option<String>, error: Option<String>| RunUpdate {
        note: Some(note.to_owned()),
        error,
        review_stage: review,
        expect_state: Some(run.state),
        ..Default::default()
    };
    let approved = format!("{}:APPROVED", stage.as_str());
    let after = match decision {
        Approval::Approve if run.state == RunState::PendingReview => {
            match scope
                .transition_run(
                    run.id,
                    RunEvent::Approve(stage),
                    upd("approved by its reviewers", Some(approved), None),
                    now,
                )
                .await
            {
                Ok(r) => r,
                // Another review released (or ended) it meanwhile.
                Err(terraplane_store::StoreError::Conflict(_)) => return Ok(scope.get_run(run.id).await?),
                Err(e) => return Err(e.into()),
            }
        }
        Approval::Approve => {
            scope.set_review_stage(run.id, &approved).await?;
            scope.get_run(run.id).await?
        }
        Approval::Undecided if run.state == stage.state() => {
            let held = scope
                .transition_run(
                    run.id,
                    RunEvent::RequireReview,
                    upd(
                        "waiting for review (approval policy)",
                        Some(format!("{}:PENDING", stage.as_str())),
                        None,
                    ),
                    now,
                )
                .await?;
            crate::notify::emit(
                st,
                terraplane_domain::notify::EventKind::RunPendingReview,
                stack,
                Some(&held),
                format!("run {} is waiting for review", held.id),
                Vec::new(),
                None,
            )
            .await;
            held
        }
        Approval::Undecided => return Ok(run),
        Approval::Reject(reason) => {
            let failed = scope
                .transition_run(run.id, RunEvent::Fail, upd(&reason, None, Some(reason.clone())), now)
                .await?;
            crate::notify::after_transition(st, &failed, stack).await;
            failed
        }
    };
    st.bus.publish(crate::bus::BusEvent::RunChanged(after.id));
    if after.state == RunState::Queued {
        st.kick_scheduler();
    }
    Ok(after)
}

/// A review of a run by the caller: stored, then, when the run waits in PENDING_REVIEW,
/// the approval policies judge it again. Reviews are taken while a run is QUEUED,
/// PENDING_REVIEW or UNCONFIRMED; anyone who can read the stack may review, and the
/// policies decide whose reviews count.
pub async fn review_run(
    st: &AppState,
    p: &Principal,
    id: RunId,
    approve: bool,
    note: Option<String>,
) -> ApiResult<Run> {
    use terraplane_domain::{ReviewStage, RunState};
    let (run, stack) = crate::service::get_run(st, p, id, Action::Read).await?;
    let stage = match run.state {
        RunState::Queued => ReviewStage::Queued,
        RunState::Unconfirmed => ReviewStage::Unconfirmed,
        RunState::PendingReview => match run.review_stage.as_deref() {
            Some(s) if s.starts_with("UNCONFIRMED") => ReviewStage::Unconfirmed,
            _ => ReviewStage::Queued,
        },
        s => {
            return Err(ApiError::conflict(
                "invalid_run_state",
                format!("run is {s}; reviews are taken while a run is QUEUED, PENDING_REVIEW or UNCONFIRMED"),
            ));
        }
    };
    let note = note.unwrap_or_default();
    if note.len() > 4096 {
        return Err(ApiError::BadRequest("a review note is at most 4096 bytes".into()));
    }
    let scope = st.store.scope(p.org);
    let teams = match crate::service::user_id(p) {
        Some(uid) => scope.user_team_slugs(uid).await?,
        None => Vec::new(),
    };
    let now = st.clock.now();
    let decision = if approve { "APPROVE" } else { "REJECT" };
    let tx = st.store.begin().await?;
    tx.scope(p.org)
        .add_review(terraplane_store::RunReview {
            id: uuid::Uuid::now_v7().to_string(),
            run_id: run.id.to_string(),
            reviewer: p.name(),
            reviewer_name: p.name(),
            teams,
            stage: stage.as_str().into(),
            decision: decision.into(),
            note: note.clone(),
            remote_ip: p.meta.client_ip.clone(),
            created_at: now,
        })
        .await?;
    tx.scope(p.org)
        .append_audit(
            event(
                p,
                "run.review",
                "run",
                run.id.to_string(),
                None,
                Some(serde_json::json!({ "decision": decision, "note": note, "stage": stage.as_str() })),
            ),
            now,
        )
        .await?;
    tx.commit().await?;
    if run.state == RunState::PendingReview {
        return apply_approval(st, run, &stack, stage).await;
    }
    Ok(run)
}

/// After a tracked run FINISHED: the stack's trigger policies name the stacks (by id) whose
/// tracked runs to queue next. Unknown names are recorded on the evaluation and skipped.
/// Returns the runs queued.
pub async fn after_finished(st: &AppState, run: &Run, stack: &Stack) -> ApiResult<Vec<Run>> {
    use terraplane_domain::{RunState, RunType};
    if run.state != RunState::Finished || run.run_type != RunType::Tracked || run.drift_detection {
        return Ok(Vec::new());
    }
    let scope = st.store.scope(run.org_id);
    let policies = stack_policies(&scope, stack, PolicyType::Trigger).await?;
    if policies.is_empty() {
        return Ok(Vec::new());
    }
    let stacks = scope.list_stacks().await?;
    let changes = shared::stored_run_changes(&scope, run).await;
    let ctx = pin::TriggerContext {
        run: run_info(run, stack),
        run_changes: changes,
        stack: stack_info(stack),
        stacks: stacks.iter().map(stack_info).collect(),
    };
    let input = pin::trigger_input(&ctx);
    let verdicts = evaluate(st, PolicyType::Trigger, policies, &input).await;
    let now = st.clock.now();
    record(
        &scope,
        PolicyType::Trigger,
        &input,
        &format!("run:{}", run.id),
        Some(run),
        &verdicts,
        now,
    )
    .await?;
    let mut wanted: Vec<(String, String)> = Vec::new();
    for v in &verdicts {
        match &v.outcome {
            Ok(e) => {
                for t in &e.trigger {
                    if !wanted.iter().any(|(s, _)| s == t) {
                        wanted.push((t.clone(), v.policy.slug.clone()));
                    }
                }
            }
            Err(e) => tracing::warn!(run_id = %run.id, policy = %v.policy.slug, error = %e, "trigger policy failed"),
        }
    }
    let mut queued = Vec::new();
    for (target, policy) in wanted {
        let Some(next) = stacks.iter().find(|s| s.slug == target) else {
            tracing::warn!(run_id = %run.id, %policy, stack = %target, "trigger policy names an unknown stack");
            continue;
        };
        let new = terraplane_store::NewRun {
            stack_id: next.id,
            run_type: RunType::Tracked,
            commit_sha: None,
            triggered_by: format!("trigger policy {policy} (run {} of {})", run.id, stack.slug),
            trigger_kind: "trigger".into(),
            drift_detection: false,
        };
        match scope.create_run(new, "trigger", now).await {
            Ok(r) => {
                tracing::info!(run_id = %r.id, stack = %next.slug, from = %run.id, "run queued by a trigger policy");
                let r = apply_approval(st, r, next, terraplane_domain::ReviewStage::Queued).await?;
                st.bus.publish(crate::bus::BusEvent::RunChanged(r.id));
                queued.push(r);
            }
            // A locked stack refuses the run; the evaluation stays on record.
            Err(e) => tracing::warn!(stack = %next.slug, error = %e, "a trigger policy's run was refused"),
        }
    }
    if !queued.is_empty() {
        st.kick_scheduler();
    }
    Ok(queued)
}

/// The organization's login policies judge a login (by an organization member): `deny` (or
/// a policy that fails: logins fail closed) refuses it, `admin` without `deny_admin` makes
/// the session an owner's. Returns whether the session is an admin's.
pub async fn judge_login(
    st: &AppState,
    org: &terraplane_store::Organization,
    login: &str,
    name: &str,
    teams: Vec<String>,
    remote_ip: Option<String>,
) -> ApiResult<bool> {
    let scope = st.store.scope(org.id);
    let policies: Vec<Policy> = scope
        .list_policies()
        .await?
        .into_iter()
        .filter(|x| x.policy_type == PolicyType::Login.as_str())
        .collect();
    if policies.is_empty() {
        return Ok(false);
    }
    let now = st.clock.now();
    let ctx = pin::LoginContext {
        request: pin::RequestInfo {
            remote_ip,
            timestamp_ns: ns(now),
        },
        session: pin::SessionInfo {
            login: login.to_owned(),
            name: name.to_owned(),
            teams,
        },
        member: true,
        account: pin::AccountInfo {
            id: org.slug.clone(),
            name: org.name.clone(),
        },
    };
    let input = pin::login_input(&ctx);
    let verdicts = evaluate(st, PolicyType::Login, policies, &input).await;
    record(
        &scope,
        PolicyType::Login,
        &input,
        &format!("login:{login}"),
        None,
        &verdicts,
        now,
    )
    .await?;
    let mut admin = false;
    let mut deny_admin = false;
    for v in &verdicts {
        match &v.outcome {
            Err(e) => {
                tracing::warn!(policy = %v.policy.slug, error = %e, "login policy failed; login refused");
                return Err(ApiError::Forbidden(format!(
                    "login refused: login policy {} could not be evaluated",
                    v.policy.slug
                )));
            }
            Ok(e) if e.login_deny => {
                return Err(ApiError::Forbidden(format!("login denied by policy {}", v.policy.slug)));
            }
            Ok(e) => {
                admin |= e.admin;
                deny_admin |= e.deny_admin;
            }
        }
    }
    Ok(admin && !deny_admin)
}

/// The stack's notification policies route an event further (see
/// [`shared::route_notification`]).
pub async fn route_notification(
    st: &AppState,
    ev: &terraplane_domain::notify::Event,
    stack: &Stack,
    run: Option<&Run>,
) -> ApiResult<usize> {
    Ok(shared::route_notification(&st.store, limits(st), ev, stack, run, st.clock.now()).await?)
}
