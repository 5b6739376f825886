//! Login sessions: short-lived access tokens renewed with a rotated refresh token;
//! reusing a rotated refresh token ends the session; logout ends it too.

use serde_json::{Value, json};

use crate::both_backends;
use crate::harness::*;

async fn gql(app: &TestApp, token: Option<&str>, q: &str, vars: Value) -> Value {
    let mut req = app
        .http()
        .post(format!("{}/graphql", app.base))
        .json(&json!({"query": q, "variables": vars}));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().await.unwrap().json().await.unwrap()
}

const LOGIN: &str = "mutation { login(email: \"admin@terraplane.local\", password: \"admin-password\") { token refreshToken expiresAt } }";
const REFRESH: &str =
    "mutation($r: String!) { refresh(refreshToken: $r) { token refreshToken organization { slug } } }";
const ME: &str = "{ me { name } }";

async fn sessions(app: TestApp) {
    let l = gql(&app, None, LOGIN, json!({})).await;
    let access = l["data"]["login"]["token"].as_str().unwrap().to_owned();
    let refresh1 = l["data"]["login"]["refreshToken"].as_str().unwrap().to_owned();
    let expires: chrono::DateTime<chrono::Utc> = l["data"]["login"]["expiresAt"].as_str().unwrap().parse().unwrap();
    let ttl = expires - chrono::Utc::now();
    assert!(
        ttl <= chrono::Duration::minutes(15) && ttl > chrono::Duration::minutes(14),
        "access tokens are short-lived: {ttl}"
    );
    assert_eq!(
        gql(&app, Some(&access), ME, json!({})).await["data"]["me"]["name"],
        "admin@terraplane.local"
    );

    // Refresh rotates: a new pair, and the old access token keeps working until it expires.
    let r = gql(&app, None, REFRESH, json!({"r": refresh1})).await;
    let access2 = r["data"]["refresh"]["token"].as_str().unwrap().to_owned();
    let refresh2 = r["data"]["refresh"]["refreshToken"].as_str().unwrap().to_owned();
    assert_ne!(refresh1, refresh2);
    assert_eq!(r["data"]["refresh"]["organization"]["slug"], "default");
    assert!(gql(&app, Some(&access2), ME, json!({})).await["data"]["me"].is_object());
    // Replaying the first refresh token ends the whole session.
    let replay = gql(&app, None, REFRESH, json!({"r": refresh1})).await;
    assert_eq!(replay["errors"][0]["extensions"]["code"], "unauthenticated", "{replay}");
    assert!(
        replay["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("already used")
    );
    let dead = gql(&app, Some(&access2), ME, json!({})).await;
    assert_eq!(dead["errors"][0]["extensions"]["code"], "unauthenticated", "{dead}");
    let dead = gql(&app, None, REFRESH, json!({"r": refresh2})).await;
    assert_eq!(dead["errors"][0]["extensions"]["code"], "unauthenticated", "{dead}");

    // Logout ends a fresh session: access and refresh tokens both stop working.
    let l = gql(&app, None, LOGIN, json!({})).await;
    let access = l["data"]["login"]["token"].as_str().unwrap().to_owned();
    let refresh = l["data"]["login"]["refreshToken"].as_str().unwrap().to_owned();
    assert_eq!(
        gql(&app, Some(&access), "mutation { logout }", json!({})).await["data"]["logout"],
        true
    );
    assert_eq!(
        gql(&app, Some(&access), ME, json!({})).await["errors"][0]["extensions"]["code"],
        "unauthenticated"
    );
    assert_eq!(
        gql(&app, None, REFRESH, json!({"r": refresh})).await["errors"][0]["extensions"]["code"],
        "unauthenticated"
    );
    // Garbage and API keys: refused cleanly.
    assert_eq!(
        gql(&app, None, REFRESH, json!({"r": "tpr_nope"})).await["errors"][0]["extensions"]["code"],
        "unauthenticated"
    );
    let r = gql(&app, Some(ADMIN_TOKEN), "mutation { logout }", json!({})).await;
    assert_eq!(r["errors"][0]["extensions"]["code"], "bad_request", "{r}");
    // The logout is in the audit trail.
    let ev = gql(
        &app,
        Some(ADMIN_TOKEN),
        "{ auditEvents(action: \"logout\") { actor } }",
        json!({}),
    )
    .await;
    assert_eq!(ev["data"]["auditEvents"], json!([{"actor": "admin@terraplane.local"}]));
    let refreshed = gql(
        &app,
        Some(ADMIN_TOKEN),
        "{ auditEvents(action: \"login.refresh\") { actor } }",
        json!({}),
    )
    .await;
    assert_eq!(
        refreshed["data"]["auditEvents"],
        json!([{"actor": "admin@terraplane.local"}])
    );
    app.teardown().await;
}
both_backends!(
    login_sessions,
    Options {
        runners: 0,
        ..Options::default()
    },
    sessions
);

const SIGN_UP: &str = "mutation($e: String!, $p: String!, $o: String!) { signUp(email: $e, password: $p, organization: $o) { token organization { slug } } }";

async fn sign_up_disabled(app: TestApp) {
    let r = gql(
        &app,
        None,
        SIGN_UP,
        json!({"e": "new@example.com", "p": "a-long-password-1", "o": "newco"}),
    )
    .await;
    assert_eq!(r["errors"][0]["extensions"]["code"], "forbidden", "{r}");
    assert!(
        app.store.get_user_by_email("new@example.com").await.is_err(),
        "nothing created"
    );
    app.teardown().await;
}
both_backends!(
    signup_disabled,
    Options {
        runners: 0,
        ..Options::default()
    },
    sign_up_disabled
);

async fn sign_up_enabled(app: TestApp) {
    let r = gql(
        &app,
        None,
        SIGN_UP,
        json!({"e": "new@example.com", "p": "a-long-password-1", "o": "newco"}),
    )
    .await;
    assert_eq!(r["data"]["signUp"]["organization"]["slug"], "newco", "{r}");
    let token = r["data"]["signUp"]["token"].as_str().unwrap().to_owned();
    let me = gql(
        &app,
        Some(&token),
        "{ me { name role organization { slug } } stacks { id } }",
        json!({}),
    )
    .await;
    assert_eq!(me["data"]["me"]["role"], "owner");
    assert_eq!(
        me["data"]["stacks"],
        json!([]),
        "a new organization sees nothing of others"
    );
    for (vars, code) in [
        (
            json!({"e": "new@example.com", "p": "a-long-password-1", "o": "other"}),
            "user_exists",
        ),
        (
            json!({"e": "x@example.com", "p": "a-long-password-1", "o": "newco"}),
            "organization_exists",
        ),
        (json!({"e": "y@example.com", "p": "short", "o": "y"}), "bad_request"),
        (
            json!({"e": "not-an-email", "p": "a-long-password-1", "o": "z"}),
            "bad_request",
        ),
        (
            json!({"e": "z@example.com", "p": "a-long-password-1", "o": "Bad Slug"}),
            "bad_request",
        ),
    ] {
        let r = gql(&app, None, SIGN_UP, vars.clone()).await;
        assert_eq!(r["errors"][0]["extensions"]["code"], code, "{vars}: {r}");
    }
    // A refused sign-up leaves nothing half-made.
    assert!(app.store.get_user_by_email("x@example.com").await.is_err());
    app.teardown().await;
}
both_backends!(
    signup_enabled,
    Options {
        runners: 0,
        signup: true,
        ..Options::default()
    },
    sign_up_enabled
);
