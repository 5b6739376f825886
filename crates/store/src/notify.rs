//! Notification endpoints and the delivery outbox. An event is written once per matching
//! endpoint (subscribed to the event, in the stack's space or an ancestor, and matching the
//! stack's labels when the endpoint names some); the scheduler process delivers due rows.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set,
    TransactionTrait,
};
use terraplane_domain::notify::{EndpointKind, Event, EventKind};
use terraplane_domain::{OrgId, SpaceId};

use crate::entities::*;
use crate::error::{Result, StoreError};
use crate::records::{Stack, parse_id};
use crate::tenant::TenantScope;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotificationEndpoint {
    pub id: String,
    pub slug: String,
    pub name: String,
    pub kind: EndpointKind,
    pub url: String,
    pub space_id: SpaceId,
    pub events: Vec<EventKind>,
    pub stack_labels: Vec<String>,
    pub has_secret: bool,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<notification_endpoints::Model> for NotificationEndpoint {
    type Error = StoreError;
    fn try_from(m: notification_endpoints::Model) -> Result<Self> {
        let names: Vec<String> = serde_json::from_str(&m.events).unwrap_or_default();
        Ok(Self {
            kind: EndpointKind::parse(&m.kind)
                .ok_or_else(|| StoreError::Invalid(format!("corrupt kind {:?}", m.kind)))?,
            space_id: parse_id(&m.space_id)?,
            events: names.iter().filter_map(|n| EventKind::parse(n)).collect(),
            stack_labels: serde_json::from_str(&m.stack_labels).unwrap_or_default(),
            has_secret: m.secret.is_some(),
            id: m.id,
            slug: m.slug,
            name: m.name,
            url: m.url,
            created_at: m.created_at,
        })
    }
}

#[derive(Clone)]
pub struct NewEndpoint {
    pub slug: String,
    pub name: String,
    pub kind: EndpointKind,
    pub url: String,
    pub secret: Option<String>,
    pub events: Vec<EventKind>,
    pub stack_labels: Vec<String>,
    pub space_id: SpaceId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryStatus {
    Pending,
    Delivered,
    Failed,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "PENDING",
            DeliveryStatus::Delivered => "DELIVERED",
            DeliveryStatus::Failed => "FAILED",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub id: String,
    pub org_id: OrgId,
    pub endpoint_id: String,
    pub event: EventKind,
    pub stack_id: Option<String>,
    pub run_id: Option<String>,
    pub payload: String,
    pub status: DeliveryStatus,
    pub attempts: i32,
    pub last_status_code: Option<i32>,
    pub last_error: Option<String>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
}

impl TryFrom<notification_deliveries::Model> for Delivery {
    type Error = StoreError;
    fn try_from(m: notification_deliveries::Model) -> Result<Self> {
        Ok(Self {
            org_id: parse_id(&m.org_id)?,
            event: EventKind::parse(&m.event)
                .ok_or_else(|| StoreError::Invalid(format!("corrupt event {:?}", m.event)))?,
            status: match m.status.as_str() {
                "DELIVERED" => DeliveryStatus::Delivered,
                "FAILED" => DeliveryStatus::Failed,
                _ => DeliveryStatus::Pending,
            },
            id: m.id,
            endpoint_id: m.endpoint_id,
            stack_id: m.stack_id,
            run_id: m.run_id,
            payload: m.payload,
            attempts: m.attempts,
            last_status_code: m.last_status_code,
            last_error: m.last_error,
            next_attempt_at: m.next_attempt_at,
            created_at: m.created_at,
            delivered_at: m.delivered_at,
        })
    }
}

/// What one attempt came to.
#[derive(Clone, Debug)]
pub enum Attempt {
    Delivered {
        code: i32,
    },
    Retry {
        code: Option<i32>,
        error: String,
        at: DateTime<Utc>,
    },
    GiveUp {
        code: Option<i32>,
        error: String,
    },
}

impl<C: ConnectionTrait + TransactionTrait> TenantScope<'_, C> {
    pub async fn create_endpoint(&self, e: NewEndpoint, now: DateTime<Utc>) -> Result<NotificationEndpoint> {
        self.get_space(e.space_id).await?;
        let secret = match e.secret {
            Some(s) => {
                if self.keys.is_none() {
                    return Err(StoreError::Invalid(
                        "secrets cannot be stored without a master key".into(),
                    ));
                }
                Some(self.seal(s.into_bytes()).await?)
            }
            None => None,
        };
        let slug = e.slug.clone();
        let events: Vec<&str> = e.events.iter().map(|k| k.as_str()).collect();
        notification_endpoints::ActiveModel {
            id: Set(uuid::Uuid::new_v4().to_string()),
            org_id: Set(self.org_s.clone()),
            space_id: Set(e.space_id.to_string()),
            slug: Set(e.slug),
            name: Set(e.name),
            kind: Set(e.kind.as_str().into()),
            url: Set(e.url),
            secret: Set(secret),
            events: Set(serde_json::to_string(&events).unwrap_or_else(|_| "[]".into())),
            stack_labels: Set(serde_json::to_string(&e.stack_labels).unwrap_or_else(|_| "[]".into())),
            created_at: Set(now),
        }
        .insert(self.db)
        .await
        .map_err(|err| crate::conflict(err, format!("a notification endpoint with id {slug:?} already exists")))?
        .try_into()
    }

    pub async fn list_endpoints(&self) -> Result<Vec<NotificationEndpoint>> {
        notification_endpoints::Entity::find()
            .filter(notification_endpoints::Column::OrgId.eq(self.org_s.clone()))
            .order_by_asc(notification_endpoints::Column::Slug)
            .all(self.db)
            .await?
            .into_iter()
            .map(NotificationEndpoint::try_from)
            .collect()
    }

    pub async fn get_endpoint_by_slug(&self, slug: &str) -> Result<NotificationEndpoint> {
        notification_endpoints::Entity::find()
            .filter(notification_endpoints::Column::OrgId.eq(self.org_s.clone()))
            .filter(notification_endpoints::Column::Slug.eq(slug))
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("notification endpoint"))?
            .try_into()
    }

    /// Deletes an endpoint with its delivery history.
    pub async fn delete_endpoint(&self, slug: &str) -> Result<NotificationEndpoint> {
        let e = self.get_endpoint_by_slug(slug).await?;
        notification_deliveries::Entity::delete_many()
            .filter(notification_deliveries::Column::OrgId.eq(self.org_s.clone()))
            .filter(notification_deliveries::Column::EndpointId.eq(e.id.clone()))
            .exec(self.db)
            .await?;
        notification_endpoints::Entity::delete_by_id(e.id.clone())
            .exec(self.db)
            .await?;
        Ok(e)
    }

    /// An endpoint's URL, kind and secret (decrypted), for delivery.
    pub async fn endpoint_for_delivery(&self, id: &str) -> Result<(EndpointKind, String, Option<String>)> {
        let m = notification_endpoints::Entity::find_by_id(id.to_owned())
            .filter(notification_endpoints::Column::OrgId.eq(self.org_s.clone()))
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("notification endpoint"))?;
        let secret = match m.secret {
            Some(s) => Some(
                String::from_utf8(self.unseal(s).await?)
                    .map_err(|_| StoreError::Invalid("endpoint secret is not UTF-8".into()))?,
            ),
            None => None,
        };
        let kind =
            EndpointKind::parse(&m.kind).ok_or_else(|| StoreError::Invalid(format!("corrupt kind {:?}", m.kind)))?;
        Ok((kind, m.url, secret))
    }

    /// Writes `ev` to the outbox for every endpoint that wants it; returns how many.
    pub async fn enqueue_notification(&self, ev: &Event, stack: &Stack, now: DateTime<Utc>) -> Result<usize> {
        let endpoints = self.list_endpoints().await?;
        if endpoints.is_empty() {
            return Ok(0);
        }
        let spaces = self.list_spaces().await?;
        // The stack's space and its ancestors.
        let mut chain = vec![stack.space_id];
        let mut cur = spaces.iter().find(|s| s.id == stack.space_id).and_then(|s| s.parent_id);
        while let Some(p) = cur {
            if chain.contains(&p) {
                break;
            }
            chain.push(p);
            cur = spaces.iter().find(|s| s.id == p).and_then(|s| s.parent_id);
        }
        let mut n = 0;
        for e in endpoints {
            let wanted = e.events.contains(&ev.kind)
                && chain.contains(&e.space_id)
                && (e.stack_labels.is_empty() || e.stack_labels.iter().any(|l| stack.labels.contains(l)));
            if !wanted {
                continue;
            }
            self.insert_delivery(ev, stack, e.id, now).await?;
            n += 1;
        }
        Ok(n)
    }

    async fn insert_delivery(&self, ev: &Event, stack: &Stack, endpoint_id: String, now: DateTime<Utc>) -> Result<()> {
        let payload = serde_json::to_string(ev).map_err(|e| StoreError::Invalid(e.to_string()))?;
        notification_deliveries::ActiveModel {
            id: Set(uuid::Uuid::now_v7().to_string()),
            org_id: Set(self.org_s.clone()),
            endpoint_id: Set(endpoint_id),
            event: Set(ev.kind.as_str().into()),
            stack_id: Set(Some(stack.id.to_string())),
            run_id: Set(ev.run_id.clone()),
            payload: Set(payload),
            status: Set(DeliveryStatus::Pending.as_str().into()),
            attempts: Set(0),
            last_status_code: Set(None),
            last_error: Set(None),
            next_attempt_at: Set(Some(now)),
            created_at: Set(now),
            delivered_at: Set(None),
        }
        .insert(self.db)
        .await?;
        Ok(())
    }

    /// Queues `ev` for one endpoint (by id), whatever it subscribes to: a notification
    /// policy's routing. False when no such endpoint exists.
    pub async fn enqueue_to(&self, ev: &Event, stack: &Stack, endpoint: &str, now: DateTime<Utc>) -> Result<bool> {
        match self.get_endpoint_by_slug(endpoint).await {
            Ok(e) => {
                self.insert_delivery(ev, stack, e.id, now).await?;
                Ok(true)
            }
            Err(StoreError::NotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Builds the event for `stack` (and run) and writes it to the outbox for the endpoints
    /// that subscribe to it; returns the event. `base_url` is the api's public URL, for links.
    #[allow(clippy::too_many_arguments)]
    pub async fn notify(
        &self,
        kind: EventKind,
        stack: &Stack,
        run_id: Option<String>,
        summary: String,
        drift: Vec<terraplane_domain::drift::DriftedResource>,
        reason: Option<String>,
        base_url: &str,
        now: DateTime<Utc>,
    ) -> Result<Event> {
        let org = organizations::Entity::find_by_id(self.org_s.clone())
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("organization"))?;
        let space = self.get_space(stack.space_id).await?;
        let url = match &run_id {
            Some(r) => format!("{base_url}/#/stacks/{}/runs/{r}", stack.slug),
            None => format!("{base_url}/#/stacks/{}", stack.slug),
        };
        let ev = Event {
            kind,
            organization: org.slug,
            space: space.slug,
            stack: stack.slug.clone(),
            run_id,
            summary,
            drift,
            reason,
            url,
            at: now,
            payload: None,
        };
        self.enqueue_notification(&ev, stack, now).await?;
        Ok(ev)
    }

    /// Delivery history, newest first (of one endpoint when given).
    pub async fn deliveries(&self, endpoint_id: Option<&str>, limit: u64) -> Result<Vec<Delivery>> {
        let mut q = notification_deliveries::Entity::find()
            .filter(notification_deliveries::Column::OrgId.eq(self.org_s.clone()));
        if let Some(id) = endpoint_id {
            q = q.filter(notification_deliveries::Column::EndpointId.eq(id));
        }
        q.order_by_desc(notification_deliveries::Column::CreatedAt)
            .order_by_desc(notification_deliveries::Column::Id)
            .limit(limit)
            .all(self.db)
            .await?
            .into_iter()
            .map(Delivery::try_from)
            .collect()
    }
}

impl crate::Store {
    /// Pending deliveries due at `now`, every organization (the delivery worker).
    pub async fn due_deliveries(&self, now: DateTime<Utc>, limit: u64) -> Result<Vec<Delivery>> {
        notification_deliveries::Entity::find()
            .filter(notification_deliveries::Column::Status.eq(DeliveryStatus::Pending.as_str()))
            .filter(notification_deliveries::Column::NextAttemptAt.lte(now))
            .order_by_asc(notification_deliveries::Column::NextAttemptAt)
            .limit(limit)
            .all(&self.db)
            .await?
            .into_iter()
            .map(Delivery::try_from)
            .collect()
    }

    /// Records an attempt of a pending delivery.
    pub async fn record_attempt(&self, id: &str, attempt: Attempt, now: DateTime<Utc>) -> Result<()> {
        let (status, code, error, next, delivered) = match attempt {
            Attempt::Delivered { code } => (DeliveryStatus::Delivered, Some(code), None, None, Some(now)),
            Attempt::Retry { code, error, at } => (DeliveryStatus::Pending, code, Some(error), Some(at), None),
            Attempt::GiveUp { code, error } => (DeliveryStatus::Failed, code, Some(error), None, None),
        };
        notification_deliveries::Entity::update_many()
            .col_expr(notification_deliveries::Column::Status, Expr::value(status.as_str()))
            .col_expr(
                notification_deliveries::Column::Attempts,
                Expr::col(notification_deliveries::Column::Attempts).add(1),
            )
            .col_expr(notification_deliveries::Column::LastStatusCode, Expr::value(code))
            .col_expr(notification_deliveries::Column::LastError, Expr::value(error))
            .col_expr(notification_deliveries::Column::NextAttemptAt, Expr::value(next))
            .col_expr(notification_deliveries::Column::DeliveredAt, Expr::value(delivered))
            .filter(notification_deliveries::Column::Id.eq(id))
            .filter(notification_deliveries::Column::Status.eq(DeliveryStatus::Pending.as_str()))
            .exec(&self.db)
            .await?;
        Ok(())
    }
}
