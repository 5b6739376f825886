//! Single sign-on end to end against an OpenID provider served by the test on localhost:
//! discovery, JWKS, and a token endpoint that checks the PKCE verifier and signs ID tokens
//! (RS256) with the nonce of the authorization request. The test plays the browser.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use terraplane_test_support::mock::{MockServer, Reply, Request};

use crate::harness::*;

const KEY: &[u8] = include_bytes!("../../../api/testdata/oidc-test-key.pem");
const JWK: &str = include_str!("../../../api/testdata/oidc-test-jwk.json");

/// How the provider misbehaves, per test.
#[derive(Clone, Default)]
struct Quirks {
    nonce: Option<String>,
    audience: Option<String>,
    issuer: Option<String>,
    expired: bool,
}

struct Provider {
    server: MockServer,
    /// code → (nonce, code_challenge)
    codes: Arc<Mutex<HashMap<String, (String, String)>>>,
    quirks: Arc<Mutex<Quirks>>,
}

fn form(body: &[u8]) -> HashMap<String, String> {
    url::form_urlencoded::parse(body).into_owned().collect()
}

async fn provider(groups: Vec<&'static str>) -> Provider {
    let codes: Arc<Mutex<HashMap<String, (String, String)>>> = Arc::default();
    let quirks: Arc<Mutex<Quirks>> = Arc::default();
    let issuer: Arc<OnceLock<String>> = Arc::default();
    let (c, q, iss) = (codes.clone(), quirks.clone(), issuer.clone());
    let server = MockServer::start(move |r: &Request| {
        let iss = iss.get().cloned().unwrap_or_default();
        match r.path.as_str() {
            "/.well-known/openid-configuration" => Reply::json(
                200,
                json!({
                    "issuer": iss, "authorization_endpoint": format!("{iss}/authorize"),
                    "token_endpoint": format!("{iss}/token"), "jwks_uri": format!("{iss}/jwks"),
                }),
            ),
            "/jwks" => Reply::json(200, serde_json::from_str(&format!("{{\"keys\":[{JWK}]}}")).unwrap()),
            "/token" => {
                let f = form(&r.body);
                let Some((nonce, challenge)) = f.get("code").and_then(|code| c.lock().unwrap().remove(code)) else {
                    return Reply::json(400, json!({"error": "invalid_grant"}));
                };
                let verifier = f.get("code_verifier").cloned().unwrap_or_default();
                let computed =
                    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
                if computed != challenge {
                    return Reply::json(
                        400,
                        json!({"error": "invalid_grant", "error_description": "PKCE verifier mismatch"}),
                    );
                }
                let quirks = q.lock().unwrap().clone();
                let now = chrono::Utc::now().timestamp();
                let claims = json!({
                    "iss": quirks.issuer.unwrap_or(iss.clone()), "sub": "idp-user-42",
                    "aud": quirks.audience.unwrap_or("terraplane-test".into()),
                    "exp": if quirks.expired { now - 3600 } else { now + 300 }, "iat": now,
                    "email": "sso.user@example.com", "email_verified": true, "name": "Sso User",
                    "nonce": quirks.nonce.unwrap_or(nonce), "groups": groups,
                });
                let mut h = Header::new(Algorithm::RS256);
                h.kid = Some("test-key-1".into());
                let id_token = jsonwebtoken::encode(&h, &claims, &EncodingKey::from_rsa_pem(KEY).unwrap()).unwrap();
                Reply::json(
                    200,
                    json!({"access_token": "at", "token_type": "Bearer", "expires_in": 300, "id_token": id_token}),
                )
            }
            _ => Reply::text(404, "not found"),
        }
    })
    .await
    .unwrap();
    issuer.set(server.url().trim_end_matches('/').to_owned()).unwrap();
    Provider { server, codes, quirks }
}

async fn sso_app(p: &Provider, backend: Backend) -> Option<TestApp> {
    let mut opts = Options {
        runners: 0,
        ..Options::default()
    };
    opts.sso_issuer = Some(p.server.url().trim_end_matches('/').to_owned());
    spawn(backend, opts).await
}

/// Starts a login, "authenticates" at the provider, returns the callback's answer.
async fn browser_login(app: &TestApp, p: &Provider, tamper_state: bool) -> (u16, Value) {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = http.get(format!("{}/auth/oidc/login", app.base)).send().await.unwrap();
    assert_eq!(r.status(), 302);
    let loc = url::Url::parse(r.headers()["location"].to_str().unwrap()).unwrap();
    let q: HashMap<String, String> = loc.query_pairs().into_owned().collect();
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["code_challenge_method"], "S256");
    assert!(q["scope"].contains("openid"));
    assert_eq!(q["redirect_uri"], format!("{}/auth/oidc/callback", app.base));
    let code = format!("code-{}", uuid::Uuid::new_v4());
    p.codes
        .lock()
        .unwrap()
        .insert(code.clone(), (q["nonce"].clone(), q["code_challenge"].clone()));
    let state = if tamper_state {
        "forged-state".to_owned()
    } else {
        q["state"].clone()
    };
    let r = http
        .get(format!("{}/auth/oidc/callback", app.base))
        .query(&[("code", code.as_str()), ("state", state.as_str())])
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn provisions_and_maps_groups(backend: Backend) {
    let p = provider(vec!["infra-leads", "unknown-group"]).await;
    let Some(app) = sso_app(&p, backend).await else { return };
    app.client
        .graphql::<Value>("mutation { teamCreate(slug: \"infra-leads\") { id } }", json!({}))
        .await
        .unwrap();
    app.client
        .graphql::<Value>("mutation { spaceCreate(slug: \"prod\") { id } }", json!({}))
        .await
        .unwrap();
    app.client
        .graphql::<Value>(
            "mutation { roleGrant(space: \"prod\", subject: {team: \"infra-leads\"}, role: \"writer\") { role } }",
            json!({}),
        )
        .await
        .unwrap();

    let (status, body) = browser_login(&app, &p, false).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["email"], "sso.user@example.com");
    assert_eq!(body["organization"], "default");
    assert_eq!(body["teams"], json!(["infra-leads"]));
    let me = app.client.with_token(Some(body["token"].as_str().unwrap().to_owned()));
    let v: Value = me
        .graphql("{ me { name role } spaces { id } }", json!({}))
        .await
        .unwrap();
    assert_eq!(v["me"]["name"], "sso.user@example.com");
    assert_eq!(v["me"]["role"], "member");
    assert_eq!(v["spaces"], json!([{"id": "prod"}]), "the team's grant applies");
    // A second login finds the same user through the linked identity.
    let (status, body) = browser_login(&app, &p, false).await;
    assert_eq!(status, 200, "{body}");
    let users: Value = app.client.graphql("{ users { email } }", json!({})).await.unwrap();
    assert_eq!(
        users["users"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|u| u["email"] == "sso.user@example.com")
            .count(),
        1
    );
    let ev: Value = app
        .client
        .graphql("{ auditEvents(action: \"login.sso\") { actor } }", json!({}))
        .await
        .unwrap();
    assert_eq!(ev["auditEvents"].as_array().unwrap().len(), 2);
    // A CLI waiting on a loopback port gets the session by redirect; other targets are refused.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for bad in [
        "https://evil.example/cb",
        "http://10.0.0.1:8080/cb",
        "http://127.0.0.1/cb",
    ] {
        let r = http
            .get(format!("{}/auth/oidc/login", app.base))
            .query(&[("return_to", bad)])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{bad}");
    }
    let r = http
        .get(format!("{}/auth/oidc/login", app.base))
        .query(&[("return_to", "http://127.0.0.1:9/callback")])
        .send()
        .await
        .unwrap();
    let loc = url::Url::parse(r.headers()["location"].to_str().unwrap()).unwrap();
    let q: HashMap<String, String> = loc.query_pairs().into_owned().collect();
    let code = "cli-code".to_owned();
    p.codes
        .lock()
        .unwrap()
        .insert(code.clone(), (q["nonce"].clone(), q["code_challenge"].clone()));
    let r = http
        .get(format!("{}/auth/oidc/callback", app.base))
        .query(&[("code", code.as_str()), ("state", q["state"].as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 302);
    let back = url::Url::parse(r.headers()["location"].to_str().unwrap()).unwrap();
    assert_eq!(back.host_str(), Some("127.0.0.1"));
    assert_eq!(back.port(), Some(9));
    let got: HashMap<String, String> = back.query_pairs().into_owned().collect();
    assert!(
        got["token"].len() > 20 && got["refresh_token"].starts_with("tpr_"),
        "{got:?}"
    );
    assert_eq!(got["organization"], "default");
    app.teardown().await;
}

async fn refuses_bad_logins(backend: Backend) {
    let p = provider(vec![]).await;
    let Some(app) = sso_app(&p, backend).await else { return };
    let (status, body) = browser_login(&app, &p, true).await;
    assert_eq!(status, 401, "{body}");
    assert!(body["message"].as_str().unwrap().contains("state"), "{body}");
    for (quirks, needle) in [
        (
            Quirks {
                nonce: Some("replayed".into()),
                ..Quirks::default()
            },
            "nonce",
        ),
        (
            Quirks {
                issuer: Some("https://evil.example".into()),
                ..Quirks::default()
            },
            "issuer",
        ),
        (
            Quirks {
                audience: Some("another-client".into()),
                ..Quirks::default()
            },
            "client",
        ),
        (
            Quirks {
                expired: true,
                ..Quirks::default()
            },
            "expired",
        ),
    ] {
        *p.quirks.lock().unwrap() = quirks;
        let (status, body) = browser_login(&app, &p, false).await;
        assert_eq!(status, 401, "{needle}: {body}");
        assert!(body["message"].as_str().unwrap().contains(needle), "{needle}: {body}");
    }
    // Nothing was provisioned by any refused login.
    assert!(app.store.get_user_by_email("sso.user@example.com").await.is_err());
    // A login state works once.
    *p.quirks.lock().unwrap() = Quirks::default();
    assert_eq!(browser_login(&app, &p, false).await.0, 200);
    app.teardown().await;
}

macro_rules! sso_tests {
    ($($name:ident => $body:ident),* $(,)?) => {
        $(
            mod $name {
                use super::*;
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn sqlite() {
                    $body(Backend::Sqlite).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn postgres() {
                    $body(Backend::Postgres).await;
                }
            }
        )*
    };
}

sso_tests!(
    sso_provisions_the_user_and_maps_groups_to_teams => provisions_and_maps_groups,
    sso_refuses_bad_state_nonce_issuer_audience_and_expiry => refuses_bad_logins,
);

/// A GitHub stand-in: OAuth token endpoint (checks PKCE) and the REST API.
async fn github(verified: bool) -> (MockServer, Arc<Mutex<HashMap<String, String>>>) {
    let codes: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let c = codes.clone();
    let server = MockServer::start(move |r: &Request| match (r.method.as_str(), r.path.as_str()) {
        ("POST", "/login/oauth/access_token") => {
            let f = form(&r.body);
            let Some(challenge) = f.get("code").and_then(|code| c.lock().unwrap().remove(code)) else {
                return Reply::json(400, json!({"error": "bad_verification_code"}));
            };
            let verifier = f.get("code_verifier").cloned().unwrap_or_default();
            let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
            if computed != challenge {
                return Reply::json(400, json!({"error": "bad_verification_code"}));
            }
            Reply::json(
                200,
                json!({"access_token": "gho_test", "token_type": "bearer", "scope": "read:user"}),
            )
        }
        ("GET", "/user") if r.header("authorization").as_deref() == Some("Bearer gho_test") => {
            Reply::json(200, json!({"id": 4242, "login": "octo", "name": "Octo Cat"}))
        }
        ("GET", "/user/emails") => Reply::json(
            200,
            json!([{"email": "octo@example.com", "primary": true, "verified": verified}]),
        ),
        ("GET", "/user/teams") => Reply::json(200, json!([{"slug": "infra-leads"}, {"slug": "other"}])),
        _ => Reply::text(404, "not found"),
    })
    .await
    .unwrap();
    (server, codes)
}

async fn github_login(app: &TestApp, codes: &Arc<Mutex<HashMap<String, String>>>) -> (u16, Value) {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = http
        .get(format!("{}/auth/github/login", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 302);
    let loc = url::Url::parse(r.headers()["location"].to_str().unwrap()).unwrap();
    assert_eq!(loc.path(), "/login/oauth/authorize");
    let q: HashMap<String, String> = loc.query_pairs().into_owned().collect();
    let code = format!("gh-{}", uuid::Uuid::new_v4());
    codes.lock().unwrap().insert(code.clone(), q["code_challenge"].clone());
    let r = http
        .get(format!("{}/auth/github/callback", app.base))
        .query(&[("code", code.as_str()), ("state", q["state"].as_str())])
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn github_app(server: &MockServer, backend: Backend) -> Option<TestApp> {
    let mut opts = Options {
        runners: 0,
        ..Options::default()
    };
    opts.github_url = Some(server.url().trim_end_matches('/').to_owned());
    spawn(backend, opts).await
}

async fn github_maps_teams(backend: Backend) {
    let (server, codes) = github(true).await;
    let Some(app) = github_app(&server, backend).await else {
        return;
    };
    app.client
        .graphql::<Value>("mutation { teamCreate(slug: \"infra-leads\") { id } }", json!({}))
        .await
        .unwrap();
    let (status, body) = github_login(&app, &codes).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["email"], "octo@example.com");
    assert_eq!(body["teams"], json!(["infra-leads"]));
    let me = app.client.with_token(Some(body["token"].as_str().unwrap().to_owned()));
    let v: Value = me.graphql("{ me { name } }", json!({})).await.unwrap();
    assert_eq!(v["me"]["name"], "octo@example.com");
    let teams: Value = app.client.graphql("{ teams { id members } }", json!({})).await.unwrap();
    assert_eq!(
        teams["teams"],
        json!([{"id": "infra-leads", "members": ["octo@example.com"]}])
    );
    // A forged state is refused before GitHub is asked anything.
    let http = reqwest::Client::new();
    let r = http
        .get(format!("{}/auth/github/callback?code=x&state=forged", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    app.teardown().await;
}

async fn github_requires_verified_email(backend: Backend) {
    let (server, codes) = github(false).await;
    let Some(app) = github_app(&server, backend).await else {
        return;
    };
    let (status, body) = github_login(&app, &codes).await;
    assert_eq!(status, 401, "{body}");
    assert!(body["message"].as_str().unwrap().contains("verified"), "{body}");
    assert!(
        app.store.get_user_by_email("octo@example.com").await.is_err(),
        "nothing provisioned"
    );
    app.teardown().await;
}

sso_tests!(
    github_provisions_and_maps_teams => github_maps_teams,
    github_refuses_unverified_emails => github_requires_verified_email,
);
