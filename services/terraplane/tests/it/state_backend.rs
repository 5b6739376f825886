//! The Terraform HTTP state backend, driven by plain `terraform` and by raw requests:
//! locking, lineage and serial rules, limits, authentication and tenant isolation.

use std::process::Command;

use base64::Engine;
use chrono::Utc;
use reqwest::Method;

use crate::both_backends;
use crate::harness::*;

fn tf(dir: &std::path::Path, args: &[&str], password: &str) -> std::process::Output {
    Command::new(terraform_bin())
        .args(args)
        .current_dir(dir)
        .env("TF_HTTP_USERNAME", "user")
        .env("TF_HTTP_PASSWORD", password)
        .env("TF_IN_AUTOMATION", "1")
        .env("CHECKPOINT_DISABLE", "1")
        .env("TF_CLI_CONFIG_FILE", "/dev/null")
        .output()
        .unwrap()
}

fn backend_config(address: &str, extra: &str) -> String {
    format!(
        r#"terraform {{
  backend "http" {{
    address        = "{address}"
    lock_address   = "{address}"
    unlock_address = "{address}"
    lock_method    = "LOCK"
    unlock_method  = "UNLOCK"
  }}
}}
resource "terraform_data" "x" {{ input = "one" }}
{extra}
output "x" {{ value = terraform_data.x.output }}
"#
    )
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

async fn plain_terraform(app: TestApp) {
    app.stack("laptop", "file:///nonexistent", false).await;
    let address = app.state_url(app.org(), "laptop");
    let dir = app.tmp.path().join("laptop");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("main.tf"), backend_config(&address, "")).unwrap();
    let o = tf(&dir, &["init", "-input=false", "-no-color"], ADMIN_TOKEN);
    assert!(o.status.success(), "{}", text(&o));
    let o = tf(
        &dir,
        &["plan", "-input=false", "-no-color", "-detailed-exitcode"],
        ADMIN_TOKEN,
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = tf(
        &dir,
        &["apply", "-input=false", "-no-color", "-auto-approve"],
        ADMIN_TOKEN,
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = tf(&dir, &["state", "pull"], ADMIN_TOKEN);
    assert!(o.status.success(), "{}", text(&o));
    let pulled: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(pulled["outputs"]["x"]["value"], "one");
    let versions = app.client.state_versions("laptop").await.unwrap();
    assert_eq!(versions.len(), 1);
    assert_eq!(versions[0].serial, pulled["serial"].as_i64());
    assert!(
        versions[0].created_by.contains("bootstrap"),
        "{}",
        versions[0].created_by
    );

    // A second apply while the first holds the lock fails naming the first holder.
    std::fs::write(
        dir.join("main.tf"),
        backend_config(
            &address,
            r#"resource "terraform_data" "slow" {
  input = "two"
  provisioner "local-exec" { command = "sleep 4" }
}"#,
        ),
    )
    .unwrap();
    let dir2 = app.tmp.path().join("laptop2");
    std::fs::create_dir_all(&dir2).unwrap();
    std::fs::copy(dir.join("main.tf"), dir2.join("main.tf")).unwrap();
    assert!(
        tf(&dir2, &["init", "-input=false", "-no-color"], ADMIN_TOKEN)
            .status
            .success()
    );
    let first = {
        let dir = dir.clone();
        std::thread::spawn(move || {
            tf(
                &dir,
                &["apply", "-input=false", "-no-color", "-auto-approve"],
                ADMIN_TOKEN,
            )
        })
    };
    let org = app.store.get_org_by_slug("default").await.unwrap();
    let stack = app.store.scope(org.id).get_stack_by_slug("laptop").await.unwrap();
    let mut held = None;
    for _ in 0..100 {
        held = app.store.scope(org.id).get_state_lock(stack.id).await.unwrap();
        if held.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let held = held.expect("first apply took the lock");
    let second = tf(
        &dir2,
        &["apply", "-input=false", "-no-color", "-auto-approve"],
        ADMIN_TOKEN,
    );
    assert!(!second.status.success());
    let out = text(&second);
    assert!(out.contains("Error acquiring the state lock"), "{out}");
    assert!(out.contains(&held.lock_id), "the holder's lock ID is named:\n{out}");
    assert!(out.contains("OperationTypeApply"), "{out}");
    let first = first.join().unwrap();
    assert!(first.status.success(), "{}", text(&first));
    assert!(
        app.store
            .scope(org.id)
            .get_state_lock(stack.id)
            .await
            .unwrap()
            .is_none(),
        "released after apply"
    );
    assert_eq!(app.client.state_versions("laptop").await.unwrap().len(), 2);

    // A stuck lock (holder vanished) is released with `terraform force-unlock`.
    let http = app.http();
    let info = r#"{"ID":"11111111-2222-3333-4444-555555555555","Operation":"OperationTypeApply","Info":"","Who":"ghost@host","Version":"1.15.0","Created":"2026-01-01T00:00:00Z","Path":""}"#;
    let r = http
        .request(Method::from_bytes(b"LOCK").unwrap(), &address)
        .bearer_auth(ADMIN_TOKEN)
        .body(info)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let o = tf(
        &dir2,
        &["plan", "-input=false", "-no-color", "-lock-timeout=0s"],
        ADMIN_TOKEN,
    );
    assert!(text(&o).contains("ghost@host"), "{}", text(&o));
    let o = tf(
        &dir2,
        &["force-unlock", "-force", "11111111-2222-3333-4444-555555555555"],
        ADMIN_TOKEN,
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        app.store
            .scope(org.id)
            .get_state_lock(stack.id)
            .await
            .unwrap()
            .is_none()
    );
    // A reader may not force-unlock.
    let reader_key = "tpk_reader_key_for_tests";
    app.store
        .create_api_key(
            org.id,
            None,
            "reader",
            "service",
            &terraplane_api::auth::hash_secret(reader_key),
            "reader",
            None,
            Utc::now(),
        )
        .await
        .unwrap();
    http.request(Method::from_bytes(b"LOCK").unwrap(), &address)
        .bearer_auth(ADMIN_TOKEN)
        .body(info)
        .send()
        .await
        .unwrap();
    let o = tf(
        &dir2,
        &["force-unlock", "-force", "11111111-2222-3333-4444-555555555555"],
        reader_key,
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        app.store
            .scope(org.id)
            .get_state_lock(stack.id)
            .await
            .unwrap()
            .is_some()
    );
    app.teardown().await;
}
both_backends!(plain_terraform_backend, Options::default(), plain_terraform);

fn state_doc(serial: u64, lineage: &str, marker: &str) -> String {
    serde_json::json!({
        "version": 4, "terraform_version": "1.15.0", "serial": serial, "lineage": lineage,
        "outputs": {"m": {"value": marker, "type": "string"}}, "resources": [], "check_results": null
    })
    .to_string()
}

async fn bad_input(app: TestApp) {
    app.stack("s1", "file:///x", false).await;
    app.stack("s2", "file:///x", false).await;
    let http = app.http();
    let url = app.state_url(app.org(), "s1");
    let post = |body: String, query: &str| {
        http.post(format!("{url}{query}"))
            .bearer_auth(ADMIN_TOKEN)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    // No state yet.
    let r = http.get(&url).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(post(state_doc(1, "L1", "first"), "").await.unwrap().status(), 200);
    // An identical re-POST is accepted and stores nothing new.
    assert_eq!(post(state_doc(1, "L1", "first"), "").await.unwrap().status(), 200);
    assert_eq!(app.client.state_versions("s1").await.unwrap().len(), 1);

    let r = post("{not json".into(), "").await.unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("not valid JSON"));
    let r = post(state_doc(1, "L1", "changed"), "").await.unwrap();
    assert_eq!(r.status(), 409, "same serial, different content");
    let r = post(state_doc(0, "L1", "older"), "").await.unwrap();
    assert_eq!(r.status(), 409);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["code"], "state_serial_conflict");
    let r = post(state_doc(5, "OTHER", "foreign"), "").await.unwrap();
    assert_eq!(r.status(), 409);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["code"], "state_lineage_conflict");
    let r = http.get(&url).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
    assert!(r.text().await.unwrap().contains("first"), "stored state unchanged");
    let r = http
        .post(&url)
        .bearer_auth(ADMIN_TOKEN)
        .header(
            "Content-MD5",
            base64::engine::general_purpose::STANDARD.encode([0u8; 16]),
        )
        .body(state_doc(2, "L1", "x"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "Content-MD5 mismatch");

    // Locks: a write with another ID, or without one, gets 423 and the holder's LockInfo.
    let info = r#"{"ID":"lock-a","Operation":"OperationTypeApply","Info":"","Who":"a@host","Version":"1.15.0","Created":"2026-01-01T00:00:00Z","Path":""}"#;
    let lock = |body: &'static str| {
        http.request(Method::from_bytes(b"LOCK").unwrap(), &url)
            .bearer_auth(ADMIN_TOKEN)
            .body(body)
            .send()
    };
    assert_eq!(lock(info).await.unwrap().status(), 200);
    let r = lock(r#"{"ID":"lock-b","Who":"b@host","Created":"2026-01-01T00:00:00Z"}"#)
        .await
        .unwrap();
    assert_eq!(r.status(), 423);
    let holder: serde_json::Value = r.json().await.unwrap();
    assert_eq!(holder["ID"], "lock-a");
    assert_eq!(holder["Who"], "a@host");
    for q in ["?ID=lock-b", ""] {
        let r = post(state_doc(2, "L1", "second"), q).await.unwrap();
        assert_eq!(r.status(), 423, "write with {q:?}");
        assert_eq!(r.json::<serde_json::Value>().await.unwrap()["ID"], "lock-a");
    }
    assert_eq!(
        post(state_doc(2, "L1", "second"), "?ID=lock-a").await.unwrap().status(),
        200
    );
    let r = lock(r#"{"Who":"x"}"#).await.unwrap();
    assert_eq!(r.status(), 400, "lock info without an ID");
    let r = http
        .request(Method::from_bytes(b"UNLOCK").unwrap(), &url)
        .bearer_auth(ADMIN_TOKEN)
        .body(r#"{"ID":"lock-b","Who":"b@host","Created":"2026-01-01T00:00:00Z"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 423, "unlock with someone else's ID");
    let r = http
        .request(Method::from_bytes(b"UNLOCK").unwrap(), &url)
        .bearer_auth(ADMIN_TOKEN)
        .body(info)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = post(state_doc(3, "L1", "third"), "?ID=lock-a").await.unwrap();
    assert_eq!(r.status(), 409, "a lock ID nobody holds");

    // Older versions stay readable by serial.
    let r = http
        .get(format!("{url}?serial=1"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert!(r.text().await.unwrap().contains("first"));
    assert_eq!(app.client.state_versions("s1").await.unwrap().len(), 2);

    // Unknown organization or stack: 404.
    let r = http
        .get(app.state_url("nope", "s1"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = http
        .get(app.state_url(app.org(), "nope"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    // Missing, invalid, expired or revoked credentials: 401.
    assert_eq!(http.get(&url).send().await.unwrap().status(), 401);
    assert_eq!(
        http.get(&url).bearer_auth("tpk_wrong").send().await.unwrap().status(),
        401
    );
    assert_eq!(
        http.get(&url)
            .basic_auth("u", Some("tpk_wrong"))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    assert_eq!(
        http.get(&url)
            .bearer_auth("eyJhbGciOiJIUzI1NiJ9.e30.bad")
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    let org = app.store.get_org_by_slug("default").await.unwrap();
    let expired = "tpk_expired_key_for_tests";
    app.store
        .create_api_key(
            org.id,
            None,
            "old",
            &terraplane_api::auth::hash_secret(expired),
            "admin",
            "service",
            Some(Utc::now() - chrono::Duration::seconds(5)),
            Utc::now() - chrono::Duration::days(1),
        )
        .await
        .unwrap();
    let r = http.get(&url).bearer_auth(expired).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.text().await.unwrap().contains("expired"));
    let gql = app.client.with_token(Some(expired.into())).stacks().await.unwrap_err();
    assert!(gql.is_unauthenticated(), "{gql}");
    let gql = app.client.with_token(None).stacks().await.unwrap_err();
    assert!(gql.is_unauthenticated(), "{gql}");

    // A session JWT past its expiry: 401.
    let auth = terraplane_api::auth::Auth::new(b"test-jwt-secret", 1, 1, None);
    let admin = app.store.get_user_by_email("admin@terraplane.local").await.unwrap();
    let (old, _) = auth
        .issue_session(
            admin.id,
            org.id,
            "no-session",
            Utc::now() - chrono::Duration::seconds(120),
        )
        .unwrap();
    let err = app.client.with_token(Some(old)).me().await.unwrap_err();
    assert!(err.to_string().contains("expired"), "{err}");

    // Too large: 413, nothing stored.
    let big = format!(
        "{{\"serial\": 9, \"lineage\": \"L1\", \"pad\": \"{}\"}}",
        "x".repeat(5000)
    );
    let r = post(big, "").await.unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(app.client.state_versions("s1").await.unwrap().len(), 2);

    // Another organization's state does not exist for this caller.
    let other = app.store.create_org("other", "Other", Utc::now()).await.unwrap();
    let other_key = "tpk_other_org_key";
    app.store
        .create_api_key(
            other.id,
            None,
            "o",
            &terraplane_api::auth::hash_secret(other_key),
            "admin",
            "service",
            None,
            Utc::now(),
        )
        .await
        .unwrap();
    let r = http.get(&url).bearer_auth(other_key).send().await.unwrap();
    assert_eq!(r.status(), 404, "other org's key on our address");
    let r = http
        .get(app.state_url("other", "s1"))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let them = app.client.with_token(Some(other_key.into()));
    assert!(them.stack("s1").await.unwrap().is_none());
    assert!(them.stacks().await.unwrap().is_empty());
    let runs = app.client.run_trigger("s1", true).await.unwrap();
    assert!(them.run(&runs.id).await.unwrap().is_none());
    assert!(them.run_cancel(&runs.id).await.unwrap_err().is_not_found());
    assert!(them.run_confirm(&runs.id).await.unwrap_err().is_not_found());
    assert!(them.run_discard(&runs.id).await.unwrap_err().is_not_found());
    assert!(them.run_trigger("s1", false).await.unwrap_err().is_not_found());
    assert!(them.stack_lock("s1", None).await.unwrap_err().is_not_found());
    assert!(them.stack_unlock("s1", true).await.unwrap_err().is_not_found());
    assert!(them.stack_delete("s1").await.unwrap_err().is_not_found());
    assert!(them.state_force_unlock("s1").await.unwrap_err().is_not_found());
    let upd = terraplane_client::StackUpdateInput {
        name: Some("mine".into()),
        ..Default::default()
    };
    assert!(them.stack_update("s1", &upd).await.unwrap_err().is_not_found());
    assert_eq!(
        app.client.stack("s1").await.unwrap().unwrap().name,
        "s1",
        "nothing changed"
    );
    assert!(them.runs("s1", 5).await.unwrap_err().is_not_found());
    assert!(them.state_pull("default", "s1", None).await.unwrap_err().is_not_found());
    // Their runner-protocol calls with our run id go nowhere either.
    let r = http
        .post(format!("{}/api/v1/runner/runs/{}/heartbeat", app.base, runs.id))
        .bearer_auth(other_key)
        .json(&serde_json::json!({"fencing_token": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "API keys are not run tokens");
    assert!(them.state_versions("s1").await.unwrap_err().is_not_found());
    app.teardown().await;
}
both_backends!(
    state_bad_input,
    Options {
        max_state_bytes: 4096,
        runners: 0,
        ..Options::default()
    },
    bad_input
);

/// A run token works only for its own stack while its run lasts.
async fn run_token_scope(app: TestApp) {
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", TWO_RESOURCES)]);
    app.stack("a", &repo, false).await;
    app.stack("b", &repo, false).await;
    let run = app.client.run_trigger("a", false).await.unwrap();
    // Claim it like a runner would, to get its token.
    let http = app.http();
    let r = http
        .post(format!("{}/api/v1/runner/runs/{}/claim", app.base, run.id))
        .bearer_auth(POOL_TOKEN)
        .json(&serde_json::json!({"runner_id": "manual", "phase": "plan"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let spec: serde_json::Value = r.json().await.unwrap();
    let token = spec["run_token"].as_str().unwrap().to_owned();
    // A second claim of the same delivery loses.
    let r = http
        .post(format!("{}/api/v1/runner/runs/{}/claim", app.base, run.id))
        .bearer_auth(POOL_TOKEN)
        .json(&serde_json::json!({"runner_id": "other", "phase": "plan"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let r = http
        .post(format!("{}/api/v1/runner/runs/{}/claim", app.base, run.id))
        .bearer_auth("wrong-pool-token")
        .json(&serde_json::json!({"runner_id": "other", "phase": "plan"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(
        http.get(app.state_url(app.org(), "a"))
            .basic_auth("x", Some(&token))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    assert_eq!(
        http.get(app.state_url(app.org(), "b"))
            .basic_auth("x", Some(&token))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    // Run tokens don't drive the product API.
    assert_eq!(
        app.client
            .with_token(Some(token.clone()))
            .stacks()
            .await
            .unwrap_err()
            .code(),
        Some("forbidden")
    );
    // Stale fencing tokens are refused.
    let r = http
        .post(format!("{}/api/v1/runner/runs/{}/logs", app.base, run.id))
        .bearer_auth(&token)
        .json(&serde_json::json!({"fencing_token": 0, "seq": 0, "phase": "plan", "data": "x\n"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    // Once the run ends the token is dead.
    app.client.run_cancel(&run.id).await.unwrap();
    let r = http
        .get(app.state_url(app.org(), "a"))
        .basic_auth("x", Some(&token))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.text().await.unwrap().contains("CANCELED"));
    app.teardown().await;
}
both_backends!(
    run_tokens,
    Options {
        runners: 0,
        ..Options::default()
    },
    run_token_scope
);
