//! Spacelift-compatible Rego policies, compiled and evaluated in-process with `regorus`.
//! Policies are checked once ([`Policy::compile`]) and then evaluated many times under [`Limits`].
//!
//! What Terraplane adds to plain Rego, as Spacelift does:
//! - `sanitized(x)`: the hash that replaces sensitive values in plan inputs ([`sanitize_value`]);
//! - the plan aliases `affected_resources`, `created_resources`, `deleted_resources`,
//!   `recreated_resources` and `updated_resources` (lists of `input.terraform.resource_changes`
//!   entries), unless the policy defines a rule of the same name;
//! - `http.send`, `opa.runtime`, `rego.parse_module`, `time.now_ns` and `trace` are refused when a
//!   policy is compiled and fail if reached at run time.
//!
//! - `not` over an iteration (`not contains(labels[_], "env:prod")`) means "no element matches",
//!   as in OPA; regorus alone tests each element (see `compile.rs`, `rewrite_negations`).
//!
//! [`input`] builds the documents each policy type reads from plain structs. To evaluate several
//! policies on one input, convert it once with [`PreparedInput`] and use [`Policy::evaluate_input`].

mod builtins;
mod compile;
mod eval;
mod hash;
pub mod input;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

pub use compile::{CompileError, Policy, Syntax};
pub use eval::{EvalError, Evaluation, PreparedInput};
pub use hash::{input_hash, sanitize_value};

/// The decision a policy takes part in; each type reads its own rules (see [`PolicyType::rules`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PolicyType {
    /// Evaluated after `terraform plan`: `deny` fails the run, `warn` asks for a human.
    Plan,
    /// Decides whether a run may proceed: `approve` / `reject` (neither = undecided).
    Approval,
    /// Picks the stacks to run after a tracked run finishes: `trigger`.
    Trigger,
    /// Interprets a push: `track`, `propose`, `ignore`, …
    Push,
    /// Routes notifications: `inbox`, `slack`, `webhook`.
    Notification,
    /// Decides who may log in and with what access: `allow`, `admin`, `deny`, …
    Login,
}

/// Rules that every policy type may define: `sample` (keep the input for the workbench) and
/// `flag` (labels passed between policies through `run.flags`).
pub const COMMON_RULES: [&str; 2] = ["sample", "flag"];

impl PolicyType {
    /// Every policy type, in the order of [`PolicyType::as_str`]'s error message.
    pub const ALL: [PolicyType; 6] = [
        PolicyType::Plan,
        PolicyType::Approval,
        PolicyType::Trigger,
        PolicyType::Push,
        PolicyType::Notification,
        PolicyType::Login,
    ];

    /// The upper-case name Spacelift uses (`"PLAN"`, `"APPROVAL"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyType::Plan => "PLAN",
            PolicyType::Approval => "APPROVAL",
            PolicyType::Trigger => "TRIGGER",
            PolicyType::Push => "PUSH",
            PolicyType::Notification => "NOTIFICATION",
            PolicyType::Login => "LOGIN",
        }
    }

    /// The rule names this type reads, followed by [`COMMON_RULES`].
    pub fn rules(self) -> &'static [&'static str] {
        match self {
            PolicyType::Plan => &["deny", "warn", "sample", "flag"],
            PolicyType::Approval => &["approve", "reject", "sample", "flag"],
            PolicyType::Trigger => &["trigger", "sample", "flag"],
            PolicyType::Push => &[
                "track",
                "propose",
                "ignore",
                "ignore_track",
                "notrigger",
                "notify",
                "cancel",
                "prioritize",
                "message",
                "sample",
                "flag",
            ],
            PolicyType::Notification => &["inbox", "slack", "webhook", "sample", "flag"],
            PolicyType::Login => &["allow", "deny", "admin", "deny_admin", "roles", "sample", "flag"],
        }
    }
}

impl fmt::Display for PolicyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy type name that is not one of [`PolicyType::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown policy type \"{0}\"; expected one of PLAN, APPROVAL, TRIGGER, PUSH, NOTIFICATION, LOGIN")]
pub struct UnknownPolicyType(pub String);

impl FromStr for PolicyType {
    type Err = UnknownPolicyType;

    /// Case-insensitive: `plan`, `Plan` and `PLAN` are the same type.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PolicyType::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownPolicyType(s.to_string()))
    }
}

/// Bounds on one [`Policy::evaluate`] call.
///
/// `time` is enforced by regorus's cooperative execution timer, checked while rules, loops and
/// comprehensions run; the whole evaluation (every rule of the type) shares one budget.
///
/// `memory_bytes` is an estimate, not an allocator limit. regorus can only enforce real memory
/// limits with its `allocator-memory-limits` feature, which installs mimalloc as the global
/// allocator of every binary that links this crate (the api, `terraplane`, `tpctl`) and counts the
/// whole process's allocations against one process-wide ceiling — too invasive and too coarse for
/// a shared server. Instead the budget is charged where a value can grow far beyond what produced
/// it: the input document (its JSON size × [`INPUT_MEMORY_FACTOR`]) and the builtins
/// `numbers.range` / `numbers.range_step`, which would otherwise build arbitrarily long arrays in
/// one call. Everything else a policy builds grows step by step and is bounded by `time`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget for one evaluation.
    pub time: Duration,
    /// Estimated memory budget (see above); `None` charges nothing.
    pub memory_bytes: Option<u64>,
}

/// How many bytes of engine memory one byte of input JSON is assumed to cost.
pub const INPUT_MEMORY_FACTOR: u64 = 4;

impl Default for Limits {
    /// 2 seconds and 256 MiB.
    fn default() -> Self {
        Limits {
            time: Duration::from_secs(2),
            memory_bytes: Some(256 * 1024 * 1024),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn policy_type_names_round_trip_case_insensitively() {
        for t in PolicyType::ALL {
            assert_eq!(t.as_str().parse::<PolicyType>().unwrap(), t);
            assert_eq!(t.as_str().to_lowercase().parse::<PolicyType>().unwrap(), t);
        }
        assert_eq!("Plan".parse::<PolicyType>().unwrap(), PolicyType::Plan);
    }

    #[test]
    fn unknown_policy_type_lists_the_valid_ones() {
        let err = "access".parse::<PolicyType>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown policy type \"access\"; expected one of PLAN, APPROVAL, TRIGGER, PUSH, NOTIFICATION, LOGIN"
        );
    }

    #[test]
    fn every_type_reads_the_common_rules() {
        for t in PolicyType::ALL {
            for common in COMMON_RULES {
                assert!(t.rules().contains(&common), "{t} lacks {common}");
            }
        }
        assert_eq!(PolicyType::Plan.rules(), &["deny", "warn", "sample", "flag"]);
    }
}
