//! The run lifecycle. Every state change goes through [`RunState::apply`], so handlers and
//! the scheduler cannot invent a transition; illegal ones return [`TransitionError`].

use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RunType {
    Tracked,
    Proposed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RunState {
    Queued,
    /// Waiting for reviews that approval policies ask for (before planning, or before the
    /// plan may be confirmed).
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
}

/// Where an approval policy holds a run: when it was queued (nothing ran yet) or when its
/// plan waits for confirmation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReviewStage {
    Queued,
    Unconfirmed,
}

impl ReviewStage {
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewStage::Queued => "QUEUED",
            ReviewStage::Unconfirmed => "UNCONFIRMED",
        }
    }

    /// The state the run is in at this stage, and returns to once approved.
    pub fn state(self) -> RunState {
        match self {
            ReviewStage::Queued => RunState::Queued,
            ReviewStage::Unconfirmed => RunState::Unconfirmed,
        }
    }
}

impl FromStr for ReviewStage {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "QUEUED" => Ok(ReviewStage::Queued),
            "UNCONFIRMED" => Ok(ReviewStage::Unconfirmed),
            _ => Err(format!("unknown review stage {s:?}")),
        }
    }
}

/// Which half of a run a runner executes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunPhase {
    Plan,
    Apply,
}

/// Something that happens to a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunEvent {
    /// A runner claimed the run for its plan phase.
    ClaimPlan,
    Initializing,
    Planning,
    /// The plan phase ended successfully.
    PlanFinished {
        has_changes: bool,
        run_type: RunType,
        autodeploy: bool,
    },
    Confirm,
    Discard,
    /// A runner claimed the run for its apply phase.
    ClaimApply,
    ApplyFinished,
    Fail,
    Cancel,
    /// Approval policies neither approve nor reject yet: wait for reviews.
    RequireReview,
    /// Approval policies approve: back to where the run was held.
    Approve(ReviewStage),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("run is {state}; cannot {event}")]
pub struct TransitionError {
    pub state: RunState,
    pub event: &'static str,
}

impl RunEvent {
    pub fn name(&self) -> &'static str {
        match self {
            RunEvent::ClaimPlan => "claim for planning",
            RunEvent::Initializing => "start initializing",
            RunEvent::Planning => "start planning",
            RunEvent::PlanFinished { .. } => "finish planning",
            RunEvent::Confirm => "confirm",
            RunEvent::Discard => "discard",
            RunEvent::ClaimApply => "claim for applying",
            RunEvent::ApplyFinished => "finish applying",
            RunEvent::Fail => "fail",
            RunEvent::Cancel => "cancel",
            RunEvent::RequireReview => "wait for review",
            RunEvent::Approve(_) => "approve",
        }
    }
}

impl RunState {
    pub const ALL: [RunState; 12] = [
        RunState::Queued,
        RunState::PendingReview,
        RunState::Preparing,
        RunState::Initializing,
        RunState::Planning,
        RunState::Unconfirmed,
        RunState::Confirmed,
        RunState::Applying,
        RunState::Finished,
        RunState::Failed,
        RunState::Discarded,
        RunState::Canceled,
    ];

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Finished | RunState::Failed | RunState::Discarded | RunState::Canceled
        )
    }

    /// States in which a runner holds the run and must keep heartbeating.
    pub fn is_runner_held(self) -> bool {
        matches!(
            self,
            RunState::Preparing | RunState::Initializing | RunState::Planning | RunState::Applying
        )
    }

    /// The single state a run moves to on `event`, or why it cannot.
    pub fn apply(self, event: &RunEvent) -> Result<RunState, TransitionError> {
        use RunState::*;
        let next = match (self, event) {
            (Queued, RunEvent::ClaimPlan) => Some(Preparing),
            (Preparing, RunEvent::Initializing) => Some(Initializing),
            (Initializing, RunEvent::Planning) => Some(Planning),
            (
                Planning,
                RunEvent::PlanFinished {
                    has_changes,
                    run_type,
                    autodeploy,
                },
            ) => Some(match (has_changes, run_type) {
                (false, _) | (_, RunType::Proposed) => Finished,
                (true, RunType::Tracked) if *autodeploy => Confirmed,
                (true, RunType::Tracked) => Unconfirmed,
            }),
            (Unconfirmed, RunEvent::Confirm) => Some(Confirmed),
            (Unconfirmed | PendingReview, RunEvent::Discard) => Some(Discarded),
            (Queued | Unconfirmed, RunEvent::RequireReview) => Some(PendingReview),
            (PendingReview, RunEvent::Approve(stage)) => Some(stage.state()),
            (Confirmed, RunEvent::ClaimApply) => Some(Applying),
            (Applying, RunEvent::ApplyFinished) => Some(Finished),
            (s, RunEvent::Fail) if !s.is_terminal() => Some(Failed),
            // An apply in progress cannot be canceled: stopping terraform mid-apply loses
            // track of real infrastructure. Everything before it can.
            (
                Queued | PendingReview | Preparing | Initializing | Planning | Unconfirmed | Confirmed,
                RunEvent::Cancel,
            ) => Some(Canceled),
            _ => None,
        };
        next.ok_or(TransitionError {
            state: self,
            event: event.name(),
        })
    }

    pub fn as_str(self) -> &'static str {
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
        }
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        RunState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| format!("unknown run state {s:?}"))
    }
}

impl RunType {
    pub fn as_str(self) -> &'static str {
        match self {
            RunType::Tracked => "TRACKED",
            RunType::Proposed => "PROPOSED",
        }
    }
}

impl fmt::Display for RunType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "TRACKED" => Ok(RunType::Tracked),
            "PROPOSED" => Ok(RunType::Proposed),
            _ => Err(format!("unknown run type {s:?}")),
        }
    }
}

impl RunPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            RunPhase::Plan => "plan",
            RunPhase::Apply => "apply",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_done(has_changes: bool, run_type: RunType, autodeploy: bool) -> RunEvent {
        RunEvent::PlanFinished {
            has_changes,
            run_type,
            autodeploy,
        }
    }

    #[test]
    fn tracked_run_happy_path() -> Result<(), TransitionError> {
        let s = RunState::Queued.apply(&RunEvent::ClaimPlan)?;
        let s = s.apply(&RunEvent::Initializing)?.apply(&RunEvent::Planning)?;
        let s = s.apply(&plan_done(true, RunType::Tracked, false))?;
        assert_eq!(s, RunState::Unconfirmed);
        let s = s.apply(&RunEvent::Confirm)?.apply(&RunEvent::ClaimApply)?;
        assert_eq!(s.apply(&RunEvent::ApplyFinished)?, RunState::Finished);
        Ok(())
    }

    #[test]
    fn reviews_hold_and_release_runs() -> Result<(), TransitionError> {
        let held = RunState::Queued.apply(&RunEvent::RequireReview)?;
        assert_eq!(held, RunState::PendingReview);
        assert_eq!(held.apply(&RunEvent::Approve(ReviewStage::Queued))?, RunState::Queued);
        let held = RunState::Unconfirmed.apply(&RunEvent::RequireReview)?;
        assert_eq!(
            held.apply(&RunEvent::Approve(ReviewStage::Unconfirmed))?,
            RunState::Unconfirmed
        );
        // A held run is neither confirmed nor claimed; it can be rejected (failed),
        // discarded or canceled.
        assert!(held.apply(&RunEvent::Confirm).is_err());
        assert!(held.apply(&RunEvent::ClaimPlan).is_err());
        assert_eq!(held.apply(&RunEvent::Fail)?, RunState::Failed);
        assert_eq!(held.apply(&RunEvent::Discard)?, RunState::Discarded);
        assert_eq!(held.apply(&RunEvent::Cancel)?, RunState::Canceled);
        assert!(RunState::Planning.apply(&RunEvent::RequireReview).is_err());
        assert!(RunState::Queued.apply(&RunEvent::Approve(ReviewStage::Queued)).is_err());
        Ok(())
    }

    #[test]
    fn plan_outcomes() {
        let p = RunState::Planning;
        assert_eq!(
            p.apply(&plan_done(false, RunType::Tracked, false)),
            Ok(RunState::Finished)
        );
        assert_eq!(
            p.apply(&plan_done(true, RunType::Proposed, true)),
            Ok(RunState::Finished)
        );
        assert_eq!(
            p.apply(&plan_done(true, RunType::Tracked, true)),
            Ok(RunState::Confirmed)
        );
    }

    #[test]
    fn illegal_transitions_name_the_state() {
        let err = RunState::Finished.apply(&RunEvent::Confirm).unwrap_err();
        assert_eq!(err.to_string(), "run is FINISHED; cannot confirm");
        assert!(RunState::Applying.apply(&RunEvent::Cancel).is_err());
        assert!(RunState::Failed.apply(&RunEvent::Fail).is_err());
        assert!(RunState::Queued.apply(&RunEvent::ClaimApply).is_err());
    }

    #[test]
    fn every_state_round_trips_and_terminals_accept_nothing() {
        let events = [
            RunEvent::ClaimPlan,
            RunEvent::Initializing,
            RunEvent::Planning,
            plan_done(true, RunType::Tracked, false),
            RunEvent::Confirm,
            RunEvent::Discard,
            RunEvent::ClaimApply,
            RunEvent::ApplyFinished,
            RunEvent::Fail,
            RunEvent::Cancel,
        ];
        for s in RunState::ALL {
            assert_eq!(s.as_str().parse::<RunState>(), Ok(s));
            if s.is_terminal() {
                assert!(events.iter().all(|e| s.apply(e).is_err()), "{s} accepted an event");
            } else {
                assert!(s.apply(&RunEvent::Fail).is_ok());
            }
        }
    }
}
