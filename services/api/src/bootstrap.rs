//! First-start seeding: the `default` organization, the admin user, and the bootstrap API
//! key (`TERRAPLANE_BOOTSTRAP_TOKEN`) with exactly the configured secret. Idempotent.

use chrono::{DateTime, Utc};
use terraplane_config::Config;
use terraplane_store::{Organization, Store, StoreError, User};

use crate::auth::{hash_password, hash_secret};

pub struct Seeded {
    pub org: Organization,
    pub admin: User,
    /// The admin password when it was generated now (shown once).
    pub generated_password: Option<String>,
}

pub async fn seed(store: &Store, cfg: &Config, now: DateTime<Utc>) -> anyhow::Result<Seeded> {
    let org = match store.get_org_by_slug("default").await {
        Ok(o) => o,
        Err(StoreError::NotFound(_)) => store.create_org("default", "Default", now).await?,
        Err(e) => return Err(e.into()),
    };
    let email = cfg.bootstrap.admin_email.clone();
    let mut generated_password = None;
    let admin = match store.get_user_by_email(&email).await {
        Ok(u) => u,
        Err(StoreError::NotFound(_)) => {
            let password = match &cfg.bootstrap.admin_password {
                Some(p) => p.expose().to_owned(),
                None => {
                    let p = crate::auth::new_api_key_secret().trim_start_matches("tpk_")[..20].to_owned();
                    generated_password = Some(p.clone());
                    p
                }
            };
            let hash = hash_password(&password)?;
            let u = store
                .create_user(&email, "Administrator", Some(hash), true, now)
                .await?;
            store.add_member(org.id, u.id, "owner", now).await?;
            u
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(token) = &cfg.bootstrap.token {
        let hash = hash_secret(token.expose());
        if store.find_api_key_by_hash(&hash).await?.is_none() {
            store
                .create_api_key(
                    org.id,
                    Some(admin.id),
                    "bootstrap",
                    &hash,
                    "owner",
                    "service",
                    None,
                    now,
                )
                .await?;
        }
    }
    Ok(Seeded {
        org,
        admin,
        generated_password,
    })
}
