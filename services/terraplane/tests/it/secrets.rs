//! Contexts, variables and secrets end to end: a secret used by a real run appears in
//! plaintext nowhere; precedence; phase scoping; bad input; master key rotation while
//! runs go on.

use std::collections::HashMap;

use base64::Engine;
use serde_json::{Value, json};
use terraplane_client::{ContextCreateInput, RunState, VariableInput, VariableKind};
use terraplane_store::Store;
use terraplane_store::crypto::KeyBytes;

use crate::both_backends;
use crate::harness::*;

const SECRET: &str = "CANARY-9f8e7d6c5b4a-s3cr3t";
const TOKEN: &str = "TOKEN-0a1b2c3d4e5f-canary";

/// Terraform reads the secret through a variable and the token through an environment
/// variable (`TF_VAR_api_token`), and prints both (and the token's base64) on purpose.
const CANARY_TF: &str = r#"
variable "db_password" { type = string }
variable "api_token" { type = string }
resource "terraform_data" "used" {
  input = "${var.db_password}|${var.api_token}"
  provisioner "local-exec" {
    command = "echo pw=${var.db_password}; echo tok=$TF_VAR_api_token; printf %s \"$TF_VAR_api_token\" | base64"
  }
}
output "combined" { value = terraform_data.used.output }
output "plain" { value = "visible" }
"#;

/// The plaintext forms a leak could take: as is, base64, and hex (PostgreSQL dumps bytea
/// in hex).
fn forms(s: &str) -> Vec<Vec<u8>> {
    vec![
        s.as_bytes().to_vec(),
        base64::engine::general_purpose::STANDARD.encode(s).into_bytes(),
        base64::engine::general_purpose::STANDARD
            .encode(s)
            .trim_end_matches('=')
            .as_bytes()
            .to_vec(),
        hex::encode(s).into_bytes(),
    ]
}

fn leaks(haystack: &[u8], secrets: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for s in secrets {
        for f in forms(s) {
            if haystack.windows(f.len()).any(|w| w == f.as_slice()) {
                found.push(String::from_utf8_lossy(&f).into_owned());
            }
        }
    }
    found
}

fn var(name: &str, value: &str, kind: VariableKind, secret: bool) -> VariableInput {
    VariableInput {
        name: name.into(),
        value: value.into(),
        kind,
        secret,
        apply_only: false,
    }
}

async fn gql(app: &TestApp, q: &str, v: Value) -> Value {
    app.client.graphql::<Value>(q, v).await.unwrap()
}

async fn canary(app: TestApp) {
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", CANARY_TF)]);
    app.stack("canary", &repo, true).await;
    let c = &app.client;
    c.context_create(&ContextCreateInput {
        id: Some("shared".into()),
        name: "Shared".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let set = c
        .context_set_variable("shared", &var("db_password", SECRET, VariableKind::Terraform, true))
        .await
        .unwrap();
    assert!(set.secret && set.value.is_none(), "write-only: {set:?}");
    assert_eq!(set.checksum.len(), 12);
    c.context_set_variable("shared", &var("TF_VAR_api_token", TOKEN, VariableKind::Env, true))
        .await
        .unwrap();
    c.context_set_variable(
        "shared",
        &var("PLAIN_FLAG", "plainly-visible", VariableKind::Env, false),
    )
    .await
    .unwrap();
    c.context_attach("shared", "canary", 0).await.unwrap();

    let run = c.run_trigger("canary", false).await.unwrap();
    let run = app.wait_state(&run.id, RunState::Finished, 120).await;

    // Terraform really used both values: the state (which holds secrets, as every
    // Terraform state does, and is stored encrypted) has them.
    let state = c.state_pull(app.org(), "canary", None).await.unwrap().unwrap();
    let state = String::from_utf8(state).unwrap();
    assert!(state.contains(&format!("{SECRET}|{TOKEN}")), "{state}");

    // Logs: the provisioner printed both and the token's base64; all masked.
    let log = app.log_text(&run.id).await;
    assert!(log.contains("pw=*****"), "{log}");
    assert!(log.contains("tok=*****"), "{log}");
    assert_eq!(leaks(log.as_bytes(), &[SECRET, TOKEN]), Vec::<String>::new(), "{log}");

    // Every API answer that could carry it.
    let mut answers = String::new();
    for q in [
        "{ context(id: \"shared\") { id variables { name kind secret value checksum } attachments { stack } } }",
        "{ contexts { id variables { name value } } }",
        "{ stackEnvironment(stackId: \"canary\") { name value source checksum } }",
        "{ stackVariables(stackId: \"canary\") { name value } }",
        "{ stateVersions(stackId: \"canary\") { serial outputs } }",
        "{ auditEvents { seq actor action targetKind target before after } }",
        "{ runs(stackId: \"canary\") { id outputs error plan } }",
    ] {
        answers.push_str(&gql(&app, q, json!({})).await.to_string());
    }
    let r = gql(
        &app,
        "query($id: ID!) { run(id: $id) { outputs error plan } }",
        json!({"id": run.id}),
    )
    .await;
    answers.push_str(&r.to_string());
    assert!(answers.contains("plainly-visible"), "plain values are shown: {answers}");
    assert!(answers.contains("context.variable.set"), "{answers}");
    assert_eq!(
        leaks(answers.as_bytes(), &[SECRET, TOKEN]),
        Vec::<String>::new(),
        "{answers}"
    );
    assert_eq!(r["run"]["outputs"]["combined"]["value"], "*****|*****", "{r}");
    assert_eq!(r["run"]["outputs"]["plain"]["value"], "visible");

    // The database (a full dump) and every service log line of this process.
    let dump = app.database_dump();
    assert_eq!(
        leaks(&dump, &[SECRET, TOKEN]),
        Vec::<String>::new(),
        "database holds a secret"
    );
    let slog = service_log();
    assert!(!slog.is_empty());
    assert_eq!(
        leaks(slog.as_bytes(), &[SECRET, TOKEN]),
        Vec::<String>::new(),
        "service log"
    );

    // Nothing is left on the runner: its work directory is wiped after each phase.
    let left = run_dirs_left(&app);
    assert!(left.is_empty(), "work directory not wiped: {left:?}");
    app.teardown().await;
}
both_backends!(canary_secret_appears_nowhere, Options::default(), canary);

/// Terraform variables a..e and TF_VAR_f as outputs, to see which value each got.
const PRECEDENCE_TF: &str = r#"
variable "a" { type = string }
variable "b" { type = string }
variable "c" { type = string }
variable "d" { type = string }
variable "e" { type = string }
variable "f" { type = string }
output "all" { value = "${var.a},${var.b},${var.c},${var.d},${var.e},${var.f}" }
"#;

async fn precedence(app: TestApp) {
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", PRECEDENCE_TF)]);
    let c = &app.client;
    let input = terraplane_client::StackCreateInput {
        slug: Some("web".into()),
        name: "web".into(),
        repository: repo,
        autodeploy: Some(true),
        labels: Some(vec!["web".into()]),
        ..Default::default()
    };
    c.stack_create(&input).await.unwrap();
    let tf = VariableKind::Terraform;
    let ctx = |id: &str, labels: Vec<String>| ContextCreateInput {
        id: Some(id.into()),
        name: id.into(),
        labels: Some(labels),
        ..Default::default()
    };
    for (id, labels) in [
        ("low", vec![]),
        ("high", vec![]),
        ("tie-b", vec![]),
        ("tie-a", vec![]),
        ("auto", vec!["autoattach:web".to_string()]),
        ("elsewhere", vec!["autoattach:db".to_string()]),
    ] {
        c.context_create(&ctx(id, labels)).await.unwrap();
    }
    for (context, name, value) in [
        ("low", "a", "low"),
        ("low", "b", "low"),
        ("low", "c", "low"),
        ("high", "a", "high"),
        ("high", "b", "high"),
        ("tie-b", "e", "tie-b"),
        ("tie-a", "e", "tie-a"),
        ("auto", "a", "auto"),
        ("auto", "d", "auto"),
        ("auto", "c", "auto"),
        ("elsewhere", "d", "elsewhere"),
    ] {
        c.context_set_variable(context, &var(name, value, tf.clone(), false))
            .await
            .unwrap();
    }
    c.context_set_variable("low", &var("TF_VAR_f", "env-low", VariableKind::Env, false))
        .await
        .unwrap();
    c.stack_set_variable("web", &var("a", "stack", tf.clone(), false))
        .await
        .unwrap();
    c.context_attach("low", "web", 5).await.unwrap();
    c.context_attach("high", "web", 1).await.unwrap();
    c.context_attach("tie-b", "web", 3).await.unwrap();
    c.context_attach("tie-a", "web", 3).await.unwrap();

    let env = c.stack_environment("web").await.unwrap();
    type Row = (String, Option<String>, String, Option<i32>, bool);
    let got: Vec<Row> = env
        .iter()
        .map(|e| {
            (
                e.name.clone(),
                e.value.clone(),
                e.source.clone(),
                e.priority,
                e.auto_attached,
            )
        })
        .collect();
    let s = |x: &str| Some(x.to_string());
    assert_eq!(
        got,
        vec![
            ("TF_VAR_f".into(), s("env-low"), "context:low".into(), Some(5), false),
            ("a".into(), s("stack"), "stack".into(), None, false),
            ("b".into(), s("high"), "context:high".into(), Some(1), false),
            ("c".into(), s("low"), "context:low".into(), Some(5), false),
            ("d".into(), s("auto"), "context:auto".into(), None, true),
            ("e".into(), s("tie-a"), "context:tie-a".into(), Some(3), false),
        ],
        "stack > explicit by priority (ties by id) > auto-attached"
    );
    let shown = c.context("auto").await.unwrap();
    assert_eq!(shown.attachments.len(), 1);
    assert!(shown.attachments[0].auto_attached && shown.attachments[0].stack == "web");

    // A real run receives exactly that set.
    let run = c.run_trigger("web", false).await.unwrap();
    let run = app.wait_state(&run.id, RunState::Finished, 120).await;
    assert_eq!(
        run.outputs.unwrap()["all"]["value"],
        "stack,high,low,auto,tie-a,env-low"
    );

    // Detaching the higher-priority context lets the next one through.
    c.context_detach("high", "web").await.unwrap();
    let env = c.stack_environment("web").await.unwrap();
    let b = env.iter().find(|e| e.name == "b").unwrap();
    assert_eq!((b.value.as_deref(), b.source.as_str()), (Some("low"), "context:low"));
    app.teardown().await;
}
both_backends!(
    precedence_across_stack_contexts_and_labels,
    Options::default(),
    precedence
);

async fn bad_input(app: TestApp) {
    let c = &app.client;
    app.stack("s", "file:///x", false).await;
    c.context_create(&ContextCreateInput {
        id: Some("ctx".into()),
        name: "ctx".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let code = |r: Result<terraplane_client::Variable, terraplane_client::ClientError>| {
        r.map(|v| format!("ok {v:?}"))
            .unwrap_or_else(|e| format!("{} {e}", e.code().unwrap_or("?")))
    };
    for (name, kind, value, want) in [
        ("9lives", VariableKind::Terraform, "x", "bad_request"),
        ("a.b", VariableKind::Terraform, "x", "bad_request"),
        ("count", VariableKind::Terraform, "x", "bad_request"),
        ("A-B", VariableKind::Env, "x", "bad_request"),
        ("TF_HTTP_PASSWORD", VariableKind::Env, "x", "bad_request"),
        ("../../etc/passwd", VariableKind::File, "x", "bad_request"),
        ("/etc/passwd", VariableKind::File, "x", "bad_request"),
        ("a/../../b", VariableKind::File, "x", "bad_request"),
    ] {
        for r in [
            c.stack_set_variable("s", &var(name, value, kind.clone(), true)).await,
            c.context_set_variable("ctx", &var(name, value, kind.clone(), true))
                .await,
        ] {
            let got = code(r);
            assert!(got.starts_with(want), "{name}: {got}");
        }
    }
    let big = "x".repeat(64 * 1024 + 1);
    let got = code(
        c.stack_set_variable("s", &var("BIG", &big, VariableKind::Env, true))
            .await,
    );
    assert!(got.starts_with("payload_too_large"), "{got}");
    let mut apply_only_tf = var("t", "x", VariableKind::Terraform, false);
    apply_only_tf.apply_only = true;
    let got = code(c.stack_set_variable("s", &apply_only_tf).await);
    assert!(got.starts_with("bad_request") && got.contains("plan time"), "{got}");
    // Nothing was written by any of them.
    assert!(c.stack_variables("s").await.unwrap().is_empty());
    assert!(c.context("ctx").await.unwrap().variables.is_empty());
    // Unknown things are "not found".
    assert_eq!(c.context("nope").await.unwrap_err().code(), Some("not_found"));
    assert_eq!(
        c.context_attach("nope", "s", 0).await.unwrap_err().code(),
        Some("not_found")
    );
    assert_eq!(
        c.stack_unset_variable("s", "NOPE").await.unwrap_err().code(),
        Some("not_found")
    );

    // Another organization's context is "not found", whichever way round.
    let other = app.store.create_org("bee", "Bee", chrono::Utc::now()).await.unwrap();
    let b_token = "tpk_secrets_owner_of_bee";
    app.store
        .create_api_key(
            other.id,
            None,
            "owner",
            &terraplane_api::auth::hash_secret(b_token),
            "owner",
            "service",
            None,
            chrono::Utc::now(),
        )
        .await
        .unwrap();
    let b = c.with_token(Some(b_token.into()));
    b.stack_create(&terraplane_client::StackCreateInput {
        slug: Some("b-stack".into()),
        name: "b".into(),
        repository: "file:///x".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(
        b.context_attach("ctx", "b-stack", 0).await.unwrap_err().code(),
        Some("not_found")
    );
    assert_eq!(
        b.context_set_variable("ctx", &var("X", "y", VariableKind::Env, false))
            .await
            .unwrap_err()
            .code(),
        Some("not_found")
    );
    b.context_create(&ContextCreateInput {
        id: Some("bee-ctx".into()),
        name: "b".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(
        c.context_attach("bee-ctx", "s", 0).await.unwrap_err().code(),
        Some("not_found")
    );

    // Secrets stored, and the service started without a master key or with the wrong one:
    // it refuses, saying why.
    c.stack_set_variable("s", &var("STORED", "a-secret-value", VariableKind::Env, true))
        .await
        .unwrap();
    let mut cfg = (*app.cfg).clone();
    cfg.secrets.master_key = None;
    let e = terraplane_api::open_store(&cfg).await.err().unwrap().to_string();
    assert!(e.contains("secrets.master_key"), "{e}");
    cfg.secrets.master_key = Some(terraplane_config::Secret::new(
        "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100",
    ));
    let e = terraplane_api::open_store(&cfg).await.err().unwrap().to_string();
    assert!(e.contains("cannot open the stored encryption keys"), "{e}");
    app.teardown().await;
}
both_backends!(
    bad_input_is_refused,
    Options {
        runners: 0,
        ..Options::default()
    },
    bad_input
);

/// Decodes a run token against the issuer's JWKS with a standard JWT library.
async fn verify_token(app: &TestApp, token: &str, audience: &str) -> Value {
    let disco: Value = app
        .http()
        .get(format!("{}/.well-known/openid-configuration", app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(disco["issuer"], app.base.as_str());
    let jwks: jsonwebtoken::jwk::JwkSet = app
        .http()
        .get(disco["jwks_uri"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kid = jsonwebtoken::decode_header(token).unwrap().kid.unwrap();
    let jwk = jwks.find(&kid).unwrap_or_else(|| panic!("kid {kid} not in the JWKS"));
    let key = jsonwebtoken::DecodingKey::from_jwk(jwk).unwrap();
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    v.set_audience(&[audience]);
    v.set_issuer(&[app.base.as_str()]);
    jsonwebtoken::decode::<Value>(token, &key, &v).unwrap().claims
}

/// The recorded terraform calls of one run, by phase.
type Env = HashMap<String, String>;

fn calls_of(dir: &std::path::Path, run: &str) -> (Vec<Env>, Vec<Env>) {
    let calls: Vec<_> = recorded_calls(dir)
        .into_iter()
        .map(|(_, env)| env)
        .filter(|e| e.get("TERRAPLANE_RUN_ID").map(String::as_str) == Some(run))
        .collect();
    let phase = |p: &str| {
        calls
            .iter()
            .filter(|e| e.get("TERRAPLANE_RUN_PHASE").map(String::as_str) == Some(p))
            .cloned()
            .collect::<Vec<_>>()
    };
    (phase("plan"), phase("apply"))
}

const PHASES_TF: &str = r#"
variable "region" { type = string }
resource "terraform_data" "r" { input = var.region }
"#;

async fn phases(app: TestApp) {
    // The recording terraform writes its calls next to itself.
    let rec = app
        .cfg
        .runner
        .terraform_bin
        .clone()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", PHASES_TF)]);
    app.stack("ph", &repo, true).await;
    let c = &app.client;
    c.stack_set_variable("ph", &var("region", "eu-west-1", VariableKind::Terraform, false))
        .await
        .unwrap();
    c.stack_set_variable(
        "ph",
        &var("PLAN_SECRET", "plan-visible-secret", VariableKind::Env, true),
    )
    .await
    .unwrap();
    let mut apply_only = var("DEPLOY_KEY", "apply-only-secret-value", VariableKind::Env, true);
    apply_only.apply_only = true;
    c.stack_set_variable("ph", &apply_only).await.unwrap();
    let mut file = var("certs/ca.pem", "-----BEGIN CERT-----\nabc\n", VariableKind::File, true);
    file.apply_only = true;
    c.stack_set_variable("ph", &file).await.unwrap();

    let tracked = c.run_trigger("ph", false).await.unwrap();
    app.wait_state(&tracked.id, RunState::Finished, 120).await;
    let proposed = c.run_trigger("ph", true).await.unwrap();
    app.wait_state(&proposed.id, RunState::Finished, 120).await;

    let (plan, apply) = calls_of(&rec, &tracked.id);
    assert!(!plan.is_empty() && !apply.is_empty(), "{plan:?} {apply:?}");
    for e in &plan {
        assert_eq!(e.get("PLAN_SECRET").map(String::as_str), Some("plan-visible-secret"));
        assert!(!e.contains_key("DEPLOY_KEY"), "apply-only secret reached the plan");
    }
    for e in &apply {
        assert_eq!(e.get("DEPLOY_KEY").map(String::as_str), Some("apply-only-secret-value"));
    }
    let plan_cmd = plan.iter().find(|e| e["ARGS"].starts_with("plan ")).unwrap();
    assert!(plan_cmd["ARGS"].contains("-var-file="), "{}", plan_cmd["ARGS"]);
    let apply_cmd = apply.iter().find(|e| e["ARGS"].starts_with("apply ")).unwrap();
    assert!(
        !apply_cmd["ARGS"].contains("-var-file"),
        "a saved plan is applied as is"
    );
    let (pplan, papply) = calls_of(&rec, &proposed.id);
    assert!(!pplan.is_empty() && papply.is_empty());
    for e in &pplan {
        assert!(!e.contains_key("DEPLOY_KEY"), "a proposed run got an apply-only secret");
    }

    // Identity tokens: one per phase, verifiable with the JWKS, scoped by phase.
    let aud = "127.0.0.1";
    let tok = |e: &HashMap<String, String>| e["TERRAPLANE_OIDC_TOKEN"].clone();
    let plan_claims = verify_token(&app, &tok(&plan[0]), aud).await;
    let apply_claims = verify_token(&app, &tok(&apply[0]), aud).await;
    let proposed_claims = verify_token(&app, &tok(&pplan[0]), aud).await;
    assert_eq!(
        plan_claims["sub"],
        "org:default:space:root:stack:ph:run_type:TRACKED:scope:read"
    );
    assert_eq!(
        apply_claims["sub"],
        "org:default:space:root:stack:ph:run_type:TRACKED:scope:write"
    );
    assert_eq!(
        proposed_claims["sub"],
        "org:default:space:root:stack:ph:run_type:PROPOSED:scope:read"
    );
    for (claims, phase) in [(&plan_claims, "plan"), (&apply_claims, "apply")] {
        assert_eq!(claims["run_id"], tracked.id.as_str());
        assert_eq!(claims["phase"], phase);
        assert_eq!(claims["organization"], "default");
        assert_eq!(claims["space"], "root");
        assert_eq!(claims["stack"], "ph");
    }
    // The token file lived in the run's work directory, now gone.
    let file = &plan[0]["TERRAPLANE_OIDC_TOKEN_FILE"];
    assert!(
        file.starts_with(&app.tmp.path().join("work").display().to_string()),
        "{file}"
    );
    assert!(!std::path::Path::new(file).exists());

    // Key rotation with overlap: a new key signs, the old one still verifies.
    let old_kid = jsonwebtoken::decode_header(tok(&plan[0])).unwrap().kid.unwrap();
    let new_kid = terraplane_api::identity::rotate(&app.store, chrono::Utc::now())
        .await
        .unwrap();
    assert_ne!(old_kid, new_kid);
    let jwks: Value = app
        .http()
        .get(format!("{}/.well-known/jwks.json", app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kids: Vec<&str> = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap())
        .collect();
    assert!(
        kids.contains(&old_kid.as_str()) && kids.contains(&new_kid.as_str()),
        "{jwks}"
    );
    verify_token(&app, &tok(&plan[0]), aud).await;
    let again = c.run_trigger("ph", true).await.unwrap();
    app.wait_state(&again.id, RunState::Finished, 120).await;
    let (aplan, _) = calls_of(&rec, &again.id);
    let t = tok(&aplan[0]);
    assert_eq!(jsonwebtoken::decode_header(&t).unwrap().kid.unwrap(), new_kid);
    verify_token(&app, &t, aud).await;
    app.teardown().await;
    let _ = std::fs::remove_dir_all(rec);
}
both_backends!(
    phase_scoping_and_identity_tokens,
    Options {
        terraform_bin: Some(recording_terraform(
            &std::env::temp_dir().join(format!("tp-calls-{}", uuid::Uuid::new_v4().simple()))
        )),
        ..Options::default()
    },
    phases
);

async fn rotation(app: TestApp) {
    let repo = git_repo(
        &app.tmp.path().join("repo"),
        &[(
            "main.tf",
            "variable \"pw\" { type = string }\nresource \"terraform_data\" \"r\" {\n  input = var.pw\n  provisioner \"local-exec\" { command = \"sleep 1\" }\n}\n",
        )],
    );
    let c = &app.client;
    let mut secrets = Vec::new();
    for i in 0..3 {
        let stack = format!("rot-{i}");
        app.stack(&stack, &repo, true).await;
        let value = format!("rotation-secret-{i}-{}", uuid::Uuid::new_v4().simple());
        c.stack_set_variable(&stack, &var("pw", &value, VariableKind::Terraform, true))
            .await
            .unwrap();
        secrets.push((stack, value));
    }
    let before: Vec<String> = {
        let mut v = Vec::new();
        for (s, _) in &secrets {
            v.push(c.stack_variables(s).await.unwrap()[0].checksum.clone());
        }
        v
    };
    let runs: Vec<String> = {
        let mut v = Vec::new();
        for (s, _) in &secrets {
            v.push(c.run_trigger(s, false).await.unwrap().id);
        }
        v
    };
    // Rotate to a new master key while those runs go on (the services keep the data keys
    // they have opened; a restart with the new key and the old as previous reads both).
    let old = KeyBytes::from_slice(&hex::decode(MASTER_KEY).unwrap()).unwrap();
    let new_hex = "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf";
    let new = KeyBytes::from_slice(&hex::decode(new_hex).unwrap()).unwrap();
    let rotating = Store::open(&app.cfg.database)
        .await
        .unwrap()
        .with_master_keys(new.clone(), vec![old.clone()]);
    let report = rotating.rotate_master_key().await.unwrap();
    assert_eq!(report.data_keys_rewrapped, 1, "{report:?}");
    for id in &runs {
        app.wait_state(id, RunState::Finished, 120).await;
    }
    // A run started after the rotation works too, and everything reads with the new key alone.
    let late = c.run_trigger("rot-0", false).await.unwrap();
    app.wait_state(&late.id, RunState::Finished, 120).await;
    assert_eq!(
        rotating.rotate_master_key().await.unwrap().data_keys_rewrapped,
        0,
        "idempotent"
    );
    let only_new = Store::open(&app.cfg.database).await.unwrap().with_master_key(new);
    only_new.check_master_key().await.unwrap();
    let org = app.store.get_org_by_slug("default").await.unwrap().id;
    for (stack, value) in &secrets {
        let s = only_new.scope(org).get_stack_by_slug(stack).await.unwrap();
        let vals = only_new
            .scope(org)
            .reveal_values(&terraplane_store::Owner::Stack(s.id))
            .await
            .unwrap();
        assert_eq!(vals[0].1, *value);
        let state = c.state_pull(app.org(), stack, None).await.unwrap().unwrap();
        assert!(String::from_utf8_lossy(&state).contains(value.as_str()));
    }
    let only_old = Store::open(&app.cfg.database).await.unwrap().with_master_key(old);
    assert!(only_old.check_master_key().await.is_err(), "the old key was retired");
    let after: Vec<String> = {
        let mut v = Vec::new();
        for (s, _) in &secrets {
            v.push(c.stack_variables(s).await.unwrap()[0].checksum.clone());
        }
        v
    };
    assert_eq!(before, after, "values unchanged by the rotation");
    let values: Vec<&str> = secrets.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(leaks(&app.database_dump(), &values), Vec::<String>::new());
    app.teardown().await;
}
both_backends!(master_key_rotation_while_runs_go_on, Options::default(), rotation);

/// A local AWS STS: moto's server (installed by `scripts/install-moto.sh`, found through
/// `MOTO_SERVER`). `None` when it is missing outside CI.
struct Moto {
    url: String,
    _child: tokio::process::Child,
}

async fn moto() -> Option<Moto> {
    let bin = std::env::var_os("MOTO_SERVER")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/moto/bin/moto_server"));
    if !bin.is_file() {
        assert!(
            !terraplane_test_support::ci(),
            "moto_server not found at {}: run scripts/install-moto.sh",
            bin.display()
        );
        eprintln!(
            "skipped: moto_server not found at {} (scripts/install-moto.sh)",
            bin.display()
        );
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = tokio::process::Command::new(&bin)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    for _ in 0..300 {
        if reqwest::get(format!("{url}/moto-api/")).await.is_ok() {
            return Some(Moto { url, _child: child });
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("moto_server did not start on {url}");
}

/// Who STS says these credentials are.
async fn caller_arn(sts: &str, env: &HashMap<String, String>) -> String {
    let creds = aws_sdk_sts::config::Credentials::new(
        &env["AWS_ACCESS_KEY_ID"],
        &env["AWS_SECRET_ACCESS_KEY"],
        Some(env["AWS_SESSION_TOKEN"].clone()),
        None,
        "test",
    );
    let conf = aws_sdk_sts::Config::builder()
        .behavior_version(aws_sdk_sts::config::BehaviorVersion::latest())
        .region(aws_sdk_sts::config::Region::new("us-east-1"))
        .endpoint_url(sts)
        .credentials_provider(creds)
        .build();
    let out = aws_sdk_sts::Client::from_conf(conf)
        .get_caller_identity()
        .send()
        .await
        .unwrap();
    out.arn().unwrap_or_default().to_owned()
}

async fn aws_flow(backend: Backend) {
    let Some(sts) = moto().await else { return };
    let rec = std::env::temp_dir().join(format!("tp-aws-{}", uuid::Uuid::new_v4().simple()));
    let opts = Options {
        sts_endpoint: Some(sts.url.clone()),
        terraform_bin: Some(recording_terraform(&rec)),
        ..Options::default()
    };
    let Some(app) = spawn(backend, opts).await else { return };
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", TWO_RESOURCES)]);
    app.stack("cloud", &repo, true).await;
    app.stack("plain", &repo, true).await;
    let c = &app.client;
    let i = c
        .aws_integration_create(&terraplane_client::AwsIntegrationInput {
            id: Some("prod-aws".into()),
            name: "prod".into(),
            role_arn: "arn:aws:iam::123456789012:role/terraplane-writer".into(),
            read_role_arn: Some("arn:aws:iam::123456789012:role/terraplane-reader".into()),
            audience: Some("sts.amazonaws.com".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(i.duration_seconds, 900);
    c.aws_integration_attach("prod-aws", "cloud").await.unwrap();
    let run = c.run_trigger("cloud", false).await.unwrap();
    let run = app.wait_state(&run.id, RunState::Finished, 120).await;
    let (plan, apply) = calls_of(&rec, &run.id);
    assert!(!plan.is_empty() && !apply.is_empty());
    // Each phase got temporary credentials of its own role, and only those.
    let (p, a) = (&plan[0], &apply[0]);
    assert!(p["AWS_ACCESS_KEY_ID"].starts_with("ASIA"), "{p:?}");
    assert_ne!(p["AWS_ACCESS_KEY_ID"], a["AWS_ACCESS_KEY_ID"]);
    assert!(plan.iter().all(|e| e["AWS_ACCESS_KEY_ID"] == p["AWS_ACCESS_KEY_ID"]));
    assert!(apply.iter().all(|e| e["AWS_ACCESS_KEY_ID"] == a["AWS_ACCESS_KEY_ID"]));
    let plan_arn = caller_arn(&sts.url, p).await;
    let apply_arn = caller_arn(&sts.url, a).await;
    assert!(plan_arn.contains(":assumed-role/terraplane-reader/"), "{plan_arn}");
    assert!(apply_arn.contains(":assumed-role/terraplane-writer/"), "{apply_arn}");
    // The credentials never reach the log.
    let log = app.log_text(&run.id).await;
    assert!(
        log.contains("assuming AWS role arn:aws:iam::123456789012:role/terraplane-reader"),
        "{log}"
    );
    for e in [p, a] {
        for k in ["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID"] {
            assert!(!log.contains(&e[k]), "{k} in the log");
        }
    }
    // A stack without the integration gets none.
    let other = c.run_trigger("plain", false).await.unwrap();
    app.wait_state(&other.id, RunState::Finished, 120).await;
    let (pp, pa) = calls_of(&rec, &other.id);
    assert!(pp.iter().chain(&pa).all(|e| !e.contains_key("AWS_ACCESS_KEY_ID")));
    // An integration in use can't be deleted; detached, it can.
    assert_eq!(
        c.aws_integration_delete("prod-aws").await.unwrap_err().code(),
        Some("integration_in_use")
    );
    c.aws_integration_detach("cloud").await.unwrap();
    c.aws_integration_delete("prod-aws").await.unwrap();
    app.teardown().await;
    let _ = std::fs::remove_dir_all(rec);
}

/// STS refuses: the run fails with STS's own message.
async fn aws_refused(backend: Backend) {
    let sts = terraplane_test_support::mock::MockServer::start(|_| {
        terraplane_test_support::mock::Reply::text(
            400,
            r#"<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>InvalidIdentityToken</Code><Message>No OpenIDConnect provider found in your account for http://127.0.0.1</Message></Error><RequestId>1</RequestId></ErrorResponse>"#,
        )
    })
    .await
    .unwrap();
    let opts = Options {
        sts_endpoint: Some(sts.url()),
        ..Options::default()
    };
    let Some(app) = spawn(backend, opts).await else { return };
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", TWO_RESOURCES)]);
    app.stack("cloud", &repo, true).await;
    let c = &app.client;
    c.aws_integration_create(&terraplane_client::AwsIntegrationInput {
        id: Some("aws".into()),
        name: "aws".into(),
        role_arn: "arn:aws:iam::123456789012:role/writer".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    c.aws_integration_attach("aws", "cloud").await.unwrap();
    let run = c.run_trigger("cloud", false).await.unwrap();
    let run = app.wait_state(&run.id, RunState::Failed, 120).await;
    let err = run.error.unwrap_or_default();
    assert!(
        err.contains("InvalidIdentityToken: No OpenIDConnect provider found in your account"),
        "{err}"
    );
    // STS was asked with the run's identity token for the role.
    let reqs = sts.requests();
    assert!(!reqs.is_empty());
    let body = String::from_utf8_lossy(&reqs[0].body).into_owned();
    assert!(body.contains("Action=AssumeRoleWithWebIdentity"), "{body}");
    assert!(
        body.contains("RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fwriter"),
        "{body}"
    );
    let token = body
        .split('&')
        .find_map(|kv| kv.strip_prefix("WebIdentityToken="))
        .unwrap();
    let claims = verify_token(&app, token, "127.0.0.1").await;
    assert_eq!(claims["stack"], "cloud");
    app.teardown().await;
}

mod aws_dynamic_credentials {
    use super::*;
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite() {
        aws_flow(Backend::Sqlite).await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        aws_flow(Backend::Postgres).await;
    }
}

mod aws_sts_error_fails_the_run {
    use super::*;
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite() {
        aws_refused(Backend::Sqlite).await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        aws_refused(Backend::Postgres).await;
    }
}

/// A run whose secret cannot be decrypted (corrupted in the database) fails at once with
/// the reason, instead of hanging until its lease expires; nothing reaches a runner.
async fn undecryptable(app: TestApp) {
    use sea_orm::{ConnectionTrait, Database, Statement};
    let repo = git_repo(&app.tmp.path().join("repo"), &[("main.tf", TWO_RESOURCES)]);
    app.stack("broken", &repo, true).await;
    app.client
        .stack_set_variable("broken", &var("PW", "will-be-corrupted", VariableKind::Env, true))
        .await
        .unwrap();
    let conn = Database::connect(&app.cfg.database.url).await.unwrap();
    let garbage = if app.backend == Backend::Postgres {
        "decode('5450453100000000000000000000000000000000', 'hex')"
    } else {
        "X'5450453100000000000000000000000000000000'"
    };
    conn.execute_raw(Statement::from_string(
        conn.get_database_backend(),
        format!("UPDATE config_values SET value = {garbage} WHERE name = 'PW'"),
    ))
    .await
    .unwrap();
    let run = app.client.run_trigger("broken", false).await.unwrap();
    let run = app.wait_state(&run.id, RunState::Failed, 60).await;
    let err = run.error.unwrap_or_default();
    assert!(
        err.contains("could not be prepared") && err.contains("cannot decrypt"),
        "{err}"
    );
    assert!(app.log_text(&run.id).await.is_empty(), "no runner started it");
    app.teardown().await;
}
both_backends!(undecryptable_secret_fails_the_run, Options::default(), undecryptable);
