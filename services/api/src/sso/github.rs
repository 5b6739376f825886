//! GitHub OAuth login at `/auth/github/login` and `/auth/github/callback`: the
//! authorization code flow with state and PKCE (oauth2 crate), then the GitHub API for
//! the user, their verified primary email and their teams. Provisioning is shared with
//! OpenID Connect (`provision::sign_in`), with issuer `github` and the numeric user id as
//! subject.

use actix_web::{HttpRequest, HttpResponse, web};
use oauth2::basic::BasicClient;
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl,
    Scope, TokenResponse, TokenUrl,
};
use serde::Deserialize;

use crate::AppState;
use crate::auth::RequestMeta;
use crate::error::{ApiError, ApiResult};
use crate::service::Shared;
use crate::sso::flow::Start;
use crate::sso::oidc::IdClaims;

struct Settings {
    client_id: String,
    client_secret: String,
    web: String,
    api: String,
    organization: String,
}

fn settings(st: &AppState) -> ApiResult<Settings> {
    let s = &st.cfg.sso;
    match (&s.github_client_id, &s.github_client_secret) {
        (Some(id), Some(secret)) => Ok(Settings {
            client_id: id.clone(),
            client_secret: secret.expose().to_owned(),
            web: s
                .github_url
                .clone()
                .unwrap_or_else(|| "https://github.com".into())
                .trim_end_matches('/')
                .to_owned(),
            api: s
                .github_api_url
                .clone()
                .unwrap_or_else(|| "https://api.github.com".into())
                .trim_end_matches('/')
                .to_owned(),
            organization: s.oidc_organization.clone().unwrap_or_else(|| "default".into()),
        }),
        _ => Err(ApiError::NotFound("GitHub login")),
    }
}

macro_rules! github_client {
    ($st:expr, $s:expr) => {{
        let bad = |e: String| ApiError::Unavailable(format!("GitHub login misconfigured: {e}"));
        BasicClient::new(ClientId::new($s.client_id.clone()))
            .set_client_secret(ClientSecret::new($s.client_secret.clone()))
            .set_auth_uri(AuthUrl::new(format!("{}/login/oauth/authorize", $s.web)).map_err(|e| bad(e.to_string()))?)
            .set_token_uri(
                TokenUrl::new(format!("{}/login/oauth/access_token", $s.web)).map_err(|e| bad(e.to_string()))?,
            )
            .set_redirect_uri(
                RedirectUrl::new(format!("{}/auth/github/callback", $st.public_url)).map_err(|e| bad(e.to_string()))?,
            )
    }};
}

/// This provider's routes; `config` registers exactly these.
pub const ROUTES: &[(&str, &str)] = &[("GET", "/auth/github/login"), ("GET", "/auth/github/callback")];

pub fn config(cfg: &mut web::ServiceConfig) {
    for (_, path) in ROUTES {
        if path.ends_with("/login") {
            cfg.route(path, web::get().to(login));
        } else {
            cfg.route(path, web::get().to(callback));
        }
    }
}

async fn login(st: web::Data<Shared>, start: web::Query<Start>) -> ApiResult<HttpResponse> {
    let return_to = crate::sso::provision::loopback_return_to(start.return_to.as_deref())?;
    let s = settings(&st)?;
    let c = github_client!(st, s);
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, csrf) = c
        .authorize_url(CsrfToken::new_random)
        .add_scope(Scope::new("read:user".into()))
        .add_scope(Scope::new("user:email".into()))
        .add_scope(Scope::new("read:org".into()))
        .set_pkce_challenge(challenge)
        .url();
    // GitHub has no nonce; the state alone binds the callback to this login.
    st.store
        .create_sso_login(csrf.secret(), "", verifier.secret(), return_to, st.clock.now())
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
}

#[derive(Deserialize)]
struct GhUser {
    id: i64,
    login: String,
    name: Option<String>,
}

#[derive(Deserialize)]
struct GhEmail {
    email: String,
    primary: bool,
    verified: bool,
}

#[derive(Deserialize)]
struct GhTeam {
    slug: String,
}

async fn api<T: serde::de::DeserializeOwned>(http: &reqwest::Client, url: String, token: &str) -> ApiResult<T> {
    http.get(url)
        .bearer_auth(token)
        .header("accept", "application/vnd.github+json")
        .header("user-agent", "terraplane")
        .send()
        .await
        .and_then(|r| r.error_for_status())
        .map_err(|e| ApiError::Unavailable(format!("GitHub API: {e}")))?
        .json()
        .await
        .map_err(|e| ApiError::Unavailable(format!("GitHub API answered unexpectedly: {e}")))
}

async fn callback(st: web::Data<Shared>, req: HttpRequest, q: web::Query<Callback>) -> ApiResult<HttpResponse> {
    let s = settings(&st)?;
    let refused = |why: String| ApiError::Unauthenticated(format!("GitHub login refused: {why}"));
    if let Some(e) = &q.error {
        return Err(refused(e.clone()));
    }
    let (Some(code), Some(state)) = (&q.code, &q.state) else {
        return Err(ApiError::BadRequest("the callback needs code and state".into()));
    };
    let Some((_, verifier, return_to)) = st.store.take_sso_login(state, st.clock.now()).await? else {
        return Err(refused("unknown, reused or expired login state".into()));
    };
    let http = crate::sso::flow::http()?;
    let c = github_client!(st, s);
    let token = c
        .exchange_code(AuthorizationCode::new(code.clone()))
        .set_pkce_verifier(PkceCodeVerifier::new(verifier))
        .request_async(&http)
        .await
        .map_err(|e| refused(format!("code exchange failed: {e}")))?;
    let access = token.access_token().secret();
    let user: GhUser = api(&http, format!("{}/user", s.api), access).await?;
    let emails: Vec<GhEmail> = api(&http, format!("{}/user/emails", s.api), access).await?;
    let email = emails
        .into_iter()
        .find(|e| e.primary && e.verified)
        .map(|e| e.email)
        .ok_or_else(|| refused("the GitHub account has no verified primary email".into()))?;
    let teams: Vec<GhTeam> = api(&http, format!("{}/user/teams", s.api), access).await?;
    let claims = IdClaims {
        iss: "github".into(),
        sub: user.id.to_string(),
        email: Some(email),
        email_verified: Some(true),
        name: user.name.or(Some(user.login)),
        nonce: None,
        groups: teams.into_iter().map(|t| t.slug).collect(),
    };
    let body = crate::sso::provision::sign_in(&st, &s.organization, &claims, &RequestMeta::of(&req)).await?;
    crate::sso::provision::respond(body, return_to)
}
