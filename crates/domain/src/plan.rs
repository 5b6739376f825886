//! Terraform plan JSON (`terraform show -json`): the change summary and the redaction that
//! must happen before anyone but the runner sees a plan.

use serde_json::Value;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlanSummary {
    pub add: i32,
    pub change: i32,
    pub destroy: i32,
}

impl PlanSummary {
    pub fn from_plan_json(plan: &Value) -> PlanSummary {
        let mut s = PlanSummary::default();
        let changes = plan.get("resource_changes").and_then(Value::as_array);
        for rc in changes.into_iter().flatten() {
            let actions: Vec<&str> = rc
                .pointer("/change/actions")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let create = actions.contains(&"create");
            let delete = actions.contains(&"delete");
            if create {
                s.add += 1;
            }
            if delete {
                s.destroy += 1;
            }
            if actions.contains(&"update") {
                s.change += 1;
            }
        }
        s
    }
}

pub const REDACTED: &str = "(sensitive value)";

/// Redacts a plan document in place: sensitive leaves of every change's before/after (per
/// `before_sensitive`/`after_sensitive`), sensitive outputs, and the raw `variables` block,
/// which Terraform never redacts.
pub fn redact_plan(plan: &mut Value) {
    if let Some(vars) = plan.get_mut("variables").and_then(Value::as_object_mut) {
        for v in vars.values_mut() {
            *v = serde_json::json!({ "value": REDACTED });
        }
    }
    for key in ["resource_changes", "resource_drift"] {
        if let Some(list) = plan.get_mut(key).and_then(Value::as_array_mut) {
            for rc in list {
                if let Some(change) = rc.get_mut("change") {
                    redact_change(change);
                }
            }
        }
    }
    if let Some(outs) = plan.get_mut("output_changes").and_then(Value::as_object_mut) {
        for change in outs.values_mut() {
            redact_change(change);
        }
    }
    for path in ["/planned_values/outputs", "/prior_state/values/outputs"] {
        if let Some(outs) = plan.pointer_mut(path).and_then(Value::as_object_mut) {
            for o in outs.values_mut() {
                if o.get("sensitive").and_then(Value::as_bool).unwrap_or(false)
                    && let Some(v) = o.get_mut("value")
                {
                    *v = Value::String(REDACTED.into());
                }
            }
        }
    }
    // The configuration echoes literal expressions: a sensitive output's constant and a
    // sensitive variable's default would otherwise show in clear.
    if let Some(m) = plan.pointer_mut("/configuration/root_module") {
        redact_module_config(m);
    }
    // planned_values / prior_state resource values carry sensitive attributes too.
    for path in ["/planned_values/root_module", "/prior_state/values/root_module"] {
        if let Some(m) = plan.pointer_mut(path) {
            redact_module_values(m);
        }
    }
}

fn redact_module_values(module: &mut Value) {
    if let Some(resources) = module.get_mut("resources").and_then(Value::as_array_mut) {
        for r in resources {
            let mask = r.get("sensitive_values").cloned().unwrap_or(Value::Null);
            if let Some(values) = r.get_mut("values") {
                redact_with_mask(values, &mask);
            }
        }
    }
    if let Some(children) = module.get_mut("child_modules").and_then(Value::as_array_mut) {
        for c in children {
            redact_module_values(c);
        }
    }
}

fn redact_module_config(module: &mut Value) {
    for (key, field) in [("outputs", "expression"), ("variables", "default")] {
        if let Some(items) = module.get_mut(key).and_then(Value::as_object_mut) {
            for item in items.values_mut() {
                if item.get("sensitive").and_then(Value::as_bool).unwrap_or(false)
                    && let Some(v) = item.get_mut(field)
                {
                    *v = Value::String(REDACTED.into());
                }
            }
        }
    }
    if let Some(calls) = module.get_mut("module_calls").and_then(Value::as_object_mut) {
        for call in calls.values_mut() {
            if let Some(m) = call.get_mut("module") {
                redact_module_config(m);
            }
        }
    }
}

fn redact_change(change: &mut Value) {
    for (value_key, mask_key) in [("before", "before_sensitive"), ("after", "after_sensitive")] {
        let mask = change.get(mask_key).cloned().unwrap_or(Value::Null);
        if let Some(v) = change.get_mut(value_key) {
            redact_with_mask(v, &mask);
        }
    }
}

/// `mask` mirrors `value`'s shape with `true` at sensitive leaves (or is `true` for all).
fn redact_with_mask(value: &mut Value, mask: &Value) {
    match mask {
        Value::Bool(true) if !value.is_null() => *value = Value::String(REDACTED.into()),
        Value::Object(m) => {
            if let Some(obj) = value.as_object_mut() {
                for (k, sub) in m {
                    if let Some(v) = obj.get_mut(k) {
                        redact_with_mask(v, sub);
                    }
                }
            }
        }
        Value::Array(m) => {
            if let Some(arr) = value.as_array_mut() {
                for (v, sub) in arr.iter_mut().zip(m) {
                    redact_with_mask(v, sub);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn summary_counts_replacements_as_add_and_destroy() {
        let plan = json!({"resource_changes": [
            {"change": {"actions": ["create"]}},
            {"change": {"actions": ["delete", "create"]}},
            {"change": {"actions": ["update"]}},
            {"change": {"actions": ["no-op"]}},
        ]});
        assert_eq!(
            PlanSummary::from_plan_json(&plan),
            PlanSummary {
                add: 2,
                change: 1,
                destroy: 1
            }
        );
    }

    #[test]
    fn redacts_sensitive_leaves_variables_and_outputs() {
        let mut plan = json!({
            "variables": {"password": {"value": "hunter2"}},
            "resource_changes": [{"change": {
                "actions": ["create"], "before": null,
                "after": {"name": "db", "password": "hunter2", "tags": {"a": "secret-tag"}},
                "after_sensitive": {"password": true, "tags": {"a": true}}
            }}],
            "output_changes": {"pw": {"actions": ["create"], "after": "hunter2", "after_sensitive": true}},
            "planned_values": {"outputs": {"pw": {"sensitive": true, "value": "hunter2"}},
                               "root_module": {"resources": [{"values": {"password": "hunter2", "name": "db"},
                                                              "sensitive_values": {"password": true}}]}}
        });
        redact_plan(&mut plan);
        let text = plan.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!text.contains("secret-tag"), "{text}");
        assert_eq!(plan["resource_changes"][0]["change"]["after"]["name"], "db");
    }

    #[test]
    fn redacts_a_real_terraform_plan() -> Result<(), serde_json::Error> {
        // `terraform show -json` of a plan with a sensitive variable (default
        // "defaultsecret") feeding a resource, and a sensitive output "hunter2".
        let mut plan: Value = serde_json::from_str(include_str!("../testdata/sensitive_plan.json"))?;
        assert!(plan.to_string().contains("hunter2") && plan.to_string().contains("defaultsecret"));
        redact_plan(&mut plan);
        let text = plan.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!text.contains("defaultsecret"), "{text}");
        assert_eq!(
            PlanSummary::from_plan_json(&plan),
            PlanSummary {
                add: 1,
                change: 0,
                destroy: 0
            }
        );
        Ok(())
    }
}
