//! The OpenID Connect authorization code flow with PKCE, at `/auth/oidc/login` and
//! `/auth/oidc/callback`. Login stores a one-time state with the nonce and PKCE verifier
//! and redirects to the provider; the callback consumes the state, exchanges the code
//! (with the verifier), verifies the ID token, and only then provisions or links the user,
//! joins them to the configured organization and maps their groups to teams of the same
//! slug. It answers with a login session, like the `login` mutation.

use actix_web::{HttpRequest, HttpResponse, web};
use oauth2::basic::{
    BasicErrorResponse, BasicRevocationErrorResponse, BasicTokenIntrospectionResponse, BasicTokenType,
};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, ExtraTokenFields, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, Scope, StandardRevocableToken, StandardTokenResponse, TokenUrl,
};
use serde::{Deserialize, Serialize};

use crate::AppState;
use crate::auth::RequestMeta;
use crate::error::{ApiError, ApiResult};
use crate::service::Shared;
use crate::sso::oidc::verify_id_token;

#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct IdTokenFields {
    id_token: Option<String>,
}

impl ExtraTokenFields for IdTokenFields {}

type OidcClient = oauth2::Client<
    BasicErrorResponse,
    StandardTokenResponse<IdTokenFields, BasicTokenType>,
    BasicTokenIntrospectionResponse,
    StandardRevocableToken,
    BasicRevocationErrorResponse,
>;

#[derive(Deserialize)]
struct Discovery {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
}

struct Settings {
    issuer: String,
    client_id: String,
    client_secret: String,
    groups_claim: String,
    organization: String,
}

fn settings(st: &AppState) -> ApiResult<Settings> {
    let s = &st.cfg.sso;
    match (&s.oidc_issuer, &s.oidc_client_id, &s.oidc_client_secret) {
        (Some(issuer), Some(id), Some(secret)) => Ok(Settings {
            issuer: issuer.trim_end_matches('/').to_owned(),
            client_id: id.clone(),
            client_secret: secret.expose().to_owned(),
            groups_claim: s.oidc_groups_claim.clone().unwrap_or_else(|| "groups".into()),
            organization: s.oidc_organization.clone().unwrap_or_else(|| "default".into()),
        }),
        _ => Err(ApiError::NotFound("single sign-on")),
    }
}

pub(crate) fn http() -> ApiResult<reqwest::Client> {
    // No redirects: an authorization server must answer the token request itself.
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(15))
        .build()
        .map_err(|e| ApiError::Internal(e.into()))
}

async fn discover(http: &reqwest::Client, issuer: &str) -> ApiResult<Discovery> {
    let url = format!("{issuer}/.well-known/openid-configuration");
    let unavailable = |e: String| ApiError::Unavailable(format!("identity provider unavailable: {e}"));
    let d: Discovery = http
        .get(&url)
        .send()
        .await
        .map_err(|e| unavailable(e.to_string()))?
        .error_for_status()
        .map_err(|e| unavailable(e.to_string()))?
        .json()
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    if d.issuer.trim_end_matches('/') != issuer {
        return Err(unavailable(format!("discovery names issuer {:?}", d.issuer)));
    }
    Ok(d)
}

fn random_token() -> String {
    use rand::RngCore;
    let mut b = [0u8; 24];
    rand::thread_rng().fill_bytes(&mut b);
    hex::encode(b)
}

/// The OAuth2 client for a discovered provider (a macro: the client's type changes with
/// each endpoint set, and naming it would add nothing).
macro_rules! oidc_client {
    ($st:expr, $s:expr, $d:expr) => {{
        let bad = |e: String| ApiError::Unavailable(format!("identity provider misconfigured: {e}"));
        let redirect = format!("{}/auth/oidc/callback", $st.public_url);
        OidcClient::new(ClientId::new($s.client_id.clone()))
            .set_client_secret(ClientSecret::new($s.client_secret.clone()))
            .set_auth_uri(AuthUrl::new($d.authorization_endpoint.clone()).map_err(|e| bad(e.to_string()))?)
            .set_token_uri(TokenUrl::new($d.token_endpoint.clone()).map_err(|e| bad(e.to_string()))?)
            .set_redirect_uri(RedirectUrl::new(redirect).map_err(|e| bad(e.to_string()))?)
    }};
}

/// This provider's routes; `config` registers exactly these.
pub const ROUTES: &[(&str, &str)] = &[("GET", "/auth/oidc/login"), ("GET", "/auth/oidc/callback")];

pub fn config(cfg: &mut web::ServiceConfig) {
    for (_, path) in ROUTES {
        if path.ends_with("/login") {
            cfg.route(path, web::get().to(login));
        } else {
            cfg.route(path, web::get().to(callback));
        }
    }
}

/// `?return_to=` of a login start (a waiting CLI's loopback address).
#[derive(Deserialize)]
pub(crate) struct Start {
    pub(crate) return_to: Option<String>,
}

async fn login(st: web::Data<Shared>, start: web::Query<Start>) -> ApiResult<HttpResponse> {
    let return_to = crate::sso::provision::loopback_return_to(start.return_to.as_deref())?;
    let s = settings(&st)?;
    let http = http()?;
    let d = discover(&http, &s.issuer).await?;
    let c = oidc_client!(st, s, d);
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let nonce = random_token();
    let (url, csrf) = c
        .authorize_url(CsrfToken::new_random)
        .add_scope(Scope::new("openid".into()))
        .add_scope(Scope::new("email".into()))
        .add_scope(Scope::new("profile".into()))
        .add_extra_param("nonce", &nonce)
        .set_pkce_challenge(challenge)
        .url();
    st.store
        .create_sso_login(csrf.secret(), &nonce, verifier.secret(), return_to, st.clock.now())
        .await?;
    Ok(HttpResponse::Found()
        .insert_header(("Location", url.to_string()))
        .finish())
}

#[derive(Deserialize)]
struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

async fn callback(st: web::Data<Shared>, req: HttpRequest, q: web::Query<Callback>) -> ApiResult<HttpResponse> {
    let s = settings(&st)?;
    let refused = |why: String| ApiError::Unauthenticated(format!("single sign-on refused: {why}"));
    if let Some(e) = &q.error {
        return Err(refused(format!(
            "{e}: {}",
            q.error_description.as_deref().unwrap_or("")
        )));
    }
    let (Some(code), Some(state)) = (&q.code, &q.state) else {
        return Err(ApiError::BadRequest("the callback needs code and state".into()));
    };
    let now = st.clock.now();
    let Some((nonce, verifier, return_to)) = st.store.take_sso_login(state, now).await? else {
        return Err(refused("unknown, reused or expired login state".into()));
    };
    let http = http()?;
    let d = discover(&http, &s.issuer).await?;
    let c = oidc_client!(st, s, d);
    let token = c
        .exchange_code(AuthorizationCode::new(code.clone()))
        .set_pkce_verifier(PkceCodeVerifier::new(verifier))
        .request_async(&http)
        .await
        .map_err(|e| refused(format!("code exchange failed: {e}")))?;
    use oauth2::TokenResponse as _;
    let id_token = token
        .extra_fields()
        .id_token
        .clone()
        .ok_or_else(|| refused("no ID token in the token response".into()))?;
    let jwks: jsonwebtoken::jwk::JwkSet = http
        .get(&d.jwks_uri)
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map_err(|e| ApiError::Unavailable(format!("identity provider keys unavailable: {e}")))?
        .json()
        .await
        .map_err(|e| ApiError::Unavailable(format!("identity provider keys unreadable: {e}")))?;
    let claims = verify_id_token(&id_token, &jwks, &s.issuer, &s.client_id, &nonce, &s.groups_claim)
        .map_err(|e| refused(e.to_string()))?;
    let _ = token.access_token();
    let meta = RequestMeta::of(&req);
    let body = crate::sso::provision::sign_in(&st, &s.organization, &claims, &meta).await?;
    crate::sso::provision::respond(body, return_to)
}
