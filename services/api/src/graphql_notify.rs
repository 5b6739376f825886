//! GraphQL for notification endpoints and their delivery history (merged into the root
//! types). An endpoint's secret is write-only (`hasSecret` says whether it has one).

use async_graphql::{Context, Enum, ID, InputObject, Object, SimpleObject};
use chrono::{DateTime, Utc};

use crate::graphql::{principal, state};
use crate::notify::{self, EndpointInput};

#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(name = "NotificationKind", remote = "terraplane_domain::notify::EndpointKind")]
pub enum GqlKind {
    /// JSON POST signed with HMAC-SHA256 of the body under the secret (`X-Terraplane-Signature-256: sha256=<hex>`).
    Webhook,
    Slack,
    /// PagerDuty Events v2; the secret is the routing key.
    Pagerduty,
    Teams,
}

#[derive(Enum, Copy, Clone, Eq, PartialEq, Debug)]
#[graphql(name = "NotificationEvent", remote = "terraplane_domain::notify::EventKind")]
pub enum GqlEvent {
    RunNeedsConfirmation,
    RunPendingReview,
    RunFailed,
    RunFinished,
    DriftDetected,
    DriftResolved,
    PolicyDenied,
}

#[derive(SimpleObject)]
pub struct NotificationEndpoint {
    id: ID,
    name: String,
    kind: GqlKind,
    url: String,
    space: String,
    events: Vec<GqlEvent>,
    /// Only stacks with one of these labels (all stacks when empty).
    stack_labels: Vec<String>,
    has_secret: bool,
    created_at: DateTime<Utc>,
}

#[derive(SimpleObject)]
pub struct NotificationDelivery {
    id: ID,
    endpoint: String,
    event: GqlEvent,
    stack: Option<String>,
    run_id: Option<String>,
    /// PENDING, DELIVERED or FAILED.
    status: String,
    attempts: i32,
    last_status_code: Option<i32>,
    last_error: Option<String>,
    next_attempt_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    delivered_at: Option<DateTime<Utc>>,
}

#[derive(InputObject)]
pub struct NotificationEndpointInput {
    id: Option<String>,
    name: String,
    kind: GqlKind,
    url: String,
    /// The webhook's HMAC key, or PagerDuty's routing key.
    secret: Option<String>,
    events: Vec<GqlEvent>,
    stack_labels: Option<Vec<String>>,
    /// Slug of the space (root when absent): the endpoint hears its stacks and its sub-spaces' stacks.
    space: Option<String>,
}

async fn endpoint_gql(
    ctx: &Context<'_>,
    e: terraplane_store::NotificationEndpoint,
) -> async_graphql::Result<NotificationEndpoint> {
    let p = principal(ctx)?;
    let space = state(ctx)
        .store
        .scope(p.org)
        .get_space(e.space_id)
        .await
        .map_err(crate::error::ApiError::from)?;
    Ok(NotificationEndpoint {
        id: ID(e.slug),
        name: e.name,
        kind: e.kind.into(),
        url: e.url,
        space: space.slug,
        events: e.events.into_iter().map(Into::into).collect(),
        stack_labels: e.stack_labels,
        has_secret: e.has_secret,
        created_at: e.created_at,
    })
}

#[derive(Default)]
pub struct NotifyQuery;

#[Object]
impl NotifyQuery {
    async fn notification_endpoints(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<NotificationEndpoint>> {
        let p = principal(ctx)?;
        let mut out = Vec::new();
        for e in notify::list(state(ctx), p).await? {
            out.push(endpoint_gql(ctx, e).await?);
        }
        Ok(out)
    }

    /// Delivery history, newest first.
    async fn notification_deliveries(
        &self,
        ctx: &Context<'_>,
        endpoint: Option<ID>,
        #[graphql(default = 50)] limit: i32,
    ) -> async_graphql::Result<Vec<NotificationDelivery>> {
        let p = principal(ctx)?;
        let list = notify::deliveries(
            state(ctx),
            p,
            endpoint.as_ref().map(|e| e.as_str()),
            limit.max(1) as u64,
        )
        .await?;
        Ok(list
            .into_iter()
            .map(|(d, endpoint, stack)| NotificationDelivery {
                id: ID(d.id),
                endpoint,
                event: d.event.into(),
                stack,
                run_id: d.run_id,
                status: d.status.as_str().into(),
                attempts: d.attempts,
                last_status_code: d.last_status_code,
                last_error: d.last_error,
                next_attempt_at: d.next_attempt_at,
                created_at: d.created_at,
                delivered_at: d.delivered_at,
            })
            .collect())
    }
}

#[derive(Default)]
pub struct NotifyMutation;

#[Object]
impl NotifyMutation {
    /// Creates an endpoint in a space; needs admin there.
    async fn notification_endpoint_create(
        &self,
        ctx: &Context<'_>,
        input: NotificationEndpointInput,
    ) -> async_graphql::Result<NotificationEndpoint> {
        let p = principal(ctx)?;
        let e = notify::create(
            state(ctx),
            p,
            EndpointInput {
                slug: input.id,
                name: input.name,
                kind: input.kind.into(),
                url: input.url,
                secret: input.secret,
                events: input.events.into_iter().map(Into::into).collect(),
                stack_labels: input.stack_labels.unwrap_or_default(),
                space: input.space,
            },
        )
        .await?;
        endpoint_gql(ctx, e).await
    }

    async fn notification_endpoint_delete(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> async_graphql::Result<NotificationEndpoint> {
        let p = principal(ctx)?;
        let e = notify::delete(state(ctx), p, &id).await?;
        endpoint_gql(ctx, e).await
    }
}
