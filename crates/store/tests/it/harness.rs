//! A fresh database per test: a SQLite file in a temp dir, or a new PostgreSQL database
//! dropped (`WITH (FORCE)`) when the test ends, even when it panics. An unreachable
//! PostgreSQL skips the test, except under `CI=true` where it fails it.

use chrono::{DateTime, SubsecRound, Utc};
use terraplane_domain::{OrgId, RunType, StackId};
use terraplane_store::{NewRun, NewStack, Organization, Run, Stack, Store};
use terraplane_test_support::{PgDatabase, fresh_postgres};

pub struct TestDb {
    pub store: Store,
    pub url: String,
    pub now: DateTime<Utc>,
    // Dropped after `store`; it force-drops the database whatever the pool still holds.
    _pg: Option<PgDatabase>,
    _tmp: Option<tempfile::TempDir>,
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
        // `pg` drops the database whatever happens below.
        let pg = fresh_postgres("tp_store").await?;
        let url = pg.url.clone();
        let store = Store::connect(&url, 5).await.unwrap();
        store.migrate().await.unwrap();
        Some(TestDb {
            store,
            url,
            now: start_time(),
            _pg: Some(pg),
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
        space_id: None,
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
