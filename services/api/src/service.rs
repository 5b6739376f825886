//! The product's operations, shared by GraphQL and REST. Each takes the caller's principal,
//! checks it through `Principal::require`, and works through the tenant-scoped store.

use std::sync::Arc;
use std::time::Duration;

use terraplane_domain::{RunEvent, RunId, RunType, Slug};
use terraplane_store::{NewRun, NewStack, Run, RunUpdate, Stack, StackPatch, StateLock, StateVersion};

use crate::AppState;
use crate::auth::{Action, Actor, Principal};
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

pub async fn create_stack(st: &AppState, p: &Principal, i: StackInput) -> ApiResult<Stack> {
    p.require(Action::Write)?;
    let slug = match &i.slug {
        Some(s) => Slug::parse(s).map_err(|e| ApiError::BadRequest(e.to_string()))?,
        None => Slug::from_name(&i.name).map_err(|e| ApiError::BadRequest(e.to_string()))?,
    };
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
    };
    st.store
        .scope(p.org)
        .create_stack(new, st.clock.now())
        .await
        .map_err(|e| match e {
            terraplane_store::StoreError::Conflict(m) => ApiError::conflict("stack_exists", m),
            e => e.into(),
        })
}

pub async fn update_stack(st: &AppState, p: &Principal, slug: &str, patch: StackPatch) -> ApiResult<Stack> {
    p.require(Action::Write)?;
    if let Some(r) = &patch.repository {
        validate_repository(r)?;
    }
    if let Some(r) = &patch.project_root {
        validate_project_root(r)?;
    }
    if patch.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
        return Err(ApiError::BadRequest("name must not be empty".into()));
    }
    Ok(st.store.scope(p.org).update_stack(slug, patch, st.clock.now()).await?)
}

pub async fn delete_stack(st: &AppState, p: &Principal, slug: &str) -> ApiResult<Stack> {
    p.require(Action::Admin)?;
    st.store.scope(p.org).delete_stack(slug).await.map_err(|e| match e {
        terraplane_store::StoreError::Conflict(m) => ApiError::conflict("stack_busy", m),
        e => e.into(),
    })
}

pub async fn lock_stack(st: &AppState, p: &Principal, slug: &str, note: Option<String>) -> ApiResult<Stack> {
    p.require(Action::Write)?;
    st.store
        .scope(p.org)
        .lock_stack(slug, &p.name(), note, st.clock.now())
        .await
        .map_err(|e| match e {
            terraplane_store::StoreError::Conflict(m) => ApiError::conflict("stack_locked", m),
            e => e.into(),
        })
}

pub async fn unlock_stack(st: &AppState, p: &Principal, slug: &str, force: bool) -> ApiResult<Stack> {
    p.require(if force { Action::Admin } else { Action::Write })?;
    st.store
        .scope(p.org)
        .unlock_stack(slug, &p.name(), force)
        .await
        .map_err(|e| match e {
            terraplane_store::StoreError::Conflict(m) => ApiError::conflict("stack_locked", m),
            e => e.into(),
        })
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
    p.require(Action::Write)?;
    let scope = st.store.scope(p.org);
    let stack = scope.get_stack_by_slug(slug).await?;
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
    let run = scope
        .create_run(new, &p.name(), st.clock.now())
        .await
        .map_err(|e| match e {
            terraplane_store::StoreError::Conflict(m) => ApiError::conflict("stack_locked", m),
            e => e.into(),
        })?;
    st.bus.publish(BusEvent::RunChanged(run.id));
    st.kick_scheduler();
    Ok(run)
}

pub async fn decide_run(st: &AppState, p: &Principal, id: RunId, event: RunEvent) -> ApiResult<Run> {
    p.require(Action::Write)?;
    let scope = st.store.scope(p.org);
    let now = st.clock.now();
    let note = format!("{} by {}", event.name(), p.name());
    let run = if event == RunEvent::Cancel {
        scope.cancel_run(id, &p.name(), now).await
    } else {
        scope
            .transition_run(
                id,
                event,
                RunUpdate {
                    note: Some(note),
                    ..Default::default()
                },
                now,
            )
            .await
    }
    .map_err(|e| match e {
        terraplane_store::StoreError::Conflict(m) => ApiError::conflict("invalid_run_state", m),
        e => e.into(),
    })?;
    st.bus.publish(BusEvent::RunChanged(run.id));
    st.kick_scheduler();
    Ok(run)
}

pub async fn force_unlock_state(st: &AppState, p: &Principal, slug: &str) -> ApiResult<StateLock> {
    p.require(Action::Admin)?;
    let scope = st.store.scope(p.org);
    let stack = scope.get_stack_by_slug(slug).await?;
    match scope.unlock_state(stack.id, None, true).await? {
        Ok(l) | Err(l) => Ok(l),
    }
}

pub async fn state_versions(st: &AppState, p: &Principal, slug: &str) -> ApiResult<Vec<StateVersion>> {
    p.require(Action::Read)?;
    let scope = st.store.scope(p.org);
    let stack = scope.get_stack_by_slug(slug).await?;
    Ok(scope.list_state_versions(stack.id).await?)
}

pub fn user_id(p: &Principal) -> Option<terraplane_domain::UserId> {
    match &p.actor {
        Actor::User { id, .. } => Some(*id),
        _ => None,
    }
}

pub type Shared = Arc<AppState>;
