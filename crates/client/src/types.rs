//! The API's objects as the client sees them: serde mirrors of the GraphQL types (camelCase
//! on the wire). Enums keep values this client doesn't know yet instead of failing.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// An API enum by its GraphQL name, as `as_str`, `Display` and on the wire; a name this
/// client doesn't know (a newer server) is kept verbatim in `Other`.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $name:ident { $($(#[$vmeta:meta])* $variant:ident => $wire:literal,)+ }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(from = "String", into = "String")]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
            /// A name this client doesn't know.
            Other(String),
        }

        impl $name {
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => $wire,)+
                    $name::Other(s) => s,
                }
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                match s.as_str() {
                    $($wire => $name::$variant,)+
                    _ => $name::Other(s),
                }
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> Self {
                match v {
                    $name::Other(s) => s,
                    v => v.as_str().to_owned(),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Organization {
    pub id: String,
    pub slug: String,
    pub name: String,
}

/// Who the token belongs to (`me`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Viewer {
    pub id: String,
    pub name: String,
    pub organization: Organization,
    pub role: String,
}

/// `Debug` leaves both tokens out.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoginResult {
    /// The short-lived access token.
    pub token: String,
    /// Exchanged for a new access token by [`crate::Client::refresh`]; rotated on each use.
    /// `None` from servers older than session refresh.
    #[serde(default)]
    pub refresh_token: Option<String>,
    pub expires_at: DateTime<Utc>,
    pub organization: Organization,
}

impl fmt::Debug for LoginResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoginResult")
            .field("token", &"<redacted>")
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "<redacted>"))
            .field("expires_at", &self.expires_at)
            .field("organization", &self.organization)
            .finish()
    }
}

/// A stack's lock (`stackLock`), not to be confused with the Terraform state lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackLock {
    pub holder: String,
    pub note: Option<String>,
    pub locked_at: DateTime<Utc>,
}

/// The Terraform state lock of a stack.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateLockInfo {
    pub id: String,
    pub holder: String,
    pub info: serde_json::Value,
    pub run_id: Option<String>,
    pub needs_recovery: bool,
    pub created_at: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stack {
    /// The slug; stacks are addressed by it.
    pub id: String,
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
    pub lock: Option<StackLock>,
    pub drift_status: DriftStatus,
    /// What a drift check that finds drift does.
    pub drift_reaction: DriftReaction,
    /// The last drift check; `None` before the first.
    pub drift_checked_at: Option<DateTime<Utc>>,
    /// Only filled by [`crate::Client::stack`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_lock: Option<StateLockInfo>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

wire_enum! {
    /// Whether a stack's resources still match its state, as its last drift check found.
    DriftStatus {
        InSync => "IN_SYNC",
        Drifted => "DRIFTED",
        /// Never checked.
        Unknown => "UNKNOWN",
    }
}

wire_enum! {
    /// What a drift check that finds drift does.
    DriftReaction {
        /// Record the drift and notify.
        Alert => "ALERT",
        /// Also trigger a tracked run that converges (confirmed like any run unless the
        /// stack deploys automatically).
        Reconcile => "RECONCILE",
    }
}

/// When a stack's drift is checked: a cron expression (5 fields, or 6 with seconds) in a
/// time zone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftSchedule {
    pub id: String,
    /// The stack's slug.
    pub stack: String,
    pub cron: String,
    /// An IANA time zone (`Europe/Berlin`) or `UTC`.
    pub timezone: String,
    pub next_run_at: DateTime<Utc>,
}

/// A resource whose real state differs from the Terraform state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftedResource {
    pub address: String,
    /// `update`, or `delete` when the resource is gone.
    pub action: String,
    /// Top-level attributes that differ (none for a deleted resource).
    pub attributes: Vec<String>,
}

/// One episode of drift of a stack: opened by the check that found it, updated by later
/// checks, resolved by the first check that finds the stack in sync again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftRecord {
    pub id: String,
    /// The stack's slug.
    pub stack: String,
    /// Still drifted: no check has found the stack in sync since.
    pub open: bool,
    pub resources: Vec<DriftedResource>,
    /// The last check that found this drift.
    pub last_run_id: String,
    pub first_seen_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub resolved_at: Option<DateTime<Utc>>,
    pub resolved_by_run_id: Option<String>,
}

/// A stack's drift status with its open drift records ([`crate::Client::stack_drift`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackDrift {
    /// The stack's slug.
    pub stack: String,
    pub drift_status: DriftStatus,
    pub drift_reaction: DriftReaction,
    /// The last drift check; `None` before the first.
    pub drift_checked_at: Option<DateTime<Utc>>,
    /// The open drift records, newest first (a stack has at most one open at a time).
    pub records: Vec<DriftRecord>,
}

/// `stackCreate` input; `None` fields take the server's defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackCreateInput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slug: Option<String>,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub repository: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_root: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autodeploy: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_pool: Option<String>,
}

/// `stackUpdate` input; only the `Some` fields change.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackUpdateInput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_root: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autodeploy: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_pool: Option<String>,
}

/// A run's state, by its GraphQL name. Unknown names (a newer server) are kept verbatim.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum RunState {
    Queued,
    PendingReview,
    Preparing,
    Initializing,
    Planning,
    Unconfirmed,
    Confirmed,
    Applying,
    Finished,
    Failed,
    Discarded,
    Canceled,
    Other(String),
}

impl RunState {
    pub fn as_str(&self) -> &str {
        match self {
            RunState::Queued => "QUEUED",
            RunState::PendingReview => "PENDING_REVIEW",
            RunState::Preparing => "PREPARING",
            RunState::Initializing => "INITIALIZING",
            RunState::Planning => "PLANNING",
            RunState::Unconfirmed => "UNCONFIRMED",
            RunState::Confirmed => "CONFIRMED",
            RunState::Applying => "APPLYING",
            RunState::Finished => "FINISHED",
            RunState::Failed => "FAILED",
            RunState::Discarded => "DISCARDED",
            RunState::Canceled => "CANCELED",
            RunState::Other(s) => s,
        }
    }
}

impl From<String> for RunState {
    fn from(s: String) -> Self {
        match s.as_str() {
            "QUEUED" => RunState::Queued,
            "PENDING_REVIEW" => RunState::PendingReview,
            "PREPARING" => RunState::Preparing,
            "INITIALIZING" => RunState::Initializing,
            "PLANNING" => RunState::Planning,
            "UNCONFIRMED" => RunState::Unconfirmed,
            "CONFIRMED" => RunState::Confirmed,
            "APPLYING" => RunState::Applying,
            "FINISHED" => RunState::Finished,
            "FAILED" => RunState::Failed,
            "DISCARDED" => RunState::Discarded,
            "CANCELED" => RunState::Canceled,
            _ => RunState::Other(s),
        }
    }
}

impl From<RunState> for String {
    fn from(s: RunState) -> Self {
        match s {
            RunState::Other(s) => s,
            s => s.as_str().to_owned(),
        }
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run's type, by its GraphQL name. Unknown names are kept verbatim.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum RunType {
    Tracked,
    Proposed,
    Other(String),
}

impl RunType {
    pub fn as_str(&self) -> &str {
        match self {
            RunType::Tracked => "TRACKED",
            RunType::Proposed => "PROPOSED",
            RunType::Other(s) => s,
        }
    }
}

impl From<String> for RunType {
    fn from(s: String) -> Self {
        match s.as_str() {
            "TRACKED" => RunType::Tracked,
            "PROPOSED" => RunType::Proposed,
            _ => RunType::Other(s),
        }
    }
}

impl From<RunType> for String {
    fn from(t: RunType) -> Self {
        match t {
            RunType::Other(s) => s,
            t => t.as_str().to_owned(),
        }
    }
}

impl fmt::Display for RunType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanSummary {
    pub add: i32,
    pub change: i32,
    pub destroy: i32,
}

impl fmt::Display for PlanSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "+{} ~{} -{}", self.add, self.change, self.destroy)
    }
}

/// One state change of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunEvent {
    pub state: RunState,
    pub note: Option<String>,
    pub at: DateTime<Utc>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    pub id: String,
    /// The stack's slug.
    pub stack_id: String,
    #[serde(rename = "type")]
    pub run_type: RunType,
    pub state: RunState,
    /// The run has ended and will not change again.
    pub terminal: bool,
    pub commit_sha: Option<String>,
    pub triggered_by: String,
    pub drift_detection: bool,
    pub plan_summary: Option<PlanSummary>,
    pub has_changes: Option<bool>,
    pub error: Option<String>,
    pub outputs: Option<serde_json::Value>,
    pub runner_id: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Only filled by [`crate::Client::run`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<RunEvent>,
}

/// A piece of a run's log; `data` carries its own newlines.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogChunk {
    pub seq: i64,
    pub phase: String,
    pub data: String,
    pub created_at: DateTime<Utc>,
}

/// A run's state together with the log chunks after a sequence number, read in one request
/// (the state is read first, so a terminal state means no chunk can follow the last one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunLogs {
    pub state: RunState,
    pub terminal: bool,
    pub logs: Vec<LogChunk>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StateVersion {
    pub serial: Option<i64>,
    pub version: i64,
    pub lineage: Option<String>,
    pub md5: String,
    pub sha256: String,
    pub size: i64,
    pub outputs: serde_json::Value,
    pub run_id: Option<String>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

/// A node of the organization's space tree; stacks live in spaces and roles are granted
/// on them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Space {
    /// The slug; spaces are addressed by it.
    pub id: String,
    pub name: String,
    pub description: String,
    /// The parent's slug; `None` for the root space.
    pub parent: Option<String>,
    /// Roles granted on the parent apply here too.
    pub inherit: bool,
    pub created_at: DateTime<Utc>,
}

/// `spaceCreate` arguments; `None` fields take the server's defaults (name from the slug,
/// parent the root space).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpaceCreate {
    pub slug: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    pub inherit: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Team {
    /// The slug; teams are addressed by it.
    pub id: String,
    pub name: String,
    /// Members' emails.
    pub members: Vec<String>,
}

/// A member of the organization (`users`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Member {
    pub id: String,
    pub email: String,
    pub name: String,
    /// `owner` or `member` of the organization.
    pub role: String,
}

/// `userCreate` arguments. `Debug` leaves the password out.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserCreate {
    pub email: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Only for accounts that don't exist yet; without one the user cannot log in with a
    /// password.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// Make the user an owner of the organization.
    pub owner: bool,
}

impl fmt::Debug for UserCreate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserCreate")
            .field("email", &self.email)
            .field("name", &self.name)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("owner", &self.owner)
            .finish()
    }
}

/// Who a role is granted to: GraphQL's `SubjectInput`, exactly one of its fields set
/// (`{"user": email}`, `{"team": slug}`, `{"apiKey": id}`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Subject {
    /// A user, by email.
    User(String),
    /// A team, by slug.
    Team(String),
    /// An API key, by id.
    ApiKey(String),
}

impl Subject {
    /// The kind as `RoleBinding::subject_kind` spells it.
    pub fn kind(&self) -> &'static str {
        match self {
            Subject::User(_) => "user",
            Subject::Team(_) => "team",
            Subject::ApiKey(_) => "api_key",
        }
    }

    /// The email, slug or id.
    pub fn name(&self) -> &str {
        match self {
            Subject::User(s) | Subject::Team(s) | Subject::ApiKey(s) => s,
        }
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::User(s) => write!(f, "user {s}"),
            Subject::Team(s) => write!(f, "team {s}"),
            Subject::ApiKey(s) => write!(f, "API key {s}"),
        }
    }
}

/// A role granted on a space.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleBinding {
    /// The space's slug.
    pub space: String,
    /// `user`, `team` or `api_key`.
    pub subject_kind: String,
    /// The user's email, the team's slug or the API key's id.
    pub subject: String,
    pub role: String,
    pub created_at: DateTime<Utc>,
}

/// An API key's kind, by its API name. Unknown names are kept verbatim.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum ApiKeyKind {
    /// Acts for its creator, never beyond the creator's rights.
    Personal,
    /// Belongs to the organization, with its own role (owners create them).
    Service,
    Other(String),
}

impl ApiKeyKind {
    pub fn as_str(&self) -> &str {
        match self {
            ApiKeyKind::Personal => "personal",
            ApiKeyKind::Service => "service",
            ApiKeyKind::Other(s) => s,
        }
    }
}

impl From<String> for ApiKeyKind {
    fn from(s: String) -> Self {
        match s.as_str() {
            "personal" => ApiKeyKind::Personal,
            "service" => ApiKeyKind::Service,
            _ => ApiKeyKind::Other(s),
        }
    }
}

impl From<ApiKeyKind> for String {
    fn from(k: ApiKeyKind) -> Self {
        match k {
            ApiKeyKind::Other(s) => s,
            k => k.as_str().to_owned(),
        }
    }
}

impl fmt::Display for ApiKeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An API key as listed; the secret is never part of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKey {
    pub id: String,
    pub name: String,
    pub kind: ApiKeyKind,
    /// Organization-wide role; empty when the key's rights come from space bindings only.
    pub role: String,
    /// The creator of a personal key.
    pub owner: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl ApiKey {
    /// Neither revoked nor expired at `now`.
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|t| t > now)
    }
}

/// `apiKeyCreate` arguments; `None` fields take the server's defaults (a personal key
/// with its creator's rights, expiring after 90 days).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyCreate {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<ApiKeyKind>,
    /// `owner`, `admin`, `writer` or `reader`; with `space`, a space role.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Limits a service key to one space (its slug).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub space: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in_days: Option<i32>,
}

/// A new API key with its secret, which the server returns this once. `Debug` leaves the
/// secret out.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyCreated {
    pub key: ApiKey,
    pub secret: String,
}

impl fmt::Debug for ApiKeyCreated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKeyCreated")
            .field("key", &self.key)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// `auditEvents` filters; `None` fields don't filter (and `limit` takes the server's
/// default, 100; the server allows at most 1000).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditQuery {
    /// Only events by this actor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// Only this action (`stack.create`, `login.failure`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// Only events on this target (a stack's slug, a user's email, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Only events at or after this time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    /// Only events before this time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
    /// At most this many events, the newest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// One entry of the organization's audit trail. Each event's `hash` covers its content
/// and the previous event's hash (`prev_hash`), so altering or removing one breaks the
/// chain ([`crate::Client::audit_verify`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    pub id: String,
    /// Position in the organization's chain, from 1.
    pub seq: i64,
    pub actor: String,
    /// `stack.create`, `role.grant`, `login.failure`, …
    pub action: String,
    /// `stack`, `user`, `space`, …
    pub target_kind: String,
    pub target: String,
    /// The target before and after the change, where it applies.
    pub before: Option<serde_json::Value>,
    pub after: Option<serde_json::Value>,
    pub request_id: Option<String>,
    pub client_ip: Option<String>,
    pub at: DateTime<Utc>,
    pub hash: String,
    pub prev_hash: String,
}

/// The outcome of recomputing the audit chain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditVerification {
    pub ok: bool,
    /// Events verified before the first problem (all of them when `ok`).
    pub events: i64,
    /// What is wrong (`event 7 (…) was altered`, `event 7 was removed`); `None` when `ok`.
    pub problem: Option<String>,
    /// The first event altered or removed.
    pub seq: Option<i64>,
    /// The id of the altered event (a removed one has none).
    pub event_id: Option<String>,
}

/// What a variable becomes in a run, by its GraphQL name. Unknown names are kept verbatim.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum VariableKind {
    /// An environment variable of the run.
    #[default]
    Env,
    /// A Terraform input variable (`name` is the variable's name).
    Terraform,
    /// A file written into the workspace (`name` is its path, relative to the project root).
    File,
    Other(String),
}

impl VariableKind {
    pub fn as_str(&self) -> &str {
        match self {
            VariableKind::Env => "ENV",
            VariableKind::Terraform => "TERRAFORM",
            VariableKind::File => "FILE",
            VariableKind::Other(s) => s,
        }
    }
}

impl From<String> for VariableKind {
    fn from(s: String) -> Self {
        match s.as_str() {
            "ENV" => VariableKind::Env,
            "TERRAFORM" => VariableKind::Terraform,
            "FILE" => VariableKind::File,
            _ => VariableKind::Other(s),
        }
    }
}

impl From<VariableKind> for String {
    fn from(k: VariableKind) -> Self {
        match k {
            VariableKind::Other(s) => s,
            k => k.as_str().to_owned(),
        }
    }
}

impl fmt::Display for VariableKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A value a context or a stack holds. Secrets are write-only: the server never returns
/// their value, and `checksum` is how versions are told apart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Variable {
    /// The environment variable's name, the Terraform variable's name, or the file's
    /// relative path.
    pub name: String,
    pub kind: VariableKind,
    pub secret: bool,
    /// Only given to the apply phase, not to plans.
    pub apply_only: bool,
    /// `None` for secrets.
    pub value: Option<String>,
    pub checksum: String,
    pub updated_at: DateTime<Utc>,
}

/// A variable as a stack's runs get it, after the stack's own values and its contexts'
/// were merged by precedence (`stackEnvironment`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectiveVariable {
    pub name: String,
    pub kind: VariableKind,
    pub secret: bool,
    pub apply_only: bool,
    /// `None` for secrets.
    pub value: Option<String>,
    pub checksum: String,
    /// Where the value comes from: `stack` or `context:<context id>`.
    pub source: String,
    /// The context attachment's priority; `None` for the stack's own values and for
    /// auto-attached contexts.
    pub priority: Option<i32>,
    /// The value comes from a context attached by label rather than by hand.
    pub auto_attached: bool,
}

/// `contextSetVariable` / `stackSetVariable` input. `Debug` leaves a secret's value out.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VariableInput {
    pub name: String,
    pub value: String,
    pub kind: VariableKind,
    /// Write-only from now on: the API never returns the value again.
    pub secret: bool,
    pub apply_only: bool,
}

impl fmt::Debug for VariableInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value: &dyn fmt::Debug = if self.secret { &"<redacted>" } else { &self.value };
        f.debug_struct("VariableInput")
            .field("name", &self.name)
            .field("value", value)
            .field("kind", &self.kind)
            .field("secret", &self.secret)
            .field("apply_only", &self.apply_only)
            .finish()
    }
}

/// A context attached to a stack. Of two attached contexts setting the same variable, the
/// lower priority number wins (0 beats 1); the stack's own values beat every context's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextAttachment {
    /// The context's id.
    pub context: String,
    /// The stack's slug.
    pub stack: String,
    pub priority: i32,
    /// Attached because of a label, not by hand.
    pub auto_attached: bool,
}

/// A named set of variables that stacks share by attaching it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    /// The slug; contexts are addressed by it.
    pub id: String,
    pub name: String,
    pub description: String,
    pub labels: Vec<String>,
    /// The space's slug.
    pub space: String,
    pub variables: Vec<Variable>,
    pub attachments: Vec<ContextAttachment>,
    pub created_at: DateTime<Utc>,
}

/// `contextCreate` input; `None` fields take the server's defaults (id from the name, the
/// root space).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextCreateInput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    /// The space's slug.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub space: Option<String>,
}

/// An AWS role runs of the attached stacks assume with the run's identity token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwsIntegration {
    /// The slug; integrations are addressed by it.
    pub id: String,
    pub name: String,
    /// The space's slug.
    pub space: String,
    pub role_arn: String,
    /// The role for plans (read-only work); `None`: `role_arn` for every phase.
    pub read_role_arn: Option<String>,
    pub audience: Option<String>,
    pub duration_seconds: i32,
    /// The attached stacks' slugs.
    pub stacks: Vec<String>,
}

/// `awsIntegrationCreate` input; `None` fields take the server's defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwsIntegrationInput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    pub role_arn: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_role_arn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<i32>,
    /// The space's slug.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub space: Option<String>,
}

wire_enum! {
    /// Where a notification endpoint delivers, and so the shape of what it gets.
    #[derive(Default)]
    NotificationKind {
        /// A JSON POST, HMAC-signed when the endpoint has a secret.
        #[default]
        Webhook => "WEBHOOK",
        /// A Slack incoming webhook.
        Slack => "SLACK",
        /// PagerDuty Events v2; the secret is the routing key.
        Pagerduty => "PAGERDUTY",
        /// A Microsoft Teams incoming webhook.
        Teams => "TEAMS",
    }
}

wire_enum! {
    /// Something a notification endpoint can subscribe to.
    NotificationEvent {
        RunNeedsConfirmation => "RUN_NEEDS_CONFIRMATION",
        RunPendingReview => "RUN_PENDING_REVIEW",
        RunFailed => "RUN_FAILED",
        RunFinished => "RUN_FINISHED",
        DriftDetected => "DRIFT_DETECTED",
        DriftResolved => "DRIFT_RESOLVED",
        PolicyDenied => "POLICY_DENIED",
    }
}

/// Where notifications go. Its secret is write-only: `has_secret` tells whether it has one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationEndpoint {
    pub id: String,
    pub name: String,
    pub kind: NotificationKind,
    pub url: String,
    /// The space's slug: the endpoint hears about the stacks of this space and its
    /// sub-spaces.
    pub space: String,
    pub events: Vec<NotificationEvent>,
    /// Only stacks with one of these labels; empty: every stack.
    pub stack_labels: Vec<String>,
    pub has_secret: bool,
    pub created_at: DateTime<Utc>,
}

/// `notificationEndpointCreate` input; `None` fields take the server's defaults (id from
/// the name, no secret, every stack, the root space). `Debug` leaves the secret out.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationEndpointInput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    pub kind: NotificationKind,
    pub url: String,
    /// Write-only: a webhook's HMAC key or a PagerDuty routing key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    pub events: Vec<NotificationEvent>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack_labels: Option<Vec<String>>,
    /// The space's slug.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub space: Option<String>,
}

impl fmt::Debug for NotificationEndpointInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NotificationEndpointInput")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("url", &self.url)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("events", &self.events)
            .field("stack_labels", &self.stack_labels)
            .field("space", &self.space)
            .finish()
    }
}

/// One event on its way to one endpoint, with its delivery attempts so far.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationDelivery {
    pub id: String,
    /// The endpoint's id.
    pub endpoint: String,
    pub event: NotificationEvent,
    /// The stack's slug.
    pub stack: Option<String>,
    pub run_id: Option<String>,
    /// `PENDING`, `DELIVERED` or `FAILED` (given up).
    pub status: String,
    pub attempts: i32,
    /// The HTTP status of the last attempt.
    pub last_status_code: Option<i32>,
    pub last_error: Option<String>,
    /// When a pending delivery is tried again.
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
}

wire_enum! {
    /// The decision a policy takes part in; each type reads its own rules.
    #[derive(Default)]
    PolicyType {
        /// After `terraform plan`: `deny` fails the run, `warn` asks for a human.
        #[default]
        Plan => "PLAN",
        /// Whether a run may proceed: `approve` / `reject`.
        Approval => "APPROVAL",
        /// The stacks to run after a tracked run finishes: `trigger`.
        Trigger => "TRIGGER",
        /// How a push is interpreted: `track`, `propose`, `ignore`, …
        Push => "PUSH",
        /// Where notifications go: `inbox`, `slack`, `webhook`.
        Notification => "NOTIFICATION",
        /// Who may log in and with what access: `allow`, `admin`, `deny`, …
        Login => "LOGIN",
    }
}

/// A Rego policy (`package spacelift`). Every change of its body or labels is a new version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// The slug; policies are addressed by it.
    pub id: String,
    pub name: String,
    #[serde(rename = "type")]
    pub policy_type: PolicyType,
    pub description: String,
    /// `autoattach:<label>` attaches the policy to every stack with that label.
    pub labels: Vec<String>,
    /// The Rego source of the current version.
    pub body: String,
    pub version: i32,
    /// The space's slug.
    pub space: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Every version, oldest first. Only filled by [`crate::Client::policy`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versions: Option<Vec<PolicyVersion>>,
    /// Slugs of the stacks it is attached to by hand (not those it auto-attaches to). Only
    /// filled by [`crate::Client::policy`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached_stacks: Option<Vec<String>>,
    /// The latest evaluations, newest first (at most [`crate::POLICY_EVALUATIONS_LIMIT`]). Only
    /// filled by [`crate::Client::policy`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluations: Option<Vec<PolicyEvaluation>>,
    /// Inputs the policy kept with its `sample` rule, newest first. Only filled by
    /// [`crate::Client::policy`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<Vec<PolicySample>>,
}

/// One version of a policy, as it was saved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyVersion {
    pub version: i32,
    pub body: String,
    pub labels: Vec<String>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

/// An input a policy kept with its `sample` rule, by its hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicySample {
    pub input_hash: String,
    pub created_at: DateTime<Utc>,
}

/// One stored verdict of one policy version on one input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyEvaluation {
    pub id: String,
    /// The policy's id (slug), or its internal id when it was deleted since.
    pub policy: String,
    pub policy_version: i32,
    #[serde(rename = "type")]
    pub policy_type: PolicyType,
    pub run_id: Option<String>,
    /// What was judged: `run:<id>`, a login, …
    pub subject: String,
    /// sha256 of the input (canonical JSON).
    pub input_hash: String,
    /// PLAN: `allow`, `warn` or `deny`; APPROVAL: `approve`, `reject` or `undecided`;
    /// TRIGGER: `trigger` or `none`; LOGIN: `allow`, `admin`, `deny` or `undecided`; PUSH and
    /// NOTIFICATION: `decided` or `none`; any type: `error`.
    pub outcome: String,
    /// PLAN: the deny then the warn messages; TRIGGER: the stacks; `error`: what failed.
    pub messages: Vec<String>,
    /// Each defined rule's value (`{"error": …}` when the evaluation failed).
    pub result: serde_json::Value,
    pub created_at: DateTime<Utc>,
}

wire_enum! {
    /// What a review decides.
    ReviewDecision {
        Approve => "APPROVE",
        Reject => "REJECT",
    }
}

/// A person's review of a run ([`crate::Client::run_reviews`]); approval policies read the
/// reviews, each reviewer's latest at the run's current stage counting.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunReview {
    /// The reviewer's login (email, or an API key's name).
    pub reviewer: String,
    /// Slugs of the reviewer's teams when they reviewed.
    pub teams: Vec<String>,
    /// Where the run was held when it was reviewed: `QUEUED` (before planning) or
    /// `UNCONFIRMED` (its plan waiting for confirmation).
    pub stage: RunState,
    pub decision: ReviewDecision,
    /// Empty when the reviewer gave none.
    pub note: String,
    pub created_at: DateTime<Utc>,
}

/// How a policy, as it is now, judges the input a run gave policies of its type
/// (`policySimulate`); nothing is stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicySimulation {
    /// As in [`PolicyEvaluation::outcome`].
    pub outcome: String,
    pub messages: Vec<String>,
    /// Each defined rule's value.
    pub result: serde_json::Value,
}

/// A policy attached to (or detached from) a stack.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyAttachment {
    /// The policy's id.
    pub policy: String,
    /// The stack's slug.
    pub stack: String,
}

/// `policyCreate` input; `None` fields take the server's defaults (id from the name, no
/// labels, the root space).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyCreateInput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    #[serde(rename = "type")]
    pub policy_type: PolicyType,
    /// Rego (v0 or v1 syntax), `package spacelift`.
    pub body: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The space's slug.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub space: Option<String>,
}

/// `policyUpdate` input; only the `Some` fields change. A new body or new labels make a new
/// version; `labels` replaces the whole set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyUpdateInput {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl PolicyUpdateInput {
    /// Nothing would change.
    pub fn is_empty(&self) -> bool {
        self == &PolicyUpdateInput::default()
    }
}
