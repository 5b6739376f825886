//! Benchmarks (not tests): run overhead and dispatch latency, each measured against its
//! baseline in the same run. `cargo bench -p terraplane --bench overhead` prints a
//! markdown report; docs/benchmarks.md holds the latest figures.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "../tests/it/harness.rs"]
mod harness;

use std::time::{Duration, Instant};

use harness::*;
use terraplane_client::RunState;
use terraplane_queue::JobConsumer;

const CONFIG: &str = r#"
resource "terraform_data" "a" { input = "alpha" }
resource "terraform_data" "b" { input = terraform_data.a.output }
output "a" { value = terraform_data.a.output }
"#;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn summary(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (percentile(&v, 0.5), percentile(&v, 0.99))
}

/// init + plan -out + apply <plan> with local state in a fresh directory.
fn direct_terraform(dir: &std::path::Path) -> f64 {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("main.tf"), CONFIG).unwrap();
    let t = Instant::now();
    for args in [
        vec!["init", "-input=false", "-no-color"],
        vec!["plan", "-input=false", "-no-color", "-out=p.tfplan"],
        vec!["apply", "-input=false", "-no-color", "p.tfplan"],
    ] {
        let o = std::process::Command::new(terraform_bin())
            .args(&args)
            .current_dir(dir)
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_CLI_CONFIG_FILE", "/dev/null")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    t.elapsed().as_secs_f64()
}

async fn run_overhead(app: &TestApp, n: usize) -> (f64, f64, f64, f64) {
    let repo = git_repo(&app.tmp.path().join("bench-repo"), &[("main.tf", CONFIG)]);
    let mut ours = Vec::new();
    let mut direct = Vec::new();
    for i in 0..n {
        let slug = format!("bench-{i}");
        app.stack(&slug, &repo, true).await;
        let t = Instant::now();
        let run = app.client.run_trigger(&slug, false).await.unwrap();
        app.wait_run(&run.id, 120, |r| r.terminal).await;
        ours.push(t.elapsed().as_secs_f64());
        direct.push(direct_terraform(&app.tmp.path().join(format!("direct-{i}"))));
    }
    let (o50, o99) = summary(ours);
    let (d50, d99) = summary(direct);
    (o50, o99, d50, d99)
}

/// QUEUED committed (the run's QUEUED event) → claim held (its PREPARING event), with an
/// idle runner; runs fail right after the claim (unclonable repository), so the next
/// sample starts at once.
async fn dispatch_latency(app: &TestApp, n: usize) -> (f64, f64) {
    app.stack("dispatch", "file:///nonexistent-bench-repo", false).await;
    let mut v = Vec::new();
    for _ in 0..n {
        let run = app.client.run_trigger("dispatch", true).await.unwrap();
        let run = app.wait_run(&run.id, 60, |r| r.terminal).await;
        let q = run.events.iter().find(|e| e.state == RunState::Queued).unwrap().at;
        let p = run.events.iter().find(|e| e.state == RunState::Preparing).unwrap().at;
        v.push((p - q).num_microseconds().unwrap() as f64 / 1000.0);
    }
    summary(v)
}

/// publish-with-confirm → consume, on the same broker and settings (durable queue,
/// persistent message, prefetch 1, manual ack).
async fn raw_round_trip(prefix: &str, n: usize) -> (f64, f64) {
    let q = terraplane_queue::rabbit::RabbitQueue::connect("amqp://guest:guest@127.0.0.1:5672/%2f", prefix)
        .await
        .unwrap();
    use terraplane_queue::JobQueue;
    let mut c: Box<dyn JobConsumer> = q.consume("raw", "bench").await.unwrap();
    let mut v = Vec::new();
    let msg = terraplane_protocol::JobMessage::new(terraplane_domain::RunId::new(), terraplane_domain::RunPhase::Plan);
    for _ in 0..n {
        let t = Instant::now();
        q.publish("raw", &msg).await.unwrap();
        let d = c.next().await.unwrap().unwrap();
        d.ack().await.unwrap();
        v.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    q.delete_topology(&["raw"]).await.unwrap();
    summary(v)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let runs: usize = std::env::var("BENCH_RUNS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
        let dispatches: usize = std::env::var("BENCH_DISPATCHES").ok().and_then(|s| s.parse().ok()).unwrap_or(200);
        println!("## Results ({runs} runs, {dispatches} dispatches per backend)\n");
        println!("| backend | metric | Terraplane p50 | p99 | baseline p50 | p99 | extra / ratio |");
        println!("|---|---|---|---|---|---|---|");
        for backend in [Backend::Sqlite, Backend::Postgres] {
            let Some(app) = spawn(backend, Options::default()).await else { continue };
            let name = match backend {
                Backend::Sqlite => "SQLite + in-process queue",
                Backend::Postgres => "PostgreSQL + RabbitMQ",
            };
            let (o50, o99, d50, d99) = run_overhead(&app, runs).await;
            println!(
                "| {name} | run overhead: trigger → FINISHED vs terraform init/plan/apply | {o50:.3} s | {o99:.3} s | {d50:.3} s | {d99:.3} s | +{:.3} s at p50 |",
                o50 - d50
            );
            let (l50, l99) = dispatch_latency(&app, dispatches).await;
            if backend == Backend::Postgres {
                let (r50, r99) = raw_round_trip(&format!("tp-bench-{}", uuid::Uuid::new_v4().simple()), dispatches).await;
                println!(
                    "| {name} | dispatch: QUEUED committed → claim held vs raw publish-confirm → consume | {l50:.2} ms | {l99:.2} ms | {r50:.2} ms | {r99:.2} ms | {:.1}× at p50 |",
                    l50 / r50
                );
            } else {
                println!("| {name} | dispatch: QUEUED committed → claim held | {l50:.2} ms | {l99:.2} ms | — | — | — |");
            }
            app.teardown().await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
}
