//! One scheduler per test over a fresh database (a SQLite file, or a new PostgreSQL
//! database dropped afterwards), a `MemoryQueue` whose messages the test drains, and a
//! `ManualClock` the test steps. An unreachable PostgreSQL skips the test unless `CI=true`.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, SubsecRound, Utc};
use futures::FutureExt;
use sea_orm::{ConnectOptions, ConnectionTrait, Database};
use terraplane_config::SchedulerConfig;
use terraplane_domain::{Clock, ManualClock, OrgId, RunEvent, RunId, RunPhase, RunType};
use terraplane_protocol::JobMessage;
use terraplane_queue::memory::MemoryQueue;
use terraplane_queue::{JobConsumer, JobQueue};
use terraplane_scheduler::{Scheduler, TickReport};
use terraplane_store::{NewRun, NewStack, Run, RunUpdate, Stack, Store};

const PG_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

pub const LEASE_SECS: i64 = 30;
pub const REPUBLISH_SECS: i64 = 60;
pub const TIMEOUT_SECS: i64 = 600;

pub struct Env {
    pub store: Store,
    pub clock: Arc<ManualClock>,
    pub scheduler: Scheduler,
    pub org: OrgId,
    queue: MemoryQueue,
    consumers: HashMap<String, Box<dyn JobConsumer>>,
    // Dropped after `store`; the guard force-drops the database whatever the pool still holds.
    _pg: Option<PgGuard>,
    _tmp: Option<tempfile::TempDir>,
}

/// A short timeout, so an absent server skips quickly instead of after the pool's 30 s.
fn admin_options() -> ConnectOptions {
    let mut o = ConnectOptions::new(PG_ADMIN_URL);
    o.connect_timeout(std::time::Duration::from_secs(3))
        .acquire_timeout(std::time::Duration::from_secs(3))
        .sqlx_logging(false);
    o
}

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

impl Env {
    pub async fn sqlite() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", tmp.path().join("t.db").display());
        Env::build(&url, None, Some(tmp)).await
    }

    pub async fn postgres() -> Option<Env> {
        let admin = match Database::connect(admin_options()).await {
            Ok(c) => c,
            Err(e) if !ci() => {
                eprintln!("skipped: PostgreSQL unreachable at {PG_ADMIN_URL} ({e})");
                return None;
            }
            Err(e) => panic!("PostgreSQL unreachable under CI=true: {e}"),
        };
        let name = format!("tp_sched_{}", uuid::Uuid::new_v4().simple());
        admin
            .execute_unprepared(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        admin.close().await.unwrap();
        let guard = PgGuard(name.clone());
        Some(Env::build(&format!("postgres://postgres@127.0.0.1:5432/{name}"), Some(guard), None).await)
    }

    async fn build(url: &str, pg: Option<PgGuard>, tmp: Option<tempfile::TempDir>) -> Env {
        let store = Store::connect(url, 5).await.unwrap();
        store.migrate().await.unwrap();
        let clock = Arc::new(ManualClock::new(Utc::now().trunc_subsecs(0)));
        let cfg = SchedulerConfig {
            tick_ms: 100,
            lease_secs: LEASE_SECS as u64,
            heartbeat_secs: 5,
            republish_after_secs: REPUBLISH_SECS as u64,
            run_timeout_secs: TIMEOUT_SECS as u64,
        };
        let queue = MemoryQueue::new();
        let scheduler = Scheduler::new(store.clone(), Arc::new(queue.clone()), clock.clone(), cfg);
        let org = store.create_org("acme", "Acme", clock.now()).await.unwrap().id;
        Env {
            store,
            clock,
            scheduler,
            org,
            queue,
            consumers: HashMap::new(),
            _pg: pg,
            _tmp: tmp,
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    pub fn advance(&self, secs: i64) {
        self.clock.advance(Duration::seconds(secs));
    }

    pub async fn tick(&self) -> TickReport {
        self.scheduler.tick().await.unwrap()
    }

    pub async fn stack(&self, slug: &str, pool: &str) -> Stack {
        let s = NewStack {
            slug: slug.into(),
            name: slug.into(),
            description: String::new(),
            repository: "https://example.com/infra.git".into(),
            branch: "main".into(),
            project_root: String::new(),
            tool: "terraform".into(),
            tool_version: None,
            autodeploy: false,
            labels: Vec::new(),
            worker_pool: pool.into(),
        };
        self.store.scope(self.org).create_stack(s, self.now()).await.unwrap()
    }

    /// Queues a run, then moves the clock one second so runs are strictly ordered.
    pub async fn run(&self, stack: &Stack, run_type: RunType) -> Run {
        let r = NewRun {
            stack_id: stack.id,
            run_type,
            commit_sha: None,
            triggered_by: "alice".into(),
            trigger_kind: "manual".into(),
            drift_detection: false,
        };
        let run = self
            .store
            .scope(self.org)
            .create_run(r, "alice", self.now())
            .await
            .unwrap();
        self.advance(1);
        run
    }

    pub async fn get(&self, id: RunId) -> Run {
        self.store.scope(self.org).get_run(id).await.unwrap()
    }

    /// What a runner does on receiving a job: claim the run, with a lease.
    pub async fn claim(&self, id: RunId, phase: RunPhase, runner: &str) -> Run {
        let lease = self.now() + Duration::seconds(LEASE_SECS);
        self.store
            .claim_run(id, phase, runner, lease, self.now())
            .await
            .unwrap()
    }

    pub async fn heartbeat(&self, run: &Run) {
        let until = self.now() + Duration::seconds(LEASE_SECS);
        self.store
            .scope(self.org)
            .renew_lease(run.id, run.fencing_token, until)
            .await
            .unwrap();
    }

    pub async fn event(&self, run: &Run, event: RunEvent) -> Run {
        let upd = RunUpdate {
            fencing_token: Some(run.fencing_token),
            ..Default::default()
        };
        self.store
            .scope(self.org)
            .transition_run(run.id, event, upd, self.now())
            .await
            .unwrap()
    }

    /// Takes a claimed run through its plan.
    pub async fn finish_plan(&self, run: &Run, has_changes: bool, autodeploy: bool) -> Run {
        self.event(run, RunEvent::Initializing).await;
        self.event(run, RunEvent::Planning).await;
        self.event(
            run,
            RunEvent::PlanFinished {
                has_changes,
                run_type: run.run_type,
                autodeploy,
            },
        )
        .await
    }

    /// Every message waiting in a pool's queue, without waiting for more.
    pub async fn published(&mut self, pool: &str) -> Vec<JobMessage> {
        if !self.consumers.contains_key(pool) {
            let c = self.queue.consume(pool, "test").await.unwrap();
            self.consumers.insert(pool.to_owned(), c);
        }
        let consumer = self.consumers.get_mut(pool).unwrap();
        let mut out = Vec::new();
        while let Some(Some(delivery)) = consumer.next().now_or_never() {
            let delivery = delivery.unwrap();
            out.push(delivery.message.clone().unwrap());
            delivery.ack().await.unwrap();
        }
        out
    }
}

/// Drops its PostgreSQL database when dropped, from a thread of its own (the test's
/// runtime cannot be blocked on). FORCE ends the store's pooled connections.
struct PgGuard(String);

impl Drop for PgGuard {
    fn drop(&mut self) {
        let name = std::mem::take(&mut self.0);
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            rt.block_on(async {
                let admin = Database::connect(PG_ADMIN_URL).await?;
                admin
                    .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await?;
                admin.close().await
            })
            .map_err(std::io::Error::other)
        })
        .join();
        if !matches!(done, Ok(Ok(()))) {
            eprintln!("warning: could not drop a test database: {done:?}");
        }
    }
}

/// Defines each listed `async fn name(env: &mut Env)` of the calling module as two tests:
/// `sqlite::name` and `postgres::name`.
macro_rules! env_tests {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let mut env = crate::harness::Env::sqlite().await;
                    super::$name(&mut env).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    let Some(mut env) = crate::harness::Env::postgres().await else { return };
                    super::$name(&mut env).await;
                }
            )*
        }
    };
}
pub(crate) use env_tests;
