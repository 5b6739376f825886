//! Policy storage: versions on every change of body or labels, evaluations with their
//! input stored once per hash, and samples trimmed to the newest SAMPLES_KEPT.

use serde_json::json;
use terraplane_store::{NewEvaluation, NewPolicy, PolicyPatch, SAMPLES_KEPT};

use crate::harness::{TestDb, db_tests};

async fn versions_evaluations_and_samples(db: &TestDb) {
    let a = db.org("org-a").await;
    let scope = db.store.scope(a.id);
    let root = scope.root_space().await.unwrap();
    let created = scope
        .create_policy(
            NewPolicy {
                slug: "p".into(),
                name: "p".into(),
                policy_type: "PLAN".into(),
                description: String::new(),
                labels: vec![],
                body: "package spacelift\n".into(),
                space_id: root.id,
            },
            "alice",
            db.now,
        )
        .await
        .unwrap();
    assert_eq!((created.version, created.policy_type.as_str()), (1, "PLAN"));
    // A rename is not a new version; a new body is.
    let renamed = scope
        .update_policy(
            "p",
            PolicyPatch {
                name: Some("P".into()),
                ..Default::default()
            },
            "alice",
            db.now,
        )
        .await
        .unwrap();
    assert_eq!(renamed.version, 1);
    let p = scope
        .update_policy(
            "p",
            PolicyPatch {
                body: Some("package spacelift\n\nwarn[\"x\"] { true }\n".into()),
                ..Default::default()
            },
            "bob",
            db.now,
        )
        .await
        .unwrap();
    assert_eq!(p.version, 2);
    let versions = scope.policy_versions(&p.id).await.unwrap();
    assert_eq!(
        versions
            .iter()
            .map(|v| (v.version, v.created_by.as_str()))
            .collect::<Vec<_>>(),
        vec![(1, "alice"), (2, "bob")]
    );
    // Another organization sees none of it.
    let b = db.org("org-b").await;
    assert!(db.store.scope(b.id).get_policy_by_slug("p").await.is_err());
    assert!(db.store.scope(b.id).policy_versions(&p.id).await.unwrap().is_empty());

    // SAMPLES_KEPT + 3 sampled evaluations of distinct inputs: the newest are kept.
    let mut hashes = Vec::new();
    for i in 0..(SAMPLES_KEPT as usize + 3) {
        let input = json!({"i": i});
        let hash = format!("{i:064}");
        let at = db.now + chrono::Duration::seconds(i as i64);
        let ev = NewEvaluation {
            policy: p.clone(),
            run_id: None,
            stack_id: None,
            subject: format!("test:{i}"),
            outcome: "warn".into(),
            messages: vec!["x".into()],
            result: json!({"warn": ["x"]}),
            sample: true,
        };
        scope
            .record_evaluations("PLAN", &input, &hash, vec![ev], at)
            .await
            .unwrap();
        hashes.push(hash);
    }
    let samples = scope.policy_samples(&p.id).await.unwrap();
    assert_eq!(samples.len(), SAMPLES_KEPT as usize);
    assert_eq!(samples[0].0, *hashes.last().unwrap(), "newest first");
    assert!(!samples.iter().any(|(h, _)| h == &hashes[0] || h == &hashes[2]));
    let (kind, input) = scope.policy_input(&hashes[1]).await.unwrap();
    assert_eq!((kind.as_str(), input), ("PLAN", json!({"i": 1})));
    assert!(db.store.scope(b.id).policy_input(&hashes[1]).await.is_err());
    let evs = scope.policy_evaluations(&p.id, 5).await.unwrap();
    assert_eq!(evs.len(), 5);
    assert_eq!(evs[0].policy_version, 2);
    assert_eq!(evs[0].subject, format!("test:{}", SAMPLES_KEPT + 2));
}

/// A queued run's first judgment is taken once; a mark whose judge died is taken over.
async fn one_judgment_per_queued_run(db: &TestDb) {
    let a = db.org("org-a").await;
    let stack = db.stack(a.id, "net").await;
    let run = db.run(a.id, stack.id, terraplane_domain::RunType::Tracked).await;
    let scope = db.store.scope(a.id);
    let now = db.now;
    let long_ago = now - chrono::Duration::seconds(60);
    assert!(scope.begin_review_judgment(run.id, now, long_ago).await.unwrap());
    assert!(!scope.begin_review_judgment(run.id, now, long_ago).await.unwrap());
    assert_eq!(
        scope.get_run(run.id).await.unwrap().review_stage.as_deref(),
        Some(terraplane_store::JUDGING)
    );
    // Sixty seconds on, the mark is stale: the next judge takes over.
    let later = now + chrono::Duration::seconds(61);
    assert!(
        scope
            .begin_review_judgment(run.id, later, later - chrono::Duration::seconds(60))
            .await
            .unwrap()
    );
    // Another organization cannot touch it.
    let b = db.org("org-b").await;
    assert!(
        !db.store
            .scope(b.id)
            .begin_review_judgment(run.id, later, later + chrono::Duration::seconds(1))
            .await
            .unwrap()
    );
}

db_tests!(versions_evaluations_and_samples, one_judgment_per_queued_run);
