//! One scheduler per test over a fresh database (a SQLite file, or a new PostgreSQL
//! database dropped afterwards), a `MemoryQueue` whose messages the test drains, and a
//! `ManualClock` the test steps. An unreachable PostgreSQL skips the test unless `CI=true`.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Duration, SubsecRound, Utc};
use futures::FutureExt;
use terraplane_config::SchedulerConfig;
use terraplane_domain::{Clock, ManualClock, OrgId, RunEvent, RunId, RunPhase, RunType};
use terraplane_protocol::JobMessage;
use terraplane_queue::memory::MemoryQueue;
use terraplane_queue::{JobConsumer, JobQueue};
use terraplane_scheduler::{Scheduler, TickReport};
use terraplane_store::{NewRun, NewStack, Run, RunUpdate, Stack, Store};
use terraplane_test_support::{PgDatabase, fresh_postgres};

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
    // Dropped after `store`; it force-drops the database whatever the pool still holds.
    _pg: Option<PgDatabase>,
    _tmp: Option<tempfile::TempDir>,
}

impl Env {
    pub async fn sqlite() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", tmp.path().join("t.db").display());
        Env::build(&url, None, Some(tmp)).await
    }

    pub async fn postgres() -> Option<Env> {
        let pg = fresh_postgres("tp_sched").await?;
        let url = pg.url.clone();
        Some(Env::build(&url, Some(pg), None).await)
    }

    async fn build(url: &str, pg: Option<PgDatabase>, tmp: Option<tempfile::TempDir>) -> Env {
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
            space_id: None,
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
