//! Terraform state documents and the rules for accepting a new version over a stored one
//! (Terraform's own `CheckValidImport`: same lineage and a higher serial).

use serde_json::Value;

/// What the backend needs to know about a state document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateMeta {
    /// `None` for documents without a visible serial (OpenTofu client-side encryption),
    /// which are stored opaquely.
    pub serial: Option<i64>,
    pub lineage: Option<String>,
    pub terraform_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("state is not valid JSON: {0}")]
    Malformed(String),
    #[error("state must be a JSON object")]
    NotAnObject,
    #[error("state serial must be a non-negative integer")]
    BadSerial,
    #[error("cannot write state with lineage {new:?} over state with lineage {stored:?}")]
    LineageMismatch { new: String, stored: String },
    #[error("cannot write state with serial {new} over stored serial {stored}")]
    StaleSerial { new: i64, stored: i64 },
    #[error("state with serial {0} is already stored with different content")]
    SerialReused(i64),
}

impl StateError {
    pub fn code(&self) -> &'static str {
        match self {
            StateError::Malformed(_) | StateError::NotAnObject | StateError::BadSerial => "state_malformed",
            StateError::LineageMismatch { .. } => "state_lineage_conflict",
            StateError::StaleSerial { .. } | StateError::SerialReused(_) => "state_serial_conflict",
        }
    }
}

pub fn parse_state(body: &[u8]) -> Result<StateMeta, StateError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| StateError::Malformed(e.to_string()))?;
    let obj = v.as_object().ok_or(StateError::NotAnObject)?;
    let serial = match obj.get("serial") {
        None => None,
        Some(s) => Some(
            s.as_u64()
                .and_then(|n| i64::try_from(n).ok())
                .ok_or(StateError::BadSerial)?,
        ),
    };
    Ok(StateMeta {
        serial,
        lineage: obj
            .get("lineage")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        terraform_version: obj.get("terraform_version").and_then(Value::as_str).map(str::to_owned),
    })
}

/// What to do with a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteDecision {
    /// Store it as a new version.
    Store,
    /// Identical to the stored latest version: accept and store nothing (idempotent retry).
    AlreadyStored,
}

/// Decides whether `new` (with its bytes' sha256) may be written over `stored`.
pub fn check_write(
    new: &StateMeta,
    new_sha256: &str,
    stored: Option<(&StateMeta, &str)>,
) -> Result<WriteDecision, StateError> {
    let Some((old, old_sha)) = stored else {
        return Ok(WriteDecision::Store);
    };
    if old_sha == new_sha256 {
        return Ok(WriteDecision::AlreadyStored);
    }
    // Opaque (encrypted) documents and legacy states without lineage can't be compared.
    let (Some(new_serial), Some(old_serial)) = (new.serial, old.serial) else {
        return Ok(WriteDecision::Store);
    };
    if let (Some(nl), Some(ol)) = (&new.lineage, &old.lineage)
        && nl != ol
    {
        return Err(StateError::LineageMismatch {
            new: nl.clone(),
            stored: ol.clone(),
        });
    }
    if new_serial == old_serial {
        return Err(StateError::SerialReused(new_serial));
    }
    if new_serial < old_serial {
        return Err(StateError::StaleSerial {
            new: new_serial,
            stored: old_serial,
        });
    }
    Ok(WriteDecision::Store)
}

/// Root outputs of a state document with sensitive values replaced.
pub fn outputs(body: &[u8]) -> Value {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Value::Object(Default::default());
    };
    let mut out = serde_json::Map::new();
    if let Some(outputs) = v.get("outputs").and_then(Value::as_object) {
        for (k, o) in outputs {
            let sensitive = o.get("sensitive").and_then(Value::as_bool).unwrap_or(false);
            let value = if sensitive {
                Value::String("<sensitive>".into())
            } else {
                o.get("value").cloned().unwrap_or(Value::Null)
            };
            out.insert(k.clone(), serde_json::json!({ "value": value, "sensitive": sensitive }));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(serial: i64, lineage: &str) -> StateMeta {
        StateMeta {
            serial: Some(serial),
            lineage: Some(lineage.into()),
            terraform_version: None,
        }
    }

    #[test]
    fn parses_serial_and_lineage() {
        let m = parse_state(br#"{"version":4,"serial":3,"lineage":"abc","terraform_version":"1.15.0"}"#);
        assert_eq!(
            m,
            Ok(StateMeta {
                serial: Some(3),
                lineage: Some("abc".into()),
                terraform_version: Some("1.15.0".into())
            })
        );
        assert!(matches!(parse_state(b"{not json"), Err(StateError::Malformed(_))));
        assert_eq!(parse_state(b"[1]"), Err(StateError::NotAnObject));
        assert_eq!(parse_state(br#"{"serial":-1}"#), Err(StateError::BadSerial));
    }

    #[test]
    fn write_rules() {
        let old = meta(5, "L");
        assert_eq!(
            check_write(&meta(6, "L"), "n", Some((&old, "o"))),
            Ok(WriteDecision::Store)
        );
        assert_eq!(
            check_write(&meta(5, "L"), "o", Some((&old, "o"))),
            Ok(WriteDecision::AlreadyStored)
        );
        assert_eq!(
            check_write(&meta(5, "L"), "x", Some((&old, "o"))),
            Err(StateError::SerialReused(5))
        );
        assert_eq!(
            check_write(&meta(4, "L"), "x", Some((&old, "o"))),
            Err(StateError::StaleSerial { new: 4, stored: 5 })
        );
        assert!(matches!(
            check_write(&meta(9, "M"), "x", Some((&old, "o"))),
            Err(StateError::LineageMismatch { .. })
        ));
        assert_eq!(check_write(&meta(1, "M"), "x", None), Ok(WriteDecision::Store));
    }

    #[test]
    fn outputs_hide_sensitive_values() {
        let o = outputs(
            br#"{"outputs":{"a":{"value":"x","type":"string"},"s":{"value":"pw","type":"string","sensitive":true}}}"#,
        );
        assert_eq!(o["a"]["value"], "x");
        assert_eq!(o["s"]["value"], "<sensitive>");
    }
}
