//! Wire types shared by the api, the scheduler, the runner and the client: the runner
//! protocol (claim, heartbeat, logs, plan, results) and the versioned queue message.
//! Everything here is serde; nothing here does IO.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use terraplane_domain::plan::PlanSummary;
use terraplane_domain::vars::VarKind;
use terraplane_domain::{RunId, RunPhase, RunState, RunType};

/// The message on the job queue. It carries ids only: the database is the source of truth,
/// and a runner learns everything else by claiming the run through the api.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobMessage {
    /// Schema version of this message; runners reject versions they don't know.
    pub v: u32,
    pub run_id: RunId,
    pub phase: RunPhase,
}

impl JobMessage {
    pub const VERSION: u32 = 1;

    pub fn new(run_id: RunId, phase: RunPhase) -> Self {
        Self {
            v: Self::VERSION,
            run_id,
            phase,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClaimRequest {
    pub runner_id: String,
    pub phase: RunPhase,
}

/// What a runner needs to execute one phase of a run. Returned only to the claimant.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobSpec {
    pub run_id: RunId,
    pub phase: RunPhase,
    pub run_type: RunType,
    /// Incremented by every claim; every later call of the claimant carries it, and calls
    /// with an older token are refused, so a runner that lost its lease can't write.
    pub fencing_token: i64,
    pub lease_expires_at: DateTime<Utc>,
    /// Short-lived token scoped to this run and its stack (state backend + runner calls).
    pub run_token: String,
    pub org: String,
    pub stack: String,
    pub repository: String,
    pub branch: String,
    pub commit_sha: Option<String>,
    pub project_root: String,
    pub tool: String,
    /// Absolute URL of the stack's state backend address.
    pub state_address: String,
    pub heartbeat_interval_secs: u64,
    /// sha256 of the plan file the apply phase must apply.
    pub plan_sha256: Option<String>,
    /// Sequence number of this phase's first log chunk (logs are gap-free across phases).
    pub log_seq_start: i64,
    /// The stack's effective values this phase receives (secrets decrypted).
    #[serde(default)]
    pub variables: Vec<JobVariable>,
    /// The phase's OIDC identity token (`TERRAPLANE_OIDC_TOKEN`).
    #[serde(default)]
    pub oidc_token: Option<String>,
    /// AWS credentials to obtain for this phase.
    #[serde(default)]
    pub aws: Option<AwsAssume>,
    /// Secret values this phase does not receive but may still print (a saved plan
    /// carries the Terraform variables it was made with): masked like the others.
    #[serde(default)]
    pub also_mask: Redacted,
    /// A drift check: `plan -refresh-only` (exit code 2 means drift).
    #[serde(default)]
    pub drift_detection: bool,
}

/// Secret strings that `Debug` never shows.
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Redacted(pub Vec<String>);

impl std::fmt::Debug for Redacted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{} redacted]", self.0.len())
    }
}

/// One value for the run. `Debug` never shows a secret's value.
#[derive(Clone, Serialize, Deserialize)]
pub struct JobVariable {
    pub kind: VarKind,
    pub name: String,
    pub value: String,
    pub secret: bool,
}

impl std::fmt::Debug for JobVariable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = if self.secret { "*****" } else { self.value.as_str() };
        f.debug_struct("JobVariable")
            .field("kind", &self.kind)
            .field("name", &self.name)
            .field("value", &value)
            .finish()
    }
}

/// `AssumeRoleWithWebIdentity` with the phase's identity token for `audience`.
#[derive(Clone, Serialize, Deserialize)]
pub struct AwsAssume {
    pub role_arn: String,
    pub web_identity_token: String,
    pub session_name: String,
    pub duration_secs: i32,
}

impl std::fmt::Debug for AwsAssume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsAssume")
            .field("role_arn", &self.role_arn)
            .field("session_name", &self.session_name)
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HeartbeatRequest {
    pub fencing_token: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HeartbeatResponse {
    pub lease_expires_at: DateTime<Utc>,
    pub state: RunState,
    /// The run was canceled: stop the phase and report nothing more.
    pub cancel_requested: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LogAppend {
    pub fencing_token: i64,
    /// Gap-free per run, from 0. Re-sending a chunk with the same seq and bytes is a no-op.
    pub seq: i64,
    pub phase: RunPhase,
    pub data: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProgressRequest {
    pub fencing_token: i64,
    /// INITIALIZING or PLANNING.
    pub state: RunState,
    /// The commit actually checked out, when the run was triggered without one.
    pub commit_sha: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlanUploadMeta {
    pub fencing_token: i64,
    pub sha256: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum PhaseOutcome {
    Planned { has_changes: bool, summary: PlanSummary },
    Applied { outputs: serde_json::Value },
    Failed { reason: String },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PhaseResult {
    pub fencing_token: i64,
    pub phase: RunPhase,
    #[serde(flatten)]
    pub outcome: PhaseOutcome,
}

/// Error body of every REST endpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_message_round_trips_with_version() -> Result<(), serde_json::Error> {
        let m = JobMessage::new(RunId::new(), RunPhase::Apply);
        let text = serde_json::to_string(&m)?;
        assert!(
            text.contains(r#""v":1"#) && text.contains(r#""phase":"apply""#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<JobMessage>(&text)?, m);
        Ok(())
    }

    #[test]
    fn phase_result_is_tagged() -> Result<(), serde_json::Error> {
        let r = PhaseResult {
            fencing_token: 3,
            phase: RunPhase::Plan,
            outcome: PhaseOutcome::Failed { reason: "boom".into() },
        };
        let v = serde_json::to_value(&r)?;
        assert_eq!(v["outcome"], "failed");
        assert_eq!(v["reason"], "boom");
        Ok(())
    }
}
