//! The input builders produce what Spacelift policies expect, and Terraplane's helpers
//! (`sanitized`, the plan aliases) work on them.

use serde_json::{Value, json};
use terraplane_policy::input::{
    AccountInfo, ApprovalContext, LoginContext, NotificationContext, PushContext, PushEvent, RequestInfo, RunInfo,
    RunUpdated, SessionInfo, StackInfo, TriggerContext, WebhookEndpoint, approval_input, login_input,
    notification_input, plan_input, push_input, run_changes, trigger_input,
};
use terraplane_policy::{Policy, PolicyType, input_hash, sanitize_value};

use crate::support::{change, context, eval, plan, strings};

fn db_plan() -> Value {
    let mut db = change(
        "aws_db_instance.main",
        &["update"],
        json!({"username": "admin", "password": "old-secret", "tags": {"env": "prod"}}),
        json!({"username": "admin", "password": "hunter2", "tags": {"env": "prod"}}),
    );
    db["change"]["before_sensitive"] = json!({"password": true});
    db["change"]["after_sensitive"] = json!({"password": true, "tags": {}});
    plan(vec![db])
}

#[test]
fn sanitized_matches_sensitive_plan_values() {
    let input = plan_input(&context(&["env:prod"], "TRACKED", 0), &db_plan());
    let text = input.to_string();
    assert!(!text.contains("hunter2") && !text.contains("old-secret"), "{text}");
    let after = &input["terraform"]["resource_changes"][0]["change"]["after"];
    assert_eq!(after["password"], json!(sanitize_value(&json!("hunter2"))));
    assert_eq!(after["username"], json!("admin"));

    let policy = Policy::compile(
        "leaked.rego",
        r#"package spacelift

deny[sprintf("%s uses a leaked password", [rc.address])] {
  rc := input.terraform.resource_changes[_]
  rc.change.after.password == sanitized("hunter2")
}

warn[sprintf("%s had password %s", [rc.address, p])] {
  rc := input.terraform.resource_changes[_]
  p := "old-secret"
  rc.change.before.password == sanitized(p)
}

flag["unrelated"] {
  input.terraform.resource_changes[_].change.after.password == sanitized("something else")
}
"#,
    )
    .unwrap();
    let out = eval(&policy, PolicyType::Plan, &input);
    assert_eq!(out.deny, strings(&["aws_db_instance.main uses a leaked password"]));
    assert_eq!(out.warn, strings(&["aws_db_instance.main had password old-secret"]));
    assert!(out.flags.is_empty());
}

#[test]
fn plan_aliases_list_resource_changes_by_action() {
    let p = plan(vec![
        change("aws_s3_bucket.created", &["create"], Value::Null, json!({})),
        change("aws_s3_bucket.updated", &["update"], json!({}), json!({})),
        change("aws_s3_bucket.deleted", &["delete"], json!({}), Value::Null),
        change("aws_s3_bucket.replaced", &["delete", "create"], json!({}), json!({})),
        change("aws_s3_bucket.same", &["no-op"], json!({}), json!({})),
    ]);
    let policy = Policy::compile(
        "aliases.rego",
        r#"package spacelift

addresses(list) := concat(",", sort([r.address | r := list[_]]))

warn[sprintf("affected=%s", [addresses(affected_resources)])] { true }
warn[sprintf("created=%s", [addresses(created_resources)])] { true }
warn[sprintf("deleted=%s", [addresses(deleted_resources)])] { true }
warn[sprintf("recreated=%s", [addresses(recreated_resources)])] { true }
warn[sprintf("updated=%s", [addresses(updated_resources)])] { true }
"#,
    )
    .unwrap();
    let out = eval(&policy, PolicyType::Plan, &plan_input(&context(&[], "TRACKED", 0), &p));
    assert_eq!(
        out.warn,
        strings(&[
            "affected=aws_s3_bucket.created,aws_s3_bucket.deleted,aws_s3_bucket.replaced,aws_s3_bucket.updated",
            "created=aws_s3_bucket.created,aws_s3_bucket.replaced",
            "deleted=aws_s3_bucket.deleted,aws_s3_bucket.replaced",
            "recreated=aws_s3_bucket.replaced",
            "updated=aws_s3_bucket.updated",
        ])
    );
}

#[test]
fn a_policy_may_define_its_own_rule_named_like_an_alias() {
    let policy = Policy::compile(
        "own.rego",
        "package spacelift\n\ncreated_resources := [\"mine\"]\n\nwarn[x] { x := created_resources[_] }\nwarn[x] { x := count(deleted_resources) ; x > 100 }\n",
    )
    .unwrap();
    let p = plan(vec![change("aws_s3_bucket.a", &["create"], Value::Null, json!({}))]);
    let out = eval(&policy, PolicyType::Plan, &plan_input(&context(&[], "TRACKED", 0), &p));
    assert_eq!(out.warn, strings(&["mine"]));
}

#[test]
fn plan_input_has_spacelifts_shape() {
    let mut ctx = context(&["env:prod"], "TRACKED", 1_735_689_600_000_000_000);
    ctx.previous_run = Some(RunInfo {
        id: "01JPREV".into(),
        state: "FINISHED".into(),
        ..RunInfo::default()
    });
    let input = plan_input(&ctx, &db_plan());
    let spacelift = &input["spacelift"];
    assert_eq!(
        spacelift["request"]["timestamp_ns"],
        json!(1_735_689_600_000_000_000_i64)
    );
    assert_eq!(
        spacelift["commit"]["hash"],
        json!("0123456789abcdef0123456789abcdef01234567")
    );
    assert_eq!(spacelift["previous_run"]["id"], json!("01JPREV"));
    let run = &spacelift["run"];
    assert_eq!(run["type"], json!("TRACKED"));
    assert_eq!(run["created_at"], json!(1_700_000_000_000_000_000_i64));
    assert_eq!(run["runtime_config"]["terraform_version"], json!("1.9.5"));
    assert_eq!(
        run["changes"],
        json!([{
            "action": "changed",
            "entity": {
                "address": "aws_db_instance.main",
                "data": {},
                "entity_type": "resource",
                "entity_vendor": "terraform",
                "name": "main",
                "type": "aws_db_instance",
            },
            "phase": "plan",
        }])
    );
    let stack = &spacelift["stack"];
    assert_eq!(stack["labels"], json!(["env:prod"]));
    assert_eq!(stack["worker_pool"]["public"], json!(true));
    assert_eq!(input["terraform"]["terraform_version"], json!("1.9.5"));
    assert!(input.get("variables").is_none() && input["terraform"].get("variables").is_none());

    let same = plan_input(&ctx, &db_plan());
    assert_eq!(input_hash(&input), input_hash(&same));
    ctx.request_timestamp_ns += 1;
    assert_ne!(input_hash(&input), input_hash(&plan_input(&ctx, &db_plan())));
}

fn session(login: &str, teams: &[&str]) -> SessionInfo {
    SessionInfo {
        login: login.into(),
        name: login.to_uppercase(),
        teams: teams.iter().map(|t| t.to_string()).collect(),
    }
}

#[test]
fn login_policies_decide_access_and_roles() {
    let policy = Policy::compile(
        "login.rego",
        r#"package spacelift
import rego.v1

allow if input.session.member
admin if "admins" in input.session.teams
deny if input.request.remote_ip == "10.6.6.6"
deny_admin if input.session.login == "mallory"
roles["space-1"] contains "writer" if "devs" in input.session.teams
roles["space-2"] contains "reader" if input.account.name == "acme"
sample if true
"#,
    )
    .unwrap();
    let ctx = |login: &str, teams: &[&str], ip: &str| LoginContext {
        request: RequestInfo {
            remote_ip: Some(ip.into()),
            timestamp_ns: 1,
        },
        session: session(login, teams),
        member: true,
        account: AccountInfo {
            id: "org-1".into(),
            name: "acme".into(),
        },
    };
    let out = eval(
        &policy,
        PolicyType::Login,
        &login_input(&ctx("alice", &["devs", "admins"], "10.0.0.1")),
    );
    assert!(out.allow && out.admin && !out.login_deny && !out.deny_admin && out.sample);
    assert_eq!(out.roles.get("space-1"), Some(&strings(&["writer"])));
    assert_eq!(out.roles.get("space-2"), Some(&strings(&["reader"])));
    assert!(out.deny.is_empty());

    let out = eval(
        &policy,
        PolicyType::Login,
        &login_input(&ctx("mallory", &["admins"], "10.6.6.6")),
    );
    assert!(out.allow && out.admin && out.login_deny && out.deny_admin);
    assert_eq!(out.rules["deny"], json!(true));
}

#[test]
fn trigger_policies_name_stacks() {
    let policy = Policy::compile(
        "trigger.rego",
        r#"package spacelift

trigger[stack.id] {
  stack := input.stacks[_]
  input.run.state == "FINISHED"
  input.run.type == "TRACKED"
  stack.labels[_] == sprintf("depends-on:%s", [input.stack.id])
}
"#,
    )
    .unwrap();
    let stack = |id: &str, labels: &[&str]| StackInfo {
        id: id.into(),
        labels: labels.iter().map(|l| l.to_string()).collect(),
        ..StackInfo::default()
    };
    let ctx = TriggerContext {
        run: RunInfo {
            run_type: "TRACKED".into(),
            state: "FINISHED".into(),
            ..RunInfo::default()
        },
        run_changes: vec![],
        stack: stack("network", &[]),
        stacks: vec![
            stack("app", &["depends-on:network"]),
            stack("db", &["depends-on:network"]),
            stack("other", &[]),
        ],
    };
    let out = eval(&policy, PolicyType::Trigger, &trigger_input(&ctx));
    assert_eq!(out.trigger, strings(&["app", "db"]));
}

#[test]
fn push_policies_see_the_push_and_runs_in_progress() {
    let policy = Policy::compile(
        "push.rego",
        r#"package spacelift
import rego.v1

track if input.push.branch == input.stack.branch
propose if not track
ignore if every f in input.push.affected_files { endswith(f, ".md") }
cancel contains run.id if {
  some run in input.in_progress
  run.type == "PROPOSED"
}
notrigger if input.pull_request
"#,
    )
    .unwrap();
    let ctx = PushContext {
        push: PushEvent {
            branch: "main".into(),
            affected_files: vec!["main.tf".into()],
            ..PushEvent::default()
        },
        stack: StackInfo {
            branch: "main".into(),
            ..StackInfo::default()
        },
        in_progress: vec![
            RunInfo {
                id: "r1".into(),
                run_type: "PROPOSED".into(),
                ..RunInfo::default()
            },
            RunInfo {
                id: "r2".into(),
                run_type: "TRACKED".into(),
                ..RunInfo::default()
            },
        ],
    };
    let out = eval(&policy, PolicyType::Push, &push_input(&ctx));
    assert_eq!(out.rules.get("track"), Some(&json!(true)));
    assert_eq!(out.rules.get("cancel"), Some(&json!(["r1"])));
    assert!(!out.rules.contains_key("propose") && !out.rules.contains_key("ignore"));
    assert!(
        !out.rules.contains_key("notrigger"),
        "no pull_request without a VCS integration"
    );
}

#[test]
fn notification_policies_route_run_updates() {
    let policy = Policy::compile(
        "notify.rego",
        r#"package spacelift
import rego.v1

webhook contains {"endpoint_id": endpoint.id} if {
  some endpoint in input.webhook_endpoints
  "failures" in endpoint.labels
  input.run_updated.state == "FAILED"
}

inbox contains {"title": "internal error", "body": input.internal_error.message, "severity": "ERROR"} if input.internal_error
"#,
    )
    .unwrap();
    let ctx = NotificationContext {
        account: AccountInfo {
            id: "org-1".into(),
            name: "acme".into(),
        },
        run_updated: Some(RunUpdated {
            state: "FAILED".into(),
            ..RunUpdated::default()
        }),
        internal_error: None,
        webhook_endpoints: vec![
            WebhookEndpoint {
                id: "hook-1".into(),
                labels: vec!["failures".into()],
            },
            WebhookEndpoint {
                id: "hook-2".into(),
                labels: vec![],
            },
        ],
    };
    let out = eval(&policy, PolicyType::Notification, &notification_input(&ctx));
    assert_eq!(out.rules.get("webhook"), Some(&json!([{"endpoint_id": "hook-1"}])));
    // A set rule with no members is defined and empty, as in OPA.
    assert_eq!(out.rules.get("inbox"), Some(&json!([])));
}

#[test]
fn approval_input_carries_reviews_and_changes() {
    let ctx = ApprovalContext {
        approvals: vec![terraplane_policy::input::Review {
            author: "bob".into(),
            state: "UNCONFIRMED".into(),
            request: RequestInfo {
                remote_ip: None,
                timestamp_ns: 5,
            },
            session: session("bob", &["infra-leads"]),
        }],
        run_changes: run_changes(&plan(vec![change(
            "aws_s3_bucket.x",
            &["delete"],
            json!({}),
            Value::Null,
        )])),
        ..ApprovalContext::default()
    };
    let input = approval_input(&ctx);
    assert_eq!(
        input["reviews"]["current"]["approvals"][0]["session"]["teams"],
        json!(["infra-leads"])
    );
    assert_eq!(
        input["reviews"]["current"]["approvals"][0]["request"],
        json!({"remote_ip": "", "timestamp_ns": 5})
    );
    assert_eq!(input["reviews"]["current"]["rejections"], json!([]));
    assert_eq!(input["reviews"]["older"], json!([]));
    assert_eq!(input["run"]["changes"][0]["action"], json!("deleted"));
}
