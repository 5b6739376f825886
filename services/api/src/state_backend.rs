//! Terraform's `backend "http"` protocol at `/api/v1/orgs/{org}/stacks/{stack}/state`:
//! GET, POST, DELETE, LOCK and UNLOCK on that one address (reference/protocols.md §1–2).
//! Credentials arrive as Basic auth (password = API key or run token) or Bearer.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use base64::Engine;
use md5::Md5;
use sha2::{Digest, Sha256};
use terraplane_domain::state::parse_state;
use terraplane_store::{LockOutcome, NewLock, NewStateVersion, Stack, TenantScope, WriteOutcome};

use crate::AppState;
use crate::auth::{Action, Actor, Principal};
use crate::error::{ApiError, ApiResult};
use crate::service::Shared;
use crate::service::event;

pub const PATH: &str = "/api/v1/orgs/{org}/stacks/{stack}/state";

/// The methods of the state backend; `config` registers exactly these (others get 405).
pub const METHODS: &[&str] = &["GET", "POST", "DELETE", "LOCK", "UNLOCK"];

pub fn config(cfg: &mut web::ServiceConfig, max_state_bytes: usize) {
    let mut resource = web::resource(PATH)
        // Room above the limit so an oversized body reaches us and gets a precise 413.
        .app_data(web::PayloadConfig::new(max_state_bytes.saturating_add(1024 * 1024)));
    for m in METHODS {
        if let Ok(method) = actix_web::http::Method::from_bytes(m.as_bytes()) {
            resource = resource.route(web::route().method(method).to(handle));
        }
    }
    cfg.service(resource.default_service(web::to(handle)));
}

async fn handle(
    st: web::Data<Shared>,
    req: HttpRequest,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> ApiResult<HttpResponse> {
    let (org_slug, stack_slug) = path.into_inner();
    let p = st.principal(&req).await?;
    // Another organization's address does not exist for this caller.
    let org = st.store.get_org_by_slug(&org_slug).await?;
    if org.id != p.org {
        return Err(ApiError::NotFound("organization"));
    }
    let scope = st.store.scope(p.org);
    let stack = scope.get_stack_by_slug(&stack_slug).await?;
    p.require_stack(stack.id)?;
    // A stack in a space the caller can't see does not exist for it.
    require_user(&p, &stack, Action::Read)?;
    let query = web::Query::<std::collections::HashMap<String, String>>::from_query(req.query_string())
        .map(|q| q.into_inner())
        .unwrap_or_default();
    match req.method().as_str() {
        "GET" => get_state(&scope, &p, &stack, query.get("serial")).await,
        "POST" | "PUT" => {
            post_state(
                &st,
                &scope,
                &p,
                &stack,
                &req,
                &body,
                query.get("ID").map(String::as_str),
            )
            .await
        }
        "DELETE" => {
            require_user(&p, &stack, Action::Admin)?;
            let tx = st.store.begin().await?;
            let removed = tx
                .scope(p.org)
                .delete_state(stack.id)
                .await
                .map_err(crate::service::store_err("state_locked"))?;
            let before = serde_json::json!({ "versions": removed });
            let e = event(&p, "state.delete", "stack", &stack.slug, Some(before), None);
            tx.scope(p.org).append_audit(e, st.clock.now()).await?;
            tx.commit().await?;
            Ok(HttpResponse::Ok().finish())
        }
        "LOCK" => lock(&st, &p, &stack, &body).await,
        "UNLOCK" => unlock(&st, &p, &stack, &body).await,
        m => Ok(HttpResponse::MethodNotAllowed()
            .insert_header(("Allow", "GET, POST, DELETE, LOCK, UNLOCK"))
            .json(terraplane_protocol::ErrorBody {
                code: "method_not_allowed".into(),
                message: format!("method {m} is not supported"),
            })),
    }
}

/// Users and API keys need `action`; a run token is good for its own stack (checked above).
fn require_user(p: &Principal, stack: &Stack, action: Action) -> ApiResult<()> {
    match p.actor {
        Actor::Run { .. } => Ok(()),
        _ => p.require_in(stack.space_id, action, "stack").map(|_| ()),
    }
}

async fn get_state(
    scope: &TenantScope<'_>,
    p: &Principal,
    stack: &Stack,
    serial: Option<&String>,
) -> ApiResult<HttpResponse> {
    require_user(p, stack, Action::Read)?;
    let found = match serial {
        Some(s) => {
            let n: i64 = s
                .parse()
                .map_err(|_| ApiError::BadRequest(format!("serial {s:?} is not a number")))?;
            Some(scope.get_state_by_serial(stack.id, n).await?)
        }
        None => scope.get_current_state(stack.id).await?,
    };
    match found {
        None => Ok(HttpResponse::NoContent().finish()),
        Some((v, data)) => {
            let md5 = hex::decode(&v.md5).unwrap_or_default();
            Ok(HttpResponse::Ok()
                .content_type("application/json")
                .insert_header(("Content-MD5", base64::engine::general_purpose::STANDARD.encode(md5)))
                .body(data))
        }
    }
}

async fn post_state(
    st: &AppState,
    scope: &TenantScope<'_>,
    p: &Principal,
    stack: &Stack,
    req: &HttpRequest,
    body: &[u8],
    lock_id: Option<&str>,
) -> ApiResult<HttpResponse> {
    require_user(p, stack, Action::Write)?;
    // A run writes state only while it applies; a plan never persists state.
    if let Actor::Run { run_id, .. } = p.actor {
        let run = scope.get_run(run_id).await?;
        if run.state != terraplane_domain::RunState::Applying {
            return Err(ApiError::Forbidden(format!(
                "run is {}; state is written only while APPLYING",
                run.state
            )));
        }
    }
    if body.len() > st.cfg.api.max_state_bytes {
        return Err(ApiError::TooLarge(format!(
            "state of {} bytes exceeds the limit of {} bytes",
            body.len(),
            st.cfg.api.max_state_bytes
        )));
    }
    let meta = parse_state(body).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let md5 = Md5::digest(body);
    if let Some(h) = req.headers().get("content-md5").and_then(|h| h.to_str().ok()) {
        let sent = base64::engine::general_purpose::STANDARD
            .decode(h.trim())
            .unwrap_or_default();
        if sent[..] != md5[..] {
            return Err(ApiError::BadRequest("Content-MD5 does not match the body".into()));
        }
    }
    let run_id = match p.actor {
        Actor::Run { run_id, .. } => Some(run_id),
        _ => None,
    };
    // Outputs are kept in clear for the API: the stack's secret values never are.
    let mut outputs = terraplane_domain::state::outputs(body);
    crate::vars::secret_masker(st, stack).await?.mask_json(&mut outputs);
    let v = NewStateVersion {
        body,
        meta: &meta,
        md5: hex::encode(md5),
        sha256: hex::encode(Sha256::digest(body)),
        outputs,
        run_id,
        created_by: p.name(),
    };
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    match tx.scope(p.org).write_state(stack.id, v, lock_id, now).await? {
        WriteOutcome::Stored(version) => {
            let after = serde_json::json!({
                "version": version.version, "serial": version.serial, "lineage": version.lineage,
                "sha256": version.sha256, "run_id": version.run_id.map(|r| r.to_string()),
            });
            let e = event(p, "state.write", "stack", &stack.slug, None, Some(after));
            tx.scope(p.org).append_audit(e, now).await?;
            tx.commit().await?;
            Ok(HttpResponse::Ok().finish())
        }
        WriteOutcome::AlreadyStored(_) => Ok(HttpResponse::Ok().finish()),
        WriteOutcome::Locked(l) => Ok(locked(&l.info)),
        WriteOutcome::LockNotHeld => Err(ApiError::conflict(
            "state_lock_not_held",
            format!("lock {:?} is not held on this state", lock_id.unwrap_or_default()),
        )),
        WriteOutcome::Rejected(e) => {
            tracing::info!(stack = %stack.slug, reason = %e, "state write rejected");
            Err(ApiError::conflict(e.code(), e.to_string()))
        }
    }
}

fn locked(holder_info: &str) -> HttpResponse {
    HttpResponse::build(StatusCode::LOCKED)
        .content_type("application/json")
        .body(holder_info.to_owned())
}

async fn lock(st: &AppState, p: &Principal, stack: &Stack, body: &[u8]) -> ApiResult<HttpResponse> {
    require_user(p, stack, Action::Write)?;
    let info: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("lock info is not valid JSON: {e}")))?;
    let id = info
        .get("ID")
        .and_then(|v| v.as_str())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::BadRequest("lock info needs a non-empty \"ID\"".into()))?
        .to_owned();
    let who = info.get("Who").and_then(|v| v.as_str()).unwrap_or_default();
    let holder = if who.is_empty() {
        p.name()
    } else {
        format!("{} ({who})", p.name())
    };
    let run_id = match p.actor {
        Actor::Run { run_id, .. } => Some(run_id),
        _ => None,
    };
    let new = NewLock {
        lock_id: id,
        info: info.to_string(),
        holder,
        run_id,
    };
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    match tx.scope(p.org).lock_state(stack.id, new, now).await? {
        LockOutcome::Acquired(l) => {
            let after =
                serde_json::json!({ "lock_id": l.lock_id, "holder": l.holder, "operation": info.get("Operation") });
            tx.scope(p.org)
                .append_audit(event(p, "state.lock", "stack", &stack.slug, None, Some(after)), now)
                .await?;
            tx.commit().await?;
            Ok(HttpResponse::Ok().content_type("application/json").body(l.info))
        }
        LockOutcome::Held(l) => Ok(locked(&l.info)),
    }
}

async fn unlock(st: &AppState, p: &Principal, stack: &Stack, body: &[u8]) -> ApiResult<HttpResponse> {
    let info: Option<serde_json::Value> = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        Some(
            serde_json::from_slice(body)
                .map_err(|e| ApiError::BadRequest(format!("unlock body is not valid JSON: {e}")))?,
        )
    };
    let id = info
        .as_ref()
        .and_then(|i| i.get("ID"))
        .and_then(|v| v.as_str())
        .filter(|s| !s.is_empty());
    // `terraform force-unlock` sends an empty body (OpenTofu: only an ID, other fields zero).
    let is_force = match &info {
        None => true,
        Some(i) => {
            i.get("Who").and_then(|v| v.as_str()).unwrap_or_default().is_empty()
                && i.get("Created")
                    .and_then(|v| v.as_str())
                    .is_none_or(|c| c.is_empty() || c.starts_with("0001-01-01"))
        }
    };
    if is_force {
        // Forcing someone else's lock open is for people, not for run tokens.
        if matches!(p.actor, Actor::Run { .. }) {
            return Err(ApiError::Forbidden("a run token cannot force-unlock state".into()));
        }
        require_user(p, stack, Action::Write)?;
    } else {
        require_user(p, stack, Action::Write)?;
    }
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    match tx.scope(p.org).unlock_state(stack.id, id, is_force).await {
        Ok(Ok(l)) => {
            let before = serde_json::json!({ "lock_id": l.lock_id, "holder": l.holder });
            let action = if is_force { "state.unlock_force" } else { "state.unlock" };
            tx.scope(p.org)
                .append_audit(event(p, action, "stack", &stack.slug, Some(before), None), now)
                .await?;
            tx.commit().await?;
            Ok(HttpResponse::Ok().finish())
        }
        Ok(Err(holder)) => Ok(locked(&holder.info)),
        // Unlocking an unlocked state is a no-op: retries after a lost response succeed.
        Err(terraplane_store::StoreError::NotFound(_)) => Ok(HttpResponse::Ok().finish()),
        Err(e) => Err(e.into()),
    }
}
