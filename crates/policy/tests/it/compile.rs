//! What `Policy::compile` accepts and refuses, with positions.

use serde_json::json;
use terraplane_policy::input::plan_input;
use terraplane_policy::{CompileError, Policy, PolicyType, Syntax};

use crate::support::{change, context, eval, plan, strings};

fn refused(source: &str) -> CompileError {
    Policy::compile("test.rego", source).unwrap_err()
}

#[test]
fn syntax_errors_point_at_the_offending_token() {
    let err = refused("package spacelift\n\ndeny[msg] {\n  msg := \"a\"\n  1 +* 2\n}\n");
    assert_eq!(
        (err.line, err.column, err.message.as_str()),
        (5, 6, "expecting expression")
    );
    assert_eq!(err.to_string(), "line 5, column 6: expecting expression");

    let err = refused("package spacelift\n\ndeny[msg] {\n  msg := \"unterminated\n}\n");
    assert_eq!((err.line, err.column), (4, 23), "{err}");

    let err = refused("package spacelift\n\nwarn[msg] {\n  msg := \"a\"\n  x := [1, 2\n}\n");
    assert_eq!((err.line, err.column), (6, 1), "{err}");
    assert!(err.message.contains("expecting `]`"), "{err}");

    // v1 source gets v1's error, not v0's complaint about `if`.
    let err = refused("package spacelift\n\ndeny contains msg if {\n  msg := @\n}\n");
    assert_eq!((err.line, err.column), (4, 10), "{err}");
}

#[test]
fn other_packages_are_refused() {
    let err = refused("# header\npackage terraform.plan\n\ndeny[msg] { msg := \"x\" }\n");
    assert_eq!((err.line, err.column), (2, 1));
    assert_eq!(
        err.message,
        "policies must be in package \"spacelift\", not \"terraform.plan\""
    );
}

#[test]
fn each_disabled_builtin_is_refused_where_it_is_called() {
    for (call, builtin) in [
        (
            "http.send({\"method\": \"get\", \"url\": \"https://example.com\"})",
            "http.send",
        ),
        ("opa.runtime()", "opa.runtime"),
        ("rego.parse_module(\"x.rego\", \"package x\")", "rego.parse_module"),
        ("time.now_ns()", "time.now_ns"),
        ("trace(\"hello\")", "trace"),
    ] {
        let source = format!("package spacelift\n\ndeny[msg] {{\n  x := {call}\n  msg := \"m\"\n}}\n");
        let err = refused(&source);
        assert_eq!((err.line, err.column), (4, 8), "{builtin}: {err}");
        assert!(err.message.contains(&format!("builtin {builtin} is disabled")), "{err}");
    }
}

#[test]
fn time_now_ns_points_to_the_request_timestamp() {
    let err = refused("package spacelift\nimport rego.v1\n\ndeny contains \"late\" if time.now_ns() > 1\n");
    assert_eq!((err.line, err.column), (4, 25));
    assert!(err.message.contains("input.spacelift.request.timestamp_ns"), "{err}");
}

#[test]
fn disabled_builtins_cannot_be_reached_through_with() {
    let source = "package spacelift\n\nclock := 0\n\ndeny[msg] {\n  t := clock with clock as time.now_ns\n  msg := sprintf(\"%d\", [t])\n}\n";
    let err = refused(source);
    assert_eq!((err.line, err.column), (6, 28), "{err}");
    // Replacing the builtin with `with` is allowed; calling it is refused even when replaced.
    Policy::compile(
        "ok.rego",
        "package spacelift\n\nallow { time.weekday(time.now_ns()) == \"Thursday\" with time.now_ns as 1 }\n",
    )
    .unwrap_err();
    Policy::compile(
        "ok.rego",
        "package spacelift\n\nallow { input.x == 1 with time.now_ns as 1 }\n",
    )
    .unwrap();
}

#[test]
fn v1_syntax_is_detected_and_evaluated() {
    let with_import = "package spacelift\n\nimport rego.v1\n\ndeny contains msg if {\n  some rc in input.terraform.resource_changes\n  \"delete\" in rc.change.actions\n  msg := sprintf(\"no deleting %s\", [rc.address])\n}\n\nwarn contains \"always\" if true\n";
    let without_import = "package spacelift\n\ndeny contains msg if {\n  some rc in input.terraform.resource_changes\n  \"delete\" in rc.change.actions\n  msg := sprintf(\"no deleting %s\", [rc.address])\n}\n";
    let input = plan_input(
        &context(&[], "TRACKED", 0),
        &plan(vec![change(
            "aws_s3_bucket.logs",
            &["delete"],
            json!({"bucket": "logs"}),
            serde_json::Value::Null,
        )]),
    );
    for source in [with_import, without_import] {
        let policy = Policy::compile("v1.rego", source).unwrap();
        assert_eq!(policy.syntax(), Syntax::V1);
        let out = eval(&policy, PolicyType::Plan, &input);
        assert_eq!(out.deny, strings(&["no deleting aws_s3_bucket.logs"]));
    }
    let out = eval(
        &Policy::compile("v1.rego", with_import).unwrap(),
        PolicyType::Plan,
        &input,
    );
    assert_eq!(out.warn, strings(&["always"]));
}

#[test]
fn v0_policies_using_the_contains_builtin_stay_v0() {
    let policy = Policy::compile(
        "v0.rego",
        "package spacelift\n\nwarn[msg] {\n  contains(input.x, \"if\")\n  msg := \"has if\"\n}\n",
    )
    .unwrap();
    assert_eq!(policy.syntax(), Syntax::V0);
    let out = eval(&policy, PolicyType::Plan, &json!({"x": "what if"}));
    assert_eq!(out.warn, strings(&["has if"]));
}

#[test]
fn undefined_rules_give_empty_results_and_rules_lists_defined_ones() {
    let policy = Policy::compile("warn-only.rego", "package spacelift\n\nwarn[\"careful\"] { true }\n").unwrap();
    assert!(policy.declares("warn"));
    assert!(!policy.declares("deny"));
    let out = eval(&policy, PolicyType::Plan, &json!({}));
    assert!(out.deny.is_empty());
    assert_eq!(out.warn, strings(&["careful"]));
    assert_eq!(out.rules.keys().collect::<Vec<_>>(), vec!["warn"]);
    assert_eq!(out.rules["warn"], json!(["careful"]));
}

#[test]
fn negated_iteration_means_no_element_matches_as_in_opa() {
    let policy = Policy::compile(
        "not.rego",
        "package spacelift\n\nflag[\"none-a\"] { not contains(input.l[_], \"a\") }\nflag[\"none-b\"] {\n  xs := input.l\n  not xs[_] == \"b\"\n}\n",
    )
    .unwrap();
    let flags = |l: serde_json::Value| eval(&policy, PolicyType::Plan, &json!({ "l": l })).flags;
    assert_eq!(flags(json!([])), strings(&["none-a", "none-b"]));
    assert_eq!(flags(json!(["xa"])), strings(&["none-b"]));
    assert_eq!(flags(json!(["c", "xa"])), strings(&["none-b"]));
    assert_eq!(flags(json!(["c", "b"])), strings(&["none-a"]));
    assert_eq!(flags(json!(["c"])), strings(&["none-a", "none-b"]));
}
