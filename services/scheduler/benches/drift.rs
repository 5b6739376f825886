//! Benchmark (not a test): how late drift schedules fire with 10,000 stacks, each with a
//! schedule and a FINISHED tracked run (so every firing queues a real check). Two shapes:
//! `spread` (due times evenly over a window) and `burst` (all due at the same second).
//! `cargo bench -p terraplane-scheduler --bench drift` prints a markdown report;
//! docs/benchmarks.md holds the latest figures. BENCH_STACKS (default 10000) and
//! BENCH_WINDOW_SECS (default 60) set the size, BENCH_SHAPES (spread,burst) and BENCH_BACKENDS
//! (sqlite,postgres) what runs; PostgreSQL is skipped when unreachable.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use terraplane_config::SchedulerConfig;
use terraplane_domain::{RunEvent, RunPhase, RunType, StackId, SystemClock};
use terraplane_queue::memory::MemoryQueue;
use terraplane_scheduler::Scheduler;
use terraplane_store::{NewRun, NewStack, RunUpdate, Store};

fn env_usize(k: &str, d: usize) -> usize {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d)
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

/// Stacks with a FINISHED tracked run each and a schedule not yet due: (stack, schedule id).
async fn seed(store: &Store, n: usize) -> Vec<(StackId, String)> {
    let now = Utc::now();
    let org = store
        .create_org(&format!("bench-{}", uuid::Uuid::new_v4().simple()), "b", now)
        .await
        .unwrap();
    let scope = store.scope(org.id);
    let mut out = Vec::new();
    for i in 0..n {
        let stack = scope
            .create_stack(
                NewStack {
                    slug: format!("s{i}"),
                    name: format!("s{i}"),
                    description: String::new(),
                    repository: "file:///x".into(),
                    branch: "main".into(),
                    project_root: String::new(),
                    tool: "terraform".into(),
                    tool_version: None,
                    autodeploy: false,
                    labels: vec![],
                    worker_pool: "bench".into(),
                    space_id: None,
                },
                now,
            )
            .await
            .unwrap();
        let run = scope
            .create_run(
                NewRun {
                    stack_id: stack.id,
                    run_type: RunType::Tracked,
                    commit_sha: None,
                    triggered_by: "bench".into(),
                    trigger_kind: "user".into(),
                    drift_detection: false,
                },
                "bench",
                now,
            )
            .await
            .unwrap();
        let run = store
            .claim_run(run.id, RunPhase::Plan, "bench", now + chrono::Duration::hours(1), now)
            .await
            .unwrap();
        let upd = || RunUpdate {
            fencing_token: Some(run.fencing_token),
            ..Default::default()
        };
        for e in [
            RunEvent::Initializing,
            RunEvent::Planning,
            RunEvent::PlanFinished {
                has_changes: false,
                run_type: RunType::Tracked,
                autodeploy: false,
            },
        ] {
            scope.transition_run(run.id, e, upd(), now).await.unwrap();
        }
        let s = scope
            .add_drift_schedule(stack.id, "0 0 1 1 *", "UTC", far_future(), now)
            .await
            .unwrap();
        out.push((stack.id, s.id));
    }
    out
}

fn far_future() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2100-01-01T00:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

/// Ticks like the scheduler loop (every `tick_ms`) until every schedule fired; returns
/// each firing's lateness in seconds (run created − due) and the slowest tick.
async fn fire(store: &Store, due: &HashMap<StackId, DateTime<Utc>>, tick_ms: u64) -> (Vec<f64>, f64) {
    // No runner takes the checks here, so the queue only grows; re-publishing them (what
    // a lost message gets after `republish_after_secs`) is not what is measured.
    let cfg = SchedulerConfig {
        tick_ms,
        republish_after_secs: 3600,
        ..SchedulerConfig::default()
    };
    let s = Scheduler::new(store.clone(), Arc::new(MemoryQueue::new()), Arc::new(SystemClock), cfg);
    // A check counts as fired when the tick had queued (committed) all of its checks: an
    // upper bound for each (the run's own timestamp is the tick's start).
    let mut runs = Vec::new();
    let mut slowest: f64 = 0.0;
    let deadline = Instant::now() + Duration::from_secs(900);
    while runs.len() < due.len() && Instant::now() < deadline {
        let t = Instant::now();
        let r = s.tick().await.unwrap();
        let done = r.drift_fired_at.unwrap();
        slowest = slowest.max(t.elapsed().as_secs_f64());
        runs.extend(r.drift_checks.into_iter().map(|id| (id, done)));
        tokio::time::sleep(Duration::from_millis(tick_ms)).await;
    }
    assert_eq!(runs.len(), due.len(), "every schedule fired");
    let mut late = Vec::new();
    for (id, done) in runs {
        let run = store.get_run_any(id).await.unwrap();
        late.push((done - due[&run.stack_id]).num_milliseconds() as f64 / 1000.0);
    }
    late.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (late, slowest)
}

async fn scenario(backend: &str, name: &str, store: &Store, n: usize, window: i64) {
    let t = Instant::now();
    let stacks = seed(store, n).await;
    // Statistics as a live database has them (autovacuum analyzes as tables grow); right
    // after a bulk load of 10,000 stacks they may describe a nearly empty table.
    store.analyze().await.unwrap();
    let seeding = t.elapsed().as_secs_f64();
    // Due times are set once everything exists, starting a little after the updates end.
    let start = Utc::now() + chrono::Duration::seconds(3 + n as i64 / 1000);
    let mut due = HashMap::new();
    for (i, (stack, id)) in stacks.iter().enumerate() {
        let at = if name == "spread" {
            start + chrono::Duration::milliseconds(i as i64 * window * 1000 / n as i64)
        } else {
            start
        };
        assert!(store.advance_drift_schedule(id, far_future(), at).await.unwrap());
        due.insert(*stack, at);
    }
    assert!(Utc::now() < start, "setting the due times took longer than planned");
    tokio::time::sleep((start - Utc::now()).to_std().unwrap_or_default()).await;
    let (late, slowest) = fire(store, &due, 100).await;
    println!(
        "| {backend} | {name} | {n} | {:.3} | {:.3} | {:.3} | {slowest:.3} | {seeding:.0} |",
        pct(&late, 0.5),
        pct(&late, 0.99),
        late.last().copied().unwrap_or_default()
    );
}

#[tokio::main]
async fn main() {
    let n = env_usize("BENCH_STACKS", 10_000);
    let window = env_usize("BENCH_WINDOW_SECS", 60) as i64;
    println!("| backend | shape | schedules | lateness p50 (s) | p99 (s) | max (s) | slowest tick (s) | seeding (s) |");
    println!("|---|---|---|---|---|---|---|---|");
    // A fresh database per scenario, so one scenario's queued checks don't weigh on the next.
    let shapes: Vec<String> = std::env::var("BENCH_SHAPES")
        .unwrap_or_else(|_| "spread,burst".into())
        .split(',')
        .map(str::to_owned)
        .collect();
    let backends = std::env::var("BENCH_BACKENDS").unwrap_or_else(|_| "sqlite,postgres".into());
    for shape in shapes.iter().map(String::as_str) {
        if !backends.contains("sqlite") {
            break;
        }
        let tmp = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", tmp.path().join("bench.db").display());
        let sqlite = Store::connect(&url, 1).await.unwrap();
        sqlite.migrate().await.unwrap();
        scenario("SQLite", shape, &sqlite, n, window).await;
    }
    for shape in shapes.iter().map(String::as_str) {
        if !backends.contains("postgres") {
            break;
        }
        let Some(pg) = terraplane_test_support::fresh_postgres("tp_bench").await else {
            break;
        };
        let store = Store::connect(&pg.url, 10).await.unwrap();
        store.migrate().await.unwrap();
        scenario("PostgreSQL", shape, &store, n, window).await;
    }
}
