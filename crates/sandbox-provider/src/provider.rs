//! The provider itself: its configuration (`root`, else `SANDBOX_ROOT`) and the resources and
//! data sources it serves, which share the configured cloud through a [`Handle`].

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tf_provider::schema::{AttributeConstraint, AttributeType, Block, Description, Schema};
use tf_provider::value::{Value, ValueEmpty};
use tf_provider::{AttributePath, Diagnostics, DynamicDataSource, DynamicResource, Provider};

use crate::bucket::BucketResource;
use crate::cloud::Cloud;
use crate::instance::{InstanceDataSource, InstanceResource};
use crate::security_group::SecurityGroupResource;
use crate::values::{attribute, error, error_at, schema_attributes};

/// The environment variable naming the root when the configuration does not.
pub const ROOT_ENV: &str = "SANDBOX_ROOT";

/// The cloud once `ConfigureProvider` ran. Terraform runs one provider process per provider
/// configuration, so it is set once; resources are built before that, hence the handle.
#[derive(Debug, Clone, Default)]
pub(crate) struct Handle(Arc<OnceLock<Cloud>>);

impl Handle {
    pub(crate) fn cloud(&self, diags: &mut Diagnostics) -> Option<&Cloud> {
        let cloud = self.0.get();
        if cloud.is_none() {
            error(
                diags,
                "Sandbox provider not configured",
                "Terraform called the provider before configuring it",
            );
        }
        cloud
    }

    pub(crate) fn set(&self, cloud: Cloud) -> Result<(), String> {
        let current = self.0.get_or_init(|| cloud.clone());
        if *current != cloud {
            return Err(format!(
                "already configured with root {}, now asked for {}",
                current.root().display(),
                cloud.root().display()
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ProviderConfig {
    pub root: Value<String>,
}

/// The root from the configuration, else from the environment (`SANDBOX_ROOT`).
pub(crate) fn resolve_root(config: &Value<String>, env: Option<OsString>) -> Result<PathBuf, String> {
    match config {
        Value::Value(root) if root.is_empty() => Err("`root` must not be empty".into()),
        Value::Value(root) => Ok(PathBuf::from(root)),
        Value::Unknown => Err("`root` must be known when the provider is configured".into()),
        Value::Null => match env {
            Some(root) if !root.is_empty() => Ok(PathBuf::from(root)),
            _ => Err(format!(
                "set `root` in the provider configuration or the {ROOT_ENV} environment variable"
            )),
        },
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct SandboxProvider {
    handle: Handle,
}

#[async_trait]
impl Provider for SandboxProvider {
    type Config<'a> = ProviderConfig;
    type MetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        Some(Schema {
            version: 1,
            block: Block {
                version: 1,
                description: Description::plain(
                    "A pretend cloud kept as JSON files, one per resource, at <root>/<kind>/<id>.json.",
                ),
                attributes: schema_attributes(vec![(
                    "root",
                    attribute(
                        AttributeType::String,
                        AttributeConstraint::Optional,
                        "Directory holding the sandbox's files; defaults to $SANDBOX_ROOT.",
                    ),
                )]),
                ..Default::default()
            },
        })
    }

    async fn configure<'a>(
        &self,
        diags: &mut Diagnostics,
        _terraform_version: String,
        config: Self::Config<'a>,
    ) -> Option<()> {
        let root = match resolve_root(&config.root, std::env::var_os(ROOT_ENV)) {
            Ok(root) => root,
            Err(detail) => {
                error_at(diags, "No sandbox root", detail, AttributePath::new("root"));
                return Some(());
            }
        };
        if let Err(detail) = self.handle.set(Cloud::new(root)) {
            error(diags, "Sandbox provider reconfigured", detail);
        }
        Some(())
    }

    fn get_resources(&self, _diags: &mut Diagnostics) -> Option<HashMap<String, Box<dyn DynamicResource>>> {
        let mut resources: HashMap<String, Box<dyn DynamicResource>> = HashMap::new();
        resources.insert("instance".into(), Box::new(InstanceResource::new(self.handle.clone())));
        resources.insert(
            "security_group".into(),
            Box::new(SecurityGroupResource::new(self.handle.clone())),
        );
        resources.insert("bucket".into(), Box::new(BucketResource::new(self.handle.clone())));
        Some(resources)
    }

    fn get_data_sources(&self, _diags: &mut Diagnostics) -> Option<HashMap<String, Box<dyn DynamicDataSource>>> {
        let mut sources: HashMap<String, Box<dyn DynamicDataSource>> = HashMap::new();
        sources.insert(
            "instance".into(),
            Box::new(InstanceDataSource::new(self.handle.clone())),
        );
        Some(sources)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_comes_from_config_then_env() {
        let env = Some(OsString::from("/from/env"));
        assert_eq!(
            resolve_root(&Value::Value("/from/config".into()), env.clone()),
            Ok(PathBuf::from("/from/config"))
        );
        assert_eq!(resolve_root(&Value::Null, env), Ok(PathBuf::from("/from/env")));
        let err = resolve_root(&Value::Null, None).unwrap_err();
        assert!(err.contains("SANDBOX_ROOT"), "{err}");
        assert!(resolve_root(&Value::Null, Some(OsString::new())).is_err());
        assert!(resolve_root(&Value::Value(String::new()), None).is_err());
        assert!(resolve_root(&Value::Unknown, None).is_err());
    }

    #[test]
    fn handle_is_set_once() {
        let handle = Handle::default();
        let mut diags = Diagnostics::default();
        assert!(handle.cloud(&mut diags).is_none());
        assert_eq!(diags.errors.len(), 1);
        handle.set(Cloud::new("/a".into())).unwrap();
        handle.set(Cloud::new("/a".into())).unwrap();
        assert!(handle.set(Cloud::new("/b".into())).is_err());
        assert_eq!(handle.cloud(&mut diags).unwrap().root(), std::path::Path::new("/a"));
    }
}
