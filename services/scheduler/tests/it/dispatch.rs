//! What gets published when: once per run, again only if still QUEUED long after; one
//! tracked run per stack at a time, oldest first; proposed runs never wait; confirmed runs
//! go out for their apply phase.

use terraplane_domain::{RunEvent, RunPhase, RunState, RunType};
use terraplane_protocol::JobMessage;
use terraplane_store::RunUpdate;

use crate::harness::{Env, REPUBLISH_SECS, env_tests};

async fn queued_run_is_published_once_then_again_while_still_queued(env: &mut Env) {
    let stack = env.stack("network", "default").await;
    let run = env.run(&stack, RunType::Tracked).await;

    let report = env.tick().await;
    assert_eq!(report.published, vec![(run.id, RunPhase::Plan)]);
    assert!(report.failed.is_empty());
    assert_eq!(
        env.published("default").await,
        vec![JobMessage::new(run.id, RunPhase::Plan)]
    );
    assert_eq!(env.get(run.id).await.dispatched_at, Some(env.now()));

    // No time passed: nothing new.
    assert!(env.tick().await.published.is_empty());
    assert!(env.published("default").await.is_empty());
    // Not yet long enough.
    env.advance(REPUBLISH_SECS - 1);
    assert!(env.tick().await.published.is_empty());
    assert!(env.published("default").await.is_empty());
    // Still QUEUED well after its publish: the message may be lost, publish again.
    env.advance(2);
    assert_eq!(env.tick().await.published, vec![(run.id, RunPhase::Plan)]);
    assert_eq!(
        env.published("default").await,
        vec![JobMessage::new(run.id, RunPhase::Plan)]
    );
    assert!(env.tick().await.published.is_empty());
    assert!(env.published("default").await.is_empty());
}

async fn runs_go_to_their_stack_worker_pool(env: &mut Env) {
    let stack = env.stack("gpu-stack", "gpu").await;
    let run = env.run(&stack, RunType::Proposed).await;
    assert_eq!(env.tick().await.published, vec![(run.id, RunPhase::Plan)]);
    assert_eq!(
        env.published("gpu").await,
        vec![JobMessage::new(run.id, RunPhase::Plan)]
    );
    assert!(env.published("default").await.is_empty());
}

async fn canceled_runs_are_not_published(env: &mut Env) {
    let stack = env.stack("network", "default").await;
    let run = env.run(&stack, RunType::Tracked).await;
    let next = env.run(&stack, RunType::Tracked).await;
    env.store
        .scope(env.org)
        .cancel_run(run.id, "alice", env.now())
        .await
        .unwrap();
    assert_eq!(env.tick().await.published, vec![(next.id, RunPhase::Plan)]);
    assert_eq!(
        env.published("default").await,
        vec![JobMessage::new(next.id, RunPhase::Plan)]
    );
}

async fn one_tracked_run_per_stack_oldest_first(env: &mut Env) {
    let network = env.stack("network", "default").await;
    let dns = env.stack("dns", "default").await;
    let first = env.run(&network, RunType::Tracked).await;
    let second = env.run(&network, RunType::Tracked).await;
    let other = env.run(&dns, RunType::Tracked).await;

    let mut published = env.tick().await.published;
    published.sort_by_key(|(id, _)| *id);
    assert_eq!(published, vec![(first.id, RunPhase::Plan), (other.id, RunPhase::Plan)]);
    let mut messages: Vec<_> = env.published("default").await.into_iter().map(|m| m.run_id).collect();
    messages.sort();
    assert_eq!(messages, vec![first.id, other.id]);

    // The first run is claimed and heartbeats; the second waits however long it takes,
    // while the other stack's unclaimed run is published again.
    let claimed = env.claim(first.id, RunPhase::Plan, "runner-1").await;
    for _ in 0..3 {
        env.advance(REPUBLISH_SECS / 2 + 1);
        env.heartbeat(&claimed).await;
        let report = env.tick().await;
        assert!(report.failed.is_empty(), "{report:?}");
        assert!(report.published.iter().all(|(id, _)| *id == other.id), "{report:?}");
    }
    let messages = env.published("default").await;
    assert!(!messages.is_empty());
    assert!(messages.iter().all(|m| m.run_id == other.id), "{messages:?}");

    // A plan that needs confirmation still blocks the stack.
    env.finish_plan(&claimed, true, false).await;
    assert_eq!(env.get(first.id).await.state, RunState::Unconfirmed);
    env.advance(REPUBLISH_SECS + 1);
    assert!(env.tick().await.published.iter().all(|(id, _)| *id == other.id));
    assert!(env.published("default").await.iter().all(|m| m.run_id == other.id));

    // Once the first run is over, the second goes.
    let upd = RunUpdate::default();
    env.store
        .scope(env.org)
        .transition_run(first.id, RunEvent::Discard, upd, env.now())
        .await
        .unwrap();
    assert_eq!(env.tick().await.published, vec![(second.id, RunPhase::Plan)]);
    assert_eq!(
        env.published("default").await,
        vec![JobMessage::new(second.id, RunPhase::Plan)]
    );
}

async fn next_tracked_run_goes_when_the_first_finishes(env: &mut Env) {
    let stack = env.stack("network", "default").await;
    let first = env.run(&stack, RunType::Tracked).await;
    let second = env.run(&stack, RunType::Tracked).await;
    assert_eq!(env.tick().await.published, vec![(first.id, RunPhase::Plan)]);
    let claimed = env.claim(first.id, RunPhase::Plan, "runner-1").await;
    assert!(env.tick().await.published.is_empty());
    let done = env.finish_plan(&claimed, false, false).await;
    assert_eq!(done.state, RunState::Finished);
    assert_eq!(env.tick().await.published, vec![(second.id, RunPhase::Plan)]);
    assert_eq!(
        env.published("default").await,
        vec![
            JobMessage::new(first.id, RunPhase::Plan),
            JobMessage::new(second.id, RunPhase::Plan)
        ]
    );
}

async fn proposed_runs_do_not_wait_for_the_tracked_run(env: &mut Env) {
    let stack = env.stack("network", "default").await;
    let tracked = env.run(&stack, RunType::Tracked).await;
    assert_eq!(env.tick().await.published, vec![(tracked.id, RunPhase::Plan)]);
    env.claim(tracked.id, RunPhase::Plan, "runner-1").await;
    let waiting = env.run(&stack, RunType::Tracked).await;
    let p1 = env.run(&stack, RunType::Proposed).await;
    let p2 = env.run(&stack, RunType::Proposed).await;

    let report = env.tick().await;
    assert_eq!(report.published, vec![(p1.id, RunPhase::Plan), (p2.id, RunPhase::Plan)]);
    let ids: Vec<_> = env.published("default").await.into_iter().map(|m| m.run_id).collect();
    assert_eq!(ids, vec![tracked.id, p1.id, p2.id]);
    assert!(!ids.contains(&waiting.id));
    // The tracked run behind the active one was never published.
    assert_eq!(env.get(waiting.id).await.dispatched_at, None);
}

async fn confirmed_run_is_published_for_apply(env: &mut Env) {
    let stack = env.stack("network", "default").await;
    let run = env.run(&stack, RunType::Tracked).await;
    let next = env.run(&stack, RunType::Tracked).await;
    env.tick().await;
    env.published("default").await;
    let claimed = env.claim(run.id, RunPhase::Plan, "runner-1").await;
    env.finish_plan(&claimed, true, false).await;
    // UNCONFIRMED waits for a human.
    assert!(env.tick().await.published.is_empty());

    let scope = env.store.scope(env.org);
    scope
        .transition_run(run.id, RunEvent::Confirm, RunUpdate::default(), env.now())
        .await
        .unwrap();
    assert_eq!(env.tick().await.published, vec![(run.id, RunPhase::Apply)]);
    assert_eq!(
        env.published("default").await,
        vec![JobMessage::new(run.id, RunPhase::Apply)]
    );
    assert!(env.tick().await.published.is_empty());
    assert!(env.published("default").await.is_empty());

    let applying = env.claim(run.id, RunPhase::Apply, "runner-2").await;
    assert_eq!(applying.state, RunState::Applying);
    assert!(env.tick().await.published.is_empty());
    env.event(&applying, RunEvent::ApplyFinished).await;
    assert_eq!(env.tick().await.published, vec![(next.id, RunPhase::Plan)]);
}

async fn autodeployed_run_is_published_for_apply(env: &mut Env) {
    let stack = env.stack("network", "default").await;
    let run = env.run(&stack, RunType::Tracked).await;
    env.tick().await;
    let claimed = env.claim(run.id, RunPhase::Plan, "runner-1").await;
    assert_eq!(env.finish_plan(&claimed, true, true).await.state, RunState::Confirmed);
    assert_eq!(env.tick().await.published, vec![(run.id, RunPhase::Apply)]);
    assert_eq!(
        env.published("default").await,
        vec![
            JobMessage::new(run.id, RunPhase::Plan),
            JobMessage::new(run.id, RunPhase::Apply)
        ]
    );
}

env_tests!(
    queued_run_is_published_once_then_again_while_still_queued,
    runs_go_to_their_stack_worker_pool,
    canceled_runs_are_not_published,
    one_tracked_run_per_stack_oldest_first,
    next_tracked_run_goes_when_the_first_finishes,
    proposed_runs_do_not_wait_for_the_tracked_run,
    confirmed_run_is_published_for_apply,
    autodeployed_run_is_published_for_apply,
);
