//! The OIDC issuer for workload identity: every run phase gets an RS256 token saying which
//! organization, space, stack and run it is, which cloud providers (AWS
//! `AssumeRoleWithWebIdentity`, and any OIDC-federating service) trust through the
//! discovery document and JWKS served here. Signing keys are RSA 2048, stored sealed by
//! the master key; `terraplane keys rotate-oidc` adds a new key and retires the old one,
//! which stays in the JWKS for `identity.key_overlap_secs` so tokens it signed still verify.

use actix_web::{HttpResponse, web};
use base64::Engine;
use chrono::{DateTime, Utc};
use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey};
use rsa::traits::PublicKeyParts;
use serde::{Deserialize, Serialize};
use terraplane_domain::{RunPhase, RunType};
use terraplane_store::Store;
use tokio::sync::Mutex;

use crate::error::{ApiError, ApiResult};
use crate::service::Shared;

pub const DISCOVERY: &str = "/.well-known/openid-configuration";
pub const JWKS: &str = "/.well-known/jwks.json";

/// Every route of the issuer; `config` registers exactly these.
pub const ROUTES: &[(&str, &str)] = &[("GET", DISCOVERY), ("GET", JWKS)];

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.route(DISCOVERY, web::get().to(discovery))
        .route(JWKS, web::get().to(jwks));
}

/// The claims of a run phase's identity token.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunClaims {
    pub iss: String,
    /// `org:<org>:space:<space>:stack:<stack>:run_type:<TRACKED|PROPOSED>:scope:<read|write>`
    pub sub: String,
    pub aud: String,
    pub exp: i64,
    pub iat: i64,
    pub nbf: i64,
    pub jti: String,
    pub organization: String,
    pub space: String,
    pub stack: String,
    pub run_id: String,
    pub run_type: String,
    pub phase: String,
    /// `write` for the apply phase of a tracked run, `read` otherwise.
    pub scope: String,
}

/// What a token is for.
pub struct Subject<'a> {
    pub org: &'a str,
    pub space: &'a str,
    pub stack: &'a str,
    pub run_id: String,
    pub run_type: RunType,
    pub phase: RunPhase,
}

impl Subject<'_> {
    pub fn scope(&self) -> &'static str {
        if self.run_type == RunType::Tracked && self.phase == RunPhase::Apply {
            "write"
        } else {
            "read"
        }
    }
}

/// Signs run tokens. Decrypted signing keys are kept by id, so a claim costs one small
/// query (which key is current) and no decryption; key creation is serialized within the
/// process (a second api creating one concurrently only adds a key that is published too).
#[derive(Default)]
pub struct Issuer {
    creating: Mutex<()>,
    keys: std::sync::Mutex<std::collections::HashMap<String, jsonwebtoken::EncodingKey>>,
}

/// A new RSA signing key: (kid, PKCS#8 DER, public JWK).
pub async fn generate_key() -> anyhow::Result<(String, Vec<u8>, String)> {
    tokio::task::spawn_blocking(|| {
        let mut rng = rand::thread_rng();
        let key = rsa::RsaPrivateKey::new(&mut rng, 2048)?;
        let der = key.to_pkcs8_der()?.as_bytes().to_vec();
        let b64 = |b: Vec<u8>| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let n = b64(key.n().to_bytes_be());
        let e = b64(key.e().to_bytes_be());
        // RFC 7638 thumbprint as the key id.
        let thumb = format!(r#"{{"e":"{e}","kty":"RSA","n":"{n}"}}"#);
        let kid = {
            use sha2::Digest;
            b64(sha2::Sha256::digest(thumb.as_bytes()).to_vec())
        };
        let jwk = serde_json::json!({ "kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid, "n": n, "e": e });
        Ok((kid, der, jwk.to_string()))
    })
    .await?
}

/// `terraplane keys rotate-oidc`: a new signing key; the old ones retire into the overlap.
pub async fn rotate(store: &Store, now: DateTime<Utc>) -> anyhow::Result<String> {
    let (kid, der, jwk) = generate_key().await?;
    store.oidc_add_key(&kid, &der, &jwk, true, now).await?;
    Ok(kid)
}

/// PKCS#8 DER of an RSA key as the signer wants it.
fn encoding_key(der: &[u8]) -> ApiResult<jsonwebtoken::EncodingKey> {
    use rsa::pkcs1::EncodeRsaPrivateKey;
    let pkcs1 = rsa::RsaPrivateKey::from_pkcs8_der(der)
        .and_then(|k| k.to_pkcs1_der().map_err(rsa::pkcs8::Error::from))
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("stored signing key is unusable: {e}")))?;
    Ok(jsonwebtoken::EncodingKey::from_rsa_der(pkcs1.as_bytes()))
}

impl Issuer {
    /// The signing key in use, created on first use.
    async fn signing_key(&self, store: &Store, now: DateTime<Utc>) -> ApiResult<(String, jsonwebtoken::EncodingKey)> {
        let kid = match store.oidc_active_kid().await? {
            Some(k) => k,
            None => {
                let _g = self.creating.lock().await;
                match store.oidc_active_kid().await? {
                    Some(k) => k,
                    None => {
                        let (kid, der, jwk) = generate_key().await.map_err(ApiError::Internal)?;
                        store.oidc_add_key(&kid, &der, &jwk, false, now).await?;
                        tracing::info!(%kid, "created the OIDC signing key");
                        kid
                    }
                }
            }
        };
        if let Some(k) = self.keys.lock().ok().and_then(|m| m.get(&kid).cloned()) {
            return Ok((kid, k));
        }
        let key = encoding_key(&store.oidc_key(&kid).await?.private_der)?;
        if let Ok(mut m) = self.keys.lock() {
            m.insert(kid.clone(), key.clone());
        }
        Ok((kid, key))
    }

    /// A signed identity token for one run phase.
    pub async fn issue(
        &self,
        st: &crate::AppState,
        subject: &Subject<'_>,
        audience: &str,
        now: DateTime<Utc>,
    ) -> ApiResult<String> {
        let (kid, key) = self.signing_key(&st.store, now).await?;
        let scope = subject.scope();
        let run_type = subject.run_type.as_str().to_ascii_uppercase();
        let claims = RunClaims {
            iss: st.public_url.clone(),
            sub: format!(
                "org:{}:space:{}:stack:{}:run_type:{run_type}:scope:{scope}",
                subject.org, subject.space, subject.stack
            ),
            aud: audience.to_owned(),
            exp: now.timestamp() + st.cfg.identity.token_ttl_secs as i64,
            iat: now.timestamp(),
            nbf: now.timestamp() - 5,
            jti: uuid::Uuid::new_v4().to_string(),
            organization: subject.org.to_owned(),
            space: subject.space.to_owned(),
            stack: subject.stack.to_owned(),
            run_id: subject.run_id.clone(),
            run_type,
            phase: subject.phase.as_str().to_owned(),
            scope: scope.to_owned(),
        };
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
        header.kid = Some(kid);
        jsonwebtoken::encode(&header, &claims, &key)
            .map_err(|e| ApiError::Internal(anyhow::anyhow!("cannot sign the identity token: {e}")))
    }
}

/// The default audience: `identity.audience`, or the public URL's host.
pub fn default_audience(st: &crate::AppState) -> String {
    if let Some(a) = &st.cfg.identity.audience {
        return a.clone();
    }
    reqwest::Url::parse(&st.public_url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_else(|| st.public_url.clone())
}

async fn discovery(st: web::Data<Shared>) -> HttpResponse {
    let iss = &st.public_url;
    HttpResponse::Ok().json(serde_json::json!({
        "issuer": iss,
        "jwks_uri": format!("{iss}{JWKS}"),
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "scopes_supported": ["openid"],
        "claims_supported": [
            "iss", "sub", "aud", "exp", "iat", "nbf", "jti", "organization", "space", "stack",
            "run_id", "run_type", "phase", "scope"
        ],
    }))
}

async fn jwks(st: web::Data<Shared>) -> ApiResult<HttpResponse> {
    let cutoff = st.clock.now() - chrono::Duration::seconds(st.cfg.identity.key_overlap_secs as i64);
    let keys: Vec<serde_json::Value> = st
        .store
        .oidc_public_keys(cutoff)
        .await?
        .iter()
        .filter_map(|k| serde_json::from_str(k).ok())
        .collect();
    Ok(HttpResponse::Ok()
        .insert_header(("Cache-Control", "public, max-age=300"))
        .json(serde_json::json!({ "keys": keys })))
}
