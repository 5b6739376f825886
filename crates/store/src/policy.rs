//! Rego policies: stored per space with every version kept, attached to stacks directly (or
//! through `autoattach:<label>`, resolved by the api), and every evaluation stored with the
//! policy version, the input's hash, the outcome and the messages. Inputs are stored once
//! per hash, for `tpctl policy simulate` and for samples.

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder, QuerySelect,
    Set, TransactionTrait,
};
use terraplane_domain::{SpaceId, StackId};

use crate::entities::*;
use crate::error::{Result, StoreError};
use crate::records::parse_id;
use crate::tenant::TenantScope;

/// `runs.review_stage` while approval policies judge a queued run.
pub const JUDGING: &str = "QUEUED:JUDGING";

/// Samples kept per policy (the newest).
pub const SAMPLES_KEPT: u64 = 100;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Internal id.
    pub id: String,
    pub slug: String,
    pub name: String,
    /// `PLAN`, `APPROVAL`, `TRIGGER`, `PUSH`, `NOTIFICATION` or `LOGIN`.
    pub policy_type: String,
    pub description: String,
    pub labels: Vec<String>,
    pub body: String,
    pub version: i32,
    pub space_id: SpaceId,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl TryFrom<policies::Model> for Policy {
    type Error = StoreError;
    fn try_from(m: policies::Model) -> Result<Self> {
        Ok(Self {
            space_id: parse_id(&m.space_id)?,
            labels: serde_json::from_str(&m.labels).unwrap_or_default(),
            id: m.id,
            slug: m.slug,
            name: m.name,
            policy_type: m.policy_type,
            description: m.description,
            body: m.body,
            version: m.version,
            created_at: m.created_at,
            updated_at: m.updated_at,
        })
    }
}

#[derive(Clone, Debug)]
pub struct NewPolicy {
    pub slug: String,
    pub name: String,
    pub policy_type: String,
    pub description: String,
    pub labels: Vec<String>,
    pub body: String,
    pub space_id: SpaceId,
}

/// What an update changes; `None` keeps the current value.
#[derive(Clone, Debug, Default)]
pub struct PolicyPatch {
    pub name: Option<String>,
    pub description: Option<String>,
    pub labels: Option<Vec<String>>,
    pub body: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyVersion {
    pub version: i32,
    pub body: String,
    pub labels: Vec<String>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

/// One stored evaluation of one policy.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyEvaluation {
    pub id: String,
    pub policy_id: String,
    pub policy_version: i32,
    pub policy_type: String,
    pub run_id: Option<String>,
    pub stack_id: Option<String>,
    /// What was evaluated, e.g. `run:<id>` or `login:<email>`.
    pub subject: String,
    pub input_hash: String,
    /// `allow`, `deny`, `warn`, `approve`, `reject`, `undecided`, `trigger`, `error`, ...
    pub outcome: String,
    pub messages: Vec<String>,
    /// Each rule's value (or the error).
    pub result: serde_json::Value,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<policy_evaluations::Model> for PolicyEvaluation {
    type Error = StoreError;
    fn try_from(m: policy_evaluations::Model) -> Result<Self> {
        Ok(Self {
            messages: serde_json::from_str(&m.messages).unwrap_or_default(),
            result: serde_json::from_str(&m.result).unwrap_or_default(),
            id: m.id,
            policy_id: m.policy_id,
            policy_version: m.policy_version,
            policy_type: m.policy_type,
            run_id: m.run_id,
            stack_id: m.stack_id,
            subject: m.subject,
            input_hash: m.input_hash,
            outcome: m.outcome,
            created_at: m.created_at,
        })
    }
}

/// An evaluation to store.
#[derive(Clone, Debug)]
pub struct NewEvaluation {
    pub policy: Policy,
    pub run_id: Option<String>,
    pub stack_id: Option<StackId>,
    pub subject: String,
    pub outcome: String,
    pub messages: Vec<String>,
    pub result: serde_json::Value,
    /// The policy asked (`sample`) for its input to be kept.
    pub sample: bool,
}

/// A review of a run (`APPROVE` or `REJECT`), given at a stage (`QUEUED` or `UNCONFIRMED`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunReview {
    pub id: String,
    pub run_id: String,
    /// The reviewer's login (email, or an API key's name).
    pub reviewer: String,
    pub reviewer_name: String,
    /// The reviewer's teams when the review was given.
    pub teams: Vec<String>,
    pub stage: String,
    pub decision: String,
    pub note: String,
    pub remote_ip: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl From<run_reviews::Model> for RunReview {
    fn from(m: run_reviews::Model) -> Self {
        Self {
            teams: serde_json::from_str(&m.teams).unwrap_or_default(),
            id: m.id,
            run_id: m.run_id,
            reviewer: m.reviewer,
            reviewer_name: m.reviewer_name,
            stage: m.stage,
            decision: m.decision,
            note: m.note,
            remote_ip: m.remote_ip,
            created_at: m.created_at,
        }
    }
}

fn json_list(v: &[String]) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "[]".into())
}

impl<C: ConnectionTrait + TransactionTrait> TenantScope<'_, C> {
    pub async fn create_policy(&self, p: NewPolicy, actor: &str, now: DateTime<Utc>) -> Result<Policy> {
        self.get_space(p.space_id).await?;
        let slug = p.slug.clone();
        let id = uuid::Uuid::new_v4().to_string();
        let m = policies::ActiveModel {
            id: Set(id.clone()),
            org_id: Set(self.org_s.clone()),
            space_id: Set(p.space_id.to_string()),
            slug: Set(p.slug),
            name: Set(p.name),
            policy_type: Set(p.policy_type),
            description: Set(p.description),
            labels: Set(json_list(&p.labels)),
            body: Set(p.body),
            version: Set(1),
            created_at: Set(now),
            updated_at: Set(now),
        }
        .insert(self.db)
        .await
        .map_err(|err| crate::conflict(err, format!("a policy with id {slug:?} already exists")))?;
        self.insert_version(&m, actor, now).await?;
        m.try_into()
    }

    async fn insert_version(&self, m: &policies::Model, actor: &str, now: DateTime<Utc>) -> Result<()> {
        policy_versions::ActiveModel {
            id: Set(uuid::Uuid::new_v4().to_string()),
            org_id: Set(self.org_s.clone()),
            policy_id: Set(m.id.clone()),
            version: Set(m.version),
            body: Set(m.body.clone()),
            labels: Set(m.labels.clone()),
            created_by: Set(actor.to_owned()),
            created_at: Set(now),
        }
        .insert(self.db)
        .await?;
        Ok(())
    }

    /// Changes a policy; a change of body or labels is a new version.
    pub async fn update_policy(
        &self,
        slug: &str,
        patch: PolicyPatch,
        actor: &str,
        now: DateTime<Utc>,
    ) -> Result<Policy> {
        let m = self.policy_model(slug).await?;
        let new_version = patch.body.as_ref().is_some_and(|b| *b != m.body)
            || patch.labels.as_ref().is_some_and(|l| json_list(l) != m.labels);
        let version = m.version;
        let mut a = m.into_active_model();
        if let Some(n) = patch.name {
            a.name = Set(n);
        }
        if let Some(d) = patch.description {
            a.description = Set(d);
        }
        if let Some(l) = patch.labels {
            a.labels = Set(json_list(&l));
        }
        if let Some(b) = patch.body {
            a.body = Set(b);
        }
        if new_version {
            a.version = Set(version + 1);
        }
        a.updated_at = Set(now);
        let m = a.update(self.db).await?;
        if new_version {
            self.insert_version(&m, actor, now).await?;
        }
        m.try_into()
    }

    /// Deletes a policy with its versions and attachments; its evaluations stay on the runs.
    pub async fn delete_policy(&self, slug: &str) -> Result<Policy> {
        let m = self.policy_model(slug).await?;
        policy_attachments::Entity::delete_many()
            .filter(policy_attachments::Column::OrgId.eq(self.org_s.clone()))
            .filter(policy_attachments::Column::PolicyId.eq(m.id.clone()))
            .exec(self.db)
            .await?;
        policy_versions::Entity::delete_many()
            .filter(policy_versions::Column::OrgId.eq(self.org_s.clone()))
            .filter(policy_versions::Column::PolicyId.eq(m.id.clone()))
            .exec(self.db)
            .await?;
        policy_samples::Entity::delete_many()
            .filter(policy_samples::Column::OrgId.eq(self.org_s.clone()))
            .filter(policy_samples::Column::PolicyId.eq(m.id.clone()))
            .exec(self.db)
            .await?;
        policies::Entity::delete_by_id(m.id.clone()).exec(self.db).await?;
        m.try_into()
    }

    async fn policy_model(&self, slug: &str) -> Result<policies::Model> {
        policies::Entity::find()
            .filter(policies::Column::OrgId.eq(self.org_s.clone()))
            .filter(policies::Column::Slug.eq(slug))
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("policy"))
    }

    pub async fn get_policy_by_slug(&self, slug: &str) -> Result<Policy> {
        self.policy_model(slug).await?.try_into()
    }

    pub async fn list_policies(&self) -> Result<Vec<Policy>> {
        policies::Entity::find()
            .filter(policies::Column::OrgId.eq(self.org_s.clone()))
            .order_by_asc(policies::Column::Slug)
            .all(self.db)
            .await?
            .into_iter()
            .map(Policy::try_from)
            .collect()
    }

    /// Every version of a policy, oldest first.
    pub async fn policy_versions(&self, policy_id: &str) -> Result<Vec<PolicyVersion>> {
        Ok(policy_versions::Entity::find()
            .filter(policy_versions::Column::OrgId.eq(self.org_s.clone()))
            .filter(policy_versions::Column::PolicyId.eq(policy_id))
            .order_by_asc(policy_versions::Column::Version)
            .all(self.db)
            .await?
            .into_iter()
            .map(|m| PolicyVersion {
                version: m.version,
                body: m.body,
                labels: serde_json::from_str(&m.labels).unwrap_or_default(),
                created_by: m.created_by,
                created_at: m.created_at,
            })
            .collect())
    }

    /// Attaches a policy to a stack (again: no change).
    pub async fn attach_policy(&self, policy_id: &str, stack: StackId, now: DateTime<Utc>) -> Result<()> {
        let existing = policy_attachments::Entity::find()
            .filter(policy_attachments::Column::OrgId.eq(self.org_s.clone()))
            .filter(policy_attachments::Column::PolicyId.eq(policy_id))
            .filter(policy_attachments::Column::StackId.eq(stack.to_string()))
            .one(self.db)
            .await?;
        if existing.is_none() {
            policy_attachments::ActiveModel {
                id: Set(uuid::Uuid::new_v4().to_string()),
                org_id: Set(self.org_s.clone()),
                policy_id: Set(policy_id.to_owned()),
                stack_id: Set(stack.to_string()),
                created_at: Set(now),
            }
            .insert(self.db)
            .await?;
        }
        Ok(())
    }

    pub async fn detach_policy(&self, policy_id: &str, stack: StackId) -> Result<()> {
        let r = policy_attachments::Entity::delete_many()
            .filter(policy_attachments::Column::OrgId.eq(self.org_s.clone()))
            .filter(policy_attachments::Column::PolicyId.eq(policy_id))
            .filter(policy_attachments::Column::StackId.eq(stack.to_string()))
            .exec(self.db)
            .await?;
        if r.rows_affected == 0 {
            return Err(StoreError::NotFound("policy attachment"));
        }
        Ok(())
    }

    /// Ids of the policies attached to `stack` directly.
    pub async fn attached_policy_ids(&self, stack: StackId) -> Result<Vec<String>> {
        Ok(policy_attachments::Entity::find()
            .filter(policy_attachments::Column::OrgId.eq(self.org_s.clone()))
            .filter(policy_attachments::Column::StackId.eq(stack.to_string()))
            .all(self.db)
            .await?
            .into_iter()
            .map(|a| a.policy_id)
            .collect())
    }

    /// Stacks a policy is attached to directly.
    pub async fn policy_stack_ids(&self, policy_id: &str) -> Result<Vec<StackId>> {
        policy_attachments::Entity::find()
            .filter(policy_attachments::Column::OrgId.eq(self.org_s.clone()))
            .filter(policy_attachments::Column::PolicyId.eq(policy_id))
            .all(self.db)
            .await?
            .iter()
            .map(|a| parse_id(&a.stack_id))
            .collect()
    }

    pub(crate) async fn delete_stack_policy_attachments(&self, stack: StackId) -> Result<()> {
        policy_attachments::Entity::delete_many()
            .filter(policy_attachments::Column::OrgId.eq(self.org_s.clone()))
            .filter(policy_attachments::Column::StackId.eq(stack.to_string()))
            .exec(self.db)
            .await?;
        Ok(())
    }

    /// Stores evaluations of one input (kept once per hash), and keeps the input as a sample
    /// of each policy that asked for it (the newest [`SAMPLES_KEPT`] per policy).
    pub async fn record_evaluations(
        &self,
        policy_type: &str,
        input: &serde_json::Value,
        input_hash: &str,
        evaluations: Vec<NewEvaluation>,
        now: DateTime<Utc>,
    ) -> Result<Vec<PolicyEvaluation>> {
        let stored = policy_inputs::Entity::find_by_id((self.org_s.clone(), input_hash.to_owned()))
            .one(self.db)
            .await?;
        if stored.is_none() {
            policy_inputs::ActiveModel {
                org_id: Set(self.org_s.clone()),
                input_hash: Set(input_hash.to_owned()),
                policy_type: Set(policy_type.to_owned()),
                input: Set(input.to_string()),
                created_at: Set(now),
            }
            .insert(self.db)
            .await?;
        }
        let mut out = Vec::new();
        for e in evaluations {
            let id = uuid::Uuid::now_v7().to_string();
            let m = policy_evaluations::ActiveModel {
                id: Set(id.clone()),
                org_id: Set(self.org_s.clone()),
                policy_id: Set(e.policy.id.clone()),
                policy_version: Set(e.policy.version),
                policy_type: Set(policy_type.to_owned()),
                run_id: Set(e.run_id),
                stack_id: Set(e.stack_id.map(|s| s.to_string())),
                subject: Set(e.subject),
                input_hash: Set(input_hash.to_owned()),
                outcome: Set(e.outcome),
                messages: Set(json_list(&e.messages)),
                result: Set(e.result.to_string()),
                created_at: Set(now),
            }
            .insert(self.db)
            .await?;
            if e.sample {
                policy_samples::ActiveModel {
                    id: Set(uuid::Uuid::now_v7().to_string()),
                    org_id: Set(self.org_s.clone()),
                    policy_id: Set(e.policy.id.clone()),
                    evaluation_id: Set(id),
                    input_hash: Set(input_hash.to_owned()),
                    created_at: Set(now),
                }
                .insert(self.db)
                .await?;
                // The newest are kept; a few hundred ids at most are read.
                let ids: Vec<String> = policy_samples::Entity::find()
                    .select_only()
                    .column(policy_samples::Column::Id)
                    .filter(policy_samples::Column::OrgId.eq(self.org_s.clone()))
                    .filter(policy_samples::Column::PolicyId.eq(e.policy.id.clone()))
                    .order_by_desc(policy_samples::Column::CreatedAt)
                    .order_by_desc(policy_samples::Column::Id)
                    .into_tuple()
                    .all(self.db)
                    .await?;
                let old: Vec<String> = ids.into_iter().skip(SAMPLES_KEPT as usize).collect();
                if !old.is_empty() {
                    policy_samples::Entity::delete_many()
                        .filter(policy_samples::Column::Id.is_in(old))
                        .exec(self.db)
                        .await?;
                }
            }
            out.push(m.try_into()?);
        }
        Ok(out)
    }

    /// Records a review of a run.
    pub async fn add_review(&self, r: RunReview) -> Result<RunReview> {
        run_reviews::ActiveModel {
            id: Set(r.id),
            org_id: Set(self.org_s.clone()),
            run_id: Set(r.run_id),
            reviewer: Set(r.reviewer),
            reviewer_name: Set(r.reviewer_name),
            teams: Set(json_list(&r.teams)),
            stage: Set(r.stage),
            decision: Set(r.decision),
            note: Set(r.note),
            remote_ip: Set(r.remote_ip),
            created_at: Set(r.created_at),
        }
        .insert(self.db)
        .await
        .map(RunReview::from)
        .map_err(Into::into)
    }

    /// A run's reviews, oldest first.
    pub async fn run_reviews(&self, run_id: &str) -> Result<Vec<RunReview>> {
        Ok(run_reviews::Entity::find()
            .filter(run_reviews::Column::OrgId.eq(self.org_s.clone()))
            .filter(run_reviews::Column::RunId.eq(run_id))
            .order_by_asc(run_reviews::Column::CreatedAt)
            .order_by_asc(run_reviews::Column::Id)
            .all(self.db)
            .await?
            .into_iter()
            .map(RunReview::from)
            .collect())
    }

    /// Takes the first judgment of a queued run by its approval policies: true for the one
    /// caller that marks it `QUEUED:JUDGING` (runs being judged are not claimed). A mark
    /// older than `stale_before` (its judge died) may be taken over.
    pub async fn begin_review_judgment(
        &self,
        run: terraplane_domain::RunId,
        now: DateTime<Utc>,
        stale_before: DateTime<Utc>,
    ) -> Result<bool> {
        let r = runs::Entity::update_many()
            .col_expr(runs::Column::ReviewStage, sea_orm::sea_query::Expr::value(JUDGING))
            .col_expr(runs::Column::UpdatedAt, sea_orm::sea_query::Expr::value(now))
            .filter(runs::Column::OrgId.eq(self.org_s.clone()))
            .filter(runs::Column::Id.eq(run.to_string()))
            .filter(runs::Column::State.eq(terraplane_domain::RunState::Queued.as_str()))
            .filter(
                sea_orm::Condition::any().add(runs::Column::ReviewStage.is_null()).add(
                    sea_orm::Condition::all()
                        .add(runs::Column::ReviewStage.eq(JUDGING))
                        .add(runs::Column::UpdatedAt.lt(stale_before)),
                ),
            )
            .exec(self.db)
            .await?;
        Ok(r.rows_affected == 1)
    }

    /// Notes that approval policies approved a run where it is, without moving it; a queued
    /// run is published afresh (a publish while it was being judged was refused).
    pub async fn set_review_stage(&self, run: terraplane_domain::RunId, stage: &str) -> Result<()> {
        runs::Entity::update_many()
            .col_expr(
                runs::Column::ReviewStage,
                sea_orm::sea_query::Expr::value(stage.to_owned()),
            )
            .col_expr(
                runs::Column::DispatchedAt,
                sea_orm::sea_query::Expr::value(Option::<DateTime<Utc>>::None),
            )
            .filter(runs::Column::OrgId.eq(self.org_s.clone()))
            .filter(runs::Column::Id.eq(run.to_string()))
            .exec(self.db)
            .await?;
        Ok(())
    }

    /// The evaluations made for a run, oldest first.
    pub async fn run_policy_evaluations(&self, run_id: &str) -> Result<Vec<PolicyEvaluation>> {
        policy_evaluations::Entity::find()
            .filter(policy_evaluations::Column::OrgId.eq(self.org_s.clone()))
            .filter(policy_evaluations::Column::RunId.eq(run_id))
            .order_by_asc(policy_evaluations::Column::CreatedAt)
            .order_by_asc(policy_evaluations::Column::Id)
            .all(self.db)
            .await?
            .into_iter()
            .map(PolicyEvaluation::try_from)
            .collect()
    }

    /// A policy's newest evaluations.
    pub async fn policy_evaluations(&self, policy_id: &str, limit: u64) -> Result<Vec<PolicyEvaluation>> {
        policy_evaluations::Entity::find()
            .filter(policy_evaluations::Column::OrgId.eq(self.org_s.clone()))
            .filter(policy_evaluations::Column::PolicyId.eq(policy_id))
            .order_by_desc(policy_evaluations::Column::CreatedAt)
            .order_by_desc(policy_evaluations::Column::Id)
            .limit(limit)
            .all(self.db)
            .await?
            .into_iter()
            .map(PolicyEvaluation::try_from)
            .collect()
    }

    /// A stored input, by hash: (policy type, input).
    pub async fn policy_input(&self, input_hash: &str) -> Result<(String, serde_json::Value)> {
        let m = policy_inputs::Entity::find_by_id((self.org_s.clone(), input_hash.to_owned()))
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("policy input"))?;
        let v = serde_json::from_str(&m.input).map_err(|e| StoreError::Invalid(format!("stored policy input: {e}")))?;
        Ok((m.policy_type, v))
    }

    /// The inputs a policy sampled, newest first: (input hash, when).
    pub async fn policy_samples(&self, policy_id: &str) -> Result<Vec<(String, DateTime<Utc>)>> {
        Ok(policy_samples::Entity::find()
            .filter(policy_samples::Column::OrgId.eq(self.org_s.clone()))
            .filter(policy_samples::Column::PolicyId.eq(policy_id))
            .order_by_desc(policy_samples::Column::CreatedAt)
            .order_by_desc(policy_samples::Column::Id)
            .all(self.db)
            .await?
            .into_iter()
            .map(|m| (m.input_hash, m.created_at))
            .collect())
    }
}
