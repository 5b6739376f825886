//! Authentication: who is calling, in which organization, with which role. Credentials are
//! session JWTs (from `login`), API keys (stored as sha256 of the secret), per-run JWTs
//! (scoped to one run and its stack, dead once the run ends) and the runner pool token.
//! Authorization decisions are made by [`Principal::require_in`] (and the organization-level
//! `require_owner`), in one place.

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use base64::Engine;
use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use terraplane_domain::{Access, ApiKeyId, OrgId, Role, RunId, SpaceId, StackId, UserId};
use terraplane_store::Store;

use crate::error::{ApiError, ApiResult};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Actor {
    User { id: UserId, email: String },
    ApiKey { id: ApiKeyId, name: String },
    Run { run_id: RunId, stack_id: StackId },
}

/// Where a request came from, for the audit trail.
#[derive(Clone, Debug, Default)]
pub struct RequestMeta {
    pub request_id: Option<String>,
    pub client_ip: Option<String>,
}

impl RequestMeta {
    /// `X-Request-Id` when the client sent a sane one, else a new id; the peer address
    /// (proxies are not trusted for it).
    pub fn of(req: &actix_web::HttpRequest) -> Self {
        let sent = req
            .headers()
            .get("x-request-id")
            .and_then(|h| h.to_str().ok())
            .filter(|s| !s.is_empty() && s.len() <= 128 && s.chars().all(|c| c.is_ascii_graphic()));
        Self {
            request_id: Some(
                sent.map(str::to_owned)
                    .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            ),
            client_ip: req.peer_addr().map(|a| a.ip().to_string()),
        }
    }
}

/// The caller of one request: organization, identity and what it may do where.
#[derive(Clone, Debug)]
pub struct Principal {
    pub org: OrgId,
    pub actor: Actor,
    pub access: Access,
    /// An instance administrator (may create organizations).
    pub instance_admin: bool,
    pub meta: RequestMeta,
    /// The login session of a user's access token.
    pub session: Option<String>,
}

/// What a caller wants to do with something in a space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// See it (and its runs and logs).
    Read,
    /// Trigger, confirm, discard runs; edit stacks.
    Write,
    /// Manage the space: its stacks' lifecycle, its bindings, its sub-spaces.
    Admin,
}

impl Action {
    fn needs(self) -> Role {
        match self {
            Action::Read => Role::Reader,
            Action::Write => Role::Writer,
            Action::Admin => Role::Admin,
        }
    }
}

impl Principal {
    /// A readable name for lock holders, run triggers and audit fields.
    pub fn name(&self) -> String {
        match &self.actor {
            Actor::User { email, .. } => email.clone(),
            Actor::ApiKey { name, id } => format!("api-key:{name}:{id}"),
            Actor::Run { run_id, .. } => format!("run:{run_id}"),
        }
    }

    /// Run tokens speak only the state backend and the runner protocol.
    fn not_a_run(&self) -> ApiResult<()> {
        match self.actor {
            Actor::Run { .. } => Err(ApiError::Forbidden("a run token cannot be used for this".into())),
            _ => Ok(()),
        }
    }

    /// The one authorization check for things that live in a space: something the caller
    /// cannot see is "not found" (`what`), something it sees but may not change is 403.
    pub fn require_in(&self, space: SpaceId, action: Action, what: &'static str) -> ApiResult<Role> {
        self.not_a_run()?;
        match self.access.role_in(space) {
            None => Err(ApiError::NotFound(what)),
            Some(r) if r >= action.needs() => Ok(r),
            Some(r) => Err(ApiError::Forbidden(format!(
                "this needs the {} role in the {what}'s space; you have {}",
                action.needs().as_str(),
                r.as_str()
            ))),
        }
    }

    pub fn can_see(&self, space: SpaceId) -> bool {
        !matches!(self.actor, Actor::Run { .. }) && self.access.role_in(space).is_some()
    }

    /// Managing the organization itself (members, teams): owners only.
    pub fn require_owner(&self) -> ApiResult<()> {
        self.not_a_run()?;
        if self.access.is_owner() {
            Ok(())
        } else {
            Err(ApiError::Forbidden("this needs the organization owner role".into()))
        }
    }

    /// Anything a member of the organization may do (who am I, list teams).
    pub fn require_member(&self) -> ApiResult<()> {
        self.not_a_run()
    }

    /// A run principal may touch only its own stack: anything else does not exist for it.
    pub fn require_stack(&self, stack: StackId) -> ApiResult<()> {
        match &self.actor {
            Actor::Run { stack_id, .. } if *stack_id != stack => Err(ApiError::NotFound("stack")),
            _ => Ok(()),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    org: String,
    typ: String,
    iat: i64,
    exp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stack: Option<String>,
    /// The login session an access token belongs to (dies with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sid: Option<String>,
}

const SESSION: &str = "session";
const RUN: &str = "run";

pub struct Auth {
    enc: EncodingKey,
    dec: DecodingKey,
    session_ttl: i64,
    run_ttl: i64,
    pool_token: Option<String>,
}

impl Auth {
    pub fn new(jwt_secret: &[u8], session_ttl_secs: u64, run_ttl_secs: u64, pool_token: Option<String>) -> Self {
        Self {
            enc: EncodingKey::from_secret(jwt_secret),
            dec: DecodingKey::from_secret(jwt_secret),
            session_ttl: session_ttl_secs as i64,
            run_ttl: run_ttl_secs as i64,
            pool_token,
        }
    }

    fn sign(&self, c: &Claims) -> ApiResult<String> {
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), c, &self.enc).map_err(|e| ApiError::Internal(e.into()))
    }

    /// A short-lived access token of login session `sid`.
    pub fn issue_session(
        &self,
        user: UserId,
        org: OrgId,
        sid: &str,
        now: DateTime<Utc>,
    ) -> ApiResult<(String, DateTime<Utc>)> {
        let exp = now + chrono::Duration::seconds(self.session_ttl);
        let c = Claims {
            sub: user.to_string(),
            org: org.to_string(),
            typ: SESSION.into(),
            iat: now.timestamp(),
            exp: exp.timestamp(),
            stack: None,
            sid: Some(sid.to_owned()),
        };
        Ok((self.sign(&c)?, exp))
    }

    pub fn issue_run_token(&self, run: RunId, stack: StackId, org: OrgId, now: DateTime<Utc>) -> ApiResult<String> {
        let exp = now + chrono::Duration::seconds(self.run_ttl);
        let c = Claims {
            sub: run.to_string(),
            org: org.to_string(),
            typ: RUN.into(),
            iat: now.timestamp(),
            exp: exp.timestamp(),
            stack: Some(stack.to_string()),
            sid: None,
        };
        self.sign(&c)
    }

    /// Checks the runner pool token in constant time.
    pub fn verify_pool_token(&self, presented: &str) -> ApiResult<()> {
        match &self.pool_token {
            Some(t) if bool::from(t.as_bytes().ct_eq(presented.as_bytes())) => Ok(()),
            _ => Err(ApiError::Unauthenticated("invalid runner pool token".into())),
        }
    }

    /// Resolves a bearer credential to a principal.
    pub async fn authenticate(&self, store: &Store, token: &str, now: DateTime<Utc>) -> ApiResult<Principal> {
        if token.is_empty() {
            return Err(ApiError::Unauthenticated("missing credentials".into()));
        }
        if token.split('.').count() == 3 {
            return self.authenticate_jwt(store, token).await;
        }
        let hash = hash_secret(token);
        let key = store
            .find_api_key_by_hash(&hash)
            .await?
            .ok_or_else(|| ApiError::Unauthenticated("invalid API key".into()))?;
        if key.revoked_at.is_some() {
            return Err(ApiError::Unauthenticated("API key was revoked".into()));
        }
        if key.expires_at.is_some_and(|e| e <= now) {
            return Err(ApiError::Unauthenticated("API key expired".into()));
        }
        let access = store
            .scope(key.org_id)
            .api_key_access(&key)
            .await?
            .ok_or_else(|| ApiError::Unauthenticated("API key's creator is no longer a member".into()))?;
        if let Err(e) = store.touch_api_key(key.id, now).await {
            tracing::warn!(error = %e, "cannot record API key use");
        }
        Ok(Principal {
            org: key.org_id,
            actor: Actor::ApiKey {
                id: key.id,
                name: key.name,
            },
            access,
            instance_admin: false,
            meta: RequestMeta::default(),
            session: None,
        })
    }

    async fn authenticate_jwt(&self, store: &Store, token: &str) -> ApiResult<Principal> {
        let mut v = Validation::new(Algorithm::HS256);
        v.leeway = 0;
        let data = jsonwebtoken::decode::<Claims>(token, &self.dec, &v).map_err(|e| match e.kind() {
            jsonwebtoken::errors::ErrorKind::ExpiredSignature => ApiError::Unauthenticated("token expired".into()),
            _ => ApiError::Unauthenticated("invalid token".into()),
        })?;
        let c = data.claims;
        let bad = || ApiError::Unauthenticated("invalid token".into());
        let org: OrgId = c.org.parse().map_err(|_| bad())?;
        match c.typ.as_str() {
            SESSION => {
                let user_id: UserId = c.sub.parse().map_err(|_| bad())?;
                let sid = c.sid.ok_or_else(bad)?;
                let session = store.get_session(&sid).await.map_err(|_| bad())?;
                if session.revoked_at.is_some() || session.user_id != user_id {
                    return Err(ApiError::Unauthenticated("session ended: log in again".into()));
                }
                let user = store.get_user(user_id).await.map_err(|_| bad())?;
                let mut access = store
                    .scope(org)
                    .user_access(user_id)
                    .await?
                    .ok_or_else(|| ApiError::Unauthenticated("no longer a member of this organization".into()))?;
                // A login policy's `admin` holds for this session only.
                access.owner |= session.policy_admin;
                Ok(Principal {
                    org,
                    actor: Actor::User {
                        id: user.id,
                        email: user.email,
                    },
                    access,
                    instance_admin: user.is_admin,
                    meta: RequestMeta::default(),
                    session: Some(sid),
                })
            }
            RUN => {
                let run_id: RunId = c.sub.parse().map_err(|_| bad())?;
                let stack_id: StackId = c.stack.as_deref().ok_or_else(bad)?.parse().map_err(|_| bad())?;
                let run = store.scope(org).get_run(run_id).await.map_err(|_| bad())?;
                if run.state.is_terminal() {
                    return Err(ApiError::Unauthenticated(format!(
                        "run token no longer valid: run is {}",
                        run.state
                    )));
                }
                Ok(Principal {
                    org,
                    actor: Actor::Run { run_id, stack_id },
                    access: Access::default(),
                    instance_admin: false,
                    meta: RequestMeta::default(),
                    session: None,
                })
            }
            _ => Err(bad()),
        }
    }
}

pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

pub fn hash_password(password: &str) -> ApiResult<String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("cannot hash password: {e}")))
}

pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| Argon2::default().verify_password(password.as_bytes(), &h).is_ok())
}

/// A new random refresh token.
pub fn new_refresh_token() -> String {
    use rand::RngCore;
    let mut b = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut b);
    format!("tpr_{}", hex::encode(b))
}

/// A new random API key secret.
pub fn new_api_key_secret() -> String {
    use rand::RngCore;
    let mut b = [0u8; 24];
    rand::thread_rng().fill_bytes(&mut b);
    format!("tpk_{}", hex::encode(b))
}

/// The credential of a request: `Authorization: Bearer <t>` or Basic with the token as the
/// password (Terraform's http backend sends only Basic).
pub fn credential(req: &actix_web::HttpRequest) -> Option<String> {
    let h = req.headers().get("authorization")?.to_str().ok()?;
    if let Some(t) = h.strip_prefix("Bearer ") {
        return Some(t.trim().to_owned());
    }
    let b = h.strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD.decode(b.trim()).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (_, password) = text.split_once(':')?;
    Some(password.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_use_argon2id_and_verify() -> ApiResult<()> {
        let h = hash_password("correct horse")?;
        assert!(h.starts_with("$argon2id$"), "{h}");
        assert!(verify_password("correct horse", &h));
        assert!(!verify_password("wrong", &h));
        Ok(())
    }

    #[test]
    fn dummy_hash_is_a_real_argon2id_hash() {
        // Login verifies against it for unknown emails; an unparsable hash would return
        // at once and reveal which emails exist.
        let h = PasswordHash::new(crate::DUMMY_HASH).unwrap();
        assert_eq!(h.algorithm.as_str(), "argon2id");
        assert!(!verify_password("anything", crate::DUMMY_HASH));
    }

    #[test]
    fn pool_token_is_checked() {
        let a = Auth::new(b"k", 60, 60, Some("pool-secret".into()));
        assert!(a.verify_pool_token("pool-secret").is_ok());
        assert!(a.verify_pool_token("pool-secreT").is_err());
        let none = Auth::new(b"k", 60, 60, None);
        assert!(none.verify_pool_token("").is_err());
    }
}
