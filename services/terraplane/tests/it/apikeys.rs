//! API keys: personal keys act for their creator and never beyond; service keys have a
//! role organization-wide or on one space; secrets are shown once; expiry, revocation and
//! last use are enforced and visible.

use serde_json::{Value, json};
use terraplane_client::{Client, ClientError};

use crate::both_backends;
use crate::harness::*;

async fn gql(c: &Client, q: &str, vars: Value) -> Result<Value, ClientError> {
    c.graphql::<Value>(q, vars).await
}

const CREATE: &str = "mutation($n: String!, $k: String, $r: String, $s: String, $d: Int) { \
    apiKeyCreate(name: $n, kind: $k, role: $r, space: $s, expiresInDays: $d) { secret key { id kind role owner expiresAt } } }";

async fn keys(app: TestApp) {
    let owner = &app.client;
    gql(owner, "mutation { spaceCreate(slug: \"dev\") { id } }", json!({}))
        .await
        .unwrap();
    gql(
        owner,
        "mutation { userCreate(email: \"alice@example.com\", password: \"a-long-password-1\") { id } }",
        json!({}),
    )
    .await
    .unwrap();
    gql(
        owner,
        "mutation { roleGrant(space: \"dev\", subject: {user: \"alice@example.com\"}, role: \"writer\") { role } }",
        json!({}),
    )
    .await
    .unwrap();
    for (slug, space) in [("in-dev", "dev"), ("in-root", "root")] {
        let input = terraplane_client::StackCreateInput {
            slug: Some(slug.into()),
            name: slug.into(),
            repository: "file:///x".into(),
            ..Default::default()
        };
        let mut v = serde_json::to_value(&input).unwrap();
        v["space"] = json!(space);
        gql(
            owner,
            "mutation($i: StackCreateInput!) { stackCreate(input: $i) { id } }",
            json!({"i": v}),
        )
        .await
        .unwrap();
    }
    let login = owner
        .with_token(None)
        .login("alice@example.com", "a-long-password-1", None)
        .await
        .unwrap();
    let alice = owner.with_token(Some(login.token));

    // A personal key acts as alice: writer in dev, nothing in root.
    let k = gql(&alice, CREATE, json!({"n": "laptop"})).await.unwrap();
    let secret = k["apiKeyCreate"]["secret"].as_str().unwrap().to_owned();
    assert_eq!(k["apiKeyCreate"]["key"]["kind"], "personal");
    assert_eq!(k["apiKeyCreate"]["key"]["owner"], "alice@example.com");
    assert!(
        k["apiKeyCreate"]["key"]["expiresAt"].is_string(),
        "keys expire by default"
    );
    let personal = owner.with_token(Some(secret.clone()));
    assert!(personal.run_trigger("in-dev", true).await.is_ok());
    assert!(personal.stack("in-root").await.unwrap().is_none());
    // It can't do more than alice: creating a stack in dev needs admin.
    let r = personal.stack_delete("in-dev").await.unwrap_err();
    assert_eq!(r.code(), Some("forbidden"));
    // A narrowed personal key: reader, capped by alice.
    let k = gql(&alice, CREATE, json!({"n": "ro", "r": "reader"})).await.unwrap();
    let ro = owner.with_token(Some(k["apiKeyCreate"]["secret"].as_str().unwrap().to_owned()));
    assert_eq!(
        ro.run_trigger("in-dev", true).await.unwrap_err().code(),
        Some("forbidden")
    );
    assert!(ro.stack("in-dev").await.unwrap().is_some());
    // When alice loses her grant, so does her key.
    gql(
        owner,
        "mutation { roleRevoke(space: \"dev\", subject: {user: \"alice@example.com\"}) }",
        json!({}),
    )
    .await
    .unwrap();
    assert!(personal.stack("in-dev").await.unwrap().is_none());

    // Service keys: owners only; a role organization-wide or on one space.
    let r = gql(&alice, CREATE, json!({"n": "ci", "k": "service", "r": "writer"}))
        .await
        .unwrap_err();
    assert_eq!(r.code(), Some("forbidden"));
    let k = gql(owner, CREATE, json!({"n": "ci", "k": "service", "r": "reader"}))
        .await
        .unwrap();
    let reader = owner.with_token(Some(k["apiKeyCreate"]["secret"].as_str().unwrap().to_owned()));
    assert!(reader.stack("in-root").await.unwrap().is_some());
    assert_eq!(
        reader.run_trigger("in-root", true).await.unwrap_err().code(),
        Some("forbidden")
    );
    let k = gql(
        owner,
        CREATE,
        json!({"n": "deployer", "k": "service", "r": "writer", "s": "dev"}),
    )
    .await
    .unwrap();
    let deployer_id = k["apiKeyCreate"]["key"]["id"].as_str().unwrap().to_owned();
    let deployer = owner.with_token(Some(k["apiKeyCreate"]["secret"].as_str().unwrap().to_owned()));
    assert!(deployer.run_trigger("in-dev", true).await.is_ok());
    assert!(deployer.stack("in-root").await.unwrap().is_none());
    let bindings = gql(owner, "{ roleBindings { space subjectKind subject role } }", json!({}))
        .await
        .unwrap();
    assert_eq!(
        bindings["roleBindings"],
        json!([{"space": "dev", "subjectKind": "api_key", "subject": deployer_id, "role": "writer"}])
    );

    // Listing shows no secrets; last use is recorded; alice sees only her keys.
    let all = gql(owner, "{ apiKeys { id name kind lastUsedAt revokedAt } }", json!({}))
        .await
        .unwrap();
    assert!(!all.to_string().contains(&secret));
    let names: Vec<&str> = all["apiKeys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    for n in ["laptop", "ro", "ci", "deployer", "bootstrap"] {
        assert!(names.contains(&n), "{n} in {names:?}");
    }
    let deployer_row = all["apiKeys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == "deployer")
        .unwrap()
        .clone();
    assert!(deployer_row["lastUsedAt"].is_string(), "{deployer_row}");
    let mine = gql(&alice, "{ apiKeys { name } }", json!({})).await.unwrap();
    assert_eq!(mine["apiKeys"], json!([{"name": "ro"}, {"name": "laptop"}]));

    // Revocation: the key stops working at once; alice can't revoke others' keys.
    let r = gql(
        &alice,
        "mutation($id: ID!) { apiKeyRevoke(id: $id) { id } }",
        json!({"id": deployer_id}),
    )
    .await
    .unwrap_err();
    assert!(r.is_not_found(), "{r}");
    let r = gql(
        owner,
        "mutation($id: ID!) { apiKeyRevoke(id: $id) { revokedAt } }",
        json!({"id": deployer_id}),
    )
    .await
    .unwrap();
    assert!(r["apiKeyRevoke"]["revokedAt"].is_string());
    let err = deployer.stacks().await.unwrap_err();
    assert!(err.is_unauthenticated() && err.to_string().contains("revoked"), "{err}");

    // Bad input: nothing is created.
    for (vars, needle) in [
        (json!({"n": ""}), "name"),
        (json!({"n": "x", "d": 0}), "expiresInDays"),
        (json!({"n": "x", "d": 366}), "expiresInDays"),
        (json!({"n": "x", "k": "robot"}), "kind"),
        (json!({"n": "x", "k": "service", "r": "god"}), "role"),
        (json!({"n": "x", "k": "service"}), "role"),
        (json!({"n": "x", "s": "dev"}), "service keys"),
    ] {
        let r = gql(owner, CREATE, vars.clone()).await.unwrap_err();
        assert_eq!(r.code(), Some("bad_request"), "{vars}: {r}");
        assert!(r.to_string().contains(needle), "{vars}: {r}");
    }
    let r = gql(
        owner,
        CREATE,
        json!({"n": "x", "k": "service", "r": "reader", "s": "nope"}),
    )
    .await
    .unwrap_err();
    assert!(r.is_not_found(), "{r}");
    let count = gql(owner, "{ apiKeys { id } }", json!({})).await.unwrap()["apiKeys"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(count, 5);
    // Another organization's key id is not found.
    let other = app
        .store
        .create_org("other", "Other", chrono::Utc::now())
        .await
        .unwrap();
    let theirs = app
        .store
        .create_api_key(
            other.id,
            None,
            "theirs",
            &terraplane_api::auth::hash_secret("tpk_theirs"),
            "owner",
            "service",
            None,
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    let r = gql(
        owner,
        "mutation($id: ID!) { apiKeyRevoke(id: $id) { id } }",
        json!({"id": theirs.id.to_string()}),
    )
    .await
    .unwrap_err();
    assert!(r.is_not_found(), "{r}");
    app.teardown().await;
}
both_backends!(
    api_keys,
    Options {
        runners: 0,
        ..Options::default()
    },
    keys
);
