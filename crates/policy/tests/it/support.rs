//! Plan documents and contexts for the tests.

use serde_json::{Value, json};
use terraplane_policy::input::{CommitInfo, PlanContext, RunInfo, StackInfo};
use terraplane_policy::{Evaluation, Limits, Policy, PolicyType};

/// A `resource_changes[]` entry as `terraform show -json` writes it.
pub fn change(address: &str, actions: &[&str], before: Value, after: Value) -> Value {
    let (rtype, name) = address
        .rsplit_once('.')
        .map(|(prefix, name)| {
            (
                prefix.rsplit('.').next().unwrap_or(prefix).to_string(),
                name.to_string(),
            )
        })
        .unwrap();
    json!({
        "address": address,
        "mode": "managed",
        "type": rtype,
        "name": name,
        "provider_name": "registry.terraform.io/hashicorp/aws",
        "change": {
            "actions": actions,
            "before": before,
            "after": after,
            "after_unknown": {},
            "before_sensitive": {},
            "after_sensitive": {},
        },
    })
}

/// A plan JSON document with these resource changes.
pub fn plan(changes: Vec<Value>) -> Value {
    json!({
        "format_version": "1.2",
        "terraform_version": "1.9.5",
        "variables": {"db_password": {"value": "hunter2"}},
        "resource_changes": changes,
        "timestamp": "2025-01-01T00:00:00Z",
    })
}

/// A plan context for a tracked run on a stack with these labels at `timestamp_ns`.
pub fn context(labels: &[&str], run_type: &str, timestamp_ns: i64) -> PlanContext {
    let commit = CommitInfo {
        author: "alice".into(),
        branch: "main".into(),
        created_at_ns: 1_700_000_000_000_000_000,
        hash: "0123456789abcdef0123456789abcdef01234567".into(),
        message: "change things".into(),
    };
    PlanContext {
        request_timestamp_ns: timestamp_ns,
        run: RunInfo {
            id: "01JRUN".into(),
            run_type: run_type.into(),
            state: "PLANNING".into(),
            branch: "main".into(),
            commit,
            created_at_ns: 1_700_000_000_000_000_000,
            updated_at_ns: 1_700_000_001_000_000_000,
            triggered_by: Some("alice".into()),
            terraform_version: "1.9.5".into(),
            ..RunInfo::default()
        },
        previous_run: None,
        stack: StackInfo {
            id: "web-app".into(),
            name: "Web app".into(),
            branch: "main".into(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            repository: "acme/infra".into(),
            state: "PLANNING".into(),
            terraform_version: "1.9.5".into(),
            ..StackInfo::default()
        },
    }
}

pub fn fixture(name: &str) -> Policy {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let source = std::fs::read_to_string(&path).unwrap();
    Policy::compile(name, &source).unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub fn example(name: &str) -> Policy {
    let path = format!("{}/../../examples/policies/{name}", env!("CARGO_MANIFEST_DIR"));
    let source = std::fs::read_to_string(&path).unwrap();
    Policy::compile(name, &source).unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub fn eval(policy: &Policy, kind: PolicyType, input: &Value) -> Evaluation {
    policy
        .evaluate(kind, input, &Limits::default())
        .unwrap_or_else(|e| panic!("{}: {e}", policy.name()))
}

pub fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}
