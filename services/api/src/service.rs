//! The product's operations, shared by GraphQL and REST. Each takes the caller's principal,
//! checks it through `Principal::require_in` (or `require_owner` for the organization
//! itself), and works through the tenant-scoped store. Reads go through here too, so a
//! thing in a space the caller cannot see is "not found" everywhere.

use std::sync::Arc;
use std::time::Duration;

use terraplane_domain::Role;
use terraplane_domain::{RunEvent, RunId, RunType, Slug};
use terraplane_store::{
    ApiKey, NewAuditEvent, NewRun, NewSpace, NewStack, Organization, RoleBinding, Run, RunUpdate, Space, Stack,
    StackPatch, StateLock, StateVersion, Subject, Team, User,
};

use crate::AppState;
use crate::auth::{Action, Actor, Principal, hash_password};
use crate::bus::BusEvent;
use crate::error::{ApiError, ApiResult};

pub struct StackInput {
    pub slug: Option<String>,
    pub name: String,
    pub description: Option<String>,
    pub repository: String,
    pub branch: Option<String>,
    pub project_root: Option<String>,
    pub tool: Option<String>,
    pub tool_version: Option<String>,
    pub autodeploy: Option<bool>,
    pub labels: Option<Vec<String>>,
    pub worker_pool: Option<String>,
    /// Slug of the space; the root space when absent.
    pub space: Option<String>,
}

/// An audit event by the caller, with its request's id and address.
pub fn event(
    p: &Principal,
    action: &str,
    kind: &str,
    target: impl Into<String>,
    before: Option<serde_json::Value>,
    after: Option<serde_json::Value>,
) -> NewAuditEvent {
    NewAuditEvent {
        actor: p.name(),
        action: action.into(),
        target_kind: kind.into(),
        target: target.into(),
        before,
        after,
        request_id: p.meta.request_id.clone(),
        client_ip: p.meta.client_ip.clone(),
    }
}

/// What the audit trail keeps of a stack (no secrets live on stacks).
fn stack_json(s: &Stack) -> serde_json::Value {
    serde_json::json!({
        "slug": s.slug, "name": s.name, "description": s.description, "repository": s.repository,
        "branch": s.branch, "project_root": s.project_root, "tool": s.tool, "tool_version": s.tool_version,
        "autodeploy": s.autodeploy, "labels": s.labels, "worker_pool": s.worker_pool,
        "space_id": s.space_id.to_string(), "locked_by": s.lock.as_ref().map(|l| l.holder.clone()),
    })
}

fn run_json(r: &Run) -> serde_json::Value {
    serde_json::json!({ "id": r.id.to_string(), "type": r.run_type.as_str(), "state": r.state.as_str() })
}

/// Maps a store conflict to an API conflict with `code`; other store errors as usual.
pub(crate) fn store_err(code: &'static str) -> impl Fn(terraplane_store::StoreError) -> ApiError {
    move |e| match e {
        terraplane_store::StoreError::Conflict(m) => ApiError::conflict(code, m),
        e => e.into(),
    }
}

fn parse_slug(s: &str) -> ApiResult<Slug> {
    Slug::parse(s).map_err(|e| ApiError::BadRequest(e.to_string()))
}

/// Stacks the caller can see.
pub async fn list_stacks(st: &AppState, p: &Principal) -> ApiResult<Vec<Stack>> {
    p.require_member()?;
    let stacks = st.store.scope(p.org).list_stacks().await?;
    Ok(stacks.into_iter().filter(|s| p.can_see(s.space_id)).collect())
}

/// A stack the caller may `action`; invisible ones are "not found".
pub async fn get_stack(st: &AppState, p: &Principal, slug: &str, action: Action) -> ApiResult<Stack> {
    p.require_member()?;
    let stack = st.store.scope(p.org).get_stack_by_slug(slug).await?;
    p.require_in(stack.space_id, action, "stack")?;
    Ok(stack)
}

/// A run (with its stack) the caller may `action`.
pub async fn get_run(st: &AppState, p: &Principal, id: RunId, action: Action) -> ApiResult<(Run, Stack)> {
    p.require_member()?;
    let scope = st.store.scope(p.org);
    let run = scope.get_run(id).await?;
    let stack = scope.get_stack(run.stack_id).await?;
    // Without read access the run doesn't exist for the caller.
    p.require_in(stack.space_id, Action::Read, "run")?;
    p.require_in(stack.space_id, action, "run")?;
    Ok((run, stack))
}

fn validate_project_root(p: &str) -> ApiResult<()> {
    if p.starts_with('/') || p.split('/').any(|s| s == "..") {
        return Err(ApiError::BadRequest(format!(
            "projectRoot {p:?} must be a relative path inside the repository"
        )));
    }
    Ok(())
}

fn validate_repository(r: &str) -> ApiResult<()> {
    if r.trim().is_empty() {
        return Err(ApiError::BadRequest("repository must not be empty".into()));
    }
    Ok(())
}

/// The space (by slug; the root space when absent) something is created in: the caller
/// must be an admin there.
pub(crate) async fn admin_space(st: &AppState, p: &Principal, space: Option<&str>) -> ApiResult<Space> {
    p.require_member()?;
    let scope = st.store.scope(p.org);
    let space = match space {
        Some(s) => scope.get_space_by_slug(s).await?,
        None => scope.root_space().await?,
    };
    p.require_in(space.id, Action::Admin, "space")?;
    Ok(space)
}

/// The slug given, or one derived from the name.
pub(crate) fn slug_or_name(slug: Option<&str>, name: &str) -> ApiResult<Slug> {
    match slug {
        Some(s) => Slug::parse(s),
        None => Slug::from_name(name),
    }
    .map_err(|e| ApiError::BadRequest(e.to_string()))
}

pub async fn create_stack(st: &AppState, p: &Principal, i: StackInput) -> ApiResult<Stack> {
    let space = admin_space(st, p, i.space.as_deref()).await?;
    let slug = slug_or_name(i.slug.as_deref(), &i.name)?;
    if i.name.trim().is_empty() {
        return Err(ApiError::BadRequest("name must not be empty".into()));
    }
    validate_repository(&i.repository)?;
    let project_root = i.project_root.unwrap_or_default();
    validate_project_root(&project_root)?;
    let tool = i.tool.unwrap_or_else(|| "terraform".into());
    if tool != "terraform" && tool != "opentofu" {
        return Err(ApiError::BadRequest(format!(
            "tool must be terraform or opentofu, got {tool:?}"
        )));
    }
    let new = NewStack {
        slug: slug.to_string(),
        name: i.name,
        description: i.description.unwrap_or_default(),
        repository: i.repository,
        branch: i.branch.unwrap_or_else(|| "main".into()),
        project_root,
        tool,
        tool_version: i.tool_version,
        autodeploy: i.autodeploy.unwrap_or(false),
        labels: i.labels.unwrap_or_default(),
        worker_pool: i.worker_pool.unwrap_or_else(|| st.cfg.runner.pool.clone()),
        space_id: Some(space.id),
    };
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let stack = tx
        .scope(p.org)
        .create_stack(new, now)
        .await
        .map_err(store_err("stack_exists"))?;
    tx.scope(p.org)
        .append_audit(
            event(p, "stack.create", "stack", &stack.slug, None, Some(stack_json(&stack))),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(stack)
}

pub async fn update_stack(st: &AppState, p: &Principal, slug: &str, patch: StackPatch) -> ApiResult<Stack> {
    let stack = get_stack(st, p, slug, Action::Write).await?;
    if let Some(target) = patch.space_id {
        // Moving a stack takes admin on both ends.
        p.require_in(stack.space_id, Action::Admin, "stack")?;
        p.require_in(target, Action::Admin, "space")?;
    }
    if let Some(r) = &patch.repository {
        validate_repository(r)?;
    }
    if let Some(r) = &patch.project_root {
        validate_project_root(r)?;
    }
    if patch.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
        return Err(ApiError::BadRequest("name must not be empty".into()));
    }
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let after = tx.scope(p.org).update_stack(slug, patch, now).await?;
    let e = event(
        p,
        "stack.update",
        "stack",
        slug,
        Some(stack_json(&stack)),
        Some(stack_json(&after)),
    );
    tx.scope(p.org).append_audit(e, now).await?;
    tx.commit().await?;
    Ok(after)
}

pub async fn delete_stack(st: &AppState, p: &Principal, slug: &str) -> ApiResult<Stack> {
    get_stack(st, p, slug, Action::Admin).await?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let gone = tx
        .scope(p.org)
        .delete_stack(slug)
        .await
        .map_err(store_err("stack_busy"))?;
    tx.scope(p.org)
        .append_audit(
            event(p, "stack.delete", "stack", slug, Some(stack_json(&gone)), None),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(gone)
}

pub async fn lock_stack(st: &AppState, p: &Principal, slug: &str, note: Option<String>) -> ApiResult<Stack> {
    get_stack(st, p, slug, Action::Write).await?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let stack = tx
        .scope(p.org)
        .lock_stack(slug, &p.name(), note, now)
        .await
        .map_err(store_err("stack_locked"))?;
    tx.scope(p.org)
        .append_audit(
            event(p, "stack.lock", "stack", slug, None, Some(stack_json(&stack))),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(stack)
}

pub async fn unlock_stack(st: &AppState, p: &Principal, slug: &str, force: bool) -> ApiResult<Stack> {
    let before = get_stack(st, p, slug, if force { Action::Admin } else { Action::Write }).await?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let stack = tx
        .scope(p.org)
        .unlock_stack(slug, &p.name(), force)
        .await
        .map_err(store_err("stack_locked"))?;
    let action = if force { "stack.unlock_force" } else { "stack.unlock" };
    let e = event(
        p,
        action,
        "stack",
        slug,
        Some(stack_json(&before)),
        Some(stack_json(&stack)),
    );
    tx.scope(p.org).append_audit(e, now).await?;
    tx.commit().await?;
    Ok(stack)
}

/// The commit the branch points at now, so the run uses exactly that even if the branch
/// moves. `None` when the repository can't be read from here: the runner then fails the
/// run with git's own message.
async fn resolve_commit(repository: &str, branch: &str) -> Option<String> {
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        tokio::process::Command::new("git")
            .args(["ls-remote", "--", repository, &format!("refs/heads/{branch}")])
            .env("GIT_TERMINAL_PROMPT", "0")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .ok()?
    .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .next()
        .filter(|s| s.len() >= 40)
        .map(str::to_owned)
}

pub async fn trigger_run(
    st: &AppState,
    p: &Principal,
    slug: &str,
    run_type: RunType,
    commit_sha: Option<String>,
) -> ApiResult<Run> {
    let stack = get_stack(st, p, slug, Action::Write).await?;
    if let Some(c) = &commit_sha
        && (c.len() < 7 || !c.chars().all(|ch| ch.is_ascii_hexdigit()))
    {
        return Err(ApiError::BadRequest(format!(
            "commitSha {c:?} is not a git commit hash"
        )));
    }
    let commit_sha = match commit_sha {
        Some(c) => Some(c),
        None => resolve_commit(&stack.repository, &stack.branch).await,
    };
    let new = NewRun {
        stack_id: stack.id,
        run_type,
        commit_sha,
        triggered_by: p.name(),
        trigger_kind: "user".into(),
        drift_detection: false,
    };
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let run = tx
        .scope(p.org)
        .create_run(new, &p.name(), now)
        .await
        .map_err(store_err("stack_locked"))?;
    let mut after = run_json(&run);
    after["stack"] = serde_json::json!(stack.slug);
    tx.scope(p.org)
        .append_audit(
            event(p, "run.trigger", "run", run.id.to_string(), None, Some(after)),
            now,
        )
        .await?;
    tx.commit().await?;
    // Approval policies judge the run as it is queued.
    let run = crate::policy::apply_approval(st, run, &stack, terraplane_domain::ReviewStage::Queued).await?;
    st.bus.publish(BusEvent::RunChanged(run.id));
    st.kick_scheduler();
    Ok(run)
}

pub async fn decide_run(st: &AppState, p: &Principal, id: RunId, decision: RunEvent) -> ApiResult<Run> {
    let (before, _) = get_run(st, p, id, Action::Write).await?;
    let tx = st.store.begin().await?;
    let scope = tx.scope(p.org);
    let now = st.clock.now();
    let note = format!("{} by {}", decision.name(), p.name());
    let action = match decision {
        RunEvent::Confirm => "run.confirm",
        RunEvent::Discard => "run.discard",
        RunEvent::Cancel => "run.cancel",
        _ => "run.transition",
    };
    let run = if decision == RunEvent::Cancel {
        scope.cancel_run(id, &p.name(), now).await
    } else {
        scope
            .transition_run(
                id,
                decision,
                RunUpdate {
                    note: Some(note),
                    ..Default::default()
                },
                now,
            )
            .await
    }
    .map_err(store_err("invalid_run_state"))?;
    let e = event(
        p,
        action,
        "run",
        id.to_string(),
        Some(run_json(&before)),
        Some(run_json(&run)),
    );
    scope.append_audit(e, now).await?;
    tx.commit().await?;
    st.bus.publish(BusEvent::RunChanged(run.id));
    st.kick_scheduler();
    Ok(run)
}

pub async fn force_unlock_state(st: &AppState, p: &Principal, slug: &str) -> ApiResult<StateLock> {
    let stack = get_stack(st, p, slug, Action::Admin).await?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let (Ok(lock) | Err(lock)) = tx.scope(p.org).unlock_state(stack.id, None, true).await?;
    let before =
        serde_json::json!({ "lock_id": lock.lock_id, "holder": lock.holder, "needs_recovery": lock.needs_recovery });
    tx.scope(p.org)
        .append_audit(event(p, "state.unlock_force", "stack", slug, Some(before), None), now)
        .await?;
    tx.commit().await?;
    Ok(lock)
}

pub async fn state_versions(st: &AppState, p: &Principal, slug: &str) -> ApiResult<Vec<StateVersion>> {
    let stack = get_stack(st, p, slug, Action::Read).await?;
    Ok(st.store.scope(p.org).list_state_versions(stack.id).await?)
}

// ---- organizations, users, spaces, teams, role bindings ----

/// Creates an organization with its root space; the creator becomes its owner.
pub async fn create_org(st: &AppState, p: &Principal, slug: &str, name: &str) -> ApiResult<Organization> {
    if !p.instance_admin {
        return Err(ApiError::Forbidden(
            "only instance administrators create organizations".into(),
        ));
    }
    let slug = parse_slug(slug)?;
    let name = if name.trim().is_empty() { slug.as_str() } else { name };
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let org = tx
        .create_org(slug.as_str(), name, now)
        .await
        .map_err(store_err("organization_exists"))?;
    if let Some(user) = user_id(p) {
        tx.add_member(org.id, user, "owner", now).await?;
    }
    // The new organization's chain starts with its creation.
    let after = serde_json::json!({ "slug": org.slug, "name": org.name });
    tx.scope(org.id)
        .append_audit(
            event(p, "org.create", "organization", &org.slug, None, Some(after)),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(org)
}

/// Self-service sign-up (when the instance enables it): a new account and a new
/// organization it owns, in one transaction.
pub async fn sign_up(
    st: &AppState,
    meta: &crate::auth::RequestMeta,
    email: &str,
    password: &str,
    org_slug: &str,
    org_name: Option<String>,
) -> ApiResult<(User, Organization)> {
    if !st.cfg.auth.signup_enabled {
        return Err(ApiError::Forbidden(
            "sign-up is disabled on this instance; ask an administrator".into(),
        ));
    }
    validate_email(email)?;
    if password.chars().count() < 12 {
        return Err(ApiError::BadRequest("a password needs at least 12 characters".into()));
    }
    let slug = parse_slug(org_slug)?;
    let name = org_name
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| slug.to_string());
    let pw = password.to_owned();
    let hash = tokio::task::spawn_blocking(move || hash_password(&pw))
        .await
        .map_err(|e| ApiError::Internal(e.into()))??;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let user = tx
        .create_user(email, email.split('@').next().unwrap_or(email), Some(hash), false, now)
        .await
        .map_err(store_err("user_exists"))?;
    let org = tx
        .create_org(slug.as_str(), &name, now)
        .await
        .map_err(store_err("organization_exists"))?;
    tx.add_member(org.id, user.id, "owner", now).await?;
    let e = NewAuditEvent {
        actor: user.email.clone(),
        action: "signup".into(),
        target_kind: "organization".into(),
        target: org.slug.clone(),
        after: Some(serde_json::json!({ "email": user.email, "organization": org.slug })),
        request_id: meta.request_id.clone(),
        client_ip: meta.client_ip.clone(),
        ..Default::default()
    };
    tx.scope(org.id).append_audit(e, now).await?;
    tx.commit().await?;
    Ok((user, org))
}

/// The caller's organizations; every organization for instance administrators.
pub async fn list_orgs(st: &AppState, p: &Principal) -> ApiResult<Vec<Organization>> {
    p.require_member()?;
    if p.instance_admin {
        return Ok(st.store.list_orgs().await?);
    }
    match user_id(p) {
        Some(u) => Ok(st
            .store
            .list_memberships(u)
            .await?
            .into_iter()
            .map(|(o, _)| o)
            .collect()),
        None => Ok(vec![st.store.get_org(p.org).await?]),
    }
}

fn validate_email(email: &str) -> ApiResult<()> {
    let ok = email.len() <= 254
        && email
            .split_once('@')
            .is_some_and(|(l, d)| !l.is_empty() && d.contains('.') && !d.starts_with('.'))
        && !email.chars().any(char::is_whitespace);
    if ok {
        Ok(())
    } else {
        Err(ApiError::BadRequest(format!("{email:?} is not an email address")))
    }
}

/// Adds a user to the caller's organization (creating the account when it is new).
pub async fn create_user(
    st: &AppState,
    p: &Principal,
    email: &str,
    name: Option<String>,
    password: Option<String>,
    owner: bool,
) -> ApiResult<User> {
    p.require_owner()?;
    validate_email(email)?;
    if password.as_deref().is_some_and(|pw| pw.chars().count() < 12) {
        return Err(ApiError::BadRequest("a password needs at least 12 characters".into()));
    }
    let now = st.clock.now();
    // Look up before the transaction: with SQLite the transaction holds the only connection.
    let existing = match st.store.get_user_by_email(email).await {
        Ok(u) => {
            if st.store.scope(p.org).member_role(u.id).await?.is_some() {
                return Err(ApiError::conflict(
                    "member_exists",
                    format!("{email} is already a member"),
                ));
            }
            Some(u)
        }
        Err(terraplane_store::StoreError::NotFound(_)) => None,
        Err(e) => return Err(e.into()),
    };
    let hash = match password {
        Some(pw) if existing.is_none() => Some(
            tokio::task::spawn_blocking(move || hash_password(&pw))
                .await
                .map_err(|e| ApiError::Internal(e.into()))??,
        ),
        _ => None,
    };
    let tx = st.store.begin().await?;
    let user = match existing {
        Some(u) => u,
        None => {
            let name = name.unwrap_or_else(|| email.split('@').next().unwrap_or(email).to_owned());
            tx.create_user(email, &name, hash, false, now)
                .await
                .map_err(store_err("user_exists"))?
        }
    };
    let role = if owner { "owner" } else { "member" };
    tx.add_member(p.org, user.id, role, now).await?;
    let after = serde_json::json!({ "email": user.email, "role": role });
    tx.scope(p.org)
        .append_audit(event(p, "member.add", "user", &user.email, None, Some(after)), now)
        .await?;
    tx.commit().await?;
    Ok(user)
}

async fn member(st: &AppState, p: &Principal, email: &str) -> ApiResult<User> {
    let user = st
        .store
        .get_user_by_email(email)
        .await
        .map_err(|_| ApiError::NotFound("user"))?;
    st.store
        .scope(p.org)
        .member_role(user.id)
        .await?
        .ok_or(ApiError::NotFound("user"))?;
    Ok(user)
}

/// Makes a member an owner or a plain member (owners); the last owner stays.
pub async fn set_member_role(st: &AppState, p: &Principal, email: &str, owner: bool) -> ApiResult<User> {
    p.require_owner()?;
    let user = member(st, p, email).await?;
    let before = st.store.scope(p.org).member_role(user.id).await?;
    let role = if owner { "owner" } else { "member" };
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    tx.scope(p.org)
        .set_member_role(user.id, role)
        .await
        .map_err(store_err("last_owner"))?;
    let e = event(
        p,
        "member.role",
        "user",
        email,
        Some(serde_json::json!({ "role": before })),
        Some(serde_json::json!({ "role": role })),
    );
    tx.scope(p.org).append_audit(e, now).await?;
    tx.commit().await?;
    Ok(user)
}

/// Removes a member (owners); never the last owner.
pub async fn remove_member(st: &AppState, p: &Principal, email: &str) -> ApiResult<()> {
    p.require_owner()?;
    let user = member(st, p, email).await?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    tx.scope(p.org)
        .remove_member(user.id)
        .await
        .map_err(store_err("last_owner"))?;
    tx.scope(p.org)
        .append_audit(event(p, "member.remove", "user", email, None, None), now)
        .await?;
    tx.commit().await?;
    Ok(())
}

pub async fn list_users(st: &AppState, p: &Principal) -> ApiResult<Vec<(User, String)>> {
    p.require_member()?;
    Ok(st.store.list_members(p.org).await?)
}

/// Spaces the caller can see, each with its parent's slug (from one read of the tree).
pub async fn list_spaces(st: &AppState, p: &Principal) -> ApiResult<Vec<(Space, Option<String>)>> {
    p.require_member()?;
    let all = st.store.scope(p.org).list_spaces().await?;
    let slug = |id| all.iter().find(|s: &&Space| s.id == id).map(|s| s.slug.clone());
    Ok(all
        .iter()
        .filter(|s| p.can_see(s.id))
        .map(|s| (s.clone(), s.parent_id.and_then(slug)))
        .collect())
}

pub async fn get_space(st: &AppState, p: &Principal, slug: &str, action: Action) -> ApiResult<Space> {
    p.require_member()?;
    let space = st.store.scope(p.org).get_space_by_slug(slug).await?;
    p.require_in(space.id, action, "space")?;
    Ok(space)
}

/// A new space under `parent` (root when absent): admin on the parent.
pub async fn create_space(
    st: &AppState,
    p: &Principal,
    slug: &str,
    name: Option<String>,
    parent: Option<String>,
    inherit: bool,
    description: Option<String>,
) -> ApiResult<Space> {
    let slug = parse_slug(slug)?;
    let parent = get_space(
        st,
        p,
        parent.as_deref().unwrap_or(terraplane_store::ROOT_SPACE),
        Action::Admin,
    )
    .await?;
    let new = NewSpace {
        slug: slug.to_string(),
        name: name
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| slug.to_string()),
        description: description.unwrap_or_default(),
        parent: parent.id,
        inherit,
    };
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let space = tx
        .scope(p.org)
        .create_space(new, now)
        .await
        .map_err(store_err("space_exists"))?;
    let after = serde_json::json!({ "slug": space.slug, "parent": parent.slug, "inherit": space.inherit });
    tx.scope(p.org)
        .append_audit(event(p, "space.create", "space", &space.slug, None, Some(after)), now)
        .await?;
    tx.commit().await?;
    Ok(space)
}

/// Deletes an empty space: admin on its parent.
pub async fn delete_space(st: &AppState, p: &Principal, slug: &str) -> ApiResult<Space> {
    let space = get_space(st, p, slug, Action::Read).await?;
    match space.parent_id {
        Some(parent) => p.require_in(parent, Action::Admin, "space")?,
        None => {
            return Err(ApiError::conflict(
                "space_not_empty",
                "the root space cannot be deleted",
            ));
        }
    };
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let gone = tx
        .scope(p.org)
        .delete_space(slug)
        .await
        .map_err(store_err("space_not_empty"))?;
    let before = serde_json::json!({ "slug": gone.slug, "inherit": gone.inherit });
    tx.scope(p.org)
        .append_audit(event(p, "space.delete", "space", slug, Some(before), None), now)
        .await?;
    tx.commit().await?;
    Ok(gone)
}

pub async fn create_team(st: &AppState, p: &Principal, slug: &str, name: Option<String>) -> ApiResult<Team> {
    p.require_owner()?;
    let slug = parse_slug(slug)?;
    let name = name
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| slug.to_string());
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let team = tx
        .scope(p.org)
        .create_team(slug.as_str(), &name, now)
        .await
        .map_err(store_err("team_exists"))?;
    let after = serde_json::json!({ "slug": team.slug, "name": team.name });
    tx.scope(p.org)
        .append_audit(event(p, "team.create", "team", &team.slug, None, Some(after)), now)
        .await?;
    tx.commit().await?;
    Ok(team)
}

pub async fn list_teams(st: &AppState, p: &Principal) -> ApiResult<Vec<Team>> {
    p.require_member()?;
    Ok(st.store.scope(p.org).list_teams().await?)
}

pub async fn add_team_member(st: &AppState, p: &Principal, team: &str, email: &str) -> ApiResult<Team> {
    p.require_owner()?;
    let scope = st.store.scope(p.org);
    let team = scope.get_team_by_slug(team).await?;
    let user = match st.store.get_user_by_email(email).await {
        Ok(u) => u,
        Err(terraplane_store::StoreError::NotFound(_)) => return Err(ApiError::NotFound("user")),
        Err(e) => return Err(e.into()),
    };
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    tx.scope(p.org).add_team_member(team.id, user.id, now).await?;
    let after = serde_json::json!({ "member": user.email });
    tx.scope(p.org)
        .append_audit(event(p, "team.add_member", "team", &team.slug, None, Some(after)), now)
        .await?;
    tx.commit().await?;
    Ok(team)
}

/// Whom a grant is for, as the API names it.
pub enum SubjectRef {
    User(String),
    Team(String),
    ApiKey(String),
}

async fn resolve_subject(st: &AppState, p: &Principal, s: &SubjectRef) -> ApiResult<Subject> {
    let scope = st.store.scope(p.org);
    Ok(match s {
        SubjectRef::User(email) => {
            let user = st
                .store
                .get_user_by_email(email)
                .await
                .map_err(|_| ApiError::NotFound("user"))?;
            scope.member_role(user.id).await?.ok_or(ApiError::NotFound("user"))?;
            Subject::User(user.id)
        }
        SubjectRef::Team(slug) => Subject::Team(scope.get_team_by_slug(slug).await?.id),
        SubjectRef::ApiKey(id) => {
            let id: terraplane_domain::ApiKeyId = id.parse().map_err(|_| ApiError::NotFound("API key"))?;
            let key = st.store.get_api_key(p.org, id).await?;
            Subject::ApiKey(key.id)
        }
    })
}

/// Grants a role on a space (admin there).
pub async fn grant_role(
    st: &AppState,
    p: &Principal,
    space: &str,
    subject: SubjectRef,
    role: &str,
) -> ApiResult<RoleBinding> {
    let role = Role::parse(role).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "unknown role {role:?}: {}",
            terraplane_domain::access::ROLE_RULE
        ))
    })?;
    let space = get_space(st, p, space, Action::Admin).await?;
    let subject = resolve_subject(st, p, &subject).await?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let binding = tx.scope(p.org).grant(space.id, subject, role, now).await?;
    let after = serde_json::json!({ "space": space.slug, "subject": subject_json(&subject), "role": role.as_str() });
    tx.scope(p.org)
        .append_audit(event(p, "role.grant", "space", &space.slug, None, Some(after)), now)
        .await?;
    tx.commit().await?;
    Ok(binding)
}

fn subject_json(s: &Subject) -> serde_json::Value {
    match s {
        Subject::User(u) => serde_json::json!({ "user": u.to_string() }),
        Subject::Team(t) => serde_json::json!({ "team": t.to_string() }),
        Subject::ApiKey(k) => serde_json::json!({ "api_key": k.to_string() }),
    }
}

pub async fn revoke_role(st: &AppState, p: &Principal, space: &str, subject: SubjectRef) -> ApiResult<()> {
    let space = get_space(st, p, space, Action::Admin).await?;
    let subject = resolve_subject(st, p, &subject).await?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    tx.scope(p.org).revoke(space.id, subject).await?;
    let before = serde_json::json!({ "space": space.slug, "subject": subject_json(&subject) });
    tx.scope(p.org)
        .append_audit(event(p, "role.revoke", "space", &space.slug, Some(before), None), now)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Role bindings on spaces the caller administers.
pub async fn list_bindings(st: &AppState, p: &Principal) -> ApiResult<Vec<RoleBinding>> {
    p.require_member()?;
    let all = st.store.scope(p.org).list_bindings().await?;
    Ok(all
        .into_iter()
        .filter(|b| p.access.role_in(b.space_id) == Some(Role::Admin))
        .collect())
}

// ---- API keys ----

pub const MAX_KEY_DAYS: i64 = 365;
pub const DEFAULT_KEY_DAYS: i64 = 90;

pub struct NewKey {
    pub name: String,
    /// `personal` (default) or `service`.
    pub kind: Option<String>,
    /// Personal: an organization-wide role narrowing the creator's rights (all of them when
    /// absent). Service: `owner`, `admin`, `writer` or `reader`, organization-wide, or on
    /// `space` only.
    pub role: Option<String>,
    pub space: Option<String>,
    pub expires_in_days: Option<i64>,
}

/// Creates a key and returns it with its secret, which is never shown again.
pub async fn create_api_key(st: &AppState, p: &Principal, k: NewKey) -> ApiResult<(ApiKey, String)> {
    p.require_member()?;
    let name = k.name.trim();
    if name.is_empty() || name.len() > 100 {
        return Err(ApiError::BadRequest("a key needs a name of 1 to 100 characters".into()));
    }
    let days = k.expires_in_days.unwrap_or(DEFAULT_KEY_DAYS);
    if !(1..=MAX_KEY_DAYS).contains(&days) {
        return Err(ApiError::BadRequest(format!(
            "expiresInDays must be between 1 and {MAX_KEY_DAYS}"
        )));
    }
    let kind = k.kind.as_deref().unwrap_or("personal");
    let role_ok = |r: &str| matches!(r, "owner" | "admin" | "writer" | "reader");
    let now = st.clock.now();
    let expires = Some(now + chrono::Duration::days(days));
    let secret = crate::auth::new_api_key_secret();
    let hash = crate::auth::hash_secret(&secret);
    let (user, role, binding) = match kind {
        "personal" => {
            let Some(user) = user_id(p) else {
                return Err(ApiError::BadRequest(
                    "personal keys are created by users; API keys create service keys".into(),
                ));
            };
            if k.space.is_some() {
                return Err(ApiError::BadRequest(
                    "space applies to service keys; a personal key acts as its creator".into(),
                ));
            }
            let role = k.role.unwrap_or_else(|| "owner".into());
            if !role_ok(&role) {
                return Err(ApiError::BadRequest(format!(
                    "unknown role {role:?}: owner, admin, writer or reader"
                )));
            }
            (Some(user), role, None)
        }
        "service" => {
            p.require_owner()?;
            let role = k
                .role
                .ok_or_else(|| ApiError::BadRequest("a service key needs a role".into()))?;
            match k.space {
                Some(space) => {
                    let r = Role::parse(&role).ok_or_else(|| {
                        ApiError::BadRequest(format!(
                            "unknown role {role:?}: {}",
                            terraplane_domain::access::ROLE_RULE
                        ))
                    })?;
                    let space = get_space(st, p, &space, Action::Admin).await?;
                    (None, String::new(), Some((space.id, r)))
                }
                None if role_ok(&role) => (None, role, None),
                None => {
                    return Err(ApiError::BadRequest(format!(
                        "unknown role {role:?}: owner, admin, writer or reader"
                    )));
                }
            }
        }
        other => {
            return Err(ApiError::BadRequest(format!(
                "unknown key kind {other:?}: personal or service"
            )));
        }
    };
    let tx = st.store.begin().await?;
    let key = tx
        .create_api_key(p.org, user, name, &hash, &role, kind, expires, now)
        .await?;
    if let Some((space, r)) = binding {
        tx.scope(p.org).grant(space, Subject::ApiKey(key.id), r, now).await?;
    }
    // Never the secret or its hash.
    let after =
        serde_json::json!({ "name": key.name, "kind": key.kind, "role": key.role, "expires_at": key.expires_at });
    tx.scope(p.org)
        .append_audit(
            event(p, "api_key.create", "api_key", key.id.to_string(), None, Some(after)),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok((key, secret))
}

/// Keys the caller may manage: owners see every key, others their personal keys.
pub async fn list_api_keys(st: &AppState, p: &Principal) -> ApiResult<Vec<ApiKey>> {
    p.require_member()?;
    let user = if p.access.is_owner() {
        None
    } else {
        Some(user_id(p).ok_or(ApiError::Forbidden("only owners list service keys".into()))?)
    };
    Ok(st.store.list_api_keys(p.org, user).await?)
}

pub async fn revoke_api_key(st: &AppState, p: &Principal, id: &str) -> ApiResult<ApiKey> {
    p.require_member()?;
    let id: terraplane_domain::ApiKeyId = id.parse().map_err(|_| ApiError::NotFound("API key"))?;
    let key = st.store.get_api_key(p.org, id).await?;
    let own = key.user_id.is_some() && key.user_id == user_id(p);
    if !own && !p.access.is_owner() {
        return Err(ApiError::NotFound("API key"));
    }
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let revoked = tx.revoke_api_key(p.org, id, now).await?;
    let before = serde_json::json!({ "name": key.name, "kind": key.kind });
    tx.scope(p.org)
        .append_audit(
            event(p, "api_key.revoke", "api_key", id.to_string(), Some(before), None),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(revoked)
}

pub fn user_id(p: &Principal) -> Option<terraplane_domain::UserId> {
    match &p.actor {
        Actor::User { id, .. } => Some(*id),
        _ => None,
    }
}

pub type Shared = Arc<AppState>;
