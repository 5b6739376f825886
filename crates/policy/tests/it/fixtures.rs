//! The product's two fixture policies (copied byte for byte from the product's fixtures into
//! `tests/fixtures/`) give exactly the expected messages.

use serde_json::{Value, json};
use terraplane_policy::PolicyType;
use terraplane_policy::input::plan_input;

use crate::support::{change, context, eval, fixture, plan, strings};

const DESTRUCTIVE: &str = "require-approval-for-destructive-changes.rego";
const COST: &str = "cost-control.rego";

fn bucket(i: usize, actions: &[&str]) -> Value {
    change(
        &format!("aws_s3_bucket.b{i}"),
        actions,
        json!({"bucket": format!("b{i}")}),
        Value::Null,
    )
}

fn instance(name: &str, instance_type: &str) -> Value {
    change(
        &format!("aws_instance.{name}"),
        &["create"],
        Value::Null,
        json!({"ami": "ami-123", "instance_type": instance_type, "tags": {"Name": name}}),
    )
}

#[test]
fn six_deletions_deny_each_one_and_the_count() {
    let policy = fixture(DESTRUCTIVE);
    let deleted: Vec<Value> = (0..6).map(|i| bucket(i, &["delete"])).collect();
    let input = plan_input(&context(&[], "TRACKED", 0), &plan(deleted));
    let out = eval(&policy, PolicyType::Plan, &input);
    assert_eq!(
        out.deny,
        strings(&[
            "Destroy richiede approvazione: aws_s3_bucket.b0",
            "Destroy richiede approvazione: aws_s3_bucket.b1",
            "Destroy richiede approvazione: aws_s3_bucket.b2",
            "Destroy richiede approvazione: aws_s3_bucket.b3",
            "Destroy richiede approvazione: aws_s3_bucket.b4",
            "Destroy richiede approvazione: aws_s3_bucket.b5",
            "Piu di 5 destroy in un singolo plan: richiede approvazione senior",
        ])
    );
    assert!(out.warn.is_empty());
}

#[test]
fn five_deletions_do_not_reach_the_senior_threshold_and_replacements_count_as_deletions() {
    let policy = fixture(DESTRUCTIVE);
    let mut changes: Vec<Value> = (0..4).map(|i| bucket(i, &["delete"])).collect();
    changes.push(bucket(4, &["delete", "create"]));
    changes.push(bucket(5, &["create"]));
    changes.push(bucket(6, &["update"]));
    let input = plan_input(&context(&[], "TRACKED", 0), &plan(changes));
    let out = eval(&policy, PolicyType::Plan, &input);
    assert_eq!(
        out.deny,
        (0..5)
            .map(|i| format!("Destroy richiede approvazione: aws_s3_bucket.b{i}"))
            .collect::<Vec<_>>()
    );
}

#[test]
fn security_group_changes_warn_without_denying() {
    let policy = fixture(DESTRUCTIVE);
    let sg = |name: &str, actions: &[&str]| {
        change(
            &format!("aws_security_group.{name}"),
            actions,
            json!({"name": name}),
            json!({"name": name}),
        )
    };
    let input = plan_input(
        &context(&[], "TRACKED", 0),
        &plan(vec![
            sg("web", &["update"]),
            sg("db", &["no-op"]),
            sg("new", &["create"]),
        ]),
    );
    let out = eval(&policy, PolicyType::Plan, &input);
    assert!(out.deny.is_empty(), "{:?}", out.deny);
    assert_eq!(
        out.warn,
        strings(&[
            "Security group modificato: aws_security_group.new",
            "Security group modificato: aws_security_group.web"
        ])
    );
}

#[test]
fn a_deleted_security_group_warns_and_denies() {
    let policy = fixture(DESTRUCTIVE);
    let input = plan_input(
        &context(&[], "TRACKED", 0),
        &plan(vec![change(
            "aws_security_group.old",
            &["delete"],
            json!({"name": "old"}),
            Value::Null,
        )]),
    );
    let out = eval(&policy, PolicyType::Plan, &input);
    assert_eq!(
        out.deny,
        strings(&["Destroy richiede approvazione: aws_security_group.old"])
    );
    assert_eq!(
        out.warn,
        strings(&["Security group modificato: aws_security_group.old"])
    );
}

#[test]
fn expensive_instances_are_denied_outside_prod() {
    let policy = fixture(COST);
    let changes = plan(vec![
        instance("big", "m5.4xlarge"),
        instance("small", "t3.micro"),
        instance("mid", "m5.large"),
    ]);
    for labels in [&[][..], &["env:dev"][..], &["team:web", "env:staging"][..]] {
        let out = eval(
            &policy,
            PolicyType::Plan,
            &plan_input(&context(labels, "TRACKED", 0), &changes),
        );
        assert_eq!(
            out.deny,
            strings(&["Istanza aws_instance.big di tipo m5.4xlarge non consentita in ambienti non-prod"]),
            "labels {labels:?}"
        );
        assert!(out.warn.is_empty());
    }
}

#[test]
fn expensive_instances_are_allowed_on_prod_stacks() {
    let policy = fixture(COST);
    let changes = plan(vec![instance("big", "m5.4xlarge"), instance("huge", "r5.8xlarge")]);
    for labels in [&["env:prod"][..], &["team:web", "env:prod"][..]] {
        let out = eval(
            &policy,
            PolicyType::Plan,
            &plan_input(&context(labels, "TRACKED", 0), &changes),
        );
        assert!(out.deny.is_empty(), "labels {labels:?}: {:?}", out.deny);
    }
}

#[test]
fn no_op_plans_give_nothing() {
    let changes = plan(vec![
        change(
            "aws_s3_bucket.a",
            &["no-op"],
            json!({"bucket": "a"}),
            json!({"bucket": "a"}),
        ),
        change(
            "aws_security_group.web",
            &["no-op"],
            json!({"name": "web"}),
            json!({"name": "web"}),
        ),
        change(
            "aws_instance.big",
            &["no-op"],
            json!({"instance_type": "t3.micro"}),
            json!({"instance_type": "t3.micro"}),
        ),
    ]);
    let input = plan_input(&context(&[], "TRACKED", 0), &changes);
    for name in [DESTRUCTIVE, COST] {
        let out = eval(&fixture(name), PolicyType::Plan, &input);
        assert!(out.deny.is_empty() && out.warn.is_empty(), "{name}: {out:?}");
    }
}

#[test]
fn fixtures_are_the_products_copies() {
    // The copies must stay byte-identical to the product's fixtures when those are reachable.
    let shared = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/fixtures/policies");
    for name in [DESTRUCTIVE, COST] {
        let ours = std::fs::read(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        if let Ok(theirs) = std::fs::read(format!("{shared}/{name}")) {
            assert_eq!(ours, theirs, "{name} differs from the product's fixture");
        }
    }
}
