//! The runner protocol under `/api/v1/runner`. A runner claims a run with its pool token
//! and gets a job spec holding a run token; every later call carries that run token and
//! the claim's fencing token, so a runner that lost its lease cannot write anything.

use actix_web::{HttpRequest, HttpResponse, web};
use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use terraplane_domain::plan::{PlanSummary, redact_plan};
use terraplane_domain::{RunEvent, RunId, RunPhase, RunState};
use terraplane_protocol::{
    AwsAssume, ClaimRequest, HeartbeatRequest, HeartbeatResponse, JobSpec, JobVariable, LogAppend, PhaseOutcome,
    PhaseResult, ProgressRequest,
};
use terraplane_store::{Run, RunUpdate};

use crate::AppState;
use crate::auth::{Actor, Principal, credential};
use crate::bus::BusEvent;
use crate::error::{ApiError, ApiResult};
use crate::service::{Shared, store_err};

pub const PREFIX: &str = "/api/v1/runner/runs/{run}";

/// Every route of the runner protocol under [`PREFIX`]; `config` registers exactly these.
pub const ROUTES: &[(&str, &str)] = &[
    ("POST", "/claim"),
    ("POST", "/heartbeat"),
    ("POST", "/logs"),
    ("POST", "/progress"),
    ("PUT", "/plan"),
    ("GET", "/plan"),
    ("POST", "/result"),
];

fn route_for(method: &str, path: &str) -> actix_web::Route {
    match (method, path) {
        ("POST", "/claim") => web::post().to(claim),
        ("POST", "/heartbeat") => web::post().to(heartbeat),
        ("POST", "/logs") => web::post().to(append_log),
        ("POST", "/progress") => web::post().to(progress),
        ("PUT", "/plan") => web::put().to(upload_plan),
        ("GET", "/plan") => web::get().to(download_plan),
        ("POST", "/result") => web::post().to(result),
        _ => web::route().to(HttpResponse::NotFound),
    }
}

pub fn config(cfg: &mut web::ServiceConfig, max_plan_bytes: usize) {
    let mut scope = web::scope(PREFIX).app_data(
        web::JsonConfig::default()
            .limit(max_plan_bytes.saturating_mul(2))
            .error_handler(|e, _| ApiError::BadRequest(format!("invalid request body: {e}")).into()),
    );
    for (method, path) in ROUTES {
        scope = scope.route(path, route_for(method, path));
    }
    cfg.service(scope);
}

fn run_id(raw: &str) -> ApiResult<RunId> {
    raw.parse().map_err(|_| ApiError::NotFound("run"))
}

/// The run token's principal, which must belong to the run in the path.
async fn run_principal(st: &AppState, req: &HttpRequest, id: RunId) -> ApiResult<Principal> {
    let p = st.principal(req).await?;
    match p.actor {
        Actor::Run { run_id, .. } if run_id == id => Ok(p),
        Actor::Run { .. } => Err(ApiError::NotFound("run")),
        _ => Err(ApiError::Forbidden("runner calls need the run's token".into())),
    }
}

/// Checks the fencing token against the run as stored.
async fn held_run(st: &AppState, p: &Principal, id: RunId, fencing: i64) -> ApiResult<Run> {
    let run = st.store.scope(p.org).get_run(id).await?;
    if run.fencing_token != fencing {
        return Err(ApiError::conflict(
            "stale_fencing_token",
            "the run was claimed by someone else",
        ));
    }
    Ok(run)
}

async fn claim(
    st: web::Data<Shared>,
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Json<ClaimRequest>,
) -> ApiResult<HttpResponse> {
    st.auth.verify_pool_token(&credential(&req).unwrap_or_default())?;
    let id = run_id(&path)?;
    let now = st.clock.now();
    let lease_until = now + chrono::Duration::seconds(st.cfg.scheduler.lease_secs as i64);
    let runner_id: String = body.runner_id.chars().take(128).collect();
    // Approval policies judge a queued run before anything runs (once: runs queued through
    // the api were judged when they were queued).
    if body.phase == RunPhase::Plan
        && let Ok(run) = st.store.get_run_any(id).await
        && run.state == RunState::Queued
    {
        let stale = run.review_stage.as_deref() == Some(terraplane_store::JUDGING)
            && run.updated_at < now - chrono::Duration::seconds(crate::policy::JUDGING_STALE_SECS);
        let run = if run.review_stage.is_none() || stale {
            let stack = st.store.scope(run.org_id).get_stack(run.stack_id).await?;
            crate::policy::apply_approval(&st, run, &stack, terraplane_domain::ReviewStage::Queued).await?
        } else {
            run
        };
        if run.state != RunState::Queued || run.review_stage.as_deref() == Some(terraplane_store::JUDGING) {
            let what = if run.state == RunState::Queued {
                "QUEUED and being judged by its approval policies".to_owned()
            } else {
                run.state.to_string()
            };
            return Err(ApiError::conflict(
                "run_not_claimable",
                format!("run is {what}; it cannot be claimed"),
            ));
        }
    }
    let run = st
        .store
        .claim_run(id, body.phase, &runner_id, lease_until, now)
        .await
        .map_err(store_err("run_not_claimable"))?;
    let spec = match job_spec(&st, &run, body.phase, lease_until, now).await {
        Ok(spec) => spec,
        Err(e) => {
            // The run is claimed but can't be given to the runner (a value that can't be
            // decrypted, say): fail it now with the reason rather than let the lease expire.
            // Its own message (the decryption's, the signer's), never a value: shown on the run.
            let reason = format!("the run could not be prepared: {e}");
            tracing::error!(run_id = %run.id, error = %e, "cannot build the job spec; failing the run");
            let upd = RunUpdate {
                fencing_token: Some(run.fencing_token),
                error: Some(reason),
                ..Default::default()
            };
            st.store
                .scope(run.org_id)
                .transition_run(run.id, RunEvent::Fail, upd, now)
                .await
                .map_err(store_err("invalid_run_state"))?;
            st.bus.publish(BusEvent::RunChanged(run.id));
            st.kick_scheduler();
            return Err(ApiError::conflict("run_failed", "the run could not be prepared"));
        }
    };
    st.bus.publish(BusEvent::RunChanged(run.id));
    Ok(HttpResponse::Ok().json(spec))
}

/// Everything the claimant needs for this phase.
async fn job_spec(
    st: &Shared,
    run: &Run,
    phase: RunPhase,
    lease_until: chrono::DateTime<chrono::Utc>,
    now: chrono::DateTime<chrono::Utc>,
) -> ApiResult<JobSpec> {
    let stack = st.store.scope(run.org_id).get_stack(run.stack_id).await?;
    let org = st.store.get_org(run.org_id).await?;
    let plan_sha256 = if phase == RunPhase::Apply {
        Some(st.store.scope(run.org_id).get_plan(run.id).await?.sha256)
    } else {
        None
    };
    let space = st.store.scope(run.org_id).get_space(stack.space_id).await?;
    let (values, also_mask) = crate::vars::run_values(st, &stack, run.run_type, phase).await?;
    let variables = values
        .into_iter()
        .map(|(v, value)| JobVariable {
            kind: v.kind,
            name: v.name,
            value,
            secret: v.secret,
        })
        .collect();
    let subject = crate::identity::Subject {
        org: &org.slug,
        space: &space.slug,
        stack: &stack.slug,
        run_id: run.id.to_string(),
        run_type: run.run_type,
        phase,
    };
    let oidc_token = st
        .issuer
        .issue(st, &subject, &crate::identity::default_audience(st), now)
        .await?;
    let aws = match st.store.scope(run.org_id).aws_for_stack(stack.id).await? {
        Some(i) => {
            let audience = i
                .audience
                .clone()
                .unwrap_or_else(|| crate::identity::default_audience(st));
            let role_arn = match (subject.scope(), &i.read_role_arn) {
                ("read", Some(read)) => read.clone(),
                _ => i.role_arn.clone(),
            };
            Some(AwsAssume {
                role_arn,
                web_identity_token: st.issuer.issue(st, &subject, &audience, now).await?,
                session_name: format!("terraplane-{}-{}", run.id, phase.as_str())
                    .chars()
                    .take(64)
                    .collect(),
                duration_secs: i.duration_secs,
            })
        }
        None => None,
    };
    let spec = JobSpec {
        run_id: run.id,
        phase,
        run_type: run.run_type,
        fencing_token: run.fencing_token,
        lease_expires_at: lease_until,
        run_token: st.auth.issue_run_token(run.id, stack.id, run.org_id, now)?,
        state_address: format!("{}/api/v1/orgs/{}/stacks/{}/state", st.public_url, org.slug, stack.slug),
        org: org.slug,
        stack: stack.slug,
        repository: stack.repository,
        branch: stack.branch,
        commit_sha: run.commit_sha.clone(),
        project_root: stack.project_root,
        tool: stack.tool,
        heartbeat_interval_secs: st.cfg.scheduler.heartbeat_secs,
        plan_sha256,
        log_seq_start: st.store.scope(run.org_id).next_log_seq(run.id).await?,
        variables,
        oidc_token: Some(oidc_token),
        aws,
        also_mask: terraplane_protocol::Redacted(also_mask),
        drift_detection: run.drift_detection,
    };
    Ok(spec)
}

async fn heartbeat(
    st: web::Data<Shared>,
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Json<HeartbeatRequest>,
) -> ApiResult<HttpResponse> {
    let id = run_id(&path)?;
    let p = match run_principal(&st, &req, id).await {
        Ok(p) => p,
        // The token dies with the run: tell the runner to stop rather than just "401".
        Err(ApiError::Unauthenticated(m)) if m.starts_with("run token no longer valid") => {
            return Err(ApiError::conflict("run_ended", m));
        }
        Err(e) => return Err(e),
    };
    let until = st.clock.now() + chrono::Duration::seconds(st.cfg.scheduler.lease_secs as i64);
    let run = st
        .store
        .scope(p.org)
        .renew_lease(id, body.fencing_token, until)
        .await
        .map_err(store_err("lease_lost"))?;
    Ok(HttpResponse::Ok().json(HeartbeatResponse {
        lease_expires_at: until,
        state: run.state,
        cancel_requested: run.cancel_requested || run.state == RunState::Canceled,
    }))
}

async fn append_log(
    st: web::Data<Shared>,
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Json<LogAppend>,
) -> ApiResult<HttpResponse> {
    let id = run_id(&path)?;
    let p = run_principal(&st, &req, id).await?;
    held_run(&st, &p, id, body.fencing_token).await?;
    if body.seq < 0 {
        return Err(ApiError::BadRequest("seq must not be negative".into()));
    }
    st.store
        .scope(p.org)
        .append_log(id, body.seq, body.phase.as_str(), &body.data, st.clock.now())
        .await
        .map_err(store_err("log_sequence_conflict"))?;
    st.bus.publish(BusEvent::LogAppended(id));
    Ok(HttpResponse::NoContent().finish())
}

async fn progress(
    st: web::Data<Shared>,
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Json<ProgressRequest>,
) -> ApiResult<HttpResponse> {
    let id = run_id(&path)?;
    let p = run_principal(&st, &req, id).await?;
    let event = match body.state {
        RunState::Initializing => RunEvent::Initializing,
        RunState::Planning => RunEvent::Planning,
        s => {
            return Err(ApiError::BadRequest(format!("a runner cannot report {s} as progress")));
        }
    };
    let upd = RunUpdate {
        fencing_token: Some(body.fencing_token),
        commit_sha: body.commit_sha.clone(),
        ..Default::default()
    };
    st.store
        .scope(p.org)
        .transition_run(id, event, upd, st.clock.now())
        .await
        .map_err(store_err("invalid_run_state"))?;
    st.bus.publish(BusEvent::RunChanged(id));
    Ok(HttpResponse::NoContent().finish())
}

#[derive(Serialize, Deserialize)]
pub struct PlanUpload {
    pub fencing_token: i64,
    /// The binary plan file, base64.
    pub plan_file: String,
    /// `terraform show -json` of the plan; redacted here before it is stored.
    pub plan_json: serde_json::Value,
}

async fn upload_plan(
    st: web::Data<Shared>,
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Json<PlanUpload>,
) -> ApiResult<HttpResponse> {
    let id = run_id(&path)?;
    let p = run_principal(&st, &req, id).await?;
    let run = held_run(&st, &p, id, body.fencing_token).await?;
    if run.state != RunState::Planning {
        return Err(ApiError::conflict(
            "invalid_run_state",
            format!("run is {}; plans are uploaded while PLANNING", run.state),
        ));
    }
    let file = base64::engine::general_purpose::STANDARD
        .decode(&body.plan_file)
        .map_err(|e| ApiError::BadRequest(format!("plan_file is not base64: {e}")))?;
    if file.len() > st.cfg.api.max_plan_bytes {
        return Err(ApiError::TooLarge(format!(
            "plan of {} bytes exceeds the limit",
            file.len()
        )));
    }
    let body = body.into_inner();
    let mut plan_json = body.plan_json;
    // Plan policies read the plan before redaction: they see sensitive values hashed.
    let stack = st.store.scope(p.org).get_stack(run.stack_id).await?;
    crate::policy::evaluate_plan(&st, &run, &stack, &plan_json).await?;
    redact_plan(&mut plan_json);
    let sha = hex::encode(Sha256::digest(&file));
    st.store
        .scope(p.org)
        .put_plan(id, file, plan_json.to_string(), sha.clone(), st.clock.now())
        .await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({ "sha256": sha })))
}

async fn download_plan(st: web::Data<Shared>, req: HttpRequest, path: web::Path<String>) -> ApiResult<HttpResponse> {
    let id = run_id(&path)?;
    let p = run_principal(&st, &req, id).await?;
    let plan = st.store.scope(p.org).get_plan(id).await?;
    Ok(HttpResponse::Ok()
        .content_type("application/octet-stream")
        .insert_header(("X-Plan-Sha256", plan.sha256))
        .body(plan.plan_file))
}

async fn result(
    st: web::Data<Shared>,
    req: HttpRequest,
    path: web::Path<String>,
    body: web::Json<PhaseResult>,
) -> ApiResult<HttpResponse> {
    let id = run_id(&path)?;
    let p = run_principal(&st, &req, id).await?;
    let scope = st.store.scope(p.org);
    let run = held_run(&st, &p, id, body.fencing_token).await?;
    let stack = scope.get_stack(run.stack_id).await?;
    let body = body.into_inner();
    let mut upd = RunUpdate {
        fencing_token: Some(body.fencing_token),
        ..Default::default()
    };
    let mut denied = false;
    let event = match (body.phase, body.outcome) {
        (RunPhase::Plan, PhaseOutcome::Planned { has_changes, summary }) => {
            let summary = if has_changes { summary } else { PlanSummary::default() };
            upd.plan = Some((summary, has_changes));
            let decision = crate::policy::plan_decision(&st, &run).await?;
            let mut note = format!("plan: +{} ~{} -{}", summary.add, summary.change, summary.destroy);
            if !decision.warnings.is_empty() {
                note.push_str(&format!("; plan policy warnings: {}", decision.warnings.join("; ")));
            }
            upd.note = Some(note);
            match decision.fail {
                Some(reason) => {
                    denied = true;
                    upd.error = Some(reason);
                    RunEvent::Fail
                }
                // A warning makes the run wait for confirmation even on an autodeploy stack.
                None => RunEvent::PlanFinished {
                    has_changes,
                    run_type: run.run_type,
                    autodeploy: stack.autodeploy && decision.warnings.is_empty(),
                },
            }
        }
        (RunPhase::Apply, PhaseOutcome::Applied { outputs }) => {
            upd.outputs = Some(outputs);
            RunEvent::ApplyFinished
        }
        (_, PhaseOutcome::Failed { reason }) => {
            upd.error = Some(reason);
            RunEvent::Fail
        }
        (phase, _) => {
            return Err(ApiError::BadRequest(format!(
                "outcome does not match the {} phase",
                phase.as_str()
            )));
        }
    };
    let check = match &event {
        RunEvent::PlanFinished { has_changes, .. } if run.drift_detection => Some(*has_changes),
        _ => None,
    };
    let run = scope
        .transition_run(id, event, upd, st.clock.now())
        .await
        .map_err(store_err("invalid_run_state"))?;
    if let Some(has_changes) = check {
        // The check's own result stands whatever happens here; a failure is logged.
        if let Err(e) = crate::drift::after_check(&st, &run, &stack, has_changes).await {
            tracing::error!(run_id = %run.id, error = %e, "cannot record the drift check");
        }
    }
    if denied {
        crate::notify::policy_denied(&st, &run, &stack).await;
    }
    // A tracked run that finished: trigger policies name the stacks to run next.
    if let Err(e) = crate::policy::after_finished(&st, &run, &stack).await {
        tracing::error!(run_id = %run.id, error = %e, "cannot apply trigger policies");
    }
    // A plan waiting for confirmation: approval policies judge it now.
    let run = if run.state == RunState::Unconfirmed {
        crate::policy::apply_approval(&st, run, &stack, terraplane_domain::ReviewStage::Unconfirmed).await?
    } else {
        run
    };
    crate::notify::after_transition(&st, &run, &stack).await;
    st.bus.publish(BusEvent::RunChanged(id));
    st.kick_scheduler();
    Ok(HttpResponse::Ok().json(serde_json::json!({ "state": run.state })))
}
