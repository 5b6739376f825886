//! Contexts, the values of stacks and contexts, context attachments, AWS integrations,
//! the OIDC issuer's signing keys, and master key rotation. A secret value is sealed with
//! the organization's data key and leaves this module in clear only through
//! [`TenantScope::reveal_values`], which the claim of a run calls.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder, Set,
    TransactionTrait,
};
use terraplane_domain::vars::{Keyed, VarKind};
use terraplane_domain::{OrgId, SpaceId, StackId};

use crate::entities::*;
use crate::error::{Result, StoreError};
use crate::records::parse_id;
use crate::tenant::TenantScope;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Context {
    /// Internal id.
    pub id: String,
    pub slug: String,
    pub name: String,
    pub description: String,
    pub labels: Vec<String>,
    pub space_id: SpaceId,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl TryFrom<contexts::Model> for Context {
    type Error = StoreError;
    fn try_from(m: contexts::Model) -> Result<Self> {
        Ok(Self {
            space_id: parse_id(&m.space_id)?,
            labels: serde_json::from_str(&m.labels).unwrap_or_default(),
            id: m.id,
            slug: m.slug,
            name: m.name,
            description: m.description,
            created_at: m.created_at,
            updated_at: m.updated_at,
        })
    }
}

#[derive(Clone, Debug)]
pub struct NewContext {
    pub slug: String,
    pub name: String,
    pub description: String,
    pub labels: Vec<String>,
    pub space_id: SpaceId,
}

/// Whose value it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    Stack(StackId),
    /// A context's internal id.
    Context(String),
}

impl Owner {
    fn key(&self) -> String {
        match self {
            Owner::Stack(id) => format!("stack:{id}"),
            Owner::Context(id) => format!("context:{id}"),
        }
    }
}

/// A stored value as the API may show it: a secret's value is never here.
#[derive(Clone, PartialEq, Eq)]
pub struct ConfigValue {
    pub kind: VarKind,
    pub name: String,
    pub secret: bool,
    pub apply_only: bool,
    pub checksum: String,
    /// The value of a plain (non-secret) entry.
    pub value: Option<String>,
    pub updated_at: DateTime<Utc>,
}

impl std::fmt::Debug for ConfigValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigValue")
            .field("kind", &self.kind)
            .field("name", &self.name)
            .field("secret", &self.secret)
            .field("checksum", &self.checksum)
            .finish_non_exhaustive()
    }
}

impl Keyed for ConfigValue {
    fn kind(&self) -> VarKind {
        self.kind
    }
    fn name(&self) -> &str {
        &self.name
    }
}

impl ConfigValue {
    fn from_model(m: &config_values::Model) -> Result<Self> {
        let kind = VarKind::parse(&m.kind).ok_or_else(|| StoreError::Invalid(format!("corrupt kind {:?}", m.kind)))?;
        Ok(Self {
            kind,
            name: m.name.clone(),
            secret: m.secret,
            apply_only: m.apply_only,
            checksum: m.checksum.clone(),
            value: if m.secret {
                None
            } else {
                Some(String::from_utf8_lossy(&m.value).into_owned())
            },
            updated_at: m.updated_at,
        })
    }
}

/// A value to set. Its name is checked by the caller.
#[derive(Clone)]
pub struct NewValue {
    pub kind: VarKind,
    pub name: String,
    pub value: String,
    pub secret: bool,
    pub apply_only: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContextAttachment {
    /// The context's internal id.
    pub context_id: String,
    pub stack_id: StackId,
    pub priority: i32,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<context_attachments::Model> for ContextAttachment {
    type Error = StoreError;
    fn try_from(m: context_attachments::Model) -> Result<Self> {
        Ok(Self {
            stack_id: parse_id(&m.stack_id)?,
            context_id: m.context_id,
            priority: m.priority,
            created_at: m.created_at,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwsIntegration {
    pub id: String,
    pub slug: String,
    pub name: String,
    pub space_id: SpaceId,
    /// Assumed for applies (and for plans when there is no read role).
    pub role_arn: String,
    /// Assumed for plans and proposed runs.
    pub read_role_arn: Option<String>,
    /// `aud` of the identity token exchanged with STS.
    pub audience: Option<String>,
    pub duration_secs: i32,
    pub created_at: DateTime<Utc>,
}

impl TryFrom<aws_integrations::Model> for AwsIntegration {
    type Error = StoreError;
    fn try_from(m: aws_integrations::Model) -> Result<Self> {
        Ok(Self {
            space_id: parse_id(&m.space_id)?,
            id: m.id,
            slug: m.slug,
            name: m.name,
            role_arn: m.role_arn,
            read_role_arn: m.read_role_arn,
            audience: m.audience,
            duration_secs: m.duration_secs,
            created_at: m.created_at,
        })
    }
}

#[derive(Clone, Debug)]
pub struct NewAwsIntegration {
    pub slug: String,
    pub name: String,
    pub space_id: SpaceId,
    pub role_arn: String,
    pub read_role_arn: Option<String>,
    pub audience: Option<String>,
    pub duration_secs: i32,
}

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

impl<C: ConnectionTrait + TransactionTrait> TenantScope<'_, C> {
    // ---- contexts ----

    pub async fn create_context(&self, c: NewContext, now: DateTime<Utc>) -> Result<Context> {
        self.get_space(c.space_id).await?;
        let slug = c.slug.clone();
        contexts::ActiveModel {
            id: Set(new_id()),
            org_id: Set(self.org_s.clone()),
            space_id: Set(c.space_id.to_string()),
            slug: Set(c.slug),
            name: Set(c.name),
            description: Set(c.description),
            labels: Set(serde_json::to_string(&c.labels).unwrap_or_else(|_| "[]".into())),
            created_at: Set(now),
            updated_at: Set(now),
        }
        .insert(self.db)
        .await
        .map_err(|e| crate::conflict(e, format!("a context with id {slug:?} already exists")))?
        .try_into()
    }

    pub async fn list_contexts(&self) -> Result<Vec<Context>> {
        contexts::Entity::find()
            .filter(contexts::Column::OrgId.eq(self.org_s.clone()))
            .order_by_asc(contexts::Column::Slug)
            .all(self.db)
            .await?
            .into_iter()
            .map(Context::try_from)
            .collect()
    }

    pub async fn get_context_by_slug(&self, slug: &str) -> Result<Context> {
        contexts::Entity::find()
            .filter(contexts::Column::OrgId.eq(self.org_s.clone()))
            .filter(contexts::Column::Slug.eq(slug))
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("context"))?
            .try_into()
    }

    /// Deletes a context with its values and attachments.
    pub async fn delete_context(&self, slug: &str) -> Result<Context> {
        let c = self.get_context_by_slug(slug).await?;
        config_values::Entity::delete_many()
            .filter(config_values::Column::OrgId.eq(self.org_s.clone()))
            .filter(config_values::Column::Owner.eq(Owner::Context(c.id.clone()).key()))
            .exec(self.db)
            .await?;
        context_attachments::Entity::delete_many()
            .filter(context_attachments::Column::OrgId.eq(self.org_s.clone()))
            .filter(context_attachments::Column::ContextId.eq(c.id.clone()))
            .exec(self.db)
            .await?;
        contexts::Entity::delete_by_id(c.id.clone()).exec(self.db).await?;
        Ok(c)
    }

    // ---- values ----

    fn values_q(&self, owner: &Owner) -> sea_orm::Select<config_values::Entity> {
        config_values::Entity::find()
            .filter(config_values::Column::OrgId.eq(self.org_s.clone()))
            .filter(config_values::Column::Owner.eq(owner.key()))
    }

    /// Sets a value, replacing the owner's value of the same name (whatever its kind).
    pub async fn set_value(&self, owner: &Owner, v: NewValue, now: DateTime<Utc>) -> Result<ConfigValue> {
        let checksum = self.checksum(v.value.as_bytes()).await?;
        let stored = if v.secret {
            let sealed = self.seal(v.value.into_bytes()).await?;
            if self.keys.is_none() {
                return Err(StoreError::Invalid(
                    "secrets cannot be stored without a master key".into(),
                ));
            }
            sealed
        } else {
            v.value.into_bytes()
        };
        let existing = self
            .values_q(owner)
            .filter(config_values::Column::Name.eq(v.name.clone()))
            .one(self.db)
            .await?;
        let m = match existing {
            Some(m) => {
                let mut a = m.into_active_model();
                a.kind = Set(v.kind.as_str().into());
                a.value = Set(stored);
                a.secret = Set(v.secret);
                a.apply_only = Set(v.apply_only);
                a.checksum = Set(checksum);
                a.updated_at = Set(now);
                a.update(self.db).await?
            }
            None => {
                config_values::ActiveModel {
                    id: Set(new_id()),
                    org_id: Set(self.org_s.clone()),
                    owner: Set(owner.key()),
                    kind: Set(v.kind.as_str().into()),
                    name: Set(v.name.clone()),
                    value: Set(stored),
                    secret: Set(v.secret),
                    apply_only: Set(v.apply_only),
                    checksum: Set(checksum),
                    created_at: Set(now),
                    updated_at: Set(now),
                }
                .insert(self.db)
                .await?
            }
        };
        ConfigValue::from_model(&m)
    }

    pub async fn unset_value(&self, owner: &Owner, name: &str) -> Result<ConfigValue> {
        let m = self
            .values_q(owner)
            .filter(config_values::Column::Name.eq(name))
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("variable"))?;
        config_values::Entity::delete_by_id(m.id.clone()).exec(self.db).await?;
        ConfigValue::from_model(&m)
    }

    pub async fn list_values(&self, owner: &Owner) -> Result<Vec<ConfigValue>> {
        self.values_q(owner)
            .order_by_asc(config_values::Column::Kind)
            .order_by_asc(config_values::Column::Name)
            .all(self.db)
            .await?
            .iter()
            .map(ConfigValue::from_model)
            .collect()
    }

    /// The owner's values with secrets decrypted: only for the job spec of a claimed run.
    pub async fn reveal_values(&self, owner: &Owner) -> Result<Vec<(ConfigValue, String)>> {
        let rows = self
            .values_q(owner)
            .order_by_asc(config_values::Column::Kind)
            .order_by_asc(config_values::Column::Name)
            .all(self.db)
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for m in rows {
            let plain = if m.secret {
                let raw = self.unseal(m.value.clone()).await?;
                String::from_utf8(raw).map_err(|_| StoreError::Invalid("secret is not UTF-8".into()))?
            } else {
                String::from_utf8_lossy(&m.value).into_owned()
            };
            out.push((ConfigValue::from_model(&m)?, plain));
        }
        Ok(out)
    }

    // ---- attachments ----

    /// Attaches a context to a stack, or changes the priority of an attachment.
    pub async fn attach_context(
        &self,
        context_id: &str,
        stack: StackId,
        priority: i32,
        now: DateTime<Utc>,
    ) -> Result<ContextAttachment> {
        let existing = context_attachments::Entity::find()
            .filter(context_attachments::Column::OrgId.eq(self.org_s.clone()))
            .filter(context_attachments::Column::ContextId.eq(context_id))
            .filter(context_attachments::Column::StackId.eq(stack.to_string()))
            .one(self.db)
            .await?;
        let m = match existing {
            Some(m) => {
                let mut a = m.into_active_model();
                a.priority = Set(priority);
                a.update(self.db).await?
            }
            None => {
                context_attachments::ActiveModel {
                    id: Set(new_id()),
                    org_id: Set(self.org_s.clone()),
                    context_id: Set(context_id.to_owned()),
                    stack_id: Set(stack.to_string()),
                    priority: Set(priority),
                    created_at: Set(now),
                }
                .insert(self.db)
                .await?
            }
        };
        m.try_into()
    }

    pub async fn detach_context(&self, context_id: &str, stack: StackId) -> Result<ContextAttachment> {
        let m = context_attachments::Entity::find()
            .filter(context_attachments::Column::OrgId.eq(self.org_s.clone()))
            .filter(context_attachments::Column::ContextId.eq(context_id))
            .filter(context_attachments::Column::StackId.eq(stack.to_string()))
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("context attachment"))?;
        context_attachments::Entity::delete_by_id(m.id.clone())
            .exec(self.db)
            .await?;
        m.try_into()
    }

    pub async fn stack_attachments(&self, stack: StackId) -> Result<Vec<ContextAttachment>> {
        context_attachments::Entity::find()
            .filter(context_attachments::Column::OrgId.eq(self.org_s.clone()))
            .filter(context_attachments::Column::StackId.eq(stack.to_string()))
            .all(self.db)
            .await?
            .into_iter()
            .map(ContextAttachment::try_from)
            .collect()
    }

    pub async fn context_attachments(&self, context_id: &str) -> Result<Vec<ContextAttachment>> {
        context_attachments::Entity::find()
            .filter(context_attachments::Column::OrgId.eq(self.org_s.clone()))
            .filter(context_attachments::Column::ContextId.eq(context_id))
            .order_by_asc(context_attachments::Column::CreatedAt)
            .all(self.db)
            .await?
            .into_iter()
            .map(ContextAttachment::try_from)
            .collect()
    }

    /// Removes everything that hangs off a stack being deleted.
    pub(crate) async fn delete_stack_config(&self, stack: StackId) -> Result<()> {
        config_values::Entity::delete_many()
            .filter(config_values::Column::OrgId.eq(self.org_s.clone()))
            .filter(config_values::Column::Owner.eq(Owner::Stack(stack).key()))
            .exec(self.db)
            .await?;
        context_attachments::Entity::delete_many()
            .filter(context_attachments::Column::OrgId.eq(self.org_s.clone()))
            .filter(context_attachments::Column::StackId.eq(stack.to_string()))
            .exec(self.db)
            .await?;
        aws_attachments::Entity::delete_many()
            .filter(aws_attachments::Column::OrgId.eq(self.org_s.clone()))
            .filter(aws_attachments::Column::StackId.eq(stack.to_string()))
            .exec(self.db)
            .await?;
        Ok(())
    }

    // ---- AWS integrations ----

    pub async fn create_aws_integration(&self, i: NewAwsIntegration, now: DateTime<Utc>) -> Result<AwsIntegration> {
        self.get_space(i.space_id).await?;
        let slug = i.slug.clone();
        aws_integrations::ActiveModel {
            id: Set(new_id()),
            org_id: Set(self.org_s.clone()),
            space_id: Set(i.space_id.to_string()),
            slug: Set(i.slug),
            name: Set(i.name),
            role_arn: Set(i.role_arn),
            read_role_arn: Set(i.read_role_arn),
            audience: Set(i.audience),
            duration_secs: Set(i.duration_secs),
            created_at: Set(now),
        }
        .insert(self.db)
        .await
        .map_err(|e| crate::conflict(e, format!("an AWS integration with id {slug:?} already exists")))?
        .try_into()
    }

    pub async fn list_aws_integrations(&self) -> Result<Vec<AwsIntegration>> {
        aws_integrations::Entity::find()
            .filter(aws_integrations::Column::OrgId.eq(self.org_s.clone()))
            .order_by_asc(aws_integrations::Column::Slug)
            .all(self.db)
            .await?
            .into_iter()
            .map(AwsIntegration::try_from)
            .collect()
    }

    pub async fn get_aws_integration_by_slug(&self, slug: &str) -> Result<AwsIntegration> {
        aws_integrations::Entity::find()
            .filter(aws_integrations::Column::OrgId.eq(self.org_s.clone()))
            .filter(aws_integrations::Column::Slug.eq(slug))
            .one(self.db)
            .await?
            .ok_or(StoreError::NotFound("AWS integration"))?
            .try_into()
    }

    /// Deletes an integration that no stack uses.
    pub async fn delete_aws_integration(&self, slug: &str) -> Result<AwsIntegration> {
        let i = self.get_aws_integration_by_slug(slug).await?;
        let used = self.aws_stacks(&i.id).await?;
        if !used.is_empty() {
            return Err(StoreError::Conflict(format!(
                "AWS integration {slug:?} is attached to {} stack(s); detach it first",
                used.len()
            )));
        }
        aws_integrations::Entity::delete_by_id(i.id.clone())
            .exec(self.db)
            .await?;
        Ok(i)
    }

    /// Attaches an integration to a stack (replacing the stack's current one).
    pub async fn attach_aws(&self, integration_id: &str, stack: StackId, now: DateTime<Utc>) -> Result<()> {
        aws_attachments::Entity::delete_many()
            .filter(aws_attachments::Column::OrgId.eq(self.org_s.clone()))
            .filter(aws_attachments::Column::StackId.eq(stack.to_string()))
            .exec(self.db)
            .await?;
        aws_attachments::ActiveModel {
            stack_id: Set(stack.to_string()),
            org_id: Set(self.org_s.clone()),
            integration_id: Set(integration_id.to_owned()),
            created_at: Set(now),
        }
        .insert(self.db)
        .await?;
        Ok(())
    }

    pub async fn detach_aws(&self, stack: StackId) -> Result<AwsIntegration> {
        let i = self
            .aws_for_stack(stack)
            .await?
            .ok_or(StoreError::NotFound("AWS integration attachment"))?;
        aws_attachments::Entity::delete_many()
            .filter(aws_attachments::Column::OrgId.eq(self.org_s.clone()))
            .filter(aws_attachments::Column::StackId.eq(stack.to_string()))
            .exec(self.db)
            .await?;
        Ok(i)
    }

    pub async fn aws_for_stack(&self, stack: StackId) -> Result<Option<AwsIntegration>> {
        let Some(a) = aws_attachments::Entity::find()
            .filter(aws_attachments::Column::OrgId.eq(self.org_s.clone()))
            .filter(aws_attachments::Column::StackId.eq(stack.to_string()))
            .one(self.db)
            .await?
        else {
            return Ok(None);
        };
        aws_integrations::Entity::find_by_id(a.integration_id)
            .filter(aws_integrations::Column::OrgId.eq(self.org_s.clone()))
            .one(self.db)
            .await?
            .map(AwsIntegration::try_from)
            .transpose()
    }

    pub async fn aws_stacks(&self, integration_id: &str) -> Result<Vec<StackId>> {
        aws_attachments::Entity::find()
            .filter(aws_attachments::Column::OrgId.eq(self.org_s.clone()))
            .filter(aws_attachments::Column::IntegrationId.eq(integration_id))
            .order_by_asc(aws_attachments::Column::CreatedAt)
            .all(self.db)
            .await?
            .iter()
            .map(|a| parse_id(&a.stack_id))
            .collect()
    }
}

/// One OIDC signing key as stored.
pub struct OidcKey {
    pub kid: String,
    /// PKCS#8 DER of the RSA private key (decrypted).
    pub private_der: Vec<u8>,
    pub public_jwk: String,
    pub created_at: DateTime<Utc>,
    pub retired_at: Option<DateTime<Utc>>,
}

const OIDC_PURPOSE: &str = "terraplane-oidc-signing-key";

/// What `terraplane keys rotate` did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RotationReport {
    pub data_keys_rewrapped: usize,
    pub data_keys_current: usize,
    pub oidc_keys_rewrapped: usize,
}

impl crate::Store {
    fn keyring(&self) -> Result<&crate::crypto::Keyring> {
        self.keys
            .as_deref()
            .ok_or_else(|| StoreError::Invalid("no master key configured".into()))
    }

    /// Fails when the master keys open none of the stored data keys (a wrong key).
    pub async fn check_master_key(&self) -> Result<()> {
        let ring = self.keyring()?;
        if let Some(row) = org_keys::Entity::find().one(&self.db).await? {
            ring.unwrap(parse_id(&row.org_id)?, &row.wrapped_key)?;
        }
        Ok(())
    }

    /// The id of the newest signing key not retired.
    pub async fn oidc_active_kid(&self) -> Result<Option<String>> {
        Ok(oidc_keys::Entity::find()
            .filter(oidc_keys::Column::RetiredAt.is_null())
            .order_by_desc(oidc_keys::Column::CreatedAt)
            .one(&self.db)
            .await?
            .map(|m| m.kid))
    }

    /// A signing key, decrypted.
    pub async fn oidc_key(&self, kid: &str) -> Result<OidcKey> {
        let ring = self.keyring()?;
        let m = oidc_keys::Entity::find_by_id(kid.to_owned())
            .one(&self.db)
            .await?
            .ok_or(StoreError::NotFound("signing key"))?;
        Ok(OidcKey {
            private_der: ring.open_instance(&m.private_key, OIDC_PURPOSE)?,
            kid: m.kid,
            public_jwk: m.public_jwk,
            created_at: m.created_at,
            retired_at: m.retired_at,
        })
    }

    /// Stores a new signing key, sealed by the master key. With `retire_others`, the keys in
    /// use are retired (they stay published for the overlap).
    pub async fn oidc_add_key(
        &self,
        kid: &str,
        private_der: &[u8],
        public_jwk: &str,
        retire_others: bool,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let ring = self.keyring()?;
        let tx = self.db.begin().await?;
        if retire_others {
            oidc_keys::Entity::update_many()
                .col_expr(oidc_keys::Column::RetiredAt, Expr::value(Some(now)))
                .filter(oidc_keys::Column::RetiredAt.is_null())
                .exec(&tx)
                .await?;
        }
        oidc_keys::ActiveModel {
            kid: Set(kid.to_owned()),
            private_key: Set(ring.seal_instance(private_der, OIDC_PURPOSE)?),
            public_jwk: Set(public_jwk.to_owned()),
            master_key_id: Set(ring.master_key_id()),
            created_at: Set(now),
            retired_at: Set(None),
        }
        .insert(&tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Public keys to publish: those in use and those retired after `retired_after`.
    pub async fn oidc_public_keys(&self, retired_after: DateTime<Utc>) -> Result<Vec<String>> {
        Ok(oidc_keys::Entity::find()
            .order_by_desc(oidc_keys::Column::CreatedAt)
            .all(&self.db)
            .await?
            .into_iter()
            .filter(|k| k.retired_at.is_none_or(|r| r > retired_after))
            .map(|k| k.public_jwk)
            .collect())
    }

    /// Re-wraps every organization data key and seals every OIDC signing key under the
    /// current master key (opening them with the current or a previous key). Safe while
    /// the services run: each row is replaced in one statement and running services open
    /// either wrapping as long as they know both keys.
    pub async fn rotate_master_key(&self) -> Result<RotationReport> {
        let ring = self.keyring()?;
        let current = ring.master_key_id();
        let mut report = RotationReport::default();
        for row in org_keys::Entity::find().all(&self.db).await? {
            if row.master_key_id == current {
                report.data_keys_current += 1;
                continue;
            }
            let org: OrgId = parse_id(&row.org_id)?;
            let key = ring.unwrap(org, &row.wrapped_key)?;
            let mut a = row.into_active_model();
            a.wrapped_key = Set(ring.wrap(org, &key)?);
            a.master_key_id = Set(current.clone());
            a.update(&self.db).await?;
            report.data_keys_rewrapped += 1;
        }
        for row in oidc_keys::Entity::find().all(&self.db).await? {
            if row.master_key_id == current {
                continue;
            }
            let der = ring.open_instance(&row.private_key, OIDC_PURPOSE)?;
            let mut a = row.into_active_model();
            a.private_key = Set(ring.seal_instance(&der, OIDC_PURPOSE)?);
            a.master_key_id = Set(current.clone());
            a.update(&self.db).await?;
            report.oidc_keys_rewrapped += 1;
        }
        Ok(report)
    }
}
