//! Evaluating a compiled [`Policy`] against one input under [`Limits`], and reading the rules'
//! values into the decision fields each policy type needs.

use std::collections::BTreeMap;
use std::fmt;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use regorus::LimitError;
use regorus::utils::limits::ExecutionTimerConfig;
use serde_json::Value;

use crate::builtins::{BudgetGuard, MEMORY_LIMIT_MARKER};
use crate::compile::split_location;
use crate::{INPUT_MEMORY_FACTOR, Limits, Policy, PolicyType};

/// Interpreter work units between two clock reads; small enough that a tight loop notices its
/// deadline within microseconds, large enough that reading the clock costs nothing measurable.
const CHECK_INTERVAL: NonZeroU32 = match NonZeroU32::new(32) {
    Some(n) => n,
    None => NonZeroU32::MIN,
};

/// Why an evaluation produced no decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvalError {
    /// The evaluation ran out of time or of its memory budget; the text says which.
    LimitExceeded(String),
    /// The policy failed at run time (a builtin error, a conflict between rule values, …).
    Failed(String),
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::LimitExceeded(details) => write!(f, "policy evaluation exceeded its limit: {details}"),
            EvalError::Failed(message) => write!(f, "policy evaluation failed: {message}"),
        }
    }
}

impl std::error::Error for EvalError {}

/// The outcome of one evaluation: every defined rule's value, and the decision fields read from
/// them. Fields of rules the policy does not define keep their defaults (empty / `false`).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Evaluation {
    /// Each rule of the evaluated type that has a value, as JSON (sets become sorted arrays).
    pub rules: BTreeMap<String, Value>,
    /// `deny` messages, sorted and deduplicated. A boolean `deny` that holds gives one message
    /// naming the policy.
    pub deny: Vec<String>,
    /// `warn` messages, sorted and deduplicated.
    pub warn: Vec<String>,
    /// Approval: `approve` holds.
    pub approve: bool,
    /// Approval: `reject` holds.
    pub reject: bool,
    /// Trigger: the stack ids to trigger, sorted and deduplicated.
    pub trigger: Vec<String>,
    /// Login: `allow` holds.
    pub allow: bool,
    /// Login: `admin` holds.
    pub admin: bool,
    /// Login: `deny` holds (a `true` boolean or a non-empty set) — refuses the login whatever
    /// `allow` and `admin` say.
    pub login_deny: bool,
    /// Login: `deny_admin` holds.
    pub deny_admin: bool,
    /// Login: `roles[space]` sets, as space id → sorted role slugs.
    pub roles: BTreeMap<String, Vec<String>>,
    /// `sample` holds: keep this input for the policy workbench.
    pub sample: bool,
    /// `flag` values, sorted and deduplicated.
    pub flags: Vec<String>,
}

/// An input document converted for the engine once, to evaluate several policies against.
///
/// Converting a large input (a plan with a thousand resource changes is about half a megabyte of
/// JSON) costs more than evaluating a typical policy on it, so callers that evaluate every
/// policy attached to a stack should prepare the input once and use [`Policy::evaluate_input`].
#[derive(Clone, Debug)]
pub struct PreparedInput {
    value: regorus::Value,
    json_bytes: u64,
}

impl PreparedInput {
    /// Converts `input` for the engine.
    pub fn new(input: &Value) -> Result<PreparedInput, EvalError> {
        PreparedInput::from_json(&to_json(input)?)
    }

    fn from_json(json: &str) -> Result<PreparedInput, EvalError> {
        let value = regorus::Value::from_json_str(json)
            .map_err(|e| EvalError::Failed(format!("input could not be loaded: {e}")))?;
        Ok(PreparedInput {
            value,
            json_bytes: json.len() as u64,
        })
    }

    /// Size of the input as compact JSON, in bytes.
    pub fn json_bytes(&self) -> u64 {
        self.json_bytes
    }
}

impl Policy {
    /// Evaluates every rule of `kind` that the policy defines, with one time budget for them all
    /// (converting the input included).
    ///
    /// An undefined rule leaves its fields empty / `false`. The input is charged against
    /// `limits.memory_bytes` at [`INPUT_MEMORY_FACTOR`] times its JSON size before anything runs.
    /// To evaluate several policies on one input, prepare it once ([`PreparedInput`]).
    pub fn evaluate(&self, kind: PolicyType, input: &Value, limits: &Limits) -> Result<Evaluation, EvalError> {
        let started = Instant::now();
        let json = to_json(input)?;
        // Refuse an oversized input before the engine builds its copy.
        check_input_size(json.len() as u64, limits)?;
        let input = PreparedInput::from_json(&json)?;
        self.evaluate_since(started, kind, &input, limits)
    }

    /// [`Policy::evaluate`] on an input converted beforehand; the time budget starts now.
    pub fn evaluate_input(
        &self,
        kind: PolicyType,
        input: &PreparedInput,
        limits: &Limits,
    ) -> Result<Evaluation, EvalError> {
        self.evaluate_since(Instant::now(), kind, input, limits)
    }

    fn evaluate_since(
        &self,
        started: Instant,
        kind: PolicyType,
        input: &PreparedInput,
        limits: &Limits,
    ) -> Result<Evaluation, EvalError> {
        check_input_size(input.json_bytes, limits)?;

        let mut engine = self.engine().clone();
        // Values are reference-counted: this shares the prepared document, it does not copy it.
        engine.set_input(input.value.clone());
        let _budget = BudgetGuard::set(limits.memory_bytes);

        let mut rules = BTreeMap::new();
        for rule in kind.rules().iter().filter(|rule| self.declares(rule)) {
            let remaining = limits.time.saturating_sub(started.elapsed());
            if remaining.is_zero() {
                return Err(time_exceeded(limits.time, rule));
            }
            engine.set_execution_timer_config(ExecutionTimerConfig {
                limit: remaining,
                check_interval: CHECK_INTERVAL,
            });
            let value = eval_rule(&mut engine, rule).map_err(|e| self.classify(&e, rule, limits))?;
            if value != regorus::Value::Undefined {
                let json = serde_json::to_value(&value).map_err(|e| EvalError::Failed(format!("rule {rule}: {e}")))?;
                rules.insert((*rule).to_string(), json);
            }
        }
        Ok(Evaluation::from_rules(kind, rules, self.name()))
    }

    fn classify(&self, err: &anyhow::Error, rule: &str, limits: &Limits) -> EvalError {
        if let Some(limit) = err.chain().find_map(|e| e.downcast_ref::<LimitError>()) {
            return match limit {
                LimitError::TimeLimitExceeded { .. } => time_exceeded(limits.time, rule),
                other => EvalError::LimitExceeded(format!("{other} (rule {rule})")),
            };
        }
        let text = err.to_string();
        let (line, column, message) = split_location(&text);
        if let Some(details) = message.strip_prefix(MEMORY_LIMIT_MARKER) {
            let details = details.trim_start_matches(':').trim();
            return EvalError::LimitExceeded(format!(
                "memory: {details} at {}, line {line}, column {column}",
                self.name()
            ));
        }
        if message.contains("exceeded time limit") {
            return time_exceeded(limits.time, rule);
        }
        if line == 0 {
            EvalError::Failed(format!("{} (rule {rule}): {message}", self.name()))
        } else {
            EvalError::Failed(format!("{}, line {line}, column {column}: {message}", self.name()))
        }
    }
}

fn to_json(input: &Value) -> Result<String, EvalError> {
    serde_json::to_string(input).map_err(|e| EvalError::Failed(format!("input is not JSON: {e}")))
}

fn check_input_size(json_bytes: u64, limits: &Limits) -> Result<(), EvalError> {
    let Some(budget) = limits.memory_bytes else {
        return Ok(());
    };
    let estimate = json_bytes.saturating_mul(INPUT_MEMORY_FACTOR);
    if estimate > budget {
        return Err(EvalError::LimitExceeded(format!(
            "memory: the input is {json_bytes} bytes of JSON, about {estimate} bytes in the engine (limit {budget} bytes)"
        )));
    }
    Ok(())
}

/// The value of `data.spacelift.<rule>`. `eval_rule` is the fast path; rules whose heads go
/// deeper than the rule name (`roles[space] contains role`) are not a "rule path" for regorus and
/// are read with a query instead.
fn eval_rule(engine: &mut regorus::Engine, rule: &str) -> anyhow::Result<regorus::Value> {
    let path = format!("data.spacelift.{rule}");
    match engine.eval_rule(path.clone()) {
        Err(e) if e.to_string().contains("not a valid rule path") => {
            let results = engine.eval_query(path, false)?;
            Ok(results
                .result
                .into_iter()
                .next()
                .and_then(|r| r.expressions.into_iter().next())
                .map_or(regorus::Value::Undefined, |e| e.value))
        }
        other => other,
    }
}

fn time_exceeded(limit: Duration, rule: &str) -> EvalError {
    EvalError::LimitExceeded(format!("time: more than {limit:?} (while evaluating rule {rule})"))
}

impl Evaluation {
    fn from_rules(kind: PolicyType, rules: BTreeMap<String, Value>, policy: &str) -> Evaluation {
        let get = |name: &str| rules.get(name);
        let mut e = Evaluation {
            deny: messages(get("deny"), policy, "deny"),
            warn: messages(get("warn"), policy, "warn"),
            trigger: strings(get("trigger")),
            flags: strings(get("flag")),
            sample: holds(get("sample")),
            ..Evaluation::default()
        };
        match kind {
            PolicyType::Approval => {
                e.approve = holds(get("approve"));
                e.reject = holds(get("reject"));
            }
            PolicyType::Login => {
                e.allow = holds(get("allow"));
                e.admin = holds(get("admin"));
                e.login_deny = holds(get("deny"));
                e.deny_admin = holds(get("deny_admin"));
                e.roles = roles(get("roles"));
            }
            _ => {}
        }
        e.rules = rules;
        e
    }
}

/// A boolean rule holds when it is `true`, or when a set-valued rule has members.
fn holds(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::Array(items)) => !items.is_empty(),
        Some(Value::Object(map)) => !map.is_empty(),
        _ => false,
    }
}

/// Members of a set rule as strings (non-strings as their JSON text), sorted and deduplicated.
fn strings(v: Option<&Value>) -> Vec<String> {
    let mut out: Vec<String> = match v {
        Some(Value::Array(items)) => items.iter().map(as_text).collect(),
        Some(Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    };
    out.sort();
    out.dedup();
    out
}

/// Like [`strings`], and a `deny`/`warn` written as a boolean rule gives one generic message.
fn messages(v: Option<&Value>, policy: &str, rule: &str) -> Vec<String> {
    match v {
        Some(Value::Bool(true)) => vec![format!("{rule} in policy {policy}")],
        other => strings(other),
    }
}

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn roles(v: Option<&Value>) -> BTreeMap<String, Vec<String>> {
    match v {
        Some(Value::Object(map)) => map
            .iter()
            .map(|(space, roles)| (space.clone(), strings(Some(roles))))
            .collect(),
        _ => BTreeMap::new(),
    }
}
