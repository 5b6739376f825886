//! Persistence: sea-orm entities and the repositories over them. The only crate that
//! depends on sea-orm. Tenant-owned data is reached only through [`TenantScope`], which
//! holds the organization id and adds it to every query; the few unscoped operations
//! (login, key lookup, dispatch) live on [`Store`] and say so in their names.

mod access;
pub mod audit;
pub mod crypto;
mod drift;
mod entities;
pub mod error;
mod notify;
mod policy;
pub mod records;
mod runs;
mod sessions;
mod sso;
mod state;
mod tenant;
mod vars;

use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectOptions, ConnectionTrait, Database, DatabaseConnection, EntityTrait,
    QueryFilter, QueryOrder, Set, TransactionSession, TransactionTrait,
};
use terraplane_domain::{ApiKeyId, OrgId, UserId};
use terraplane_migration::MigratorTrait;

/// Ids per statement in `IN (...)` lists. Batched statements stay under 16 KiB: sqlx 0.9.0
/// leaves Nagle's algorithm on (sqlx issue #4335), and a PostgreSQL message larger than the
/// socket's initial send buffer (16 KiB on Linux) then waits ~40 ms for a delayed ACK.
pub(crate) const IN_CHUNK: usize = 250;
/// Rows per multi-row insert of runs (13 columns bound) and of run events (6), under the same
/// 16 KiB.
pub(crate) const RUN_INSERT_CHUNK: usize = 40;
pub(crate) const EVENT_INSERT_CHUNK: usize = 100;

pub use access::{NewSpace, ROOT_SPACE};
pub use audit::{AuditEvent, AuditFilter, ChainCheck, DeliveryCursor, NewAuditEvent};
pub use drift::{DriftOutcome, DriftRecord, DriftSchedule, FiredSchedules};
use entities::*;
pub use error::{Result, StoreError};
pub use notify::{Attempt, Delivery, DeliveryStatus, NewEndpoint, NotificationEndpoint};
pub use policy::{
    JUDGING, NewEvaluation, NewPolicy, Policy, PolicyEvaluation, PolicyPatch, PolicyVersion, RunReview, SAMPLES_KEPT,
};
pub use records::*;
pub use runs::ExpiredRun;
pub use runs::{NewRun, RunUpdate};
pub use sessions::{Refresh, Session};
pub use state::{LockOutcome, NewLock, NewStateVersion, WriteOutcome};
pub use tenant::{NewStack, StackPatch, TenantScope};
pub use vars::*;

#[derive(Clone)]
pub struct Store {
    db: DatabaseConnection,
    /// Seals state versions and plan files when set (always, outside tests of the store).
    keys: Option<std::sync::Arc<crypto::Keyring>>,
}

impl Store {
    pub async fn connect(url: &str, max_connections: u32) -> Result<Store> {
        let mut opts = ConnectOptions::new(url.to_owned());
        opts.max_connections(max_connections).sqlx_logging(false);
        if url.starts_with("sqlite:") {
            // SQLite allows one writer; a single connection serializes writers in-process
            // instead of failing them with SQLITE_BUSY.
            opts.max_connections(1).min_connections(1);
        }
        let db = Database::connect(opts).await?;
        if url.starts_with("sqlite:") {
            db.execute_unprepared("PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON; PRAGMA busy_timeout=5000;")
                .await?;
        }
        Ok(Store { db, keys: None })
    }

    /// Connects as configured: creates a SQLite file's directory, and applies pending
    /// migrations when `auto_migrate` is on.
    pub async fn open(cfg: &terraplane_config::DatabaseConfig) -> Result<Store> {
        if let Some(path) = cfg.url.strip_prefix("sqlite://").and_then(|p| p.split('?').next())
            && let Some(parent) = std::path::Path::new(path).parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent)
                .map_err(|e| StoreError::Invalid(format!("cannot create {}: {e}", parent.display())))?;
        }
        let store = Store::connect(&cfg.url, cfg.max_connections).await?;
        if cfg.auto_migrate {
            store.migrate().await?;
        }
        Ok(store)
    }

    pub async fn migrate(&self) -> Result<()> {
        terraplane_migration::Migrator::up(&self.db, None).await?;
        Ok(())
    }

    pub async fn ping(&self) -> Result<()> {
        self.db.ping().await?;
        Ok(())
    }

    /// Encrypts state versions and plan files at rest under this master key.
    pub fn with_master_key(self, master: crypto::KeyBytes) -> Self {
        self.with_master_keys(master, Vec::new())
    }

    /// Encrypts under `master`; what `previous` keys wrapped still opens.
    pub fn with_master_keys(mut self, master: crypto::KeyBytes, previous: Vec<crypto::KeyBytes>) -> Self {
        self.keys = Some(std::sync::Arc::new(
            crypto::Keyring::new(master).with_previous(previous),
        ));
        self
    }

    /// Refreshes the planner's statistics (`ANALYZE`), as autovacuum does on a live
    /// PostgreSQL; for benchmarks and bulk loads.
    pub async fn analyze(&self) -> Result<()> {
        self.db.execute_unprepared("ANALYZE").await?;
        Ok(())
    }

    pub fn scope(&self, org: OrgId) -> TenantScope<'_> {
        TenantScope::new(&self.db, org).with_keys(self.keys.as_deref())
    }

    /// Starts a transaction: changes made through [`Tx::scope`] and the audit events
    /// recording them commit together or not at all.
    pub async fn begin(&self) -> Result<Tx> {
        Ok(Tx(self.db.begin().await?, self.keys.clone()))
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self.db.get_database_backend(), sea_orm::DatabaseBackend::Postgres)
    }

    // ---- organizations and users (instance-wide, not tenant data) ----

    /// Creates an organization with its root space.
    pub async fn create_org(&self, slug: &str, name: &str, now: DateTime<Utc>) -> Result<Organization> {
        create_org_in(&self.db, slug, name, now).await
    }

    /// Every organization, oldest first (instance administrators).
    pub async fn list_orgs(&self) -> Result<Vec<Organization>> {
        organizations::Entity::find()
            .order_by_asc(organizations::Column::CreatedAt)
            .all(&self.db)
            .await?
            .into_iter()
            .map(Organization::try_from)
            .collect()
    }

    /// Users of an organization with their organization role.
    pub async fn list_members(&self, org: OrgId) -> Result<Vec<(User, String)>> {
        let ms = memberships::Entity::find()
            .filter(memberships::Column::OrgId.eq(org.to_string()))
            .order_by_asc(memberships::Column::CreatedAt)
            .all(&self.db)
            .await?;
        let mut out = Vec::new();
        for m in ms {
            let user = self.get_user(records::parse_id(&m.user_id)?).await?;
            out.push((user, m.role));
        }
        Ok(out)
    }

    pub async fn get_org_by_slug(&self, slug: &str) -> Result<Organization> {
        organizations::Entity::find()
            .filter(organizations::Column::Slug.eq(slug))
            .one(&self.db)
            .await?
            .ok_or(StoreError::NotFound("organization"))?
            .try_into()
    }

    pub async fn get_org(&self, id: OrgId) -> Result<Organization> {
        organizations::Entity::find_by_id(id.to_string())
            .one(&self.db)
            .await?
            .ok_or(StoreError::NotFound("organization"))?
            .try_into()
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn create_user(
        &self,
        email: &str,
        name: &str,
        password_hash: Option<String>,
        is_admin: bool,
        now: DateTime<Utc>,
    ) -> Result<User> {
        create_user_in(&self.db, email, name, password_hash, is_admin, now).await
    }

    pub async fn get_user_by_email(&self, email: &str) -> Result<User> {
        users::Entity::find()
            .filter(users::Column::Email.eq(email))
            .one(&self.db)
            .await?
            .ok_or(StoreError::NotFound("user"))?
            .try_into()
    }

    pub async fn get_user(&self, id: UserId) -> Result<User> {
        users::Entity::find_by_id(id.to_string())
            .one(&self.db)
            .await?
            .ok_or(StoreError::NotFound("user"))?
            .try_into()
    }

    pub async fn add_member(&self, org: OrgId, user: UserId, role: &str, now: DateTime<Utc>) -> Result<()> {
        add_member_in(&self.db, org, user, role, now).await
    }

    /// The user's organizations with their role in each, oldest membership first.
    pub async fn list_memberships(&self, user: UserId) -> Result<Vec<(Organization, String)>> {
        let ms = memberships::Entity::find()
            .filter(memberships::Column::UserId.eq(user.to_string()))
            .all(&self.db)
            .await?;
        let mut out = Vec::new();
        for m in ms {
            let org = self
                .get_org(
                    m.org_id
                        .parse()
                        .map_err(|_| StoreError::Invalid("corrupt org id".into()))?,
                )
                .await?;
            out.push((org, m.role));
        }
        out.sort_by_key(|(o, _)| o.created_at);
        Ok(out)
    }

    pub async fn get_membership(&self, org: OrgId, user: UserId) -> Result<String> {
        memberships::Entity::find_by_id((org.to_string(), user.to_string()))
            .one(&self.db)
            .await?
            .map(|m| m.role)
            .ok_or(StoreError::NotFound("membership"))
    }

    // ---- API keys: looked up by the hash of their secret, before any tenant is known ----

    #[allow(clippy::too_many_arguments)]
    pub async fn create_api_key(
        &self,
        org: OrgId,
        user: Option<UserId>,
        name: &str,
        secret_hash: &str,
        role: &str,
        kind: &str,
        expires_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<ApiKey> {
        create_api_key_in(&self.db, org, user, name, secret_hash, role, kind, expires_at, now).await
    }

    pub async fn find_api_key_by_hash(&self, secret_hash: &str) -> Result<Option<ApiKey>> {
        api_keys::Entity::find()
            .filter(api_keys::Column::SecretHash.eq(secret_hash))
            .one(&self.db)
            .await?
            .map(ApiKey::try_from)
            .transpose()
    }

    /// Keys of `org`, newest first; only `user`'s personal keys when given.
    pub async fn list_api_keys(&self, org: OrgId, user: Option<UserId>) -> Result<Vec<ApiKey>> {
        let mut q = api_keys::Entity::find().filter(api_keys::Column::OrgId.eq(org.to_string()));
        if let Some(u) = user {
            q = q.filter(api_keys::Column::UserId.eq(u.to_string()));
        }
        q.order_by_desc(api_keys::Column::CreatedAt)
            .all(&self.db)
            .await?
            .into_iter()
            .map(ApiKey::try_from)
            .collect()
    }

    /// Revokes a key of `org` (idempotent: revoking twice keeps the first time).
    pub async fn revoke_api_key(&self, org: OrgId, id: ApiKeyId, now: DateTime<Utc>) -> Result<ApiKey> {
        revoke_api_key_in(&self.db, org, id, now).await
    }

    /// An API key of `org` by id.
    pub async fn get_api_key(&self, org: OrgId, id: ApiKeyId) -> Result<ApiKey> {
        get_api_key_in(&self.db, org, id).await
    }

    pub async fn touch_api_key(&self, id: ApiKeyId, now: DateTime<Utc>) -> Result<()> {
        api_keys::Entity::update_many()
            .col_expr(api_keys::Column::LastUsedAt, sea_orm::sea_query::Expr::value(now))
            .filter(api_keys::Column::Id.eq(id.to_string()))
            .exec(&self.db)
            .await?;
        Ok(())
    }
}

pub struct Tx(sea_orm::DatabaseTransaction, Option<std::sync::Arc<crypto::Keyring>>);

impl Tx {
    pub fn scope(&self, org: OrgId) -> TenantScope<'_, sea_orm::DatabaseTransaction> {
        TenantScope::new(&self.0, org).with_keys(self.1.as_deref())
    }

    pub async fn commit(self) -> Result<()> {
        Ok(self.0.commit().await?)
    }

    pub async fn create_org(&self, slug: &str, name: &str, now: DateTime<Utc>) -> Result<Organization> {
        create_org_in(&self.0, slug, name, now).await
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn create_user(
        &self,
        email: &str,
        name: &str,
        password_hash: Option<String>,
        is_admin: bool,
        now: DateTime<Utc>,
    ) -> Result<User> {
        create_user_in(&self.0, email, name, password_hash, is_admin, now).await
    }

    pub async fn add_member(&self, org: OrgId, user: UserId, role: &str, now: DateTime<Utc>) -> Result<()> {
        add_member_in(&self.0, org, user, role, now).await
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn create_api_key(
        &self,
        org: OrgId,
        user: Option<UserId>,
        name: &str,
        secret_hash: &str,
        role: &str,
        kind: &str,
        expires_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<ApiKey> {
        create_api_key_in(&self.0, org, user, name, secret_hash, role, kind, expires_at, now).await
    }

    pub async fn revoke_api_key(&self, org: OrgId, id: ApiKeyId, now: DateTime<Utc>) -> Result<ApiKey> {
        revoke_api_key_in(&self.0, org, id, now).await
    }
}

pub(crate) fn conflict(e: sea_orm::DbErr, msg: String) -> StoreError {
    match StoreError::from(e) {
        StoreError::Conflict(_) => StoreError::Conflict(msg),
        other => other,
    }
}

pub(crate) async fn create_org_in<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    slug: &str,
    name: &str,
    now: DateTime<Utc>,
) -> Result<Organization> {
    let tx = db.begin().await?;
    let m = organizations::ActiveModel {
        id: Set(OrgId::new().to_string()),
        slug: Set(slug.to_owned()),
        name: Set(name.to_owned()),
        created_at: Set(now),
    }
    .insert(&tx)
    .await
    .map_err(|e| conflict(e, format!("organization {slug:?} already exists")))?;
    spaces::ActiveModel {
        id: Set(terraplane_domain::SpaceId::new().to_string()),
        org_id: Set(m.id.clone()),
        slug: Set(ROOT_SPACE.to_owned()),
        name: Set("Root".to_owned()),
        description: Set(String::new()),
        parent_id: Set(None),
        inherit: Set(false),
        created_at: Set(now),
    }
    .insert(&tx)
    .await?;
    tx.commit().await?;
    m.try_into()
}

pub(crate) async fn create_user_in<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    email: &str,
    name: &str,
    password_hash: Option<String>,
    is_admin: bool,
    now: DateTime<Utc>,
) -> Result<User> {
    let m = users::ActiveModel {
        id: Set(UserId::new().to_string()),
        email: Set(email.to_owned()),
        name: Set(name.to_owned()),
        password_hash: Set(password_hash),
        is_admin: Set(is_admin),
        created_at: Set(now),
    }
    .insert(db)
    .await
    .map_err(|e| conflict(e, format!("user {email:?} already exists")))?;
    m.try_into()
}

pub(crate) async fn add_member_in<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    org: OrgId,
    user: UserId,
    role: &str,
    now: DateTime<Utc>,
) -> Result<()> {
    memberships::ActiveModel {
        org_id: Set(org.to_string()),
        user_id: Set(user.to_string()),
        role: Set(role.to_owned()),
        created_at: Set(now),
    }
    .insert(db)
    .await?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn create_api_key_in<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    org: OrgId,
    user: Option<UserId>,
    name: &str,
    secret_hash: &str,
    role: &str,
    kind: &str,
    expires_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<ApiKey> {
    let m = api_keys::ActiveModel {
        id: Set(ApiKeyId::new().to_string()),
        org_id: Set(org.to_string()),
        user_id: Set(user.map(|u| u.to_string())),
        name: Set(name.to_owned()),
        secret_hash: Set(secret_hash.to_owned()),
        role: Set(role.to_owned()),
        created_at: Set(now),
        expires_at: Set(expires_at),
        revoked_at: Set(None),
        last_used_at: Set(None),
        kind: Set(kind.to_owned()),
    }
    .insert(db)
    .await
    .map_err(|e| conflict(e, "an API key with this secret already exists".into()))?;
    m.try_into()
}

pub(crate) async fn revoke_api_key_in<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    org: OrgId,
    id: ApiKeyId,
    now: DateTime<Utc>,
) -> Result<ApiKey> {
    let key = get_api_key_in(db, org, id).await?;
    if key.revoked_at.is_none() {
        api_keys::Entity::update_many()
            .col_expr(api_keys::Column::RevokedAt, sea_orm::sea_query::Expr::value(now))
            .filter(api_keys::Column::Id.eq(id.to_string()))
            .filter(api_keys::Column::OrgId.eq(org.to_string()))
            .exec(db)
            .await?;
    }
    get_api_key_in(db, org, id).await
}

pub(crate) async fn get_api_key_in<C: ConnectionTrait + TransactionTrait>(
    db: &C,
    org: OrgId,
    id: ApiKeyId,
) -> Result<ApiKey> {
    api_keys::Entity::find_by_id(id.to_string())
        .filter(api_keys::Column::OrgId.eq(org.to_string()))
        .one(db)
        .await?
        .ok_or(StoreError::NotFound("API key"))?
        .try_into()
}
