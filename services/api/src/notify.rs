//! Notification endpoints (GraphQL operations) and the events the api raises: a run that
//! needs confirmation, failed or finished, and drift found or resolved. Events go to the
//! outbox (`TenantScope::notify`); the scheduler process delivers them.

use terraplane_domain::RunState;
use terraplane_domain::notify::{EndpointKind, EventKind};
use terraplane_store::{Delivery, NewEndpoint, NotificationEndpoint, Run, Stack};

use crate::AppState;
use crate::auth::{Action, Principal};
use crate::error::{ApiError, ApiResult};
use crate::service::{admin_space, event, slug_or_name, store_err};

/// Raises the event a run's new state calls for (drift checks raise drift events instead).
pub async fn after_transition(st: &AppState, run: &Run, stack: &Stack) {
    let (kind, summary) = match run.state {
        RunState::Unconfirmed => (
            EventKind::RunNeedsConfirmation,
            format!("run {} needs confirmation", run.id),
        ),
        RunState::Failed => (EventKind::RunFailed, format!("run {} failed", run.id)),
        RunState::Finished if !run.drift_detection => (EventKind::RunFinished, format!("run {} finished", run.id)),
        _ => return,
    };
    emit(st, kind, stack, Some(run), summary, Vec::new(), run.error.clone()).await;
}

/// A plan policy denied the run.
pub async fn policy_denied(st: &AppState, run: &Run, stack: &Stack) {
    let summary = format!("run {} was denied by a plan policy", run.id);
    emit(
        st,
        EventKind::PolicyDenied,
        stack,
        Some(run),
        summary,
        Vec::new(),
        run.error.clone(),
    )
    .await;
}

/// Queues an event for the endpoints subscribed to it, then lets the stack's notification
/// policies route it further. Failures are logged: an event never fails what raised it.
pub async fn emit(
    st: &AppState,
    kind: EventKind,
    stack: &Stack,
    run: Option<&Run>,
    summary: String,
    drift: Vec<terraplane_domain::drift::DriftedResource>,
    reason: Option<String>,
) {
    let scope = st.store.scope(stack.org_id);
    let now = st.clock.now();
    let run_id = run.map(|r| r.id.to_string());
    match scope
        .notify(kind, stack, run_id, summary, drift, reason, &st.public_url, now)
        .await
    {
        Ok(ev) => {
            if let Err(e) = crate::policy::route_notification(st, &ev, stack, run).await {
                tracing::error!(stack = %stack.slug, error = %e, "cannot apply notification policies");
            }
        }
        Err(e) => tracing::error!(stack = %stack.slug, error = %e, "cannot queue the notification"),
    }
}

pub struct EndpointInput {
    pub slug: Option<String>,
    pub name: String,
    pub kind: EndpointKind,
    pub url: String,
    pub secret: Option<String>,
    pub events: Vec<EventKind>,
    pub stack_labels: Vec<String>,
    pub space: Option<String>,
}

fn endpoint_json(e: &NotificationEndpoint) -> serde_json::Value {
    serde_json::json!({
        "slug": e.slug, "name": e.name, "kind": e.kind.as_str(), "url": e.url,
        "events": e.events.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        "stack_labels": e.stack_labels, "has_secret": e.has_secret, "space_id": e.space_id.to_string(),
    })
}

pub async fn list(st: &AppState, p: &Principal) -> ApiResult<Vec<NotificationEndpoint>> {
    p.require_member()?;
    let all = st.store.scope(p.org).list_endpoints().await?;
    Ok(all.into_iter().filter(|e| p.can_see(e.space_id)).collect())
}

async fn get(st: &AppState, p: &Principal, slug: &str, action: Action) -> ApiResult<NotificationEndpoint> {
    p.require_member()?;
    let e = st.store.scope(p.org).get_endpoint_by_slug(slug).await?;
    p.require_in(e.space_id, Action::Read, "notification endpoint")?;
    p.require_in(e.space_id, action, "notification endpoint")?;
    Ok(e)
}

pub async fn create(st: &AppState, p: &Principal, i: EndpointInput) -> ApiResult<NotificationEndpoint> {
    let space = admin_space(st, p, i.space.as_deref()).await?;
    if i.name.trim().is_empty() {
        return Err(ApiError::BadRequest("name must not be empty".into()));
    }
    let url = reqwest::Url::parse(&i.url).map_err(|e| ApiError::BadRequest(format!("url {:?}: {e}", i.url)))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ApiError::BadRequest("url must be http or https".into()));
    }
    if i.events.is_empty() {
        return Err(ApiError::BadRequest("subscribe to at least one event".into()));
    }
    if i.kind == EndpointKind::Pagerduty && i.secret.as_deref().is_none_or(|s| s.trim().is_empty()) {
        return Err(ApiError::BadRequest(
            "a PagerDuty endpoint needs its integration's routing key as the secret".into(),
        ));
    }
    if i.secret.as_deref().is_some_and(|s| s.len() > 4096) {
        return Err(ApiError::TooLarge("the secret is longer than 4096 bytes".into()));
    }
    let slug = slug_or_name(i.slug.as_deref(), &i.name)?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let e = tx
        .scope(p.org)
        .create_endpoint(
            NewEndpoint {
                slug: slug.to_string(),
                name: i.name,
                kind: i.kind,
                url: i.url,
                secret: i.secret,
                events: i.events,
                stack_labels: i.stack_labels,
                space_id: space.id,
            },
            now,
        )
        .await
        .map_err(store_err("endpoint_exists"))?;
    tx.scope(p.org)
        .append_audit(
            event(
                p,
                "notification.endpoint.create",
                "notification_endpoint",
                &e.slug,
                None,
                Some(endpoint_json(&e)),
            ),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(e)
}

pub async fn delete(st: &AppState, p: &Principal, slug: &str) -> ApiResult<NotificationEndpoint> {
    get(st, p, slug, Action::Admin).await?;
    let now = st.clock.now();
    let tx = st.store.begin().await?;
    let e = tx.scope(p.org).delete_endpoint(slug).await?;
    tx.scope(p.org)
        .append_audit(
            event(
                p,
                "notification.endpoint.delete",
                "notification_endpoint",
                slug,
                Some(endpoint_json(&e)),
                None,
            ),
            now,
        )
        .await?;
    tx.commit().await?;
    Ok(e)
}

/// Delivery history (of one endpoint, or of every endpoint the caller can see).
pub async fn deliveries(
    st: &AppState,
    p: &Principal,
    endpoint: Option<&str>,
    limit: u64,
) -> ApiResult<Vec<(Delivery, String, Option<String>)>> {
    p.require_member()?;
    let scope = st.store.scope(p.org);
    let visible = list(st, p).await?;
    let only = match endpoint {
        Some(slug) => Some(get(st, p, slug, Action::Read).await?.id),
        None => None,
    };
    let stacks = scope.list_stacks().await?;
    let all = scope.deliveries(only.as_deref(), limit.clamp(1, 500)).await?;
    Ok(all
        .into_iter()
        .filter_map(|d| {
            let e = visible.iter().find(|e| e.id == d.endpoint_id)?;
            let stack = d
                .stack_id
                .as_ref()
                .and_then(|id| stacks.iter().find(|s| &s.id.to_string() == id))
                .map(|s| s.slug.clone());
            Some((d, e.slug.clone(), stack))
        })
        .collect())
}
