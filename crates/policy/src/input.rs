//! The documents policies read, built from plain structs with Spacelift's field names so that
//! Spacelift policies work unchanged. Times are Unix nanoseconds, as in Spacelift.
//!
//! Terraplane fills what it knows; fields Spacelift has but Terraplane has no counterpart for
//! are given neutral values (`runner_image: ""`, `before_init: []`, `user_provided_metadata: []`
//! unless set), so policies that read them still find them.

use serde_json::{Map, Value, json};

use crate::sanitize_value;

/// A commit: `input.spacelift.commit`, `run.commit`, `stack.tracked_commit`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitInfo {
    /// Author name as recorded in the commit.
    pub author: String,
    /// Branch the commit was taken from.
    pub branch: String,
    /// Commit time, Unix nanoseconds.
    pub created_at_ns: i64,
    /// Full commit SHA.
    pub hash: String,
    /// Commit message.
    pub message: String,
}

impl CommitInfo {
    fn to_json(&self) -> Value {
        json!({
            "author": self.author,
            "branch": self.branch,
            "created_at": self.created_at_ns,
            "hash": self.hash,
            "message": self.message,
        })
    }
}

/// Who started a run (`run.creator_session` in approval inputs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CreatorSession {
    /// Whether the creator is an organization admin.
    pub admin: bool,
    /// IP address the run was created from, if known.
    pub creator_ip: Option<String>,
    /// Login name.
    pub login: String,
    /// Display name.
    pub name: String,
    /// Names of the creator's teams.
    pub teams: Vec<String>,
    /// Whether the creator is an API key rather than a person.
    pub machine: bool,
}

/// A run: `input.spacelift.run`, `input.run`, entries of `input.in_progress`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunInfo {
    /// Run id.
    pub id: String,
    /// Spacelift run type: `TRACKED`, `PROPOSED`, `TASK`, `TESTING`, `DESTROY`.
    pub run_type: String,
    /// Spacelift run state, e.g. `PLANNING`, `UNCONFIRMED`, `FINISHED`.
    pub state: String,
    /// Branch the run is on.
    pub branch: String,
    /// The commit the run is pinned to.
    pub commit: CommitInfo,
    /// Creation time, Unix nanoseconds.
    pub created_at_ns: i64,
    /// Last update time, Unix nanoseconds.
    pub updated_at_ns: i64,
    /// Whether this is a drift-detection run.
    pub drift_detection: bool,
    /// Flags set by earlier policies' `flag` rules.
    pub flags: Vec<String>,
    /// Login of whoever triggered the run; `None` for runs Terraplane started (`null` in JSON).
    pub triggered_by: Option<String>,
    /// Directory of the stack's Terraform code inside the repository.
    pub project_root: String,
    /// Terraform version the run uses.
    pub terraform_version: String,
    /// The one-off command of a task run.
    pub command: Option<String>,
    /// Who created the run (approval inputs); omitted when `None`.
    pub creator_session: Option<CreatorSession>,
    /// Free-form metadata attached by the run's creator.
    pub user_provided_metadata: Vec<String>,
}

impl RunInfo {
    fn to_json(&self, changes: &[RunChange]) -> Value {
        let mut run = json!({
            "based_on_local_workspace": false,
            "branch": self.branch,
            "changes": changes.iter().map(RunChange::to_json).collect::<Vec<_>>(),
            "command": self.command.clone().unwrap_or_default(),
            "commit": self.commit.to_json(),
            "created_at": self.created_at_ns,
            "drift_detection": self.drift_detection,
            "flags": self.flags,
            "id": self.id,
            "runtime_config": {
                "before_init": [],
                "project_root": self.project_root,
                "runner_image": "",
                "terraform_version": self.terraform_version,
            },
            "state": self.state,
            "triggered_by": self.triggered_by,
            "type": self.run_type,
            "updated_at": self.updated_at_ns,
            "user_provided_metadata": self.user_provided_metadata,
        });
        if let (Some(session), Some(map)) = (&self.creator_session, run.as_object_mut()) {
            map.insert(
                "creator_session".into(),
                json!({
                    "admin": session.admin,
                    "creator_ip": session.creator_ip.clone().unwrap_or_default(),
                    "login": session.login,
                    "machine": session.machine,
                    "name": session.name,
                    "teams": session.teams,
                }),
            );
        }
        run
    }
}

/// A worker pool: `stack.worker_pool`. The default is the public pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerPoolInfo {
    /// Pool id (empty for the public pool).
    pub id: String,
    /// Pool name.
    pub name: String,
    /// Pool labels.
    pub labels: Vec<String>,
    /// Whether this is the shared public pool.
    pub public: bool,
}

impl Default for WorkerPoolInfo {
    fn default() -> Self {
        WorkerPoolInfo {
            id: String::new(),
            name: String::new(),
            labels: Vec::new(),
            public: true,
        }
    }
}

/// A stack: `input.spacelift.stack`, `input.stack`, entries of `input.stacks`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StackInfo {
    /// Stack id (its slug).
    pub id: String,
    /// Display name.
    pub name: String,
    /// Tracked branch.
    pub branch: String,
    /// Labels, e.g. `env:prod`.
    pub labels: Vec<String>,
    /// Whether tracked runs apply without confirmation.
    pub autodeploy: bool,
    /// Whether the stack manages Terraplane itself.
    pub administrative: bool,
    /// Repository URL or name.
    pub repository: String,
    /// Repository namespace (owner), if any.
    pub namespace: String,
    /// Directory of the Terraform code inside the repository.
    pub project_root: String,
    /// Spacelift stack state, e.g. `FINISHED`, `UNCONFIRMED`, `NONE`.
    pub state: String,
    /// Terraform version the stack uses.
    pub terraform_version: String,
    /// Login of whoever holds the stack lock (`null` when unlocked).
    pub locked_by: Option<String>,
    /// The commit the tracked branch points at, if known.
    pub tracked_commit: Option<CommitInfo>,
    /// Where the stack's runs execute.
    pub worker_pool: WorkerPoolInfo,
}

impl StackInfo {
    fn to_json(&self) -> Value {
        json!({
            "administrative": self.administrative,
            "autodeploy": self.autodeploy,
            "branch": self.branch,
            "id": self.id,
            "labels": self.labels,
            "locked_by": self.locked_by,
            "name": self.name,
            "namespace": self.namespace,
            "project_root": self.project_root,
            "repository": self.repository,
            "roles": [],
            "state": self.state,
            "terraform_version": self.terraform_version,
            "tracked_commit": self.tracked_commit.as_ref().map(CommitInfo::to_json),
            "worker_pool": {
                "id": self.worker_pool.id,
                "labels": self.worker_pool.labels,
                "name": self.worker_pool.name,
                "public": self.worker_pool.public,
            },
        })
    }
}

/// What a run change does to a resource, in Spacelift's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeAction {
    /// Terraform `create`.
    Added,
    /// Terraform `update`.
    Changed,
    /// Terraform `delete`.
    Deleted,
}

impl ChangeAction {
    /// `added`, `changed` or `deleted`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeAction::Added => "added",
            ChangeAction::Changed => "changed",
            ChangeAction::Deleted => "deleted",
        }
    }
}

/// One entry of `run.changes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunChange {
    /// What happens to the resource.
    pub action: ChangeAction,
    /// Full resource address, e.g. `module.net.aws_vpc.main`.
    pub address: String,
    /// Resource name, e.g. `main`.
    pub name: String,
    /// Resource type, e.g. `aws_vpc`.
    pub resource_type: String,
}

impl RunChange {
    fn to_json(&self) -> Value {
        json!({
            "action": self.action.as_str(),
            "entity": {
                "address": self.address,
                "data": {},
                "entity_type": "resource",
                "entity_vendor": "terraform",
                "name": self.name,
                "type": self.resource_type,
            },
            "phase": "plan",
        })
    }
}

/// `run.changes` from a `terraform show -json` plan.
///
/// `create` → `added`, `update` → `changed`, `delete` → `deleted`. A replacement
/// (`["delete","create"]` or `["create","delete"]`) gives two entries, `deleted` and `added`, in
/// the order Terraform performs them, so counting `deleted` entries counts every destroyed
/// object. `no-op`, `read` and `forget` (removed from state, not destroyed) give none.
pub fn run_changes(plan_json: &Value) -> Vec<RunChange> {
    let mut out = Vec::new();
    for rc in resource_changes(plan_json) {
        let text = |key: &str| rc.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
        let actions = rc
            .pointer("/change/actions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        for action in actions.filter_map(Value::as_str) {
            let action = match action {
                "create" => ChangeAction::Added,
                "update" => ChangeAction::Changed,
                "delete" => ChangeAction::Deleted,
                _ => continue,
            };
            out.push(RunChange {
                action,
                address: text("address"),
                name: text("name"),
                resource_type: text("type"),
            });
        }
    }
    out
}

fn resource_changes(plan_json: &Value) -> impl Iterator<Item = &Value> {
    plan_json
        .get("resource_changes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// Everything a plan policy's input needs besides the plan itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanContext {
    /// When the policy is evaluated, Unix nanoseconds (`input.spacelift.request.timestamp_ns`).
    pub request_timestamp_ns: i64,
    /// The run being planned; `run.changes` comes from the plan.
    pub run: RunInfo,
    /// The stack's previous run (its `changes` are empty); `None` on the first run.
    pub previous_run: Option<RunInfo>,
    /// The run's stack.
    pub stack: StackInfo,
}

/// The plan policy input: `input.spacelift{commit, request, previous_run?, run, stack}` and
/// `input.terraform{resource_changes, terraform_version}`.
///
/// `resource_changes` keeps Terraform's fields (address, previous_address, module_address, mode,
/// type, name, index, provider_name, deposed, action_reason, and `change` with actions, before,
/// after, after_unknown, before_sensitive, after_sensitive, replace_paths, importing). Every value
/// of `before`/`after` marked in `before_sensitive`/`after_sensitive` is replaced by
/// [`sanitize_value`] of it; a marked `null` stays `null`. Nothing else of the plan (variables,
/// outputs, configuration — which hold raw secrets) reaches the policy.
pub fn plan_input(ctx: &PlanContext, plan_json: &Value) -> Value {
    let changes = run_changes(plan_json);
    let resource_changes: Vec<Value> = resource_changes(plan_json).map(policy_resource_change).collect();
    let mut spacelift = json!({
        "commit": ctx.run.commit.to_json(),
        "request": { "timestamp_ns": ctx.request_timestamp_ns },
        "run": ctx.run.to_json(&changes),
        "stack": ctx.stack.to_json(),
    });
    if let (Some(previous), Some(map)) = (&ctx.previous_run, spacelift.as_object_mut()) {
        map.insert("previous_run".into(), previous.to_json(&[]));
    }
    json!({
        "spacelift": spacelift,
        "terraform": {
            "resource_changes": resource_changes,
            "terraform_version": plan_json.get("terraform_version").cloned().unwrap_or(Value::String(String::new())),
        },
    })
}

const RESOURCE_CHANGE_KEYS: [&str; 10] = [
    "address",
    "previous_address",
    "module_address",
    "mode",
    "type",
    "name",
    "index",
    "provider_name",
    "deposed",
    "action_reason",
];

const CHANGE_KEYS: [&str; 5] = [
    "actions",
    "after_unknown",
    "before_sensitive",
    "after_sensitive",
    "replace_paths",
];

fn policy_resource_change(rc: &Value) -> Value {
    let mut out = Map::new();
    for key in RESOURCE_CHANGE_KEYS {
        if let Some(v) = rc.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    let change = rc.get("change").unwrap_or(&Value::Null);
    let mut c = Map::new();
    for key in CHANGE_KEYS {
        if let Some(v) = change.get(key) {
            c.insert(key.into(), v.clone());
        }
    }
    for (key, marker) in [("before", "before_sensitive"), ("after", "after_sensitive")] {
        let value = change.get(key).unwrap_or(&Value::Null);
        let sanitized = match change.get(marker) {
            Some(marker) => sanitize_sensitive(value, marker),
            None => value.clone(),
        };
        c.insert(key.into(), sanitized);
    }
    if let Some(importing) = change.get("importing") {
        // Only the id: `importing` may grow fields that carry values.
        let id = importing.get("id").cloned().unwrap_or(Value::Null);
        c.insert("importing".into(), json!({ "id": id }));
    }
    out.insert("change".into(), Value::Object(c));
    Value::Object(out)
}

/// Replaces every value that `marker` (Terraform's `*_sensitive` mirror of `value`) marks `true`
/// with its [`sanitize_value`] hash.
pub fn sanitize_sensitive(value: &Value, marker: &Value) -> Value {
    match (marker, value) {
        (_, Value::Null) => Value::Null,
        (Value::Bool(true), v) => Value::String(sanitize_value(v)),
        (Value::Object(markers), Value::Object(values)) => Value::Object(
            values
                .iter()
                .map(|(k, v)| {
                    let v = match markers.get(k) {
                        Some(m) => sanitize_sensitive(v, m),
                        None => v.clone(),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        (Value::Array(markers), Value::Array(values)) => Value::Array(
            values
                .iter()
                .enumerate()
                .map(|(i, v)| match markers.get(i) {
                    Some(m) => sanitize_sensitive(v, m),
                    None => v.clone(),
                })
                .collect(),
        ),
        (_, v) => v.clone(),
    }
}

/// An HTTP request's origin and time: `input.request`, `review.request`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// Client IP address, if known (`""` otherwise).
    pub remote_ip: Option<String>,
    /// Request time, Unix nanoseconds.
    pub timestamp_ns: i64,
}

impl RequestInfo {
    fn to_json(&self) -> Value {
        json!({ "remote_ip": self.remote_ip.clone().unwrap_or_default(), "timestamp_ns": self.timestamp_ns })
    }
}

/// A signed-in user: `review.session`, `input.session`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionInfo {
    /// Login name.
    pub login: String,
    /// Display name (may be empty).
    pub name: String,
    /// Names of the user's teams.
    pub teams: Vec<String>,
}

/// One review of a run: an entry of `reviews.current.approvals`, `…rejections` or `reviews.older`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Review {
    /// Reviewer's login.
    pub author: String,
    /// The run's state when the review was made (e.g. `UNCONFIRMED`).
    pub state: String,
    /// Where and when the review was made.
    pub request: RequestInfo,
    /// The reviewer.
    pub session: SessionInfo,
}

impl Review {
    fn to_json(&self) -> Value {
        json!({
            "author": self.author,
            "author_roles": [],
            "request": self.request.to_json(),
            "session": { "login": self.session.login, "name": self.session.name, "teams": self.session.teams },
            "state": self.state,
        })
    }
}

/// Everything an approval policy's input needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApprovalContext {
    /// Newest approval of each reviewer for the run's current state.
    pub approvals: Vec<Review>,
    /// Newest rejection of each reviewer for the run's current state.
    pub rejections: Vec<Review>,
    /// Reviews made in earlier states of the run.
    pub older: Vec<Review>,
    /// The run under review.
    pub run: RunInfo,
    /// The run's planned changes (see [`run_changes`]).
    pub run_changes: Vec<RunChange>,
    /// The run's stack.
    pub stack: StackInfo,
}

/// The approval policy input: `reviews{current{approvals, rejections}, older}`, `run`, `stack`.
pub fn approval_input(ctx: &ApprovalContext) -> Value {
    let list = |reviews: &[Review]| reviews.iter().map(Review::to_json).collect::<Vec<_>>();
    json!({
        "reviews": {
            "current": { "approvals": list(&ctx.approvals), "rejections": list(&ctx.rejections) },
            "older": list(&ctx.older),
        },
        "run": ctx.run.to_json(&ctx.run_changes),
        "stack": ctx.stack.to_json(),
    })
}

/// Everything a trigger policy's input needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TriggerContext {
    /// The run that just reached a terminal state.
    pub run: RunInfo,
    /// That run's changes (see [`run_changes`]).
    pub run_changes: Vec<RunChange>,
    /// That run's stack.
    pub stack: StackInfo,
    /// Every stack the policy may trigger (its `trigger` rule names their ids).
    pub stacks: Vec<StackInfo>,
}

/// The trigger policy input: `run`, `stack`, `stacks[]`.
pub fn trigger_input(ctx: &TriggerContext) -> Value {
    json!({
        "run": ctx.run.to_json(&ctx.run_changes),
        "stack": ctx.stack.to_json(),
        "stacks": ctx.stacks.iter().map(StackInfo::to_json).collect::<Vec<_>>(),
    })
}

/// The organization a login or notification belongs to (`input.account`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccountInfo {
    /// Organization id.
    pub id: String,
    /// Organization name (its slug).
    pub name: String,
}

/// Everything a login policy's input needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoginContext {
    /// Where and when the login is attempted.
    pub request: RequestInfo,
    /// The user logging in.
    pub session: SessionInfo,
    /// Whether the user is already a member of the organization.
    pub member: bool,
    /// The organization being logged in to.
    pub account: AccountInfo,
}

/// The login policy input: `request{remote_ip, timestamp_ns}`, `session{login, member, name,
/// teams}` as in Spacelift, plus `account{id, name}` naming the organization (Spacelift login
/// policies have one account; Terraplane serves several organizations).
pub fn login_input(ctx: &LoginContext) -> Value {
    json!({
        "account": { "id": ctx.account.id, "name": ctx.account.name },
        "request": ctx.request.to_json(),
        "session": {
            "login": ctx.session.login,
            "member": ctx.member,
            "name": ctx.session.name,
            "teams": ctx.session.teams,
        },
    })
}

/// A push to a repository, as far as Terraplane sees it without a VCS integration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PushEvent {
    /// Branch pushed to (empty for a tag push).
    pub branch: String,
    /// Tag pushed, if any.
    pub tag: Option<String>,
    /// The pushed head commit.
    pub commit: CommitInfo,
    /// Files changed by the push, relative to the repository root.
    pub affected_files: Vec<String>,
}

/// Everything a push policy's input needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PushContext {
    /// The push.
    pub push: PushEvent,
    /// The stack the push is evaluated for.
    pub stack: StackInfo,
    /// The stack's runs that have not finished (candidates for `cancel`).
    pub in_progress: Vec<RunInfo>,
}

/// The push policy input: `push{affected_files, author, branch, created_at, hash, message, tag}`,
/// `stack`, `in_progress[]`. Without a VCS integration there is no `pull_request`: the key is
/// absent, so rules about pull requests simply do not match.
pub fn push_input(ctx: &PushContext) -> Value {
    json!({
        "in_progress": ctx.in_progress.iter().map(|r| r.to_json(&[])).collect::<Vec<_>>(),
        "push": {
            "affected_files": ctx.push.affected_files,
            "author": ctx.push.commit.author,
            "branch": ctx.push.branch,
            "created_at": ctx.push.commit.created_at_ns,
            "hash": ctx.push.commit.hash,
            "message": ctx.push.commit.message,
            "tag": ctx.push.tag.clone().unwrap_or_default(),
        },
        "stack": ctx.stack.to_json(),
    })
}

/// A run's state change, the event most notifications are about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunUpdated {
    /// The run after the change.
    pub run: RunInfo,
    /// Its changes (see [`run_changes`]).
    pub run_changes: Vec<RunChange>,
    /// Its stack.
    pub stack: StackInfo,
    /// The new state.
    pub state: String,
    /// Who caused the change, if a person did.
    pub username: Option<String>,
    /// A note left with the change (e.g. a confirmation comment).
    pub note: Option<String>,
    /// Link to the run in Terraplane's UI.
    pub run_url: String,
}

/// An internal error worth telling people about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InternalError {
    /// Short error class.
    pub error: String,
    /// Human-readable message.
    pub message: String,
    /// `ERROR` or `WARNING`.
    pub severity: String,
}

/// A webhook endpoint the `webhook` rule may route to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WebhookEndpoint {
    /// Endpoint id (what `webhook` rules name).
    pub id: String,
    /// Endpoint labels.
    pub labels: Vec<String>,
}

/// Everything a notification policy's input needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NotificationContext {
    /// The organization.
    pub account: AccountInfo,
    /// Set when the notification is about a run.
    pub run_updated: Option<RunUpdated>,
    /// Set when the notification is about an internal error.
    pub internal_error: Option<InternalError>,
    /// The organization's webhook endpoints.
    pub webhook_endpoints: Vec<WebhookEndpoint>,
}

/// The notification policy input: `account`, `run_updated` and `internal_error` (each only when
/// that is what happened), `webhook_endpoints[]`. Terraplane has no module registry, so
/// `module_version` never appears.
pub fn notification_input(ctx: &NotificationContext) -> Value {
    let mut input = json!({
        "account": { "id": ctx.account.id, "name": ctx.account.name },
        "webhook_endpoints": ctx.webhook_endpoints.iter()
            .map(|w| json!({ "id": w.id, "labels": w.labels }))
            .collect::<Vec<_>>(),
    });
    let Some(map) = input.as_object_mut() else { return input };
    if let Some(ru) = &ctx.run_updated {
        map.insert(
            "run_updated".into(),
            json!({
                "note": ru.note.clone().unwrap_or_default(),
                "run": ru.run.to_json(&ru.run_changes),
                "stack": ru.stack.to_json(),
                "state": ru.state,
                "urls": { "run": ru.run_url },
                "username": ru.username.clone().unwrap_or_default(),
            }),
        );
    }
    if let Some(err) = &ctx.internal_error {
        map.insert(
            "internal_error".into(),
            json!({ "error": err.error, "message": err.message, "severity": err.severity }),
        );
    }
    input
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn nested_sensitive_values_are_hashed_and_the_rest_kept() {
        let value = json!({
            "name": "db",
            "password": "hunter2",
            "tags": {"owner": "ops", "token": "t0k"},
            "rules": [{"cidr": "10.0.0.0/8", "key": "k1"}, {"cidr": "0.0.0.0/0", "key": "k2"}],
            "keys": ["a", "b"],
            "whole": {"x": 1},
            "gone": null,
        });
        let marker = json!({
            "password": true,
            "tags": {"token": true},
            "rules": [{"key": true}, {}],
            "keys": [false, true],
            "whole": true,
            "gone": true,
        });
        let out = sanitize_sensitive(&value, &marker);
        assert_eq!(
            out,
            json!({
                "name": "db",
                "password": sanitize_value(&json!("hunter2")),
                "tags": {"owner": "ops", "token": sanitize_value(&json!("t0k"))},
                "rules": [{"cidr": "10.0.0.0/8", "key": sanitize_value(&json!("k1"))}, {"cidr": "0.0.0.0/0", "key": "k2"}],
                "keys": ["a", sanitize_value(&json!("b"))],
                "whole": sanitize_value(&json!({"x": 1})),
                "gone": null,
            })
        );
        assert!(!out.to_string().contains("hunter2"));
    }

    #[test]
    fn replacements_give_a_deletion_and_an_addition() {
        let plan = json!({"resource_changes": [
            {"address": "a.x", "type": "a", "name": "x", "change": {"actions": ["delete", "create"]}},
            {"address": "a.y", "type": "a", "name": "y", "change": {"actions": ["create", "delete"]}},
            {"address": "a.z", "type": "a", "name": "z", "change": {"actions": ["no-op"]}},
            {"address": "a.w", "type": "a", "name": "w", "change": {"actions": ["update"]}},
        ]});
        let actions: Vec<(&str, String)> = run_changes(&plan)
            .iter()
            .map(|c| (c.action.as_str(), c.address.clone()))
            .collect();
        assert_eq!(
            actions,
            vec![
                ("deleted", "a.x".to_string()),
                ("added", "a.x".to_string()),
                ("added", "a.y".to_string()),
                ("deleted", "a.y".to_string()),
                ("changed", "a.w".to_string()),
            ]
        );
    }

    #[test]
    fn previous_run_is_omitted_on_a_first_run() {
        let input = plan_input(&PlanContext::default(), &json!({"resource_changes": []}));
        assert!(input["spacelift"].get("previous_run").is_none());
        let ctx = PlanContext {
            previous_run: Some(RunInfo::default()),
            ..PlanContext::default()
        };
        assert!(plan_input(&ctx, &json!({}))["spacelift"]["previous_run"].is_object());
    }
}
