//! Values of stacks and contexts, and the OIDC signing keys: secrets are sealed and
//! write-only; a stack's deletion takes its values and attachments along; retired signing
//! keys stay published only for the overlap.

use sea_orm::{ConnectionTrait, Database, Statement};
use terraplane_domain::vars::VarKind;
use terraplane_store::crypto::KeyBytes;
use terraplane_store::{NewContext, NewValue, Owner, Store};

use crate::harness::{TestDb, db_tests};

fn value(name: &str, v: &str, secret: bool) -> NewValue {
    NewValue {
        kind: VarKind::Env,
        name: name.into(),
        value: v.into(),
        secret,
        apply_only: false,
    }
}

async fn secrets_are_sealed_and_write_only(db: &TestDb) {
    let org = db.org("acme").await;
    let stack = db.stack(org.id, "net").await;
    // Without a master key, a secret is refused rather than stored in clear.
    let err = db
        .store
        .scope(org.id)
        .set_value(&Owner::Stack(stack.id), value("PW", "hunter2-secret", true), db.now)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("without a master key"), "{err}");
    let keyed = Store::connect(&db.url, 2)
        .await
        .unwrap()
        .with_master_key(KeyBytes::random());
    let s = keyed.scope(org.id);
    let owner = Owner::Stack(stack.id);
    let v = s
        .set_value(&owner, value("PW", "hunter2-secret", true), db.now)
        .await
        .unwrap();
    assert!(v.value.is_none() && v.secret);
    let plain = s
        .set_value(&owner, value("REGION", "eu-west-1", false), db.now)
        .await
        .unwrap();
    assert_eq!(plain.value.as_deref(), Some("eu-west-1"));
    // Setting it again replaces it; the checksum follows the value.
    let again = s
        .set_value(&owner, value("PW", "hunter2-secret", true), db.now)
        .await
        .unwrap();
    assert_eq!(again.checksum, v.checksum);
    let changed = s
        .set_value(&owner, value("PW", "another-secret", true), db.now)
        .await
        .unwrap();
    assert_ne!(changed.checksum, v.checksum);
    assert_eq!(s.list_values(&owner).await.unwrap().len(), 2);
    let revealed = s.reveal_values(&owner).await.unwrap();
    assert!(revealed.iter().any(|(v, p)| v.name == "PW" && p == "another-secret"));
    let conn = Database::connect(&db.url).await.unwrap();
    let rows = conn
        .query_all_raw(Statement::from_string(
            conn.get_database_backend(),
            "SELECT value FROM config_values WHERE secret = true".to_owned(),
        ))
        .await
        .unwrap();
    let raw: Vec<u8> = rows[0].try_get_by_index(0).unwrap();
    assert!(raw.starts_with(b"TPE1") && !raw.windows(7).any(|w| w == b"another"));
    // Another organization sees nothing of it.
    let other = db.org("other").await;
    assert!(keyed.scope(other.id).list_values(&owner).await.unwrap().is_empty());

    // Contexts and attachments go with their stack.
    let c = s
        .create_context(
            NewContext {
                slug: "shared".into(),
                name: "Shared".into(),
                description: String::new(),
                labels: vec!["autoattach:x".into()],
                space_id: s.root_space().await.unwrap().id,
            },
            db.now,
        )
        .await
        .unwrap();
    s.attach_context(&c.id, stack.id, 3, db.now).await.unwrap();
    assert_eq!(s.attach_context(&c.id, stack.id, 1, db.now).await.unwrap().priority, 1);
    assert_eq!(s.stack_attachments(stack.id).await.unwrap().len(), 1);
    s.delete_stack("net").await.unwrap();
    assert!(s.list_values(&owner).await.unwrap().is_empty());
    assert!(s.context_attachments(&c.id).await.unwrap().is_empty());
}

async fn retired_signing_keys_leave_after_the_overlap(db: &TestDb) {
    let keyed = Store::connect(&db.url, 2)
        .await
        .unwrap()
        .with_master_key(KeyBytes::random());
    let t0 = db.now;
    keyed
        .oidc_add_key("k1", b"der-1", "{\"kid\":\"k1\"}", false, t0)
        .await
        .unwrap();
    let t1 = t0 + chrono::Duration::hours(1);
    keyed
        .oidc_add_key("k2", b"der-2", "{\"kid\":\"k2\"}", true, t1)
        .await
        .unwrap();
    assert_eq!(keyed.oidc_active_kid().await.unwrap().as_deref(), Some("k2"));
    assert_eq!(keyed.oidc_key("k1").await.unwrap().private_der, b"der-1");
    // k1 retired at t1: published while the overlap lasts, gone after.
    let published = |cutoff| {
        let keyed = keyed.clone();
        async move { keyed.oidc_public_keys(cutoff).await.unwrap() }
    };
    assert_eq!(published(t1 - chrono::Duration::minutes(1)).await.len(), 2);
    assert_eq!(
        published(t1 + chrono::Duration::minutes(1)).await,
        vec!["{\"kid\":\"k2\"}"]
    );
}
db_tests!(
    secrets_are_sealed_and_write_only,
    retired_signing_keys_leave_after_the_overlap
);
