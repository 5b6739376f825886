//! Drift detection: schedules (cron expressions in a time zone), what a refresh-only plan
//! says drifted (`resource_drift`: which resources, which attributes), and the reaction a
//! stack takes.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a stack does when a check finds drift.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reaction {
    /// Record it and notify.
    Alert,
    /// Also trigger a tracked run that converges (it waits for confirmation unless the
    /// stack deploys automatically).
    Reconcile,
}

impl Reaction {
    pub fn as_str(self) -> &'static str {
        match self {
            Reaction::Alert => "alert",
            Reaction::Reconcile => "reconcile",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "alert" => Some(Reaction::Alert),
            "reconcile" => Some(Reaction::Reconcile),
            _ => None,
        }
    }
}

/// A stack's drift status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DriftStatus {
    InSync,
    Drifted,
    /// Never checked.
    Unknown,
}

impl DriftStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DriftStatus::InSync => "IN_SYNC",
            DriftStatus::Drifted => "DRIFTED",
            DriftStatus::Unknown => "UNKNOWN",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "IN_SYNC" => Some(DriftStatus::InSync),
            "DRIFTED" => Some(DriftStatus::Drifted),
            "UNKNOWN" => Some(DriftStatus::Unknown),
            _ => None,
        }
    }
}

/// A cron expression (5 fields, or 6 with seconds) evaluated in a time zone.
#[derive(Clone, Debug)]
pub struct Schedule {
    cron: croner::Cron,
    tz: chrono_tz::Tz,
}

impl Schedule {
    /// Parses `expr` in `tz` (an IANA name such as `Europe/Paris`); the error says why not.
    pub fn parse(expr: &str, tz: &str) -> Result<Self, String> {
        let tz: chrono_tz::Tz = tz
            .parse()
            .map_err(|_| format!("unknown time zone {tz:?} (use an IANA name such as Europe/Paris)"))?;
        let cron = croner::Cron::from_str(expr.trim()).map_err(|e| format!("invalid cron expression {expr:?}: {e}"))?;
        Ok(Self { cron, tz })
    }

    /// The first time strictly after `after` that the schedule fires.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&self.tz);
        self.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }
}

/// One drifted resource of a refresh-only plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftedResource {
    pub address: String,
    /// `update`, or `delete` when the resource is gone.
    pub action: String,
    /// Top-level attributes whose value differs (empty for a deleted resource).
    pub attributes: Vec<String>,
}

/// The drifted resources of a (refresh-only) plan, from its `resource_drift`.
pub fn drifted_resources(plan: &Value) -> Vec<DriftedResource> {
    let Some(list) = plan.get("resource_drift").and_then(Value::as_array) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for rc in list {
        let address = rc.get("address").and_then(Value::as_str).unwrap_or_default().to_owned();
        let change = rc.get("change").cloned().unwrap_or_default();
        let actions: Vec<&str> = change
            .get("actions")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if actions == ["no-op"] || actions.is_empty() {
            continue;
        }
        let action = if actions.contains(&"delete") {
            "delete"
        } else {
            "update"
        };
        let mut attributes = Vec::new();
        if action == "update"
            && let (Some(Value::Object(before)), Some(Value::Object(after))) =
                (change.get("before"), change.get("after"))
        {
            for (k, v) in before {
                if after.get(k) != Some(v) {
                    attributes.push(k.clone());
                }
            }
            for k in after.keys() {
                if !before.contains_key(k) {
                    attributes.push(k.clone());
                }
            }
            attributes.sort();
        }
        out.push(DriftedResource {
            address,
            action: action.into(),
            attributes,
        });
    }
    out.sort_by(|a, b| a.address.cmp(&b.address));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_fire_in_their_time_zone() {
        let s = Schedule::parse("0 6 * * *", "Europe/Paris").unwrap();
        let now = DateTime::parse_from_rfc3339("2026-11-30T04:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        // 06:00 in Paris (UTC+1 in winter) is 05:00 UTC.
        assert_eq!(s.next_after(now).unwrap().to_rfc3339(), "2026-11-30T05:00:00+00:00");
        let at = s.next_after(now).unwrap();
        assert_eq!(
            s.next_after(at).unwrap().to_rfc3339(),
            "2026-12-01T05:00:00+00:00",
            "strictly after"
        );
        let every = Schedule::parse("*/15 * * * *", "UTC").unwrap();
        assert_eq!(every.next_after(now).unwrap().to_rfc3339(), "2026-11-30T04:15:00+00:00");
    }

    #[test]
    fn bad_schedules_say_why() {
        assert!(
            Schedule::parse("61 * * * *", "UTC")
                .unwrap_err()
                .contains("invalid cron expression")
        );
        assert!(Schedule::parse("not cron", "UTC").is_err());
        assert!(
            Schedule::parse("0 * * * *", "Mars/Base")
                .unwrap_err()
                .contains("unknown time zone")
        );
    }

    #[test]
    fn drift_names_resources_and_attributes() {
        let plan = serde_json::json!({
            "resource_drift": [
                {"address": "sandbox_instance.web", "change": {"actions": ["update"],
                    "before": {"id": "i-1", "tags": {"env": "prod"}, "name": "web"},
                    "after": {"id": "i-1", "tags": {"env": "hacked"}, "name": "web"}}},
                {"address": "sandbox_bucket.logs", "change": {"actions": ["delete"], "before": {"id": "logs"}, "after": null}},
                {"address": "sandbox_security_group.sg", "change": {"actions": ["update"],
                    "before": {"ingress": [], "id": "sg-1"}, "after": {"ingress": [{"from_port": 22}], "id": "sg-1"}}},
                {"address": "terraform_data.x", "change": {"actions": ["no-op"], "before": {}, "after": {}}}
            ]
        });
        let d = drifted_resources(&plan);
        assert_eq!(
            d,
            vec![
                DriftedResource {
                    address: "sandbox_bucket.logs".into(),
                    action: "delete".into(),
                    attributes: vec![]
                },
                DriftedResource {
                    address: "sandbox_instance.web".into(),
                    action: "update".into(),
                    attributes: vec!["tags".into()]
                },
                DriftedResource {
                    address: "sandbox_security_group.sg".into(),
                    action: "update".into(),
                    attributes: vec!["ingress".into()]
                },
            ]
        );
        assert!(drifted_resources(&serde_json::json!({})).is_empty());
    }
}
