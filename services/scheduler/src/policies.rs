//! Policy glue shared by the api and the scheduler (both raise notifications): which
//! policies apply to a stack, bounded evaluation off the async threads, stored verdicts,
//! the documents runs and stacks give policies, and notification routing.

use std::time::Duration;

use terraplane_config::PolicyConfig;
use terraplane_domain::SpaceId;
use terraplane_domain::vars::autoattaches;
use terraplane_policy::input::{self as pin, RunInfo, StackInfo};
use terraplane_policy::{Evaluation, Limits, PolicyType, PreparedInput};
use terraplane_store::{NewEvaluation, Policy, PolicyEvaluation, Run, Space, Stack, Store, StoreError, TenantScope};

/// The spaces whose contexts and policies a stack in `space` may use: its own, then each
/// ancestor as long as the space below inherits.
pub fn reachable(spaces: &[Space], space: SpaceId) -> Vec<SpaceId> {
    let mut out = vec![space];
    let mut cur = spaces.iter().find(|s| s.id == space);
    while let Some(s) = cur {
        match (s.inherit, s.parent_id) {
            (true, Some(parent)) if !out.contains(&parent) => {
                out.push(parent);
                cur = spaces.iter().find(|x| x.id == parent);
            }
            _ => break,
        }
    }
    out
}

/// The policies of `kind` that apply to `stack`: attached to it, or carrying an
/// `autoattach:<label>` matching one of its labels, from its space or an ancestor it
/// inherits. Login policies apply to the organization, never to a stack.
pub async fn stack_policies(
    scope: &TenantScope<'_>,
    stack: &Stack,
    kind: PolicyType,
) -> Result<Vec<Policy>, StoreError> {
    if kind == PolicyType::Login {
        return Ok(Vec::new());
    }
    let attached = scope.attached_policy_ids(stack.id).await?;
    let spaces = scope.list_spaces().await?;
    let reach = reachable(&spaces, stack.space_id);
    Ok(scope
        .list_policies()
        .await?
        .into_iter()
        .filter(|x| x.policy_type == kind.as_str())
        .filter(|x| attached.contains(&x.id) || (autoattaches(&x.labels, &stack.labels) && reach.contains(&x.space_id)))
        .collect())
}

/// The run's plan as policies see its changes (none before it planned).
pub async fn stored_run_changes(scope: &TenantScope<'_>, run: &Run) -> Vec<pin::RunChange> {
    match scope.get_plan(run.id).await {
        Ok(plan) => serde_json::from_str(&plan.plan_json)
            .map(|v| pin::run_changes(&v))
            .unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

/// One policy's verdict on one input.
pub struct Verdict {
    pub policy: Policy,
    pub outcome: Result<Evaluation, String>,
}

impl Verdict {
    /// The stored outcome word for a policy of `kind`.
    pub fn outcome_word(&self, kind: PolicyType) -> &'static str {
        let Ok(e) = &self.outcome else { return "error" };
        match kind {
            PolicyType::Plan if !e.deny.is_empty() => "deny",
            PolicyType::Plan if !e.warn.is_empty() => "warn",
            PolicyType::Plan => "allow",
            PolicyType::Approval if e.reject => "reject",
            PolicyType::Approval if e.approve => "approve",
            PolicyType::Approval => "undecided",
            PolicyType::Trigger if !e.trigger.is_empty() => "trigger",
            PolicyType::Trigger => "none",
            PolicyType::Login if e.login_deny => "deny",
            PolicyType::Login if e.admin => "admin",
            PolicyType::Login if e.allow => "allow",
            PolicyType::Login => "undecided",
            PolicyType::Push | PolicyType::Notification if e.rules.is_empty() => "none",
            PolicyType::Push | PolicyType::Notification => "decided",
        }
    }

    /// Outcome word, messages and each rule's value, as stored.
    pub fn summary(&self, kind: PolicyType) -> (String, Vec<String>, serde_json::Value) {
        (
            self.outcome_word(kind).to_owned(),
            self.messages(kind),
            match &self.outcome {
                Ok(e) => serde_json::to_value(&e.rules).unwrap_or_default(),
                Err(e) => serde_json::json!({ "error": e }),
            },
        )
    }

    pub fn messages(&self, kind: PolicyType) -> Vec<String> {
        match &self.outcome {
            Err(e) => vec![e.clone()],
            Ok(e) => match kind {
                PolicyType::Plan => e.deny.iter().chain(&e.warn).cloned().collect(),
                PolicyType::Trigger => e.trigger.clone(),
                _ => Vec::new(),
            },
        }
    }
}

/// The configured bounds of one evaluation.
pub fn limits(cfg: &PolicyConfig) -> Limits {
    Limits {
        time: Duration::from_millis(cfg.eval_timeout_ms.max(1)),
        memory_bytes: Some(cfg.max_memory_mb.saturating_mul(1024 * 1024)),
    }
}

/// Evaluates `policies` on `input` off the async threads, each bounded by the configured
/// limits. A policy stored before it stopped compiling (an engine upgrade) is an error
/// verdict, not a panic.
pub async fn evaluate(
    limits: Limits,
    kind: PolicyType,
    policies: Vec<Policy>,
    input: &serde_json::Value,
) -> Vec<Verdict> {
    if policies.is_empty() {
        return Vec::new();
    }
    let input = input.clone();
    let work = move || {
        let prepared = PreparedInput::new(&input);
        policies
            .into_iter()
            .map(|policy| {
                let outcome = match (
                    &prepared,
                    terraplane_policy::Policy::compile(&policy.slug, &policy.body),
                ) {
                    (Err(e), _) => Err(e.to_string()),
                    (_, Err(e)) => Err(format!("policy does not compile: {e}")),
                    (Ok(input), Ok(compiled)) => {
                        compiled.evaluate_input(kind, input, &limits).map_err(|e| e.to_string())
                    }
                };
                Verdict { policy, outcome }
            })
            .collect::<Vec<_>>()
    };
    match tokio::task::spawn_blocking(work).await {
        Ok(v) => v,
        Err(e) => {
            tracing::error!(error = %e, "policy evaluation task failed");
            Vec::new()
        }
    }
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
) -> Result<Vec<PolicyEvaluation>, StoreError> {
    if verdicts.is_empty() {
        return Ok(Vec::new());
    }
    let hash = terraplane_policy::input_hash(input);
    let evaluations = verdicts
        .iter()
        .map(|v| NewEvaluation {
            policy: v.policy.clone(),
            run_id: run.map(|r| r.id.to_string()),
            stack_id: run.map(|r| r.stack_id),
            subject: subject.to_owned(),
            outcome: v.outcome_word(kind).to_owned(),
            messages: v.messages(kind),
            result: match &v.outcome {
                Ok(e) => serde_json::to_value(&e.rules).unwrap_or_default(),
                Err(e) => serde_json::json!({ "error": e }),
            },
            sample: v.outcome.as_ref().is_ok_and(|e| e.sample),
        })
        .collect();
    scope
        .record_evaluations(kind.as_str(), input, &hash, evaluations, now)
        .await
}

/// Unix nanoseconds, as policies read times.
pub fn ns(t: chrono::DateTime<chrono::Utc>) -> i64 {
    t.timestamp_nanos_opt().unwrap_or(i64::MAX)
}

/// A run as policies see it.
pub fn run_info(run: &Run, stack: &Stack) -> RunInfo {
    RunInfo {
        id: run.id.to_string(),
        run_type: run.run_type.as_str().into(),
        state: run.state.as_str().into(),
        branch: stack.branch.clone(),
        commit: pin::CommitInfo {
            branch: stack.branch.clone(),
            hash: run.commit_sha.clone().unwrap_or_default(),
            ..Default::default()
        },
        created_at_ns: ns(run.created_at),
        updated_at_ns: ns(run.updated_at),
        drift_detection: run.drift_detection,
        flags: Vec::new(),
        triggered_by: Some(run.triggered_by.clone()),
        project_root: stack.project_root.clone(),
        terraform_version: stack.tool_version.clone().unwrap_or_default(),
        ..Default::default()
    }
}

/// A stack as policies see it.
pub fn stack_info(stack: &Stack) -> StackInfo {
    StackInfo {
        id: stack.slug.clone(),
        name: stack.name.clone(),
        branch: stack.branch.clone(),
        labels: stack.labels.clone(),
        autodeploy: stack.autodeploy,
        repository: stack.repository.clone(),
        project_root: stack.project_root.clone(),
        terraform_version: stack.tool_version.clone().unwrap_or_default(),
        locked_by: stack.lock.as_ref().map(|l| l.holder.clone()),
        worker_pool: pin::WorkerPoolInfo {
            id: stack.worker_pool.clone(),
            name: stack.worker_pool.clone(),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The stack's notification policies route an event further: each `webhook` entry
/// `{"endpoint_id": ID, "payload": ANY}` queues the event for that endpoint (with the
/// policy's payload as the body when given), whatever the endpoint subscribes to. Returns
/// how many deliveries were queued.
pub async fn route_notification(
    store: &Store,
    limits: Limits,
    ev: &terraplane_domain::notify::Event,
    stack: &Stack,
    run: Option<&Run>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<usize, StoreError> {
    let scope = store.scope(stack.org_id);
    let policies = stack_policies(&scope, stack, PolicyType::Notification).await?;
    if policies.is_empty() {
        return Ok(0);
    }
    let org = store.get_org(stack.org_id).await?;
    let endpoints = scope.list_endpoints().await?;
    let ctx = pin::NotificationContext {
        account: pin::AccountInfo {
            id: org.slug.clone(),
            name: org.name.clone(),
        },
        run_updated: run.map(|r| pin::RunUpdated {
            run: run_info(r, stack),
            run_changes: Vec::new(),
            stack: stack_info(stack),
            state: r.state.as_str().into(),
            username: None,
            note: Some(ev.summary.clone()),
            run_url: ev.url.clone(),
        }),
        internal_error: None,
        webhook_endpoints: endpoints
            .iter()
            .map(|e| pin::WebhookEndpoint {
                id: e.slug.clone(),
                labels: e.stack_labels.clone(),
            })
            .collect(),
    };
    let input = pin::notification_input(&ctx);
    let verdicts = evaluate(limits, PolicyType::Notification, policies, &input).await;
    let subject = match run {
        Some(r) => format!("notification:{}:run:{}", ev.kind.as_str(), r.id),
        None => format!("notification:{}:stack:{}", ev.kind.as_str(), stack.slug),
    };
    record(&scope, PolicyType::Notification, &input, &subject, run, &verdicts, now).await?;
    let mut queued = 0;
    for v in &verdicts {
        let Ok(e) = &v.outcome else { continue };
        let Some(serde_json::Value::Array(hooks)) = e.rules.get("webhook") else {
            continue;
        };
        for h in hooks {
            let Some(endpoint) = h.get("endpoint_id").and_then(|x| x.as_str()) else {
                tracing::warn!(policy = %v.policy.slug, "webhook entry without endpoint_id");
                continue;
            };
            let mut routed = ev.clone();
            routed.payload = h.get("payload").cloned();
            if scope.enqueue_to(&routed, stack, endpoint, now).await? {
                queued += 1;
            } else {
                tracing::warn!(policy = %v.policy.slug, %endpoint, "notification policy names an unknown endpoint");
            }
        }
    }
    Ok(queued)
}
