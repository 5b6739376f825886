//! Drift schedules fired in batches: one check per stack however many of its schedules came
//! due, none where a check may not start (and why), every due schedule moved to its next
//! firing either way, and passes larger than one batch finished in the same tick.

use chrono::Duration;
use terraplane_domain::{RunEvent, RunPhase, RunState, RunType};
use terraplane_store::{NewRun, Stack};

use crate::harness::{Env, env_tests};

const CRON: &str = "*/5 * * * *";

/// A stack whose last tracked run FINISHED.
async fn finished_stack(env: &Env, slug: &str) -> Stack {
    let stack = env.stack(slug, "default").await;
    let run = env.run(&stack, RunType::Tracked).await;
    let run = env.claim(run.id, RunPhase::Plan, "r1").await;
    assert_eq!(env.finish_plan(&run, false, false).await.state, RunState::Finished);
    stack
}

async fn schedule(env: &Env, stack: &Stack, due_in_secs: i64) {
    let at = env.now() + Duration::seconds(due_in_secs);
    env.store
        .scope(env.org)
        .add_drift_schedule(stack.id, CRON, "UTC", at, env.now())
        .await
        .unwrap();
}

async fn due_schedules_fire_once_per_stack_where_a_check_may_start(env: &mut Env) {
    let twice = finished_stack(env, "twice").await;
    let fresh = env.stack("fresh", "default").await; // never ran
    let failed = finished_stack(env, "failed").await;
    let r = env.run(&failed, RunType::Tracked).await;
    let r = env.claim(r.id, RunPhase::Plan, "r1").await;
    env.event(&r, RunEvent::Initializing).await;
    env.event(&r, RunEvent::Fail).await;
    let busy = finished_stack(env, "busy").await;
    let active = env.run(&busy, RunType::Tracked).await;
    env.claim(active.id, RunPhase::Plan, "r1").await;
    let checking = finished_stack(env, "checking").await;
    let waiting = env
        .store
        .scope(env.org)
        .create_run(
            NewRun::drift_check(checking.id, "alice".into(), "manual"),
            "alice",
            env.now(),
        )
        .await
        .unwrap();
    let later = finished_stack(env, "later").await;
    env.published("default").await;

    schedule(env, &twice, -30).await;
    schedule(env, &twice, -10).await;
    for s in [&fresh, &failed, &busy, &checking] {
        schedule(env, s, -5).await;
    }
    schedule(env, &later, 600).await;

    let report = env.tick().await;
    assert_eq!(report.drift_checks.len(), 1, "{report:?}");
    let check = env.get(report.drift_checks[0]).await;
    assert_eq!(check.stack_id, twice.id);
    assert!(check.drift_detection);
    assert_eq!(check.run_type, RunType::Proposed);
    assert_eq!(check.state, RunState::Queued);
    assert_eq!(check.trigger_kind, "drift_schedule");
    assert_eq!(check.triggered_by, format!("drift schedule {CRON}"));
    // Its first event is on record like any run's.
    let events = env.store.scope(env.org).list_run_events(check.id).await.unwrap();
    assert_eq!(
        events.iter().map(|e| e.state).collect::<Vec<_>>(),
        vec![RunState::Queued]
    );
    // Published in the same tick, together with the waiting manual check.
    assert!(report.published.contains(&(check.id, RunPhase::Plan)), "{report:?}");
    assert!(report.published.contains(&(waiting.id, RunPhase::Plan)), "{report:?}");

    // Every due schedule moved to its next five-minute slot; the later one did not move.
    let slot = |t: chrono::DateTime<chrono::Utc>| {
        let t = t.timestamp();
        t - t.rem_euclid(300) + 300
    };
    for s in [&twice, &fresh, &failed, &busy, &checking] {
        for sch in env.store.scope(env.org).drift_schedules(s.id).await.unwrap() {
            assert_eq!(sch.next_run_at.timestamp(), slot(env.now()), "{}", s.slug);
        }
    }
    let l = env.store.scope(env.org).drift_schedules(later.id).await.unwrap();
    assert_eq!(l[0].next_run_at, l[0].created_at + Duration::seconds(600));

    // Nothing is due any more at this time.
    let again = env.tick().await;
    assert!(again.drift_checks.is_empty(), "{again:?}");
    // Nor did any blocked stack get a check.
    for s in [&fresh, &failed, &busy] {
        let runs = env.store.scope(env.org).list_runs(s.id, 50).await.unwrap();
        assert!(runs.iter().all(|r| !r.drift_detection), "{}", s.slug);
    }
}

async fn a_pass_larger_than_a_batch_fires_in_one_tick(env: &mut Env) {
    let a = finished_stack(env, "a").await;
    let b = finished_stack(env, "b").await;
    let c = env.stack("c", "default").await;
    // 2,001 due schedules: more than one batch of 2,000.
    for i in 0..2001 {
        let stack = [&a, &b, &c][i % 3];
        schedule(env, stack, -1 - (i as i64 % 50)).await;
    }
    let report = env.tick().await;
    let mut stacks: Vec<_> = Vec::new();
    for id in &report.drift_checks {
        stacks.push(env.get(*id).await.stack_id);
    }
    stacks.sort();
    let mut want = vec![a.id, b.id];
    want.sort();
    assert_eq!(stacks, want);
    for s in [&a, &b, &c] {
        let schedules = env.store.scope(env.org).drift_schedules(s.id).await.unwrap();
        assert_eq!(schedules.len(), 667);
        assert!(schedules.iter().all(|x| x.next_run_at > env.now()), "{}", s.slug);
    }
    assert!(env.tick().await.drift_checks.is_empty());
}

env_tests!(
    due_schedules_fire_once_per_stack_where_a_check_may_start,
    a_pass_larger_than_a_batch_fires_in_one_tick,
);
