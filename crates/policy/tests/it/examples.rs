//! Every policy in `examples/policies/` does what its header says.

use chrono::TimeZone;
use chrono_tz::Europe::Berlin;
use serde_json::{Value, json};
use terraplane_policy::PolicyType;
use terraplane_policy::input::{
    ApprovalContext, RequestInfo, Review, SessionInfo, approval_input, plan_input, run_changes,
};

use crate::support::{change, context, eval, example, plan, strings};

#[test]
fn every_example_compiles() {
    let dir = format!("{}/../../examples/policies", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".rego"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "change-freeze.rego",
            "destroy-needs-approval.rego",
            "instance-type-allowlist.rego",
            "required-tags.rego"
        ]
    );
    for name in names {
        let source = std::fs::read_to_string(format!("{dir}/{name}")).unwrap();
        assert!(source.starts_with("# policy: "), "{name} lacks its header comment");
        example(&name);
    }
}

#[test]
fn required_tags_denies_missing_owner_or_env() {
    let policy = example("required-tags.rego");
    let p = plan(vec![
        change(
            "aws_s3_bucket.ok",
            &["create"],
            Value::Null,
            json!({"tags": {"owner": "ops", "env": "dev"}}),
        ),
        change(
            "aws_s3_bucket.no_env",
            &["create"],
            Value::Null,
            json!({"tags": {"owner": "ops"}}),
        ),
        change(
            "aws_instance.untagged",
            &["update"],
            json!({"tags": null}),
            json!({"tags": null}),
        ),
        change(
            "aws_vpc.replaced",
            &["delete", "create"],
            json!({}),
            json!({"tags": {"env": "prod"}}),
        ),
        change(
            "aws_iam_policy.no_tags_attr",
            &["create"],
            Value::Null,
            json!({"name": "p"}),
        ),
        change("aws_s3_bucket.deleted", &["delete"], json!({"tags": {}}), Value::Null),
        change(
            "aws_s3_bucket.same",
            &["no-op"],
            json!({"tags": {}}),
            json!({"tags": {}}),
        ),
    ]);
    let out = eval(&policy, PolicyType::Plan, &plan_input(&context(&[], "TRACKED", 0), &p));
    assert_eq!(
        out.deny,
        strings(&[
            "aws_instance.untagged is missing the required tag env",
            "aws_instance.untagged is missing the required tag owner",
            "aws_s3_bucket.no_env is missing the required tag env",
            "aws_vpc.replaced is missing the required tag owner",
        ])
    );
}

fn instance(rtype: &str, name: &str, instance_type: &str) -> Value {
    change(
        &format!("{rtype}.{name}"),
        &["create"],
        Value::Null,
        json!({"instance_type": instance_type}),
    )
}

#[test]
fn instance_types_are_checked_against_the_stacks_environment() {
    let policy = example("instance-type-allowlist.rego");
    let p = plan(vec![
        instance("aws_instance", "small", "t3.micro"),
        instance("aws_instance", "large", "m5.large"),
        instance("sandbox_instance", "huge", "m5.4xlarge"),
        instance("aws_launch_template", "ignored", "x1.32xlarge"),
    ]);
    let denied = |labels: &[&str]| {
        let out = eval(
            &policy,
            PolicyType::Plan,
            &plan_input(&context(labels, "TRACKED", 0), &p),
        );
        out.deny
            .iter()
            .map(|m| m.split(' ').next().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        denied(&["env:dev"]),
        strings(&["aws_instance.large", "sandbox_instance.huge"])
    );
    assert_eq!(
        denied(&["env:prod"]),
        strings(&["aws_instance.small", "sandbox_instance.huge"])
    );
    assert_eq!(denied(&[]), denied(&["env:dev"]), "no env label means the dev list");
    assert_eq!(denied(&["env:unknown"]), denied(&["env:dev"]));
    assert_eq!(denied(&["env:dev", "env:prod"]), strings(&["sandbox_instance.huge"]));

    let out = eval(
        &policy,
        PolicyType::Plan,
        &plan_input(&context(&["env:dev"], "TRACKED", 0), &p),
    );
    assert_eq!(
        out.deny[0],
        "aws_instance.large uses instance type m5.large, which is not allowed in dev (allowed: t3.medium, t3.micro, t3.nano, t3.small)"
    );
}

fn review(login: &str, teams: &[&str]) -> Review {
    Review {
        author: login.into(),
        state: "UNCONFIRMED".into(),
        request: RequestInfo {
            remote_ip: Some("10.0.0.1".into()),
            timestamp_ns: 1,
        },
        session: SessionInfo {
            login: login.into(),
            name: login.into(),
            teams: teams.iter().map(|t| t.to_string()).collect(),
        },
    }
}

#[test]
fn deletions_need_two_infra_lead_approvals() {
    let policy = example("destroy-needs-approval.rego");
    let deleting = run_changes(&plan(vec![
        change("aws_s3_bucket.a", &["update"], json!({}), json!({})),
        change("aws_s3_bucket.b", &["delete"], json!({}), Value::Null),
    ]));
    let harmless = run_changes(&plan(vec![change(
        "aws_s3_bucket.a",
        &["create"],
        Value::Null,
        json!({}),
    )]));
    let decide = |changes: &[terraplane_policy::input::RunChange], approvals: Vec<Review>, rejections: Vec<Review>| {
        let ctx = ApprovalContext {
            approvals,
            rejections,
            run_changes: changes.to_vec(),
            ..ApprovalContext::default()
        };
        let out = eval(&policy, PolicyType::Approval, &approval_input(&ctx));
        (out.approve, out.reject)
    };

    assert_eq!(decide(&harmless, vec![], vec![]), (true, false));
    assert_eq!(decide(&deleting, vec![], vec![]), (false, false));
    assert_eq!(
        decide(&deleting, vec![review("ann", &["infra-leads"])], vec![]),
        (false, false)
    );
    assert_eq!(
        decide(
            &deleting,
            vec![review("ann", &["infra-leads"]), review("dev", &["developers"])],
            vec![]
        ),
        (false, false)
    );
    assert_eq!(
        decide(
            &deleting,
            vec![review("ann", &["infra-leads"]), review("ben", &["sre", "infra-leads"])],
            vec![]
        ),
        (true, false)
    );
    assert_eq!(
        decide(
            &deleting,
            vec![review("ann", &["infra-leads"]), review("ben", &["infra-leads"])],
            vec![review("dev", &["developers"])]
        ),
        (true, true),
        "a rejection rejects (and wins over approvals)"
    );
    assert_eq!(decide(&harmless, vec![], vec![review("dev", &[])]), (true, true));
}

/// Unix nanoseconds of a wall-clock time in Berlin.
fn berlin(y: i32, m: u32, d: u32, h: u32, min: u32) -> i64 {
    Berlin
        .with_ymd_and_hms(y, m, d, h, min, 0)
        .single()
        .unwrap()
        .timestamp_nanos_opt()
        .unwrap()
}

#[test]
fn change_freeze_covers_friday_evening_to_monday_morning_in_berlin() {
    let policy = example("change-freeze.rego");
    let p = plan(vec![change("aws_s3_bucket.a", &["update"], json!({}), json!({}))]);
    let frozen = |ts: i64, run_type: &str| {
        let out = eval(&policy, PolicyType::Plan, &plan_input(&context(&[], run_type, ts), &p));
        !out.deny.is_empty()
    };
    // The weekend of 28–31 March 2025 crosses the switch to summer time (Sunday 02:00 CET →
    // 03:00 CEST): Friday is UTC+1, Monday UTC+2.
    assert!(!frozen(berlin(2025, 3, 28, 17, 59), "TRACKED"), "Fri 17:59");
    assert!(frozen(berlin(2025, 3, 28, 18, 0), "TRACKED"), "Fri 18:00");
    assert!(
        frozen(berlin(2025, 3, 30, 3, 30), "TRACKED"),
        "Sun 03:30, just after the switch"
    );
    assert!(frozen(berlin(2025, 3, 31, 5, 59), "TRACKED"), "Mon 05:59");
    assert!(!frozen(berlin(2025, 3, 31, 6, 0), "TRACKED"), "Mon 06:00");
    // The same boundaries in UTC terms, to show the zone is applied: Monday 06:00 Berlin
    // summer time is 04:00 UTC, so 04:30 UTC is already allowed…
    let monday_0430_utc = chrono::Utc
        .with_ymd_and_hms(2025, 3, 31, 4, 30, 0)
        .unwrap()
        .timestamp_nanos_opt()
        .unwrap();
    assert!(!frozen(monday_0430_utc, "TRACKED"));
    // …and Friday 17:30 UTC is 18:30 in Berlin winter time, already frozen.
    let friday_1730_utc = chrono::Utc
        .with_ymd_and_hms(2025, 3, 28, 17, 30, 0)
        .unwrap()
        .timestamp_nanos_opt()
        .unwrap();
    assert!(frozen(friday_1730_utc, "TRACKED"));
    // The autumn switch back (26 October 2025) and an ordinary midweek day.
    assert!(frozen(berlin(2025, 10, 26, 12, 0), "TRACKED"), "Sun noon");
    assert!(!frozen(berlin(2025, 10, 27, 6, 0), "TRACKED"), "Mon 06:00 CET");
    assert!(!frozen(berlin(2025, 10, 29, 23, 0), "TRACKED"), "Wednesday");
    // Proposed runs are never frozen.
    assert!(!frozen(berlin(2025, 3, 29, 12, 0), "PROPOSED"));

    let out = eval(
        &policy,
        PolicyType::Plan,
        &plan_input(&context(&[], "TRACKED", berlin(2025, 3, 29, 12, 0)), &p),
    );
    assert_eq!(
        out.deny,
        strings(&["change freeze: no tracked runs from Friday 18:00 to Monday 06:00 (Europe/Berlin)"])
    );
}
