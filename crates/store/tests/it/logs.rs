//! Log chunks are appended in order without gaps; a retry of a stored chunk is accepted.

use terraplane_domain::RunType;
use terraplane_store::StoreError;

use crate::harness::{TestDb, db_tests};

async fn log_append_rules(db: &TestDb) {
    let a = db.org("org-a").await;
    let stack = db.stack(a.id, "network").await;
    let run = db.run(a.id, stack.id, RunType::Tracked).await;
    let scope = db.store.scope(a.id);
    assert_eq!(scope.next_log_seq(run.id).await.unwrap(), 0);

    scope.append_log(run.id, 0, "plan", "line 0\n", db.now).await.unwrap();
    match scope.append_log(run.id, 2, "plan", "line 2\n", db.now).await {
        Err(StoreError::Conflict(m)) => assert!(m.contains("expected 1"), "{m}"),
        other => panic!("a gap was accepted: {other:?}"),
    }
    // The identical retry is fine; different bytes under a used seq are not.
    scope.append_log(run.id, 0, "plan", "line 0\n", db.now).await.unwrap();
    let r = scope.append_log(run.id, 0, "plan", "something else\n", db.now).await;
    assert!(matches!(r, Err(StoreError::Conflict(_))), "{r:?}");
    scope.append_log(run.id, 1, "plan", "line 1\n", db.now).await.unwrap();

    let logs = scope.list_logs(run.id, None, 100).await.unwrap();
    let got: Vec<(i64, &str)> = logs.iter().map(|c| (c.seq, c.data.as_str())).collect();
    assert_eq!(got, vec![(0, "line 0\n"), (1, "line 1\n")]);
    let after: Vec<i64> = scope
        .list_logs(run.id, Some(0), 100)
        .await
        .unwrap()
        .iter()
        .map(|c| c.seq)
        .collect();
    assert_eq!(after, vec![1]);
    assert_eq!(scope.list_logs(run.id, None, 1).await.unwrap().len(), 1);
    assert_eq!(scope.next_log_seq(run.id).await.unwrap(), 2);
}

db_tests!(log_append_rules);
