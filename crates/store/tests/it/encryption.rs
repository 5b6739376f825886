//! Encryption at rest: state versions and plan files are sealed with the organization's
//! data key (wrapped by the master key); the database never holds them in clear; a wrong
//! master key can't read them; blobs from before encryption still read.

use sea_orm::{ConnectionTrait, Database, Statement};
use sha2::{Digest, Sha256};
use terraplane_domain::RunType;
use terraplane_domain::state::parse_state;
use terraplane_store::crypto::KeyBytes;
use terraplane_store::{NewStateVersion, Store, WriteOutcome};

use crate::harness::{TestDb, db_tests};
use crate::state::state_body;

async fn raw_blobs(db: &TestDb, sql: &str) -> Vec<Vec<u8>> {
    let conn = Database::connect(&db.url).await.unwrap();
    let rows = conn
        .query_all_raw(Statement::from_string(conn.get_database_backend(), sql.to_owned()))
        .await
        .unwrap();
    rows.iter().map(|r| r.try_get_by_index::<Vec<u8>>(0).unwrap()).collect()
}

async fn state_and_plans_are_sealed(db: &TestDb) {
    let org = db.org("acme").await;
    let stack = db.stack(org.id, "net").await;
    let run = db.run(org.id, stack.id, RunType::Tracked).await;
    // Written before encryption was configured: stays readable afterwards.
    let legacy = state_body(1, "L", "legacy-plain");
    let v = |body: &'static [u8]| NewStateVersion {
        body,
        meta: Box::leak(Box::new(parse_state(body).unwrap())),
        md5: "0".repeat(32),
        sha256: hex::encode(Sha256::digest(body)),
        outputs: serde_json::json!({}),
        run_id: None,
        created_by: "t".into(),
    };
    let legacy: &'static [u8] = Box::leak(legacy.into_boxed_slice());
    assert!(matches!(
        db.store
            .scope(org.id)
            .write_state(stack.id, v(legacy), None, db.now)
            .await
            .unwrap(),
        WriteOutcome::Stored(_)
    ));

    let master = KeyBytes::random();
    let keyed = Store::connect(&db.url, 2)
        .await
        .unwrap()
        .with_master_key(master.clone());
    let secret: &'static [u8] = Box::leak(state_body(2, "L", "hunter2-password").into_boxed_slice());
    assert!(matches!(
        keyed
            .scope(org.id)
            .write_state(stack.id, v(secret), None, db.now)
            .await
            .unwrap(),
        WriteOutcome::Stored(_)
    ));
    keyed
        .scope(org.id)
        .put_plan(
            run.id,
            b"PLANFILE-with-hunter2".to_vec(),
            "{}".into(),
            "s".repeat(64),
            db.now,
        )
        .await
        .unwrap();

    let states = raw_blobs(db, "SELECT data FROM state_versions ORDER BY version").await;
    assert_eq!(states[0], legacy, "the old version is as it was");
    assert!(states[1].starts_with(b"TPE1"));
    assert!(
        !states[1].windows(7).any(|w| w == b"hunter2"),
        "state in clear in the database"
    );
    let plans = raw_blobs(db, "SELECT plan_file FROM plan_artifacts").await;
    assert!(
        !plans[0].windows(7).any(|w| w == b"hunter2"),
        "plan in clear in the database"
    );
    let wrapped = raw_blobs(db, "SELECT wrapped_key FROM org_keys").await;
    assert_eq!(wrapped.len(), 1);

    // Reading through the keyed store gives the plaintext back, old and new.
    let scope = keyed.scope(org.id);
    assert_eq!(scope.get_current_state(stack.id).await.unwrap().unwrap().1, secret);
    assert_eq!(scope.get_state_by_serial(stack.id, 1).await.unwrap().1, legacy);
    assert_eq!(
        scope.get_plan(run.id).await.unwrap().plan_file,
        b"PLANFILE-with-hunter2"
    );
    // A fresh process with the same master key reads it too; another key or none can't.
    let again = Store::connect(&db.url, 2).await.unwrap().with_master_key(master);
    assert_eq!(
        again
            .scope(org.id)
            .get_current_state(stack.id)
            .await
            .unwrap()
            .unwrap()
            .1,
        secret
    );
    let wrong = Store::connect(&db.url, 2)
        .await
        .unwrap()
        .with_master_key(KeyBytes::random());
    assert!(wrong.scope(org.id).get_current_state(stack.id).await.is_err());
    assert!(
        db.store.scope(org.id).get_plan(run.id).await.is_err(),
        "no master key: sealed data is not readable"
    );
}

db_tests!(state_and_plans_are_sealed);
