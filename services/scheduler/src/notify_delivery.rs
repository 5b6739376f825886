//! Delivers notifications from the outbox: each due delivery is POSTed to its endpoint,
//! rendered for the endpoint's kind at send time (webhook bodies signed with the endpoint's
//! secret). A 2xx delivers it; a 429 waits for `Retry-After`; anything else backs off
//! exponentially; after `max_attempts` the delivery is marked failed. Deliveries are
//! independent: one endpoint failing holds back no other.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use terraplane_config::NotificationsConfig;
use terraplane_domain::Clock;
use terraplane_domain::notify::{EndpointKind, Event, render};
use terraplane_store::{Attempt, Delivery, Store, StoreError};
use tokio_util::sync::CancellationToken;

use crate::audit_delivery::{SIGNATURE_HEADER, signature};

pub struct NotificationDelivery {
    store: Store,
    http: reqwest::Client,
    clock: Arc<dyn Clock>,
    cfg: NotificationsConfig,
}

impl NotificationDelivery {
    pub fn new(store: Store, clock: Arc<dyn Clock>, cfg: NotificationsConfig) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(cfg.timeout_secs.max(1)))
            .build()?;
        Ok(Self {
            store,
            http,
            clock,
            cfg,
        })
    }

    pub async fn run_until_stopped(self, shutdown: CancellationToken) {
        let every = Duration::from_millis(self.cfg.delivery_interval_ms.max(20));
        loop {
            if let Err(e) = self.run_once().await {
                tracing::error!(error = %e, "notification delivery failed");
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(every) => {}
            }
        }
    }

    /// Attempts every due delivery once; returns how many were attempted.
    pub async fn run_once(&self) -> Result<usize, StoreError> {
        let now = self.clock.now();
        let due = self.store.due_deliveries(now, 100).await?;
        let n = due.len();
        let sends = due.into_iter().map(|d| async move {
            let attempt = self.attempt(&d, now).await;
            if let Attempt::GiveUp { error, .. } = &attempt {
                tracing::warn!(delivery = %d.id, endpoint = %d.endpoint_id, %error, "notification delivery failed for good");
            }
            self.store.record_attempt(&d.id, attempt, now).await
        });
        for r in futures::future::join_all(sends).await {
            r?;
        }
        Ok(n)
    }

    fn backoff(&self, attempts_before: i32) -> i64 {
        let exp = 2i64.saturating_pow(attempts_before.clamp(0, 30) as u32);
        exp.min(self.cfg.max_backoff_secs as i64).max(1)
    }

    async fn attempt(&self, d: &Delivery, now: DateTime<Utc>) -> Attempt {
        let last = d.attempts + 1 >= self.cfg.max_attempts as i32;
        let fail = |code: Option<i32>, error: String, wait: i64| {
            if last {
                Attempt::GiveUp {
                    code,
                    error: format!("{error} (gave up after {} attempts)", d.attempts + 1),
                }
            } else {
                Attempt::Retry {
                    code,
                    error,
                    at: now + chrono::Duration::seconds(wait),
                }
            }
        };
        let (kind, url, secret) = match self.store.scope(d.org_id).endpoint_for_delivery(&d.endpoint_id).await {
            Ok(e) => e,
            Err(e) => {
                return Attempt::GiveUp {
                    code: None,
                    error: format!("endpoint unavailable: {e}"),
                };
            }
        };
        let event: Event = match serde_json::from_str(&d.payload) {
            Ok(e) => e,
            Err(e) => {
                return Attempt::GiveUp {
                    code: None,
                    error: format!("unreadable event: {e}"),
                };
            }
        };
        let body = render(kind, &event, secret.as_deref()).to_string();
        let mut req = self
            .http
            .post(&url)
            .header("content-type", "application/json")
            .header("User-Agent", "Terraplane-Notifications")
            .header("X-Terraplane-Event", event.kind.as_str())
            .header("X-Terraplane-Delivery", d.id.as_str());
        if kind == EndpointKind::Webhook
            && let Some(s) = &secret
        {
            req = req.header(SIGNATURE_HEADER, signature(s.as_bytes(), body.as_bytes()));
        }
        match req.body(body).send().await {
            Ok(r) if r.status().is_success() => Attempt::Delivered {
                code: r.status().as_u16() as i32,
            },
            Ok(r) => {
                let code = r.status().as_u16() as i32;
                let retry_after = r
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<i64>().ok());
                let text: String = r.text().await.unwrap_or_default().chars().take(300).collect();
                let wait = match (code, retry_after) {
                    (429, Some(s)) => s.clamp(1, self.cfg.max_backoff_secs as i64),
                    _ => self.backoff(d.attempts),
                };
                fail(Some(code), format!("HTTP {code}: {}", text.trim()), wait)
            }
            Err(e) => fail(None, format!("request failed: {e}"), self.backoff(d.attempts)),
        }
    }
}
