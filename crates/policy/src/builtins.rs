//! The functions Terraplane adds to or replaces in every engine: `sanitized`, the disabled
//! builtins, and `numbers.range`/`numbers.range_step` charged against the memory budget.
//! regorus looks extensions up before its builtins, so an extension overrides a builtin.

use std::cell::Cell;

use anyhow::{Result, bail};
use regorus::{Engine, Value};

/// Builtins Spacelift disables: they reach the network or the clock, or make results depend on
/// more than the input. `time.now_ns` has a deterministic replacement.
pub(crate) const DISABLED: [(&str, u8); 5] = [
    ("http.send", 1),
    ("opa.runtime", 0),
    ("rego.parse_module", 2),
    ("time.now_ns", 0),
    ("trace", 1),
];

/// Why a disabled builtin may not be used, with the alternative where there is one.
pub(crate) fn disabled_reason(name: &str) -> String {
    match name {
        "time.now_ns" => {
            "builtin time.now_ns is disabled in Terraplane policies; use input.spacelift.request.timestamp_ns".into()
        }
        _ => format!("builtin {name} is disabled in Terraplane policies"),
    }
}

/// Starts every message of a memory-budget error, so evaluation can tell it from other failures
/// after regorus has turned the extension's error into text.
pub(crate) const MEMORY_LIMIT_MARKER: &str = "policy evaluation exceeded its memory limit";

/// Estimated bytes for one element of an array built by a builtin.
const BYTES_PER_ELEMENT: u64 = std::mem::size_of::<Value>() as u64;

thread_local! {
    /// The memory budget of the evaluation running on this thread. Extensions are cloned with the
    /// engine and cannot be given per-call state, and evaluation is synchronous, so the budget
    /// travels in a thread-local set by [`BudgetGuard`].
    static VALUE_BUDGET: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Sets this thread's memory budget for the lifetime of the guard.
pub(crate) struct BudgetGuard {
    previous: Option<u64>,
}

impl BudgetGuard {
    pub(crate) fn set(budget: Option<u64>) -> BudgetGuard {
        BudgetGuard {
            previous: VALUE_BUDGET.with(|b| b.replace(budget)),
        }
    }
}

impl Drop for BudgetGuard {
    fn drop(&mut self) {
        VALUE_BUDGET.with(|b| b.set(self.previous));
    }
}

/// Registers Terraplane's extensions on a fresh engine.
pub(crate) fn register(engine: &mut Engine) -> Result<()> {
    engine.add_extension("sanitized".into(), 1, Box::new(sanitized))?;
    for (name, nargs) in DISABLED {
        let reason = disabled_reason(name);
        engine.add_extension(
            name.into(),
            nargs,
            Box::new(move |_: Vec<Value>| -> Result<Value> { bail!("{reason}") }),
        )?;
    }
    engine.add_extension("numbers.range".into(), 2, Box::new(range))?;
    engine.add_extension("numbers.range_step".into(), 3, Box::new(range_step))?;
    Ok(())
}

fn sanitized(args: Vec<Value>) -> Result<Value> {
    let Some(arg) = args.first() else {
        bail!("sanitized expects one argument")
    };
    let json = match arg {
        Value::String(s) => serde_json::Value::String(s.to_string()),
        other => serde_json::to_value(other)?,
    };
    Ok(Value::from(crate::sanitize_value(&json)))
}

fn range(args: Vec<Value>) -> Result<Value> {
    let (Some(from), Some(to)) = (integer(&args, 0), integer(&args, 1)) else {
        // Like the builtin in non-strict mode: non-integer bounds make the call undefined.
        return Ok(Value::Undefined);
    };
    build_range("numbers.range", from, to, 1)
}

fn range_step(args: Vec<Value>) -> Result<Value> {
    let (Some(from), Some(to)) = (integer(&args, 0), integer(&args, 1)) else {
        return Ok(Value::Undefined);
    };
    match integer(&args, 2) {
        Some(step) if step > 0 => build_range("numbers.range_step", from, to, step),
        _ => bail!("numbers.range_step: step must be a positive integer"),
    }
}

fn integer(args: &[Value], i: usize) -> Option<i64> {
    match args.get(i)? {
        Value::Number(n) if n.is_integer() => n.as_i64(),
        _ => None,
    }
}

/// Both bounds are inclusive; the range counts down when `to < from`, as OPA's does.
fn build_range(name: &str, from: i64, to: i64, step: i64) -> Result<Value> {
    let span = (i128::from(to) - i128::from(from)).unsigned_abs();
    let elements = span / step.unsigned_abs() as u128 + 1;
    if let Some(budget) = VALUE_BUDGET.with(Cell::get) {
        let bytes = elements.saturating_mul(u128::from(BYTES_PER_ELEMENT));
        if bytes > u128::from(budget) {
            bail!(
                "{MEMORY_LIMIT_MARKER}: {name} would build {elements} elements (about {bytes} bytes, limit {budget} bytes)"
            );
        }
    }
    let step = if to < from { -step } else { step };
    let mut values = Vec::new();
    let mut v = from;
    loop {
        values.push(Value::from(v));
        match v.checked_add(step) {
            Some(next) if (step > 0 && next <= to) || (step < 0 && next >= to) => v = next,
            _ => break,
        }
    }
    Ok(Value::from(values))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn ints(v: Value) -> Vec<i64> {
        let Value::Array(a) = v else {
            panic!("not an array: {v:?}")
        };
        a.iter().map(|x| x.as_i64().unwrap()).collect()
    }

    #[test]
    fn ranges_match_opa() {
        assert_eq!(ints(build_range("r", 1, 4, 1).unwrap()), vec![1, 2, 3, 4]);
        assert_eq!(ints(build_range("r", 3, 1, 1).unwrap()), vec![3, 2, 1]);
        assert_eq!(ints(build_range("r", 2, 2, 1).unwrap()), vec![2]);
        assert_eq!(ints(build_range("r", 0, 10, 4).unwrap()), vec![0, 4, 8]);
        assert_eq!(ints(build_range("r", 10, 0, 4).unwrap()), vec![10, 6, 2]);
        assert_eq!(
            ints(build_range("r", i64::MAX - 1, i64::MAX, 1).unwrap()),
            vec![i64::MAX - 1, i64::MAX]
        );
    }

    #[test]
    fn ranges_beyond_the_budget_are_refused_before_building() {
        let _guard = BudgetGuard::set(Some(1024));
        let err = build_range("numbers.range", 1, 1_000_000_000_000, 1)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with(MEMORY_LIMIT_MARKER), "{err}");
        assert!(build_range("numbers.range", 1, 10, 1).is_ok());
    }
}

#[cfg(test)]
mod engine_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// The compile-time check refuses these calls; this is the second line of defence, for a
    /// call the check could not see.
    #[test]
    fn disabled_builtins_fail_at_run_time_too() {
        for (call, name) in [
            ("time.now_ns()", "time.now_ns"),
            ("http.send({\"method\": \"get\", \"url\": \"http://x\"})", "http.send"),
            ("opa.runtime()", "opa.runtime"),
            ("rego.parse_module(\"a.rego\", \"package a\")", "rego.parse_module"),
            ("trace(\"x\")", "trace"),
        ] {
            let mut engine = Engine::new();
            register(&mut engine).unwrap();
            engine
                .add_policy("p.rego".into(), format!("package p\nimport rego.v1\nx := {call}\n"))
                .unwrap();
            let err = engine.eval_rule("data.p.x".into()).unwrap_err().to_string();
            assert!(err.contains(&format!("builtin {name} is disabled")), "{call}: {err}");
        }
    }
}
