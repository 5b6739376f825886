//! Delivers every organization's audit events to the configured webhook, in order, at
//! least once: the audit table is the outbox, and a cursor per organization records the
//! last event the webhook acknowledged (2xx). A failing delivery is retried with
//! exponential backoff (capped), later events wait behind it, nothing is dropped.
//! Each POST carries `X-Terraplane-Signature-256: sha256=<hex HMAC-SHA256 of the body>`.

use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use terraplane_domain::Clock;
use terraplane_store::{AuditEvent, DeliveryCursor, Store, StoreError};
use tokio_util::sync::CancellationToken;

pub const SIGNATURE_HEADER: &str = "X-Terraplane-Signature-256";

pub struct AuditDelivery {
    store: Store,
    http: reqwest::Client,
    url: String,
    secret: String,
    clock: Arc<dyn Clock>,
    max_backoff: i64,
}

/// `sha256=<hex>` of the body under `secret`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(m) => m,
        // HMAC accepts keys of any length; this cannot happen.
        Err(_) => return String::new(),
    };
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

fn payload(org: &str, e: &AuditEvent) -> serde_json::Value {
    serde_json::json!({
        "organization": org,
        "event": {
            "id": e.id, "seq": e.seq, "actor": e.actor, "action": e.action,
            "target_kind": e.target_kind, "target": e.target, "before": e.before, "after": e.after,
            "request_id": e.request_id, "client_ip": e.client_ip,
            "at": e.created_at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "hash": e.hash, "prev_hash": e.prev_hash,
        }
    })
}

impl AuditDelivery {
    pub fn new(
        store: Store,
        url: String,
        secret: String,
        clock: Arc<dyn Clock>,
        max_backoff_secs: u64,
    ) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build()?;
        Ok(Self {
            store,
            http,
            url,
            secret,
            clock,
            max_backoff: max_backoff_secs as i64,
        })
    }

    pub async fn run_until_stopped(self, every: Duration, shutdown: CancellationToken) {
        loop {
            if let Err(e) = self.run_once().await {
                tracing::error!(error = %e, "audit delivery pass failed");
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(every) => {}
            }
        }
    }

    /// One pass over every organization; returns how many events were delivered.
    pub async fn run_once(&self) -> Result<usize, StoreError> {
        let mut delivered = 0;
        for org in self.store.list_orgs().await? {
            let scope = self.store.scope(org.id);
            let mut cursor = scope.audit_delivery().await?;
            let now = self.clock.now();
            if cursor.next_attempt_at.is_some_and(|t| t > now) {
                continue;
            }
            for e in scope.list_audit_after(cursor.last_seq, 100).await? {
                match self.post(&org.slug, &e).await {
                    Ok(()) => {
                        cursor = DeliveryCursor {
                            last_seq: e.seq,
                            ..Default::default()
                        };
                        scope.set_audit_delivery(&cursor, self.clock.now()).await?;
                        delivered += 1;
                    }
                    Err(reason) => {
                        let failures = cursor.failures.saturating_add(1);
                        let backoff = (1i64 << failures.clamp(0, 20)).min(self.max_backoff);
                        tracing::warn!(org = %org.slug, seq = e.seq, %reason, backoff, "audit webhook delivery failed");
                        cursor = DeliveryCursor {
                            last_seq: cursor.last_seq,
                            failures,
                            next_attempt_at: Some(self.clock.now() + chrono::Duration::seconds(backoff)),
                            last_error: Some(reason),
                        };
                        scope.set_audit_delivery(&cursor, self.clock.now()).await?;
                        break;
                    }
                }
            }
        }
        Ok(delivered)
    }

    async fn post(&self, org: &str, e: &AuditEvent) -> Result<(), String> {
        let body = payload(org, e).to_string();
        let sig = signature(self.secret.as_bytes(), body.as_bytes());
        let resp = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header(SIGNATURE_HEADER, sig)
            .header("X-Terraplane-Event", e.action.as_str())
            .body(body)
            .send()
            .await
            .map_err(|err| format!("cannot reach the webhook: {err}"))?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(format!("webhook answered {}", resp.status()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_is_hmac_sha256_hex() {
        // RFC 4231 test case 2.
        let s = signature(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            s,
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
