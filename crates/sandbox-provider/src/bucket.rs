//! `sandbox_bucket`: a pretend S3 bucket in `<root>/bucket/<name>.json`. The name is the id,
//! so changing it replaces the bucket; `versioning` defaults to false.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tf_provider::schema::{AttributeConstraint, AttributeType, Block, Description, Schema};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, Diagnostics, Resource};

use crate::cloud::{Cloud, Kind};
use crate::provider::Handle;
use crate::values::{
    Tags, attribute, error, error_at, known, report, schema_attributes, tags_attribute, tags_from_file, tags_to_file,
    validate_tags,
};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct BucketFile {
    pub id: String,
    pub arn: String,
    pub name: String,
    #[serde(default)]
    pub versioning: bool,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct BucketState {
    pub id: Value<String>,
    pub arn: Value<String>,
    pub name: Value<String>,
    pub versioning: Value<bool>,
    pub tags: Tags,
}

pub(crate) fn bucket_arn(name: &str) -> String {
    format!("arn:sandbox:s3:::{name}")
}

/// S3's rules, simplified: 3 to 63 lowercase letters, digits, '.' and '-', starting and
/// ending with a letter or digit. They also keep the name a valid file name.
fn bucket_name_problem(name: &str) -> Option<&'static str> {
    let ok_char = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-';
    let alnum = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if !(3..=63).contains(&name.len()) {
        Some("must be 3 to 63 characters long")
    } else if !name.bytes().all(ok_char) {
        Some("may contain only lowercase letters, digits, '.' and '-'")
    } else if !alnum(name.bytes().next()) || !alnum(name.bytes().last()) {
        Some("must start and end with a lowercase letter or a digit")
    } else {
        None
    }
}

impl BucketState {
    fn from_file(file: BucketFile, prior: Option<&BucketState>) -> Self {
        Self {
            id: Value::Value(file.id),
            arn: Value::Value(file.arn),
            name: Value::Value(file.name),
            versioning: Value::Value(file.versioning),
            tags: tags_from_file(file.tags, prior.map(|p| &p.tags)),
        }
    }

    fn to_file(&self, diags: &mut Diagnostics) -> Option<BucketFile> {
        Some(BucketFile {
            id: known(diags, &self.id, "id")?,
            arn: known(diags, &self.arn, "arn")?,
            name: known(diags, &self.name, "name")?,
            versioning: known(diags, &self.versioning, "versioning")?,
            tags: tags_to_file(&self.tags),
        })
    }

    /// The plan for this configuration: `versioning` unset means false (not "whatever it
    /// was"), and the id and ARN follow the name.
    fn planned(proposed: BucketState, config: &BucketState) -> BucketState {
        let versioning = if config.versioning.is_null() {
            Value::Value(false)
        } else {
            proposed.versioning
        };
        let (id, arn) = match &proposed.name {
            Value::Value(name) => (Value::Value(name.clone()), Value::Value(bucket_arn(name))),
            _ => (Value::Unknown, Value::Unknown),
        };
        BucketState {
            id,
            arn,
            versioning,
            ..proposed
        }
    }
}

fn read_bucket(diags: &mut Diagnostics, cloud: &Cloud, id: &str) -> Result<Option<BucketFile>, ()> {
    match cloud.get::<BucketFile>(Kind::Bucket, id) {
        Ok(file) => Ok(file),
        Err(e) => {
            report(diags, "Cannot read sandbox bucket", e);
            Err(())
        }
    }
}

pub(crate) struct BucketResource {
    handle: Handle,
}

impl BucketResource {
    pub(crate) fn new(handle: Handle) -> Self {
        Self { handle }
    }
}

#[async_trait]
impl Resource for BucketResource {
    type State<'a> = BucketState;
    type PrivateState<'a> = ValueEmpty;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        let computed = |d| attribute(AttributeType::String, AttributeConstraint::Computed, d);
        Some(Schema {
            version: 1,
            block: Block {
                version: 1,
                description: Description::plain("A sandbox bucket, kept in <root>/bucket/<name>.json."),
                attributes: schema_attributes(vec![
                    ("id", computed("The bucket's name.")),
                    ("arn", computed("The bucket's ARN.")),
                    (
                        "name",
                        attribute(
                            AttributeType::String,
                            AttributeConstraint::Required,
                            "Bucket name; changing it replaces the bucket.",
                        ),
                    ),
                    (
                        "versioning",
                        attribute(
                            AttributeType::Bool,
                            AttributeConstraint::OptionalComputed,
                            "Keep object versions; defaults to false.",
                        ),
                    ),
                    ("tags", tags_attribute(AttributeConstraint::Optional)),
                ]),
                ..Default::default()
            },
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        if let Value::Value(name) = &config.name
            && let Some(problem) = bucket_name_problem(name)
        {
            error_at(
                diags,
                "Invalid bucket name",
                format!("{name:?} {problem}"),
                AttributePath::new("name"),
            );
        }
        validate_tags(diags, &config.tags);
        Some(())
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        state: Self::State<'a>,
        private_state: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        // On errors the prior state goes back with the diagnostics: `None` would mean "gone".
        let Some(cloud) = self.handle.cloud(diags) else {
            return Some((state, private_state));
        };
        let Some(id) = known(diags, &state.id, "id") else {
            return Some((state, private_state));
        };
        match read_bucket(diags, cloud, &id) {
            Ok(Some(file)) => Some((BucketState::from_file(file, Some(&state)), private_state)),
            Ok(None) => None,
            Err(()) => Some((state, private_state)),
        }
    }

    async fn plan_create<'a>(
        &self,
        _diags: &mut Diagnostics,
        proposed_state: Self::State<'a>,
        config_state: Self::State<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        Some((BucketState::planned(proposed_state, &config_state), ValueEmpty::Null))
    }

    async fn plan_update<'a>(
        &self,
        _diags: &mut Diagnostics,
        prior_state: Self::State<'a>,
        proposed_state: Self::State<'a>,
        config_state: Self::State<'a>,
        prior_private_state: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>, Vec<AttributePath>)> {
        let mut replace = Vec::new();
        if proposed_state.name != prior_state.name {
            replace.push(AttributePath::new("name"));
        }
        Some((
            BucketState::planned(proposed_state, &config_state),
            prior_private_state,
            replace,
        ))
    }

    async fn plan_destroy<'a>(
        &self,
        _diags: &mut Diagnostics,
        _prior_state: Self::State<'a>,
        prior_private_state: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<Self::PrivateState<'a>> {
        Some(prior_private_state)
    }

    async fn create<'a>(
        &self,
        diags: &mut Diagnostics,
        planned_state: Self::State<'a>,
        _config_state: Self::State<'a>,
        planned_private_state: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let cloud = self.handle.cloud(diags)?;
        let file = planned_state.to_file(diags)?;
        if let Err(e) = cloud.create(Kind::Bucket, &file.id, &file) {
            report(diags, "Cannot create sandbox bucket", e);
            return None;
        }
        Some((planned_state, planned_private_state))
    }

    async fn update<'a>(
        &self,
        diags: &mut Diagnostics,
        _prior_state: Self::State<'a>,
        planned_state: Self::State<'a>,
        _config_state: Self::State<'a>,
        planned_private_state: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let cloud = self.handle.cloud(diags)?;
        let file = planned_state.to_file(diags)?;
        if let Err(e) = cloud.update(Kind::Bucket, &file.id, &file) {
            report(diags, "Cannot update sandbox bucket", e);
            return None;
        }
        Some((planned_state, planned_private_state))
    }

    async fn destroy<'a>(
        &self,
        diags: &mut Diagnostics,
        prior_state: Self::State<'a>,
        _planned_private_state: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<()> {
        let cloud = self.handle.cloud(diags)?;
        let id = known(diags, &prior_state.id, "id")?;
        if let Err(e) = cloud.delete(Kind::Bucket, &id) {
            report(diags, "Cannot delete sandbox bucket", e);
            return None;
        }
        Some(())
    }

    async fn import<'a>(
        &self,
        diags: &mut Diagnostics,
        id: String,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let cloud = self.handle.cloud(diags)?;
        match read_bucket(diags, cloud, &id) {
            Ok(Some(file)) => Some((BucketState::from_file(file, None), ValueEmpty::Null)),
            Ok(None) => {
                error(
                    diags,
                    "Cannot import non-existent sandbox bucket",
                    format!("no file for bucket {id:?} under {}", cloud.root().display()),
                );
                None
            }
            Err(()) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versioning_defaults_to_false_and_id_follows_name() {
        let config = BucketState {
            name: Value::Value("logs".into()),
            ..Default::default()
        };
        let prior = BucketState {
            versioning: Value::Value(true),
            ..config.clone()
        };
        // Terraform proposes the prior value for an unset optional+computed attribute.
        let planned = BucketState::planned(prior, &config);
        assert_eq!(planned.versioning, Value::Value(false));
        assert_eq!(planned.id, Value::Value("logs".to_owned()));
        assert_eq!(planned.arn, Value::Value("arn:sandbox:s3:::logs".to_owned()));

        let set = BucketState {
            versioning: Value::Value(true),
            ..config.clone()
        };
        assert_eq!(BucketState::planned(set.clone(), &set).versioning, Value::Value(true));

        let unknown_name = BucketState {
            name: Value::Unknown,
            ..Default::default()
        };
        let planned = BucketState::planned(unknown_name.clone(), &unknown_name);
        assert_eq!(planned.id, Value::Unknown);
        assert_eq!(planned.arn, Value::Unknown);
    }

    #[test]
    fn bucket_names_follow_s3_rules() {
        for good in ["abc", "my-bucket.logs", "0a9"] {
            assert_eq!(bucket_name_problem(good), None, "{good}");
        }
        for bad in ["ab", "Caps", "-lead", "trail.", "has space", "a/b", &"x".repeat(64)] {
            assert!(bucket_name_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn file_format_is_stable() {
        let state = BucketState {
            id: Value::Value("logs".into()),
            arn: Value::Value(bucket_arn("logs")),
            name: Value::Value("logs".into()),
            versioning: Value::Value(true),
            tags: Value::Null,
        };
        let file = state.to_file(&mut Diagnostics::default()).unwrap();
        assert_eq!(
            serde_json::to_value(&file).unwrap(),
            serde_json::json!({
                "id": "logs", "arn": "arn:sandbox:s3:::logs", "name": "logs", "versioning": true, "tags": {}
            })
        );
        assert_eq!(BucketState::from_file(file, Some(&state)), state);
    }
}
