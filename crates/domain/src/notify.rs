//! Notifications: the events users subscribe to, the kinds of endpoint, and each kind's
//! payload (generic webhook, Slack incoming webhook, PagerDuty Events v2, Microsoft Teams
//! adaptive card). Rendering happens at delivery time, so secrets (a PagerDuty routing
//! key) never sit in the outbox.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::drift::DriftedResource;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    RunNeedsConfirmation,
    RunPendingReview,
    RunFailed,
    RunFinished,
    DriftDetected,
    DriftResolved,
    PolicyDenied,
}

impl EventKind {
    pub const ALL: [EventKind; 7] = [
        EventKind::RunNeedsConfirmation,
        EventKind::RunPendingReview,
        EventKind::RunFailed,
        EventKind::RunFinished,
        EventKind::DriftDetected,
        EventKind::DriftResolved,
        EventKind::PolicyDenied,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::RunNeedsConfirmation => "run_needs_confirmation",
            EventKind::RunPendingReview => "run_pending_review",
            EventKind::RunFailed => "run_failed",
            EventKind::RunFinished => "run_finished",
            EventKind::DriftDetected => "drift_detected",
            EventKind::DriftResolved => "drift_resolved",
            EventKind::PolicyDenied => "policy_denied",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndpointKind {
    /// A JSON POST signed with HMAC-SHA256 (`X-Terraplane-Signature-256`).
    Webhook,
    Slack,
    /// PagerDuty Events v2: drift and failures trigger, a resolved drift resolves.
    Pagerduty,
    Teams,
}

impl EndpointKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EndpointKind::Webhook => "webhook",
            EndpointKind::Slack => "slack",
            EndpointKind::Pagerduty => "pagerduty",
            EndpointKind::Teams => "teams",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            EndpointKind::Webhook,
            EndpointKind::Slack,
            EndpointKind::Pagerduty,
            EndpointKind::Teams,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// What happened, as the outbox keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub kind: EventKind,
    pub organization: String,
    pub space: String,
    pub stack: String,
    pub run_id: Option<String>,
    /// One line for people.
    pub summary: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<DriftedResource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where to look (the api's URL for the run or stack).
    pub url: String,
    pub at: DateTime<Utc>,
    /// A notification policy's own body for a webhook endpoint (sent as is, signed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
}

impl Event {
    /// PagerDuty's `dedup_key`: one incident per stack's drift (resolved by the same key),
    /// one per failed run.
    pub fn dedup_key(&self) -> String {
        match self.kind {
            EventKind::DriftDetected | EventKind::DriftResolved => {
                format!("terraplane:{}:{}:drift", self.organization, self.stack)
            }
            _ => format!(
                "terraplane:{}:{}:{}",
                self.organization,
                self.stack,
                self.run_id.as_deref().unwrap_or("-")
            ),
        }
    }
}

/// The request body for an endpoint of `kind`; `secret` is the PagerDuty routing key.
pub fn render(kind: EndpointKind, ev: &Event, secret: Option<&str>) -> Value {
    match kind {
        EndpointKind::Webhook if ev.payload.is_some() => ev.payload.clone().unwrap_or_default(),
        EndpointKind::Webhook => json!({
            "event": ev.kind.as_str(),
            "organization": ev.organization,
            "space": ev.space,
            "stack": ev.stack,
            "run_id": ev.run_id,
            "summary": ev.summary,
            "drift": ev.drift,
            "reason": ev.reason,
            "url": ev.url,
            "at": ev.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        }),
        EndpointKind::Slack => {
            let mut text = format!("*{}* {} <{}|details>", ev.stack, ev.summary, ev.url);
            for d in &ev.drift {
                text.push_str(&format!("\n• `{}` {} {}", d.address, d.action, d.attributes.join(", ")));
            }
            json!({
                "text": format!("{}: {}", ev.stack, ev.summary),
                "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
            })
        }
        EndpointKind::Pagerduty => {
            let action = match ev.kind {
                EventKind::DriftResolved => "resolve",
                _ => "trigger",
            };
            let mut body = json!({
                "routing_key": secret.unwrap_or_default(),
                "event_action": action,
                "dedup_key": ev.dedup_key(),
            });
            if action == "trigger" {
                body["payload"] = json!({
                    "summary": format!("{}: {}", ev.stack, ev.summary).chars().take(1024).collect::<String>(),
                    "source": format!("terraplane/{}/{}", ev.organization, ev.stack),
                    "severity": if ev.kind == EventKind::RunFailed { "error" } else { "warning" },
                    "timestamp": ev.at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    "component": ev.stack,
                    "group": ev.space,
                    "class": ev.kind.as_str(),
                    "custom_details": { "drift": ev.drift, "run_id": ev.run_id, "reason": ev.reason },
                });
                body["client"] = json!("Terraplane");
                body["client_url"] = json!(ev.url);
            }
            body
        }
        EndpointKind::Teams => {
            let mut blocks = vec![
                json!({"type": "TextBlock", "size": "Medium", "weight": "Bolder", "text": format!("{}: {}", ev.stack, ev.kind.as_str().replace('_', " "))}),
                json!({"type": "TextBlock", "wrap": true, "text": ev.summary}),
            ];
            for d in &ev.drift {
                blocks.push(json!({"type": "TextBlock", "wrap": true, "text": format!("{} {} {}", d.address, d.action, d.attributes.join(", "))}));
            }
            json!({
                "type": "message",
                "attachments": [{
                    "contentType": "application/vnd.microsoft.card.adaptive",
                    "contentUrl": null,
                    "content": {
                        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                        "type": "AdaptiveCard",
                        "version": "1.2",
                        "body": blocks,
                        "actions": [{"type": "Action.OpenUrl", "title": "Open", "url": ev.url}],
                    }
                }]
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind) -> Event {
        Event {
            kind,
            organization: "acme".into(),
            space: "root".into(),
            stack: "net".into(),
            run_id: Some("r1".into()),
            summary: "drift in 1 resource".into(),
            drift: vec![DriftedResource {
                address: "sandbox_instance.web".into(),
                action: "update".into(),
                attributes: vec!["tags".into()],
            }],
            reason: None,
            url: "https://tp.example.com/stacks/net".into(),
            at: DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z")
                .unwrap()
                .with_timezone(&Utc),
            payload: None,
        }
    }

    #[test]
    fn a_policy_payload_is_the_webhook_body() {
        let mut e = ev(EventKind::RunFailed);
        e.payload = Some(json!({"text": "net failed"}));
        assert_eq!(render(EndpointKind::Webhook, &e, None), json!({"text": "net failed"}));
        // Other kinds keep their own shape.
        assert!(render(EndpointKind::Slack, &e, None)["text"].is_string());
    }

    #[test]
    fn pagerduty_triggers_and_resolves_with_one_key() {
        let t = render(
            EndpointKind::Pagerduty,
            &ev(EventKind::DriftDetected),
            Some("R0UT1NGKEY"),
        );
        let r = render(
            EndpointKind::Pagerduty,
            &ev(EventKind::DriftResolved),
            Some("R0UT1NGKEY"),
        );
        assert_eq!(t["event_action"], "trigger");
        assert_eq!(r["event_action"], "resolve");
        assert_eq!(t["dedup_key"], r["dedup_key"]);
        assert_eq!(t["routing_key"], "R0UT1NGKEY");
        assert_eq!(t["payload"]["severity"], "warning");
        assert!(t["payload"]["summary"].as_str().unwrap().contains("net"));
        assert!(r.get("payload").is_none());
    }

    #[test]
    fn slack_teams_and_webhook_shapes() {
        let s = render(EndpointKind::Slack, &ev(EventKind::DriftDetected), None);
        assert_eq!(s["blocks"][0]["text"]["type"], "mrkdwn");
        assert!(
            s["blocks"][0]["text"]["text"]
                .as_str()
                .unwrap()
                .contains("sandbox_instance.web")
        );
        let t = render(EndpointKind::Teams, &ev(EventKind::RunFailed), None);
        assert_eq!(
            t["attachments"][0]["contentType"],
            "application/vnd.microsoft.card.adaptive"
        );
        assert_eq!(t["attachments"][0]["content"]["type"], "AdaptiveCard");
        let w = render(EndpointKind::Webhook, &ev(EventKind::DriftDetected), None);
        assert_eq!(w["event"], "drift_detected");
        assert_eq!(w["drift"][0]["attributes"][0], "tags");
        for k in EventKind::ALL {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
        }
    }
}
