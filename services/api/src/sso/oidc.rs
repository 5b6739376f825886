//! OpenID Connect ID token verification: the signature with the provider's key named by
//! the token's `kid` (from its JWKS), then `iss`, `aud`, `exp` and the login's `nonce`.
//! Anything off refuses the login; nothing is provisioned before this passes.

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdTokenError {
    #[error("ID token is malformed: {0}")]
    Malformed(String),
    #[error("ID token is signed with an unknown key")]
    UnknownKey,
    #[error("ID token signature is invalid")]
    BadSignature,
    #[error("ID token has expired")]
    Expired,
    #[error("ID token was issued by {0:?}, not the configured issuer")]
    WrongIssuer(String),
    #[error("ID token is not meant for this client")]
    WrongAudience,
    #[error("ID token nonce does not match this login")]
    WrongNonce,
    #[error("ID token algorithm {0:?} is not accepted")]
    Algorithm(String),
}

/// The claims Terraplane uses from an ID token.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct IdClaims {
    pub iss: String,
    pub sub: String,
    pub email: Option<String>,
    #[serde(default)]
    pub email_verified: Option<bool>,
    pub name: Option<String>,
    pub nonce: Option<String>,
    /// Group names (the claim name is configurable; `groups` by default).
    #[serde(default, skip)]
    pub groups: Vec<String>,
}

/// Verifies `token` and returns its claims, with `groups_claim` read into `groups`.
pub fn verify_id_token(
    token: &str,
    jwks: &JwkSet,
    issuer: &str,
    client_id: &str,
    nonce: &str,
    groups_claim: &str,
) -> Result<IdClaims, IdTokenError> {
    let header = jsonwebtoken::decode_header(token).map_err(|e| IdTokenError::Malformed(e.to_string()))?;
    // Providers sign ID tokens with asymmetric keys; never accept `none` or HMAC here.
    if !matches!(
        header.alg,
        Algorithm::RS256 | Algorithm::RS384 | Algorithm::RS512 | Algorithm::ES256 | Algorithm::ES384
    ) {
        return Err(IdTokenError::Algorithm(format!("{:?}", header.alg)));
    }
    let kid = header.kid.ok_or(IdTokenError::UnknownKey)?;
    let jwk = jwks.find(&kid).ok_or(IdTokenError::UnknownKey)?;
    let key = DecodingKey::from_jwk(jwk).map_err(|e| IdTokenError::Malformed(e.to_string()))?;
    let mut v = Validation::new(header.alg);
    v.set_audience(&[client_id]);
    // The issuer is compared below to name it in the error.
    v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    v.leeway = 60;
    let data = jsonwebtoken::decode::<serde_json::Value>(token, &key, &v).map_err(|e| {
        use jsonwebtoken::errors::ErrorKind as K;
        match e.kind() {
            K::ExpiredSignature => IdTokenError::Expired,
            K::InvalidAudience => IdTokenError::WrongAudience,
            K::InvalidSignature => IdTokenError::BadSignature,
            _ => IdTokenError::Malformed(e.to_string()),
        }
    })?;
    let raw = data.claims;
    let mut claims: IdClaims =
        serde_json::from_value(raw.clone()).map_err(|e| IdTokenError::Malformed(e.to_string()))?;
    if claims.iss.trim_end_matches('/') != issuer.trim_end_matches('/') {
        return Err(IdTokenError::WrongIssuer(claims.iss));
    }
    if claims.nonce.as_deref() != Some(nonce) {
        return Err(IdTokenError::WrongNonce);
    }
    claims.groups = match raw.get(groups_claim) {
        Some(serde_json::Value::Array(a)) => a.iter().filter_map(|g| g.as_str().map(str::to_owned)).collect(),
        Some(serde_json::Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    };
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header};

    const KEY: &[u8] = include_bytes!("../../testdata/oidc-test-key.pem");
    const JWK: &str = include_str!("../../testdata/oidc-test-jwk.json");
    const ISS: &str = "https://idp.example.test";

    fn jwks() -> JwkSet {
        serde_json::from_str(&format!("{{\"keys\":[{JWK}]}}")).unwrap()
    }

    fn sign(claims: serde_json::Value, kid: &str) -> String {
        let mut h = Header::new(Algorithm::RS256);
        h.kid = Some(kid.into());
        jsonwebtoken::encode(&h, &claims, &EncodingKey::from_rsa_pem(KEY).unwrap()).unwrap()
    }

    fn claims(over: serde_json::Value) -> serde_json::Value {
        let now = chrono::Utc::now().timestamp();
        let mut c = serde_json::json!({
            "iss": ISS, "sub": "u-1", "aud": "terraplane", "exp": now + 300, "iat": now,
            "email": "sso@example.com", "nonce": "n-1", "groups": ["infra-leads", "devs"]
        });
        for (k, v) in over.as_object().unwrap() {
            c[k] = v.clone();
        }
        c
    }

    fn check(token: &str) -> Result<IdClaims, IdTokenError> {
        verify_id_token(token, &jwks(), ISS, "terraplane", "n-1", "groups")
    }

    #[test]
    fn accepts_a_valid_token_and_reads_groups() {
        let c = check(&sign(claims(serde_json::json!({})), "test-key-1")).unwrap();
        assert_eq!(c.sub, "u-1");
        assert_eq!(c.email.as_deref(), Some("sso@example.com"));
        assert_eq!(c.groups, ["infra-leads", "devs"]);
    }

    #[test]
    fn refuses_wrong_issuer_audience_nonce_expiry_and_key() {
        let now = chrono::Utc::now().timestamp();
        let cases = [
            (
                serde_json::json!({"iss": "https://evil.example"}),
                IdTokenError::WrongIssuer("https://evil.example".into()),
            ),
            (serde_json::json!({"aud": "someone-else"}), IdTokenError::WrongAudience),
            (serde_json::json!({"nonce": "replayed"}), IdTokenError::WrongNonce),
            (serde_json::json!({"exp": now - 3600}), IdTokenError::Expired),
        ];
        for (over, want) in cases {
            assert_eq!(
                check(&sign(claims(over.clone()), "test-key-1")).unwrap_err(),
                want,
                "{over}"
            );
        }
        assert_eq!(
            check(&sign(claims(serde_json::json!({})), "other-kid")).unwrap_err(),
            IdTokenError::UnknownKey
        );
        // A token whose payload was changed after signing.
        let t = sign(claims(serde_json::json!({})), "test-key-1");
        let parts: Vec<&str> = t.split('.').collect();
        let forged_payload = {
            use base64::Engine;
            let e = base64::engine::general_purpose::URL_SAFE_NO_PAD;
            let mut p: serde_json::Value = serde_json::from_slice(&e.decode(parts[1]).unwrap()).unwrap();
            p["email"] = "admin@example.com".into();
            e.encode(p.to_string())
        };
        let forged = format!("{}.{}.{}", parts[0], forged_payload, parts[2]);
        assert_eq!(check(&forged).unwrap_err(), IdTokenError::BadSignature);
        // HMAC-signed tokens are refused outright.
        let hs = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims(serde_json::json!({})),
            &EncodingKey::from_secret(b"k"),
        )
        .unwrap();
        assert!(matches!(check(&hs).unwrap_err(), IdTokenError::Algorithm(_)));
        assert!(matches!(check("not.a.jwt").unwrap_err(), IdTokenError::Malformed(_)));
    }
}
