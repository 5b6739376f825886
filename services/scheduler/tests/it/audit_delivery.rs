//! Audit webhook delivery: every event, in order, signed; a failing webhook is retried
//! with growing delays (stepped with the manual clock) and nothing is skipped or dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use terraplane_scheduler::audit_delivery::{AuditDelivery, SIGNATURE_HEADER, signature};
use terraplane_store::NewAuditEvent;
use terraplane_test_support::mock::{MockServer, Reply};

use crate::harness::{Env, env_tests};

const SECRET: &str = "webhook-secret";

async fn events_are_delivered_in_order_signed_and_retried(env: &mut Env) {
    let scope = env.store.scope(env.org);
    for i in 1..=3 {
        let e = NewAuditEvent {
            actor: "alice".into(),
            action: "stack.create".into(),
            target_kind: "stack".into(),
            target: format!("s{i}"),
            ..Default::default()
        };
        scope.append_audit(e, env.now()).await.unwrap();
    }
    // The webhook fails twice, then accepts.
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let hook = MockServer::start(move |_| {
        if c.fetch_add(1, Ordering::SeqCst) < 2 {
            Reply::text(500, "down")
        } else {
            Reply::text(200, "ok")
        }
    })
    .await
    .unwrap();
    let d = AuditDelivery::new(env.store.clone(), hook.url(), SECRET.into(), env.clock.clone(), 300).unwrap();

    assert_eq!(d.run_once().await.unwrap(), 0, "first attempt fails");
    let cursor = scope.audit_delivery().await.unwrap();
    assert_eq!((cursor.last_seq, cursor.failures), (0, 1));
    assert!(cursor.last_error.as_deref().unwrap().contains("500"), "{cursor:?}");
    // Within the backoff nothing is tried.
    assert_eq!(d.run_once().await.unwrap(), 0);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    env.advance(2);
    assert_eq!(d.run_once().await.unwrap(), 0, "second attempt fails too");
    assert_eq!(scope.audit_delivery().await.unwrap().failures, 2);
    env.advance(3);
    assert_eq!(d.run_once().await.unwrap(), 0, "backoff doubled to 4 s");
    env.advance(1);
    assert_eq!(d.run_once().await.unwrap(), 3);
    let cursor = scope.audit_delivery().await.unwrap();
    assert_eq!((cursor.last_seq, cursor.failures, cursor.last_error), (3, 0, None));

    // Event 1 was attempted three times, then 2 and 3 once each, in order.
    let reqs = hook.requests();
    let seqs: Vec<i64> = reqs
        .iter()
        .map(|r| {
            serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["event"]["seq"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, [1, 1, 1, 2, 3]);
    for r in &reqs {
        assert_eq!(r.header(SIGNATURE_HEADER), Some(signature(SECRET.as_bytes(), &r.body)));
        let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["organization"], "acme");
    }
    // Nothing new: nothing sent.
    assert_eq!(d.run_once().await.unwrap(), 0);
    assert_eq!(hook.requests().len(), 5);
}

env_tests!(events_are_delivered_in_order_signed_and_retried);
