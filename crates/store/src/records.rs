//! What repositories return: plain records with typed ids, independent of sea-orm models.

use chrono::{DateTime, Utc};
use terraplane_domain::plan::PlanSummary;
use terraplane_domain::{ApiKeyId, OrgId, Role, RunId, RunState, RunType, SpaceId, StackId, TeamId, UserId};

use crate::entities::*;
use crate::error::StoreError;

pub(crate) fn parse_id<T: std::str::FromStr>(s: &str) -> Result<T, StoreError> {
    id(s)
}

fn id<T: std::str::FromStr>(s: &str) -> Result<T, StoreError> {
    s.parse().map_err(|_| StoreError::Invalid(format!("corrupt id {s:?}")))
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Organization {
    pub id: OrgId,
    pub slug: String,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<organizations::Model> for Organization {
    type Error = StoreError;
    fn try_from(m: organizations::Model) -> Result<Self, StoreError> {
        Ok(Self {
            id: id(&m.id)?,
            slug: m.slug,
            name: m.name,
            created_at: m.created_at,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub id: UserId,
    pub email: String,
    pub name: String,
    pub password_hash: Option<String>,
    pub is_admin: bool,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<users::Model> for User {
    type Error = StoreError;
    fn try_from(m: users::Model) -> Result<Self, StoreError> {
        Ok(Self {
            id: id(&m.id)?,
            email: m.email,
            name: m.name,
            password_hash: m.password_hash,
            is_admin: m.is_admin,
            created_at: m.created_at,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiKey {
    pub id: ApiKeyId,
    pub org_id: OrgId,
    pub user_id: Option<UserId>,
    pub name: String,
    pub role: String,
    /// `personal` (acts for its creator, never beyond the creator's rights) or `service`.
    pub kind: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
}

impl TryFrom<api_keys::Model> for ApiKey {
    type Error = StoreError;
    fn try_from(m: api_keys::Model) -> Result<Self, StoreError> {
        Ok(Self {
            id: id(&m.id)?,
            org_id: id(&m.org_id)?,
            user_id: m.user_id.as_deref().map(id).transpose()?,
            name: m.name,
            role: m.role,
            kind: m.kind,
            created_at: m.created_at,
            expires_at: m.expires_at,
            revoked_at: m.revoked_at,
            last_used_at: m.last_used_at,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackLock {
    pub holder: String,
    pub note: Option<String>,
    pub locked_at: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stack {
    pub id: StackId,
    pub org_id: OrgId,
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
    pub space_id: SpaceId,
    pub lock: Option<StackLock>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub drift_status: terraplane_domain::drift::DriftStatus,
    pub drift_reaction: terraplane_domain::drift::Reaction,
    pub drift_checked_at: Option<DateTime<Utc>>,
}

impl TryFrom<stacks::Model> for Stack {
    type Error = StoreError;
    fn try_from(m: stacks::Model) -> Result<Self, StoreError> {
        let lock = match (m.locked_by, m.locked_at) {
            (Some(holder), Some(locked_at)) => Some(StackLock {
                holder,
                note: m.lock_note,
                locked_at,
            }),
            _ => None,
        };
        let space_id = match m.space_id.as_deref() {
            Some(s) => id(s)?,
            None => return Err(StoreError::Invalid(format!("stack {} has no space", m.slug))),
        };
        Ok(Self {
            id: id(&m.id)?,
            org_id: id(&m.org_id)?,
            slug: m.slug,
            name: m.name,
            description: m.description,
            repository: m.repository,
            branch: m.branch,
            project_root: m.project_root,
            tool: m.tool,
            tool_version: m.tool_version,
            autodeploy: m.autodeploy,
            labels: serde_json::from_str(&m.labels).unwrap_or_default(),
            worker_pool: m.worker_pool,
            space_id,
            lock,
            created_at: m.created_at,
            updated_at: m.updated_at,
            drift_status: terraplane_domain::drift::DriftStatus::parse(&m.drift_status)
                .unwrap_or(terraplane_domain::drift::DriftStatus::Unknown),
            drift_reaction: terraplane_domain::drift::Reaction::parse(&m.drift_reaction)
                .unwrap_or(terraplane_domain::drift::Reaction::Alert),
            drift_checked_at: m.drift_checked_at,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    pub id: RunId,
    pub org_id: OrgId,
    pub stack_id: StackId,
    pub run_type: RunType,
    pub state: RunState,
    pub commit_sha: Option<String>,
    pub triggered_by: String,
    pub trigger_kind: String,
    pub drift_detection: bool,
    pub plan_summary: Option<PlanSummary>,
    pub has_changes: Option<bool>,
    pub error: Option<String>,
    pub outputs: Option<serde_json::Value>,
    pub fencing_token: i64,
    pub runner_id: Option<String>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub dispatched_at: Option<DateTime<Utc>>,
    pub held_since: Option<DateTime<Utc>>,
    /// Where approval policies last judged the run: `QUEUED:PENDING`, `QUEUED:APPROVED`,
    /// `UNCONFIRMED:PENDING` or `UNCONFIRMED:APPROVED` (none when no approval policy ran).
    pub review_stage: Option<String>,
    pub cancel_requested: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl TryFrom<runs::Model> for Run {
    type Error = StoreError;
    fn try_from(m: runs::Model) -> Result<Self, StoreError> {
        let plan_summary = match (m.plan_add, m.plan_change, m.plan_destroy) {
            (Some(add), Some(change), Some(destroy)) => Some(PlanSummary { add, change, destroy }),
            _ => None,
        };
        Ok(Self {
            id: id(&m.id)?,
            org_id: id(&m.org_id)?,
            stack_id: id(&m.stack_id)?,
            run_type: m.run_type.parse().map_err(StoreError::Invalid)?,
            state: m.state.parse().map_err(StoreError::Invalid)?,
            commit_sha: m.commit_sha,
            triggered_by: m.triggered_by,
            trigger_kind: m.trigger_kind,
            drift_detection: m.drift_detection,
            plan_summary,
            has_changes: m.has_changes,
            error: m.error,
            outputs: m.outputs.as_deref().and_then(|o| serde_json::from_str(o).ok()),
            fencing_token: m.fencing_token,
            runner_id: m.runner_id,
            lease_expires_at: m.lease_expires_at,
            dispatched_at: m.dispatched_at,
            held_since: m.held_since,
            review_stage: m.review_stage,
            cancel_requested: m.cancel_requested,
            created_at: m.created_at,
            updated_at: m.updated_at,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunEventRecord {
    pub state: RunState,
    pub note: Option<String>,
    pub at: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogChunk {
    pub seq: i64,
    pub phase: String,
    pub data: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanArtifact {
    pub plan_file: Vec<u8>,
    pub plan_json: String,
    pub sha256: String,
    pub size: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateVersion {
    pub id: String,
    pub stack_id: StackId,
    pub version: i64,
    pub serial: Option<i64>,
    pub lineage: Option<String>,
    pub md5: String,
    pub sha256: String,
    pub size: i64,
    pub outputs: serde_json::Value,
    pub run_id: Option<RunId>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<&state_versions::Model> for StateVersion {
    type Error = StoreError;
    fn try_from(m: &state_versions::Model) -> Result<Self, StoreError> {
        Ok(Self {
            id: m.id.clone(),
            stack_id: id(&m.stack_id)?,
            version: m.version,
            serial: m.serial,
            lineage: m.lineage.clone(),
            md5: m.md5.clone(),
            sha256: m.sha256.clone(),
            size: m.size,
            outputs: serde_json::from_str(&m.outputs).unwrap_or_default(),
            run_id: m.run_id.as_deref().map(id).transpose()?,
            created_by: m.created_by.clone(),
            created_at: m.created_at,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateLock {
    pub lock_id: String,
    /// The holder's LockInfo JSON, verbatim.
    pub info: String,
    pub holder: String,
    pub run_id: Option<RunId>,
    pub needs_recovery: bool,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<state_locks::Model> for StateLock {
    type Error = StoreError;
    fn try_from(m: state_locks::Model) -> Result<Self, StoreError> {
        Ok(Self {
            lock_id: m.lock_id,
            info: m.info,
            holder: m.holder,
            run_id: m.run_id.as_deref().map(id).transpose()?,
            needs_recovery: m.needs_recovery,
            created_at: m.created_at,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Space {
    pub id: SpaceId,
    pub org_id: OrgId,
    pub slug: String,
    pub name: String,
    pub description: String,
    pub parent_id: Option<SpaceId>,
    pub inherit: bool,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<spaces::Model> for Space {
    type Error = StoreError;
    fn try_from(m: spaces::Model) -> Result<Self, StoreError> {
        Ok(Self {
            id: id(&m.id)?,
            org_id: id(&m.org_id)?,
            slug: m.slug,
            name: m.name,
            description: m.description,
            parent_id: m.parent_id.as_deref().map(id).transpose()?,
            inherit: m.inherit,
            created_at: m.created_at,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Team {
    pub id: TeamId,
    pub org_id: OrgId,
    pub slug: String,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<teams::Model> for Team {
    type Error = StoreError;
    fn try_from(m: teams::Model) -> Result<Self, StoreError> {
        Ok(Self {
            id: id(&m.id)?,
            org_id: id(&m.org_id)?,
            slug: m.slug,
            name: m.name,
            created_at: m.created_at,
        })
    }
}

/// Who a role binding grants to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Subject {
    User(UserId),
    Team(TeamId),
    ApiKey(ApiKeyId),
}

impl Subject {
    pub(crate) fn parts(&self) -> (&'static str, String) {
        match self {
            Subject::User(u) => ("user", u.to_string()),
            Subject::Team(t) => ("team", t.to_string()),
            Subject::ApiKey(k) => ("api_key", k.to_string()),
        }
    }

    pub(crate) fn from_parts(kind: &str, sid: &str) -> Result<Self, StoreError> {
        Ok(match kind {
            "user" => Subject::User(id(sid)?),
            "team" => Subject::Team(id(sid)?),
            "api_key" => Subject::ApiKey(id(sid)?),
            k => return Err(StoreError::Invalid(format!("unknown binding subject {k:?}"))),
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleBinding {
    pub space_id: SpaceId,
    pub subject: Subject,
    pub role: Role,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<role_bindings::Model> for RoleBinding {
    type Error = StoreError;
    fn try_from(m: role_bindings::Model) -> Result<Self, StoreError> {
        Ok(Self {
            space_id: id(&m.space_id)?,
            subject: Subject::from_parts(&m.subject_kind, &m.subject_id)?,
            role: Role::parse(&m.role).ok_or_else(|| StoreError::Invalid(format!("unknown role {:?}", m.role)))?,
            created_at: m.created_at,
        })
    }
}
