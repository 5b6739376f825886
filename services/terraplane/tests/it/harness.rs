//! Test harness: boots the real product (api + scheduler + runners) in-process on port 0
//! against either SQLite + the in-process queue or a fresh PostgreSQL database + RabbitMQ
//! with fresh queue names, and real Terraform. When `CI=true`, an unreachable PostgreSQL
//! or RabbitMQ fails the test instead of skipping it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use terraplane::{ApiHandle, connect_store, start_api, start_runner, start_scheduler, system_clock};
use terraplane_client::{Client, Run, RunState};
use terraplane_config::{Config, Secret};
use terraplane_queue::JobQueue;
use terraplane_queue::memory::MemoryQueue;
use terraplane_queue::rabbit::RabbitQueue;
use terraplane_store::Store;
use tokio_util::sync::CancellationToken;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// SQLite + in-process queue (the embedded default).
    Sqlite,
    /// PostgreSQL + RabbitMQ (production).
    Postgres,
}

pub const ADMIN_TOKEN: &str = "tpk_test_admin_token_0123456789";
pub const POOL_TOKEN: &str = "test-pool-token";
pub use terraplane_test_support::AMQP_URL;

pub struct Options {
    pub runners: usize,
    pub lease_secs: u64,
    pub heartbeat_secs: u64,
    pub max_state_bytes: usize,
    pub terraform_bin: Option<PathBuf>,
    /// Self-service sign-up enabled.
    pub signup: bool,
    /// An OpenID provider for single sign-on (client `terraplane-test`).
    pub sso_issuer: Option<String>,
    /// A GitHub stand-in (web and API at the same address).
    pub github_url: Option<String>,
    /// Where runners call AWS STS.
    pub sts_endpoint: Option<String>,
    /// The master key (64 hex characters).
    pub master_key: &'static str,
    /// A clock the test steps (api and scheduler); the system clock otherwise.
    pub clock: Option<Arc<terraplane_domain::ManualClock>>,
    /// Attempts before a notification delivery is marked failed.
    pub notify_max_attempts: u32,
}

pub const MASTER_KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/// Every service log line of this test process (all levels from debug for Terraplane's
/// crates), so tests can assert what never reaches a log. With `TEST_LOG` set the lines
/// are printed too.
pub static SERVICE_LOG: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());

struct CaptureWriter;

impl std::io::Write for CaptureWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut l) = SERVICE_LOG.lock() {
            l.extend_from_slice(buf);
        }
        if std::env::var_os("TEST_LOG").is_some() {
            eprint!("{}", String::from_utf8_lossy(buf));
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = tracing_subscriber::fmt()
            .with_env_filter("info,terraplane=debug,terraplane_api=debug,terraplane_runner=debug,terraplane_scheduler=debug,terraplane_store=debug,sqlx=warn")
            .with_ansi(false)
            .with_writer(|| CaptureWriter)
            .try_init();
    });
}

/// Everything the services logged so far in this process.
pub fn service_log() -> String {
    String::from_utf8_lossy(&SERVICE_LOG.lock().unwrap()).into_owned()
}

impl Default for Options {
    fn default() -> Self {
        Self {
            runners: 1,
            lease_secs: 30,
            heartbeat_secs: 2,
            max_state_bytes: 64 * 1024 * 1024,
            terraform_bin: None,
            signup: false,
            sso_issuer: None,
            github_url: None,
            sts_endpoint: None,
            master_key: MASTER_KEY,
            clock: None,
            notify_max_attempts: 8,
        }
    }
}

pub struct TestApp {
    pub backend: Backend,
    pub base: String,
    pub client: Client,
    pub store: Store,
    pub cfg: Arc<Config>,
    pub queue: Arc<dyn JobQueue>,
    pub shutdown: CancellationToken,
    pub runners: Vec<(CancellationToken, tokio::task::JoinHandle<()>)>,
    #[allow(dead_code)]
    pub api: ApiHandle,
    pub tmp: tempfile::TempDir,
    // Dropped last: force-drops the test database whatever the pools still hold.
    pg_db: Option<terraplane_test_support::PgDatabase>,
    rabbit_prefix: Option<String>,
}

/// Real terraform: `TERRAFORM_BIN`, or the project's tools directory (installed by
/// `scripts/install-terraform.sh`, which the test command runs first).
pub fn terraform_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("TERRAFORM_BIN") {
        return PathBuf::from(p);
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/bin/terraform");
    assert!(
        p.is_file(),
        "terraform not found at {}: run scripts/install-terraform.sh",
        p.display()
    );
    std::fs::canonicalize(p).unwrap()
}

/// Skips (returns None) when the backend's services are unreachable, except under CI.
pub async fn spawn(backend: Backend, opts: Options) -> Option<TestApp> {
    capture_logs();
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = Config::default();
    cfg.auth.jwt_secret = Some(Secret::new("test-jwt-secret"));
    cfg.secrets.master_key = Some(Secret::new(opts.master_key));
    cfg.runner.sts_endpoint = opts.sts_endpoint.clone();
    cfg.runner.sandbox_provider = Some(PathBuf::from(env!("CARGO_BIN_EXE_terraplane-sandbox-provider")));
    cfg.runner.sandbox_root = Some(tmp.path().join("sandbox"));
    cfg.runner.pool_token = Some(Secret::new(POOL_TOKEN));
    cfg.runner.work_dir = Some(tmp.path().join("work"));
    cfg.runner.terraform_bin = Some(opts.terraform_bin.clone().unwrap_or_else(terraform_bin));
    cfg.bootstrap.token = Some(Secret::new(ADMIN_TOKEN));
    cfg.bootstrap.admin_password = Some(Secret::new("admin-password"));
    cfg.scheduler.tick_ms = 100;
    cfg.notifications.delivery_interval_ms = 50;
    cfg.notifications.max_attempts = opts.notify_max_attempts;
    cfg.notifications.max_backoff_secs = 60;
    cfg.scheduler.lease_secs = opts.lease_secs;
    cfg.scheduler.heartbeat_secs = opts.heartbeat_secs;
    cfg.api.max_state_bytes = opts.max_state_bytes;
    cfg.auth.signup_enabled = opts.signup;
    if let Some(issuer) = &opts.sso_issuer {
        cfg.sso.oidc_issuer = Some(issuer.clone());
        cfg.sso.oidc_client_id = Some("terraplane-test".into());
        cfg.sso.oidc_client_secret = Some(Secret::new("sso-client-secret"));
    }
    if let Some(gh) = &opts.github_url {
        cfg.sso.github_client_id = Some("gh-client".into());
        cfg.sso.github_client_secret = Some(Secret::new("gh-secret"));
        cfg.sso.github_url = Some(gh.clone());
        cfg.sso.github_api_url = Some(gh.clone());
    }
    let mut pg_db = None;
    let mut rabbit_prefix = None;
    let memory = MemoryQueue::new();
    let queue: Arc<dyn JobQueue> = match backend {
        Backend::Sqlite => {
            cfg.database.url = format!("sqlite://{}?mode=rwc", tmp.path().join("t.db").display());
            Arc::new(memory.clone())
        }
        Backend::Postgres => {
            let db = terraplane_test_support::fresh_postgres("tp_test").await?;
            cfg.database.url = db.url.clone();
            pg_db = Some(db);
            let prefix = format!("tp-test-{}", uuid::Uuid::new_v4().simple());
            let q = terraplane_test_support::rabbit_or_skip(RabbitQueue::connect(AMQP_URL, &prefix).await)?;
            cfg.queue.url = AMQP_URL.into();
            cfg.queue.prefix = prefix.clone();
            rabbit_prefix = Some(prefix);
            Arc::new(q)
        }
    };
    let cfg = Arc::new(cfg);
    let store = connect_store(&cfg).await.unwrap();
    terraplane_api::bootstrap::seed(&store, &cfg, Utc::now()).await.unwrap();
    let shutdown = CancellationToken::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let clock: Arc<dyn terraplane_domain::Clock> = match &opts.clock {
        Some(c) => c.clone(),
        None => system_clock(),
    };
    let api = start_api(
        cfg.clone(),
        store.clone(),
        queue.clone(),
        clock.clone(),
        listener,
        shutdown.clone(),
    )
    .await
    .unwrap();
    let base = format!("http://127.0.0.1:{}", api.port);
    start_scheduler(&cfg, store.clone(), queue.clone(), clock, shutdown.clone());
    let client = Client::new(&base, Some(ADMIN_TOKEN.into())).unwrap();
    let mut app = TestApp {
        backend,
        base,
        client,
        store,
        cfg,
        queue,
        shutdown,
        runners: Vec::new(),
        api,
        tmp,
        pg_db,
        rabbit_prefix,
    };
    for _ in 0..opts.runners {
        app.add_runner();
    }
    Some(app)
}

impl TestApp {
    /// Starts one more in-process runner; returns its index.
    pub fn add_runner(&mut self) -> usize {
        let n = self.runners.len();
        let mut s = terraplane::runner_settings(&self.cfg, self.base.clone()).unwrap();
        s.id = format!("test-runner-{n}");
        let token = self.shutdown.child_token();
        let handle = start_runner(s, self.queue.clone(), token.clone()).unwrap();
        self.runners.push((token, handle));
        n
    }

    /// Kills a runner the hard way: its task is dropped mid-flight, its terraform child
    /// is killed with it (kill_on_drop), and it sends nothing more.
    pub fn kill_runner(&mut self, i: usize) {
        self.runners[i].1.abort();
    }

    /// Every byte the database holds: the SQLite files as they are on disk, or a
    /// `pg_dump` of the PostgreSQL database (bytea columns appear in hex).
    pub fn database_dump(&self) -> Vec<u8> {
        match self.backend {
            Backend::Sqlite => {
                let mut out = Vec::new();
                for suffix in ["", "-wal", "-shm"] {
                    if let Ok(b) = std::fs::read(self.tmp.path().join(format!("t.db{suffix}"))) {
                        out.extend(b);
                    }
                }
                assert!(!out.is_empty(), "no SQLite file");
                out
            }
            Backend::Postgres => {
                let url = &self.pg_db.as_ref().unwrap().url;
                let o = std::process::Command::new("pg_dump")
                    .args(["--data-only", "--no-owner", url.as_str()])
                    .output()
                    .expect("pg_dump (PostgreSQL's client tools) must be installed");
                assert!(o.status.success(), "pg_dump: {}", String::from_utf8_lossy(&o.stderr));
                o.stdout
            }
        }
    }

    pub fn org(&self) -> &str {
        "default"
    }

    pub async fn stack(&self, slug: &str, repo: &str, autodeploy: bool) -> terraplane_client::Stack {
        let input = terraplane_client::StackCreateInput {
            slug: Some(slug.into()),
            name: slug.into(),
            repository: repo.into(),
            autodeploy: Some(autodeploy),
            ..Default::default()
        };
        self.client.stack_create(&input).await.unwrap()
    }

    /// Polls the run until `pred` holds (or panics after `secs`).
    pub async fn wait_run(&self, id: &str, secs: u64, pred: impl Fn(&Run) -> bool) -> Run {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let run = self.client.run(id).await.unwrap().expect("run exists");
            if pred(&run) {
                return run;
            }
            if Instant::now() > deadline {
                let logs = self.client.logs(id, None).await.unwrap_or_default();
                let text: String = logs.into_iter().map(|c| c.data).collect();
                panic!("run {id} stuck in {} (error {:?}); log:\n{text}", run.state, run.error);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn wait_state(&self, id: &str, state: RunState, secs: u64) -> Run {
        let run = self.wait_run(id, secs, |r| r.state == state || r.terminal).await;
        assert_eq!(
            run.state, state,
            "run {id} ended as {} (error {:?})",
            run.state, run.error
        );
        run
    }

    pub async fn log_text(&self, id: &str) -> String {
        self.client
            .logs(id, None)
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.data)
            .collect()
    }

    pub fn http(&self) -> reqwest::Client {
        reqwest::Client::new()
    }

    pub fn state_url(&self, org: &str, stack: &str) -> String {
        format!("{}/api/v1/orgs/{org}/stacks/{stack}/state", self.base)
    }

    pub async fn teardown(self) {
        self.shutdown.cancel();
        for (_, h) in self.runners {
            h.abort();
        }
        if let Some(prefix) = &self.rabbit_prefix
            && let Ok(q) = RabbitQueue::connect(AMQP_URL, prefix).await
        {
            let _ = q.delete_topology(&["default", "other"]).await;
        }
        drop(self.store);
        drop(self.pg_db);
    }
}

/// A git repository (branch `main`) holding `files`; returns its `file://` URL.
pub fn git_repo(dir: &Path, files: &[(&str, &str)]) -> String {
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    for args in [
        vec!["init", "--quiet", "--initial-branch=main"],
        vec!["add", "-A"],
        vec![
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "--quiet",
            "-m",
            "init",
        ],
    ] {
        let st = std::process::Command::new("git")
            .args(&args)
            .current_dir(dir)
            .status()
            .unwrap();
        assert!(st.success(), "git {args:?}");
    }
    format!("file://{}", dir.display())
}

/// Run work directories the runners left behind (the provider mirror they keep beside
/// them is not run data).
pub fn run_dirs_left(app: &TestApp) -> Vec<PathBuf> {
    std::fs::read_dir(app.tmp.path().join("work"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with(".provider-mirror"))
        .collect()
}

/// A terraform that records each invocation's arguments and environment in `dir` (one
/// file per call, named by time) before running the real one: how tests see what a phase
/// was given. The runner clears the environment, so the paths are written into the script.
pub fn recording_terraform(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let script = dir.join("terraform-recording.sh");
    let real = terraform_bin();
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nf=\"{d}/call-$(date +%s%N)-$$.env\"\necho \"ARGS=$*\" > \"$f\"\nenv >> \"$f\"\nexec \"{real}\" \"$@\"\n",
            d = dir.display(),
            real = real.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// The recorded calls of [`recording_terraform`], oldest first: (subcommand, environment).
pub fn recorded_calls(dir: &Path) -> Vec<(String, std::collections::HashMap<String, String>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "env"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let mut env = std::collections::HashMap::new();
            let mut sub = String::new();
            for line in text.lines() {
                if let Some(a) = line.strip_prefix("ARGS=") {
                    sub = a.split_whitespace().next().unwrap_or_default().to_owned();
                    env.insert("ARGS".to_owned(), a.to_owned());
                } else if let Some((k, v)) = line.split_once('=') {
                    env.insert(k.to_owned(), v.to_owned());
                }
            }
            (sub, env)
        })
        .collect()
}

pub const TWO_RESOURCES: &str = r#"
resource "terraform_data" "a" { input = "alpha" }
resource "terraform_data" "b" { input = terraform_data.a.output }
output "a" { value = terraform_data.a.output }
output "secret" {
  value     = "hunter2"
  sensitive = true
}
"#;

/// Runs a scenario on both backends: `name_sqlite` and `name_postgres`.
#[macro_export]
macro_rules! both_backends {
    ($name:ident, $opts:expr, $body:path) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                if let Some(app) = $crate::harness::spawn($crate::harness::Backend::Sqlite, $opts).await {
                    $body(app).await;
                }
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                if let Some(app) = $crate::harness::spawn($crate::harness::Backend::Postgres, $opts).await {
                    $body(app).await;
                }
            }
        }
    };
}
