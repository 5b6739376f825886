//! Between Terraform values (null / unknown / known) and the plain values in the files,
//! plus the schema helpers the resources share.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use rand::Rng;
use tf_provider::schema::{Attribute, AttributeConstraint, AttributeType, Description};
use tf_provider::value::Value;
use tf_provider::{AttributePath, Diagnostic, Diagnostics};

use crate::cloud::CloudError;

/// `tags`: a map of strings whose elements may be unknown while planning.
pub(crate) type Tags = Value<BTreeMap<String, Value<String>>>;

/// A list of strings whose elements may be unknown while planning.
pub(crate) type StringList = Value<Vec<Value<String>>>;

pub(crate) fn attribute(attr_type: AttributeType, constraint: AttributeConstraint, description: &str) -> Attribute {
    Attribute {
        attr_type,
        description: Description::plain(description),
        constraint,
        sensitive: false,
        deprecated: false,
    }
}

pub(crate) fn tags_attribute(constraint: AttributeConstraint) -> Attribute {
    attribute(
        AttributeType::Map(Box::new(AttributeType::String)),
        constraint,
        "Tags. Null and an empty map are the same to the sandbox; the state keeps whichever the configuration used.",
    )
}

pub(crate) fn schema_attributes(attrs: Vec<(&str, Attribute)>) -> HashMap<String, Attribute> {
    attrs.into_iter().map(|(name, a)| (name.to_owned(), a)).collect()
}

/// The known value at apply time. Terraform never applies unknowns, so an unknown or null
/// here is the provider's bug or a required value missing: an error either way.
pub(crate) fn known<T: Clone>(diags: &mut Diagnostics, value: &Value<T>, attr: &'static str) -> Option<T> {
    match value {
        Value::Value(v) => Some(v.clone()),
        Value::Null => {
            error_at(diags, format!("`{attr}` must be set"), "", AttributePath::new(attr));
            None
        }
        Value::Unknown => {
            error_at(
                diags,
                format!("`{attr}` is still unknown at apply"),
                "",
                AttributePath::new(attr),
            );
            None
        }
    }
}

/// Tags as the file keeps them: always a map (null is empty). Null elements are refused by
/// validation, so dropping them here loses nothing.
pub(crate) fn tags_to_file(tags: &Tags) -> BTreeMap<String, String> {
    match tags {
        Value::Value(map) => map
            .iter()
            .filter_map(|(k, v)| match v {
                Value::Value(v) => Some((k.clone(), v.clone())),
                _ => None,
            })
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// Tags as Read reports them: the file's map, except that an empty map stays null when the
/// state had null (otherwise `tags` unset in the configuration would diff against `{}`
/// forever). With no prior state (import) empty reads as null, the common configuration.
pub(crate) fn tags_from_file(file: BTreeMap<String, String>, prior: Option<&Tags>) -> Tags {
    if file.is_empty() && prior.is_none_or(|p| p.is_null()) {
        return Value::Null;
    }
    Value::Value(file.into_iter().map(|(k, v)| (k, Value::Value(v))).collect())
}

pub(crate) fn strings_to_file(list: &StringList) -> Vec<String> {
    list.iter()
        .flatten()
        .filter_map(|v| v.as_ref_option().cloned())
        .collect()
}

/// Same null-versus-empty rule as [`tags_from_file`], for lists.
pub(crate) fn strings_from_file(file: Vec<String>, prior: Option<&StringList>) -> StringList {
    if file.is_empty() && prior.is_none_or(|p| p.is_null()) {
        return Value::Null;
    }
    Value::Value(file.into_iter().map(Value::Value).collect())
}

/// Rejects null tag values: the sandbox stores strings, so a null would come back missing
/// and diff forever.
pub(crate) fn validate_tags(diags: &mut Diagnostics, tags: &Tags) {
    if let Value::Value(map) = tags {
        for (key, value) in map {
            if value.is_null() {
                error_at(
                    diags,
                    "Tag value must not be null",
                    format!("tag {key:?} is null; remove it or give it a string"),
                    AttributePath::new("tags").key(key.clone()),
                );
            }
        }
    }
}

/// `prefix` + 17 lowercase hex digits, the shape of EC2 ids.
pub(crate) fn new_id(prefix: &str) -> String {
    let mut rng = rand::thread_rng();
    let digits: String = (0..17)
        .map(|_| char::from_digit(rng.gen_range(0..16), 16).unwrap_or('0'))
        .collect();
    format!("{prefix}{digits}")
}

/// Adds an error about one attribute. Diagnostics are built here rather than with
/// tf-provider's constructors, which append a backtrace to the detail whenever
/// RUST_BACKTRACE is set and so bury the message in Terraform's output.
pub(crate) fn error_at(
    diags: &mut Diagnostics,
    summary: impl Into<Cow<'static, str>>,
    detail: impl Into<Cow<'static, str>>,
    attribute: AttributePath,
) {
    diags.add_error(Diagnostic {
        summary: summary.into(),
        detail: detail.into(),
        attribute,
    });
}

/// Adds an error about the whole resource (see [`error_at`]).
pub(crate) fn error(
    diags: &mut Diagnostics,
    summary: impl Into<Cow<'static, str>>,
    detail: impl Into<Cow<'static, str>>,
) {
    error_at(diags, summary, detail, AttributePath::root());
}

/// Reports a cloud failure as an error diagnostic; the message names the file.
pub(crate) fn report(diags: &mut Diagnostics, summary: &'static str, err: CloudError) {
    let summary = match err {
        CloudError::Invalid { .. } => "Invalid sandbox resource file",
        _ => summary,
    };
    error(diags, summary, err.to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_tags_keep_the_prior_nullness() {
        let empty = BTreeMap::new();
        assert_eq!(tags_from_file(empty.clone(), Some(&Value::Null)), Value::Null);
        assert_eq!(tags_from_file(empty.clone(), None), Value::Null);
        assert_eq!(
            tags_from_file(empty.clone(), Some(&Value::Value(BTreeMap::new()))),
            Value::Value(BTreeMap::new())
        );
        let one = BTreeMap::from([("a".to_owned(), "b".to_owned())]);
        let read = tags_from_file(one.clone(), Some(&Value::Null));
        assert_eq!(tags_to_file(&read), one);
        assert_eq!(tags_to_file(&Value::Null), empty);
    }

    #[test]
    fn empty_lists_keep_the_prior_nullness() {
        assert_eq!(strings_from_file(vec![], Some(&Value::Null)), Value::Null);
        assert_eq!(
            strings_from_file(vec![], Some(&Value::Value(vec![]))),
            Value::Value(vec![])
        );
        let read = strings_from_file(vec!["10.0.0.0/8".into()], None);
        assert_eq!(strings_to_file(&read), ["10.0.0.0/8"]);
    }

    #[test]
    fn ids_look_like_ec2_ids() {
        let id = new_id("i-");
        assert_eq!(id.len(), 19);
        assert!(
            id[2..]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_ne!(new_id("i-"), id);
    }

    #[test]
    fn null_tag_values_are_refused() {
        let mut diags = Diagnostics::default();
        let tags = Value::Value(BTreeMap::from([("a".to_owned(), Value::Null)]));
        validate_tags(&mut diags, &tags);
        assert_eq!(diags.errors.len(), 1);
    }
}
