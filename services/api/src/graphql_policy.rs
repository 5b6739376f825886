//! GraphQL for Rego policies (merged into the root types): CRUD with versions, attachment
//! to stacks, stored evaluations (per run and per policy) and sampled inputs.

use async_graphql::{Context, ID, InputObject, Json, Object, SimpleObject};
use chrono::{DateTime, Utc};
use terraplane_store::PolicyPatch;

use crate::auth::Action;
use crate::error::ApiError;
use crate::graphql::{principal, state};
use crate::policy::{self, PolicyInput};

#[derive(SimpleObject)]
pub struct PolicyVersion {
    version: i32,
    body: String,
    labels: Vec<String>,
    created_by: String,
    created_at: DateTime<Utc>,
}

#[derive(SimpleObject)]
pub struct PolicyEvaluation {
    id: ID,
    /// The policy's id (slug), or its internal id when it was deleted since.
    policy: String,
    policy_version: i32,
    #[graphql(name = "type")]
    policy_type: String,
    run_id: Option<String>,
    subject: String,
    /// sha256 of the input (canonical JSON); `policySimulate` and samples refer to it.
    input_hash: String,
    /// PLAN: allow, warn or deny; APPROVAL: approve, reject or undecided; TRIGGER: trigger or
    /// none; LOGIN: allow, admin, deny or undecided; any type: error.
    outcome: String,
    messages: Vec<String>,
    /// Each rule's value.
    result: Json<serde_json::Value>,
    created_at: DateTime<Utc>,
}

pub(crate) fn evaluation_gql(e: terraplane_store::PolicyEvaluation, policy: String) -> PolicyEvaluation {
    PolicyEvaluation {
        id: ID(e.id),
        policy,
        policy_version: e.policy_version,
        policy_type: e.policy_type,
        run_id: e.run_id,
        subject: e.subject,
        input_hash: e.input_hash,
        outcome: e.outcome,
        messages: e.messages,
        result: Json(e.result),
        created_at: e.created_at,
    }
}

#[derive(SimpleObject)]
pub struct PolicySample {
    input_hash: String,
    created_at: DateTime<Utc>,
}

pub struct Policy {
    p: terraplane_store::Policy,
}

#[Object]
impl Policy {
    async fn id(&self) -> ID {
        ID(self.p.slug.clone())
    }
    async fn name(&self) -> &str {
        &self.p.name
    }
    /// PLAN, APPROVAL, TRIGGER, PUSH, NOTIFICATION or LOGIN.
    #[graphql(name = "type")]
    async fn policy_type(&self) -> &str {
        &self.p.policy_type
    }
    async fn description(&self) -> &str {
        &self.p.description
    }
    /// `autoattach:<label>` attaches the policy to every stack with that label.
    async fn labels(&self) -> &[String] {
        &self.p.labels
    }
    async fn body(&self) -> &str {
        &self.p.body
    }
    async fn version(&self) -> i32 {
        self.p.version
    }
    async fn space(&self, ctx: &Context<'_>) -> async_graphql::Result<String> {
        let p = principal(ctx)?;
        let s = state(ctx)
            .store
            .scope(p.org)
            .get_space(self.p.space_id)
            .await
            .map_err(ApiError::from)?;
        Ok(s.slug)
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.p.created_at
    }
    async fn updated_at(&self) -> DateTime<Utc> {
        self.p.updated_at
    }
    /// Every version, oldest first.
    async fn versions(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<PolicyVersion>> {
        let p = principal(ctx)?;
        let v = state(ctx)
            .store
            .scope(p.org)
            .policy_versions(&self.p.id)
            .await
            .map_err(ApiError::from)?;
        Ok(v.into_iter()
            .map(|v| PolicyVersion {
                version: v.version,
                body: v.body,
                labels: v.labels,
                created_by: v.created_by,
                created_at: v.created_at,
            })
            .collect())
    }
    /// Stacks it is attached to directly (ids).
    async fn attached_stacks(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<String>> {
        let p = principal(ctx)?;
        let scope = state(ctx).store.scope(p.org);
        let ids = scope.policy_stack_ids(&self.p.id).await.map_err(ApiError::from)?;
        let mut out = Vec::new();
        for s in scope.list_stacks().await.map_err(ApiError::from)? {
            if ids.contains(&s.id) && p.can_see(s.space_id) {
                out.push(s.slug);
            }
        }
        Ok(out)
    }
    /// Newest evaluations first.
    async fn evaluations(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 50)] limit: i32,
    ) -> async_graphql::Result<Vec<PolicyEvaluation>> {
        let p = principal(ctx)?;
        let list = state(ctx)
            .store
            .scope(p.org)
            .policy_evaluations(&self.p.id, limit.clamp(1, 500) as u64)
            .await
            .map_err(ApiError::from)?;
        Ok(list
            .into_iter()
            .map(|e| evaluation_gql(e, self.p.slug.clone()))
            .collect())
    }
    /// Inputs the policy kept with its `sample` rule, newest first (the last 100).
    async fn samples(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<PolicySample>> {
        let p = principal(ctx)?;
        let list = state(ctx)
            .store
            .scope(p.org)
            .policy_samples(&self.p.id)
            .await
            .map_err(ApiError::from)?;
        Ok(list
            .into_iter()
            .map(|(input_hash, created_at)| PolicySample { input_hash, created_at })
            .collect())
    }
}

#[derive(InputObject)]
pub struct PolicyCreateInput {
    id: Option<String>,
    name: String,
    /// PLAN, APPROVAL, TRIGGER, PUSH, NOTIFICATION or LOGIN.
    #[graphql(name = "type")]
    policy_type: String,
    /// Rego (v0 or v1 syntax), `package spacelift`.
    body: String,
    labels: Option<Vec<String>>,
    description: Option<String>,
    /// Slug of the space (root when absent).
    space: Option<String>,
}

#[derive(InputObject)]
pub struct PolicyUpdateInput {
    name: Option<String>,
    body: Option<String>,
    labels: Option<Vec<String>>,
    description: Option<String>,
}

#[derive(SimpleObject)]
pub struct PolicyAttachment {
    policy: String,
    stack: String,
}

/// How a policy, as it is now, judges a recorded input.
#[derive(SimpleObject)]
pub struct PolicySimulation {
    outcome: String,
    messages: Vec<String>,
    result: Json<serde_json::Value>,
}

#[derive(async_graphql::Enum, Copy, Clone, Eq, PartialEq, Debug)]
pub enum ReviewDecision {
    Approve,
    Reject,
}

/// A review of a run.
#[derive(SimpleObject)]
pub struct RunReview {
    reviewer: String,
    teams: Vec<String>,
    /// QUEUED or UNCONFIRMED: where the run was when it was reviewed.
    stage: String,
    decision: ReviewDecision,
    note: String,
    created_at: DateTime<Utc>,
}

pub(crate) fn review_gql(r: terraplane_store::RunReview) -> RunReview {
    RunReview {
        reviewer: r.reviewer,
        teams: r.teams,
        stage: r.stage,
        decision: if r.decision == "APPROVE" {
            ReviewDecision::Approve
        } else {
            ReviewDecision::Reject
        },
        note: r.note,
        created_at: r.created_at,
    }
}

#[derive(Default)]
pub struct PolicyQuery;

#[Object]
impl PolicyQuery {
    async fn policies(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<Policy>> {
        let p = principal(ctx)?;
        Ok(policy::list_policies(state(ctx), p)
            .await?
            .into_iter()
            .map(|p| Policy { p })
            .collect())
    }

    /// Replays the input a run gave policies of this policy's type through the policy's
    /// current version; nothing is stored.
    async fn policy_simulate(&self, ctx: &Context<'_>, id: ID, run_id: ID) -> async_graphql::Result<PolicySimulation> {
        let p = principal(ctx)?;
        let run = run_id
            .parse::<terraplane_domain::RunId>()
            .map_err(|_| ApiError::NotFound("run"))?;
        let (v, kind) = policy::simulate(state(ctx), p, &id, run).await?;
        let (outcome, messages, result) = v.summary(kind);
        Ok(PolicySimulation {
            outcome,
            messages,
            result: Json(result),
        })
    }

    async fn policy(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Policy> {
        let p = principal(ctx)?;
        Ok(Policy {
            p: policy::get_policy(state(ctx), p, &id, Action::Read).await?,
        })
    }
}

#[derive(Default)]
pub struct PolicyMutation;

#[Object]
impl PolicyMutation {
    /// Creates a policy in a space; needs admin there. Rego that does not compile is refused
    /// with its line and column.
    async fn policy_create(&self, ctx: &Context<'_>, input: PolicyCreateInput) -> async_graphql::Result<Policy> {
        let p = principal(ctx)?;
        let x = policy::create_policy(
            state(ctx),
            p,
            PolicyInput {
                slug: input.id,
                name: input.name,
                policy_type: input.policy_type,
                body: input.body,
                labels: input.labels.unwrap_or_default(),
                description: input.description,
                space: input.space,
            },
        )
        .await?;
        Ok(Policy { p: x })
    }

    /// Changes a policy; a new body or new labels make a new version.
    async fn policy_update(
        &self,
        ctx: &Context<'_>,
        id: ID,
        input: PolicyUpdateInput,
    ) -> async_graphql::Result<Policy> {
        let p = principal(ctx)?;
        let patch = PolicyPatch {
            name: input.name,
            description: input.description,
            labels: input.labels,
            body: input.body,
        };
        Ok(Policy {
            p: policy::update_policy(state(ctx), p, &id, patch).await?,
        })
    }

    /// Reviews a run (QUEUED, PENDING_REVIEW or UNCONFIRMED): approval policies read the
    /// reviews, each reviewer's latest at the run's current stage counting.
    async fn run_review(
        &self,
        ctx: &Context<'_>,
        id: ID,
        decision: ReviewDecision,
        note: Option<String>,
    ) -> async_graphql::Result<crate::graphql::Run> {
        let p = principal(ctx)?;
        let run_id = id
            .parse::<terraplane_domain::RunId>()
            .map_err(|_| ApiError::NotFound("run"))?;
        let run = policy::review_run(state(ctx), p, run_id, decision == ReviewDecision::Approve, note).await?;
        let (run, stack) = crate::service::get_run(state(ctx), p, run.id, Action::Read).await?;
        Ok(crate::graphql::Run::new(run, stack.slug))
    }

    async fn policy_delete(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Policy> {
        let p = principal(ctx)?;
        Ok(Policy {
            p: policy::delete_policy(state(ctx), p, &id).await?,
        })
    }

    /// Attaches a policy to a stack; needs admin on the stack. The policy must live in the
    /// stack's space or an ancestor it inherits from.
    async fn policy_attach(&self, ctx: &Context<'_>, id: ID, stack_id: ID) -> async_graphql::Result<PolicyAttachment> {
        let p = principal(ctx)?;
        let (x, s) = policy::attach_policy(state(ctx), p, &id, &stack_id).await?;
        Ok(PolicyAttachment {
            policy: x.slug,
            stack: s.slug,
        })
    }

    async fn policy_detach(&self, ctx: &Context<'_>, id: ID, stack_id: ID) -> async_graphql::Result<PolicyAttachment> {
        let p = principal(ctx)?;
        let (x, s) = policy::detach_policy(state(ctx), p, &id, &stack_id).await?;
        Ok(PolicyAttachment {
            policy: x.slug,
            stack: s.slug,
        })
    }
}
