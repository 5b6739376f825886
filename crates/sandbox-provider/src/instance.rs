//! `sandbox_instance`, the resource and the data source: a pretend EC2 instance in
//! `<root>/instance/<id>.json`. `name` and `instance_type` change in place.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tf_provider::schema::{AttributeConstraint, AttributeType, Block, Description, Schema};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, DataSource, Diagnostics, Resource};

use crate::cloud::{Cloud, Kind};
use crate::provider::Handle;
use crate::values::{
    Tags, attribute, error, error_at, known, new_id, report, schema_attributes, tags_attribute, tags_from_file,
    tags_to_file, validate_tags,
};

/// The file: what the sandbox "API" returns for an instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct InstanceFile {
    pub id: String,
    pub arn: String,
    pub name: String,
    pub instance_type: String,
    pub private_ip: String,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

/// The Terraform state (and configuration, and plan) of `sandbox_instance`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct InstanceState {
    pub id: Value<String>,
    pub arn: Value<String>,
    pub name: Value<String>,
    pub instance_type: Value<String>,
    pub private_ip: Value<String>,
    pub tags: Tags,
}

pub(crate) fn instance_arn(id: &str) -> String {
    format!("arn:sandbox:ec2:local:000000000000:instance/{id}")
}

/// 10.x.y.z from the id's last six hex digits, so the same id always has the same address.
pub(crate) fn private_ip(id: &str) -> String {
    let tail = id.get(id.len().saturating_sub(6)..).unwrap_or_default();
    let n = u32::from_str_radix(tail, 16).unwrap_or(0);
    format!("10.{}.{}.{}", (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff)
}

impl InstanceState {
    /// The state Read reports: the file as it is. `prior` decides only null versus empty tags.
    fn from_file(file: InstanceFile, prior: Option<&InstanceState>) -> Self {
        Self {
            id: Value::Value(file.id),
            arn: Value::Value(file.arn),
            name: Value::Value(file.name),
            instance_type: Value::Value(file.instance_type),
            private_ip: Value::Value(file.private_ip),
            tags: tags_from_file(file.tags, prior.map(|p| &p.tags)),
        }
    }

    /// The file for a planned state whose computed values are filled in.
    fn to_file(&self, diags: &mut Diagnostics) -> Option<InstanceFile> {
        let file = InstanceFile {
            id: known(diags, &self.id, "id")?,
            arn: known(diags, &self.arn, "arn")?,
            name: known(diags, &self.name, "name")?,
            instance_type: known(diags, &self.instance_type, "instance_type")?,
            private_ip: known(diags, &self.private_ip, "private_ip")?,
            tags: tags_to_file(&self.tags),
        };
        Some(file)
    }
}

/// Reads the instance with this id: `Ok(None)` when its file is gone, `Err` after reporting.
fn read_instance(diags: &mut Diagnostics, cloud: &Cloud, id: &str) -> Result<Option<InstanceFile>, ()> {
    match cloud.get::<InstanceFile>(Kind::Instance, id) {
        Ok(file) => Ok(file),
        Err(e) => {
            report(diags, "Cannot read sandbox instance", e);
            Err(())
        }
    }
}

fn instance_schema() -> Schema {
    let computed = |d| attribute(AttributeType::String, AttributeConstraint::Computed, d);
    let required = |d| attribute(AttributeType::String, AttributeConstraint::Required, d);
    Schema {
        version: 1,
        block: Block {
            version: 1,
            description: Description::plain("A sandbox instance, kept in <root>/instance/<id>.json."),
            attributes: schema_attributes(vec![
                ("id", computed("Instance id, `i-` and 17 hex digits.")),
                ("arn", computed("The instance's ARN.")),
                ("name", required("Name; changes in place.")),
                (
                    "instance_type",
                    required("Instance type, e.g. t3.micro; changes in place."),
                ),
                ("private_ip", computed("Private IPv4 address in 10.0.0.0/8.")),
                ("tags", tags_attribute(AttributeConstraint::Optional)),
            ]),
            ..Default::default()
        },
    }
}

pub(crate) struct InstanceResource {
    handle: Handle,
}

impl InstanceResource {
    pub(crate) fn new(handle: Handle) -> Self {
        Self { handle }
    }
}

#[async_trait]
impl Resource for InstanceResource {
    type State<'a> = InstanceState;
    type PrivateState<'a> = ValueEmpty;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        Some(instance_schema())
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        for (attr, value) in [("name", &config.name), ("instance_type", &config.instance_type)] {
            if value.as_ref_option().is_some_and(|v| v.is_empty()) {
                error_at(
                    diags,
                    format!("`{attr}` must not be empty"),
                    "",
                    AttributePath::new(attr),
                );
            }
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
        match read_instance(diags, cloud, &id) {
            Ok(Some(file)) => Some((InstanceState::from_file(file, Some(&state)), private_state)),
            Ok(None) => None,
            Err(()) => Some((state, private_state)),
        }
    }

    async fn plan_create<'a>(
        &self,
        _diags: &mut Diagnostics,
        proposed_state: Self::State<'a>,
        _config_state: Self::State<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>)> {
        let planned = InstanceState {
            id: Value::Unknown,
            arn: Value::Unknown,
            private_ip: Value::Unknown,
            ..proposed_state
        };
        Some((planned, ValueEmpty::Null))
    }

    async fn plan_update<'a>(
        &self,
        _diags: &mut Diagnostics,
        _prior_state: Self::State<'a>,
        proposed_state: Self::State<'a>,
        _config_state: Self::State<'a>,
        prior_private_state: Self::PrivateState<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<(Self::State<'a>, Self::PrivateState<'a>, Vec<AttributePath>)> {
        // Everything changes in place and the computed values keep the prior ones, which is
        // what Terraform proposes.
        Some((proposed_state, prior_private_state, vec![]))
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
        let id = new_id("i-");
        let state = InstanceState {
            arn: Value::Value(instance_arn(&id)),
            private_ip: Value::Value(private_ip(&id)),
            id: Value::Value(id.clone()),
            ..planned_state
        };
        let file = state.to_file(diags)?;
        if let Err(e) = cloud.create(Kind::Instance, &id, &file) {
            report(diags, "Cannot create sandbox instance", e);
            return None;
        }
        Some((state, planned_private_state))
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
        if let Err(e) = cloud.update(Kind::Instance, &file.id, &file) {
            report(diags, "Cannot update sandbox instance", e);
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
        if let Err(e) = cloud.delete(Kind::Instance, &id) {
            report(diags, "Cannot delete sandbox instance", e);
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
        match read_instance(diags, cloud, &id) {
            Ok(Some(file)) => Some((InstanceState::from_file(file, None), ValueEmpty::Null)),
            Ok(None) => {
                error(
                    diags,
                    "Cannot import non-existent sandbox instance",
                    format!("no file for instance {id:?} under {}", cloud.root().display()),
                );
                None
            }
            Err(()) => None,
        }
    }
}

/// The data source's state: look up by `id` or by `name`, get everything back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct InstanceLookup {
    pub id: Value<String>,
    pub name: Value<String>,
    pub arn: Value<String>,
    pub instance_type: Value<String>,
    pub private_ip: Value<String>,
    pub tags: Tags,
}

impl InstanceLookup {
    fn from_file(file: InstanceFile) -> Self {
        Self {
            id: Value::Value(file.id),
            name: Value::Value(file.name),
            arn: Value::Value(file.arn),
            instance_type: Value::Value(file.instance_type),
            private_ip: Value::Value(file.private_ip),
            // Computed only, so no configuration to match: always a map.
            tags: Value::Value(file.tags.into_iter().map(|(k, v)| (k, Value::Value(v))).collect()),
        }
    }
}

pub(crate) struct InstanceDataSource {
    handle: Handle,
}

impl InstanceDataSource {
    pub(crate) fn new(handle: Handle) -> Self {
        Self { handle }
    }
}

/// Finds the one instance with this name; none or several is an error.
fn find_by_name(diags: &mut Diagnostics, cloud: &Cloud, name: &str) -> Option<InstanceFile> {
    let all = match cloud.list::<InstanceFile>(Kind::Instance) {
        Ok(all) => all,
        Err(e) => {
            report(diags, "Cannot list sandbox instances", e);
            return None;
        }
    };
    let mut matching: Vec<_> = all.into_iter().filter(|(_, f)| f.name == name).collect();
    match matching.len() {
        1 => matching.pop().map(|(_, f)| f),
        0 => {
            error_at(
                diags,
                "No sandbox instance found",
                format!("no instance named {name:?} under {}", cloud.root().display()),
                AttributePath::new("name"),
            );
            None
        }
        _ => {
            let ids: Vec<_> = matching.iter().map(|(id, _)| id.as_str()).collect();
            error_at(
                diags,
                "Several sandbox instances match",
                format!("instances named {name:?}: {}; look one up by id", ids.join(", ")),
                AttributePath::new("name"),
            );
            None
        }
    }
}

#[async_trait]
impl DataSource for InstanceDataSource {
    type State<'a> = InstanceLookup;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        let computed = |d| attribute(AttributeType::String, AttributeConstraint::Computed, d);
        let lookup = |d| attribute(AttributeType::String, AttributeConstraint::OptionalComputed, d);
        Some(Schema {
            version: 1,
            block: Block {
                version: 1,
                description: Description::plain("Looks up one sandbox instance by `id` or by `name`."),
                attributes: schema_attributes(vec![
                    ("id", lookup("Instance id to look up.")),
                    (
                        "name",
                        lookup("Instance name to look up; exactly one instance must have it."),
                    ),
                    ("arn", computed("The instance's ARN.")),
                    ("instance_type", computed("Instance type.")),
                    ("private_ip", computed("Private IPv4 address.")),
                    ("tags", tags_attribute(AttributeConstraint::Computed)),
                ]),
                ..Default::default()
            },
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        match (config.id.is_null(), config.name.is_null()) {
            (true, true) => error(diags, "Missing lookup key", "set one of `id` or `name`"),
            (false, false) => error(diags, "Conflicting lookup keys", "set only one of `id` or `name`"),
            _ => {}
        }
        Some(())
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        config: Self::State<'a>,
        _meta: Self::ProviderMetaState<'a>,
    ) -> Option<Self::State<'a>> {
        let cloud = self.handle.cloud(diags)?;
        let file = if let Value::Value(id) = &config.id {
            match read_instance(diags, cloud, id) {
                Ok(Some(file)) => file,
                Ok(None) => {
                    error_at(
                        diags,
                        "No sandbox instance found",
                        format!("no instance {id:?} under {}", cloud.root().display()),
                        AttributePath::new("id"),
                    );
                    return None;
                }
                Err(()) => return None,
            }
        } else if let Value::Value(name) = &config.name {
            find_by_name(diags, cloud, name)?
        } else {
            error(diags, "Missing lookup key", "set one of `id` or `name`");
            return None;
        };
        Some(InstanceLookup::from_file(file))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> InstanceFile {
        InstanceFile {
            id: "i-0123456789abcdef0".into(),
            arn: instance_arn("i-0123456789abcdef0"),
            name: "web".into(),
            instance_type: "t3.micro".into(),
            private_ip: private_ip("i-0123456789abcdef0"),
            tags: BTreeMap::new(),
        }
    }

    #[test]
    fn private_ip_is_derived_from_the_id() {
        assert_eq!(private_ip("i-0123456789abcdef0"), "10.188.222.240");
        assert_eq!(private_ip("i-0"), "10.0.0.0");
        assert_eq!(private_ip(""), "10.0.0.0");
    }

    #[test]
    fn read_reports_the_file_and_keeps_null_tags() {
        let created = InstanceState::from_file(file(), None);
        assert_eq!(created.tags, Value::Null);
        assert_eq!(created.to_file(&mut Diagnostics::default()), Some(file()));

        let mut edited = file();
        edited.name = "renamed".into();
        edited.tags.insert("env".into(), "prod".into());
        let read = InstanceState::from_file(edited.clone(), Some(&created));
        assert_eq!(read.name, Value::Value("renamed".to_owned()));
        assert_eq!(read.to_file(&mut Diagnostics::default()), Some(edited));
    }

    #[test]
    fn unknown_values_do_not_reach_the_file() {
        let state = InstanceState {
            id: Value::Unknown,
            ..InstanceState::from_file(file(), None)
        };
        let mut diags = Diagnostics::default();
        assert_eq!(state.to_file(&mut diags), None);
        assert_eq!(diags.errors.len(), 1);
    }

    #[test]
    fn file_format_is_stable() {
        let mut f = file();
        f.tags.insert("env".into(), "dev".into());
        let json = serde_json::to_value(&f).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "id": "i-0123456789abcdef0",
                "arn": "arn:sandbox:ec2:local:000000000000:instance/i-0123456789abcdef0",
                "name": "web",
                "instance_type": "t3.micro",
                "private_ip": "10.188.222.240",
                "tags": {"env": "dev"},
            })
        );
        // `tags` may be left out by hand.
        let mut no_tags = json;
        no_tags.as_object_mut().unwrap().remove("tags");
        let parsed: InstanceFile = serde_json::from_value(no_tags).unwrap();
        assert!(parsed.tags.is_empty());
    }

    #[tokio::test]
    async fn data_source_finds_by_id_and_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let handle = Handle::default();
        let cloud = Cloud::new(dir.path().to_owned());
        handle.set(cloud.clone()).unwrap();
        cloud.create(Kind::Instance, &file().id, &file()).unwrap();
        let ds = InstanceDataSource::new(handle);

        let mut diags = Diagnostics::default();
        let by_id = InstanceLookup {
            id: Value::Value(file().id),
            ..Default::default()
        };
        let found = DataSource::read(&ds, &mut diags, by_id, ValueEmpty::Null)
            .await
            .unwrap();
        assert_eq!(found.name, Value::Value("web".to_owned()));
        assert_eq!(found.tags, Value::Value(BTreeMap::new()));

        let by_name = InstanceLookup {
            name: Value::Value("web".into()),
            ..Default::default()
        };
        let found = DataSource::read(&ds, &mut diags, by_name, ValueEmpty::Null)
            .await
            .unwrap();
        assert_eq!(found.id, Value::Value(file().id));
        assert!(diags.errors.is_empty(), "{diags:?}");

        let missing = InstanceLookup {
            name: Value::Value("nope".into()),
            ..Default::default()
        };
        assert!(
            DataSource::read(&ds, &mut diags, missing, ValueEmpty::Null)
                .await
                .is_none()
        );
        assert_eq!(diags.errors.len(), 1);
    }
}
