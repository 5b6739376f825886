//! Evaluations are bounded: loops stop at the time limit, oversized values at the memory budget.

use std::time::{Duration, Instant};

use serde_json::json;
use terraplane_policy::{EvalError, Limits, Policy, PolicyType, PreparedInput};

fn limits(time_ms: u64) -> Limits {
    Limits {
        time: Duration::from_millis(time_ms),
        ..Limits::default()
    }
}

fn limit_error(source: &str, input: &serde_json::Value, limits: &Limits) -> (String, Duration) {
    let policy = Policy::compile("limits.rego", source).unwrap();
    let started = Instant::now();
    let err = policy.evaluate(PolicyType::Plan, input, limits).unwrap_err();
    let elapsed = started.elapsed();
    assert!(matches!(err, EvalError::LimitExceeded(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.starts_with("policy evaluation exceeded its limit"), "{text}");
    (text, elapsed)
}

#[test]
fn nested_loops_stop_at_the_time_limit() {
    let source = r#"package spacelift

deny[x] {
  some i, j, k
  numbers.range(1, 100000)[i]
  numbers.range(1, 100000)[j]
  numbers.range(1, 100000)[k]
  x := sprintf("%d", [i + j + k])
}
"#;
    let (text, elapsed) = limit_error(source, &json!({}), &limits(200));
    assert!(text.contains("time"), "{text}");
    assert!(
        elapsed >= Duration::from_millis(190) && elapsed < Duration::from_secs(2),
        "took {elapsed:?}"
    );
}

#[test]
fn huge_comprehensions_stop_at_the_time_limit() {
    let source = r#"package spacelift
import rego.v1

warn contains msg if {
  pairs := [[a, b] | some a in numbers.range(1, 20000); some b in numbers.range(1, 20000)]
  msg := sprintf("%d pairs", [count(pairs)])
}
"#;
    let (_, elapsed) = limit_error(source, &json!({}), &limits(200));
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
}

#[test]
fn one_time_budget_covers_every_rule() {
    // Each rule alone finishes well inside the limit; together they do not.
    let source = r#"package spacelift
import rego.v1

slow(n) := count([x | some x in numbers.range(1, n); x % 7 == 0])

deny contains "d" if slow(input.n) > 0
warn contains "w" if slow(input.n) > 0
flag contains "f" if slow(input.n) > 0
"#;
    let policy = Policy::compile("budget.rego", source).unwrap();
    let one_pass = (0..3)
        .map(|_| {
            let started = Instant::now();
            policy
                .evaluate(PolicyType::Plan, &json!({"n": 50_000}), &limits(5_000))
                .unwrap();
            started.elapsed()
        })
        .min()
        .unwrap();
    // Less than half of the three rules' time: enough for the first rule, not for all three.
    let limit = (one_pass * 9 / 20).max(Duration::from_millis(5));
    let err = policy.evaluate(
        PolicyType::Plan,
        &json!({"n": 50_000}),
        &Limits {
            time: limit,
            ..Limits::default()
        },
    );
    assert!(
        matches!(err, Err(EvalError::LimitExceeded(_))),
        "{err:?} (one pass took {one_pass:?})"
    );
}

#[test]
fn ranges_beyond_the_memory_budget_are_refused_at_once() {
    for call in ["numbers.range(1, 100000000)", "numbers.range_step(0, 1000000000, 5)"] {
        let source =
            format!("package spacelift\n\ndeny[msg] {{\n  n := count({call})\n  msg := sprintf(\"%d\", [n])\n}}\n");
        let (text, elapsed) = limit_error(&source, &json!({}), &limits(10_000));
        assert!(text.contains("memory"), "{text}");
        assert!(elapsed < Duration::from_secs(1), "took {elapsed:?}");
    }
}

#[test]
fn small_ranges_still_work() {
    let policy = Policy::compile(
        "ranges.rego",
        "package spacelift\n\nflag[sprintf(\"%d\", [n])] { n := numbers.range(1, 3)[_] }\nflag[sprintf(\"s%d\", [n])] { n := numbers.range_step(10, 0, 5)[_] }\n",
    )
    .unwrap();
    let out = policy
        .evaluate(PolicyType::Plan, &json!({}), &Limits::default())
        .unwrap();
    assert_eq!(out.flags, vec!["1", "2", "3", "s0", "s10", "s5"]);
}

#[test]
fn inputs_beyond_the_memory_budget_are_refused() {
    let big = json!({"blob": "x".repeat(300 * 1024)});
    let tight = Limits {
        time: Duration::from_secs(1),
        memory_bytes: Some(1024 * 1024),
    };
    let (text, _) = limit_error("package spacelift\n\ndeny[\"x\"] { input.blob }\n", &big, &tight);
    assert!(text.contains("memory") && text.contains("input"), "{text}");
    // Without a memory budget the same input is fine.
    let policy = Policy::compile("ok.rego", "package spacelift\n\ndeny[\"x\"] { input.blob }\n").unwrap();
    let out = policy
        .evaluate(
            PolicyType::Plan,
            &big,
            &Limits {
                memory_bytes: None,
                ..tight
            },
        )
        .unwrap();
    assert_eq!(out.deny, vec!["x"]);
}

#[test]
fn a_prepared_input_gives_the_same_results_and_the_same_limits() {
    let policy = Policy::compile("p.rego", "package spacelift\n\nwarn[input.blob] { true }\n").unwrap();
    let input = json!({"blob": "x".repeat(1000)});
    let prepared = PreparedInput::new(&input).unwrap();
    assert_eq!(prepared.json_bytes(), input.to_string().len() as u64);
    let direct = policy.evaluate(PolicyType::Plan, &input, &Limits::default()).unwrap();
    let reused = policy
        .evaluate_input(PolicyType::Plan, &prepared, &Limits::default())
        .unwrap();
    assert_eq!(direct, reused);
    assert_eq!(reused.warn.len(), 1);
    let tight = Limits {
        memory_bytes: Some(1000),
        ..Limits::default()
    };
    assert!(matches!(
        policy.evaluate_input(PolicyType::Plan, &prepared, &tight),
        Err(EvalError::LimitExceeded(_))
    ));
}

#[test]
fn policies_evaluate_concurrently() {
    let policy = Policy::compile(
        "conc.rego",
        "package spacelift\n\ndeny[msg] { msg := sprintf(\"n=%d\", [input.n]) }\n",
    )
    .unwrap();
    std::thread::scope(|s| {
        for n in 0..4 {
            let policy = &policy;
            s.spawn(move || {
                for _ in 0..20 {
                    let out = policy
                        .evaluate(PolicyType::Plan, &json!({"n": n}), &Limits::default())
                        .unwrap();
                    assert_eq!(out.deny, vec![format!("n={n}")]);
                }
            });
        }
    });
}

#[test]
fn runtime_failures_are_not_limit_errors() {
    let policy = Policy::compile(
        "conflict.rego",
        "package spacelift\n\nx := 1\nx := 2\n\ndeny[\"d\"] { x }\n",
    );
    // regorus refuses conflicting complete rules either when compiling or when evaluating.
    if let Ok(policy) = policy {
        let err = policy
            .evaluate(PolicyType::Plan, &json!({}), &Limits::default())
            .unwrap_err();
        assert!(matches!(err, EvalError::Failed(_)), "{err:?}");
        assert!(
            err.to_string().starts_with("policy evaluation failed: conflict.rego"),
            "{err}"
        );
    }
}
