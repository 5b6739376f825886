//! Evaluations per second of the product's two fixture policies on a plan with 1,000
//! resource changes, on one thread. Prints a markdown table. Run with
//! `cargo bench -p terraplane-policy --bench eval` (`EVAL_BENCH_SECS` sets the duration).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use terraplane_policy::input::{PlanContext, StackInfo, plan_input};
use terraplane_policy::{Evaluation, Limits, Policy, PolicyType, PreparedInput};

const RESOURCES: usize = 1_000;

/// One way of evaluating both policies; returns their message count.
type Run<'a> = Box<dyn Fn() -> usize + 'a>;

fn generated_plan() -> Value {
    let changes: Vec<Value> = (0..RESOURCES)
        .map(|i| {
            let (rtype, after) = match i % 4 {
                0 => ("aws_instance", json!({"ami": "ami-1", "instance_type": if i % 40 == 0 { "m5.4xlarge" } else { "t3.micro" }, "tags": {"Name": format!("web-{i}")}})),
                1 => ("aws_security_group", json!({"name": format!("sg-{i}"), "ingress": [{"from_port": 443, "to_port": 443, "cidr_blocks": ["0.0.0.0/0"]}]})),
                2 => ("aws_s3_bucket", json!({"bucket": format!("bucket-{i}"), "tags": {"env": "dev"}})),
                _ => ("aws_iam_role", json!({"name": format!("role-{i}"), "assume_role_policy": "{}"})),
            };
            let actions: &[&str] = match i % 10 {
                0 => &["delete"],
                1 | 2 => &["update"],
                3 => &["delete", "create"],
                4..=6 => &["create"],
                _ => &["no-op"],
            };
            json!({
                "address": format!("{rtype}.r{i}"),
                "mode": "managed",
                "type": rtype,
                "name": format!("r{i}"),
                "provider_name": "registry.terraform.io/hashicorp/aws",
                "change": {
                    "actions": actions,
                    "before": after,
                    "after": after,
                    "after_unknown": {},
                    "before_sensitive": {},
                    "after_sensitive": {"tags": {}},
                },
            })
        })
        .collect();
    json!({"format_version": "1.2", "terraform_version": "1.9.5", "resource_changes": changes})
}

fn fixture(name: &str) -> Policy {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    Policy::compile(name, &std::fs::read_to_string(path).unwrap()).unwrap()
}

fn main() {
    let secs: u64 = std::env::var("EVAL_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let policies = [
        fixture("require-approval-for-destructive-changes.rego"),
        fixture("cost-control.rego"),
    ];
    let ctx = PlanContext {
        stack: StackInfo {
            labels: vec!["env:dev".into()],
            ..StackInfo::default()
        },
        ..PlanContext::default()
    };
    let input = plan_input(&ctx, &generated_plan());
    let json_bytes = serde_json::to_string(&input).unwrap().len();
    let prepared = PreparedInput::new(&input).unwrap();
    let limits = Limits::default();

    // Each way runs both policies once per iteration and returns their message count.
    let ways: [(&str, Run); 3] = [
        (
            "`evaluate()` (converts the input each time)",
            Box::new(|| {
                policies
                    .iter()
                    .map(|p| messages(p.evaluate(PolicyType::Plan, &input, &limits)))
                    .sum()
            }),
        ),
        (
            "`PreparedInput::new` once per iteration + `evaluate_input()`",
            Box::new(|| {
                let prepared = PreparedInput::new(&input).unwrap();
                policies
                    .iter()
                    .map(|p| messages(p.evaluate_input(PolicyType::Plan, &prepared, &limits)))
                    .sum()
            }),
        ),
        (
            "`evaluate_input()` on an input prepared once",
            Box::new(|| {
                policies
                    .iter()
                    .map(|p| messages(p.evaluate_input(PolicyType::Plan, &prepared, &limits)))
                    .sum()
            }),
        ),
    ];

    println!(
        "Both fixture policies on a plan with {RESOURCES} resource changes ({json_bytes} bytes of input JSON), one thread, {secs} s each.\n"
    );
    println!("| how | messages | iterations | evaluations of both / s | ms per iteration |");
    println!("|---|---|---|---|---|");
    for (how, run) in &ways {
        let count = run();
        let started = Instant::now();
        let mut n = 0u64;
        while started.elapsed() < Duration::from_secs(secs) {
            std::hint::black_box(run());
            n += 1;
        }
        let elapsed = started.elapsed().as_secs_f64();
        println!(
            "| {how} | {count} | {n} | {:.0} | {:.2} |",
            n as f64 / elapsed,
            elapsed * 1000.0 / n as f64
        );
    }
}

fn messages(out: Result<Evaluation, terraplane_policy::EvalError>) -> usize {
    let out = out.unwrap();
    out.deny.len() + out.warn.len()
}
