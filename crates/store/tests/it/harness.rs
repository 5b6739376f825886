//! A fresh database per test: a SQLite file in a temp dir, or a new PostgreSQL database
//! dropped (`WITH (FORCE)`) when the test ends, even when it panics. An unreachable
//! PostgreSQL skips the test, except under `CI=true` where it fails it.

use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use sea_orm::{ConnectOptions, ConnectionTrait, Database};
use terraplane_domain::{OrgId, RunType, StackId};
use terraplane_store::{NewRun, NewStack, Organization, Run, Stack, Store};

const PG_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

pub struct TestDb {
    pub store: Store,
    pub url: String,
    pub now: DateTime<Utc>,
    // Dropped after `store`; the guard force-drops the database whatever the pool still holds.
    _pg: Option<PgGuard>,
    _tmp: Option<tempfile::TempDir>,
}

/// A short timeout, so an absent server skips quickly instead of after the pool's 30 s.
fn admin_options() -> ConnectOptions {
    let mut o = ConnectOptions::new(PG_ADMIN_URL);
    o.connect_timeout(Duration::from_secs(3))
        .acquire_timeout(Duration::from_secs(3))
        .sqlx_logging(false);
    o
}

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

impl TestDb {
    pub async fn sqlite() -> TestDb {
        let tmp = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", tmp.path().join("t.db").display());
        let store = Store::connect(&url, 5).await.unwrap();
        store.migrate().await.unwrap();
        TestDb {
            store,
            url,
            now: start_time(),
            _pg: None,
            _tmp: Some(tmp),
        }
    }

    /// `None` (after printing why) when PostgreSQL is unreachable outside CI.
    pub async fn postgres() -> Option<TestDb> {
        let admin = match Database::connect(admin_options()).await {
            Ok(c) => c,
            Err(e) if !ci() => {
                eprintln!("skipped: PostgreSQL unreachable at {PG_ADMIN_URL} ({e})");
                return None;
            }
            Err(e) => panic!("PostgreSQL unreachable under CI=true: {e}"),
        };
        let name = format!("tp_store_{}", uuid::Uuid::new_v4().simple());
        admin
            .execute_unprepared(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        admin.close().await.unwrap();
        // From here on the guard drops the database whatever happens.
        let guard = PgGuard(name.clone());
        let url = format!("postgres://postgres@127.0.0.1:5432/{name}");
        let store = Store::connect(&url, 5).await.unwrap();
        store.migrate().await.unwrap();
        Some(TestDb {
            store,
            url,
            now: start_time(),
            _pg: Some(guard),
            _tmp: None,
        })
    }

    pub async fn org(&self, slug: &str) -> Organization {
        self.store.create_org(slug, slug, self.now).await.unwrap()
    }

    pub async fn stack(&self, org: OrgId, slug: &str) -> Stack {
        self.store
            .scope(org)
            .create_stack(new_stack(slug), self.now)
            .await
            .unwrap()
    }

    pub async fn run(&self, org: OrgId, stack: StackId, run_type: RunType) -> Run {
        self.store
            .scope(org)
            .create_run(new_run(stack, run_type), "alice", self.now)
            .await
            .unwrap()
    }
}

/// Drops its PostgreSQL database when dropped.
struct PgGuard(String);

impl Drop for PgGuard {
    fn drop(&mut self) {
        let name = std::mem::take(&mut self.0);
        // Drop runs inside the test's runtime, which cannot be blocked on: use a fresh one
        // on another thread. FORCE ends the store's pooled connections.
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

/// Whole seconds, so values read back from either backend compare equal.
fn start_time() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(0)
}

pub fn new_stack(slug: &str) -> NewStack {
    NewStack {
        slug: slug.into(),
        name: format!("Stack {slug}"),
        description: String::new(),
        repository: "https://example.com/infra.git".into(),
        branch: "main".into(),
        project_root: String::new(),
        tool: "terraform".into(),
        tool_version: None,
        autodeploy: false,
        labels: vec!["team:core".into()],
        worker_pool: "default".into(),
    }
}

pub fn new_run(stack: StackId, run_type: RunType) -> NewRun {
    NewRun {
        stack_id: stack,
        run_type,
        commit_sha: None,
        triggered_by: "alice".into(),
        trigger_kind: "manual".into(),
        drift_detection: false,
    }
}

/// Defines each listed `async fn name(db: &TestDb)` of the calling module as two tests:
/// `sqlite::name` and `postgres::name`.
macro_rules! db_tests {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    let db = crate::harness::TestDb::sqlite().await;
                    super::$name(&db).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    let Some(db) = crate::harness::TestDb::postgres().await else { return };
                    super::$name(&db).await;
                }
            )*
        }
    };
}
pub(crate) use db_tests;
