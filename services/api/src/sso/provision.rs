//! After a verified ID token: find the user by provider identity, else link by email,
//! else create them; make them a member of the SSO organization; add them to the teams
//! named by their groups; open a login session.

use serde::Serialize;
use terraplane_store::{NewAuditEvent, StoreError};

use crate::AppState;
use crate::auth::RequestMeta;
use crate::error::{ApiError, ApiResult};
use crate::sso::oidc::IdClaims;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SsoLogin {
    pub token: String,
    pub refresh_token: String,
    pub expires_at: chrono::DateTime<chrono::Utc>,
    pub organization: String,
    pub email: String,
    pub teams: Vec<String>,
}

/// Where a CLI waits for the result: only a loopback address (`http://127.0.0.1:PORT/…`
/// or `http://localhost:PORT/…`) is accepted, so tokens never leave the user's machine.
pub fn loopback_return_to(raw: Option<&str>) -> ApiResult<Option<String>> {
    let Some(raw) = raw else { return Ok(None) };
    let u = url::Url::parse(raw).map_err(|_| ApiError::BadRequest("return_to is not a URL".into()))?;
    let loopback =
        u.scheme() == "http" && matches!(u.host_str(), Some("127.0.0.1" | "localhost")) && u.port().is_some();
    if !loopback {
        return Err(ApiError::BadRequest(
            "return_to must be http://127.0.0.1:PORT/… (a local CLI)".into(),
        ));
    }
    Ok(Some(u.to_string()))
}

/// The answer to a successful callback: JSON, or a redirect to the waiting CLI.
pub fn respond(body: SsoLogin, return_to: Option<String>) -> ApiResult<actix_web::HttpResponse> {
    match return_to {
        None => Ok(actix_web::HttpResponse::Ok().json(body)),
        Some(r) => {
            let mut u = url::Url::parse(&r).map_err(|e| ApiError::Internal(e.into()))?;
            u.query_pairs_mut()
                .append_pair("token", &body.token)
                .append_pair("refresh_token", &body.refresh_token)
                .append_pair("expires_at", &body.expires_at.to_rfc3339())
                .append_pair("organization", &body.organization)
                .append_pair("email", &body.email);
            Ok(actix_web::HttpResponse::Found()
                .insert_header(("Location", u.to_string()))
                .finish())
        }
    }
}

pub async fn sign_in(st: &AppState, org_slug: &str, c: &IdClaims, meta: &RequestMeta) -> ApiResult<SsoLogin> {
    let now = st.clock.now();
    let org = st.store.get_org_by_slug(org_slug).await?;
    let user = match st.store.find_sso_identity(&c.iss, &c.sub).await? {
        Some(id) => st.store.get_user(id).await?,
        None => {
            let email =
                c.email.as_deref().filter(|e| e.contains('@')).ok_or_else(|| {
                    ApiError::Unauthenticated("single sign-on refused: the ID token has no email".into())
                })?;
            if c.email_verified == Some(false) {
                return Err(ApiError::Unauthenticated(
                    "single sign-on refused: the email is not verified".into(),
                ));
            }
            let user = match st.store.get_user_by_email(email).await {
                Ok(u) => u,
                Err(StoreError::NotFound(_)) => {
                    let name = c
                        .name
                        .clone()
                        .unwrap_or_else(|| email.split('@').next().unwrap_or(email).to_owned());
                    st.store.create_user(email, &name, None, false, now).await?
                }
                Err(e) => return Err(e.into()),
            };
            st.store.link_sso_identity(&c.iss, &c.sub, user.id, now).await?;
            user
        }
    };
    let scope = st.store.scope(org.id);
    // Login policies judge the login before anything is granted.
    let groups: Vec<String> = scope
        .list_teams()
        .await?
        .into_iter()
        .filter(|t| c.groups.iter().any(|g| g == &t.slug))
        .map(|t| t.slug)
        .collect();
    let admin = crate::policy::judge_login(st, &org, &user.email, &user.name, groups, meta.client_ip.clone()).await?;
    if scope.member_role(user.id).await?.is_none() {
        st.store.add_member(org.id, user.id, "member", now).await?;
    }
    let mut teams = Vec::new();
    for t in scope.list_teams().await? {
        if c.groups.iter().any(|g| g == &t.slug) {
            scope.add_team_member(t.id, user.id, now).await?;
            teams.push(t.slug);
        }
    }
    let e = NewAuditEvent {
        actor: user.email.clone(),
        action: "login.sso".into(),
        target_kind: "user".into(),
        target: user.email.clone(),
        after: Some(serde_json::json!({ "issuer": c.iss, "subject": c.sub, "teams": teams })),
        request_id: meta.request_id.clone(),
        client_ip: meta.client_ip.clone(),
        ..Default::default()
    };
    scope.append_audit(e, now).await?;
    let (token, refresh_token, expires_at) = crate::graphql::start_session(st, user.id, org.id, admin, now).await?;
    Ok(SsoLogin {
        token,
        refresh_token,
        expires_at,
        organization: org.slug,
        email: user.email,
        teams,
    })
}
