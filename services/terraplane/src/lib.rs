//! Wiring for the `terraplane` binary: builds the api, the scheduler and runners from a
//! configuration, either all in one process (`dev`) or one component per process.
//! Integration tests start the product through the same functions.

pub mod demo;

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use terraplane_api::{AppState, Application, auth::Auth, bus::Bus};
use terraplane_config::Config;
use terraplane_domain::{Clock, SystemClock};
use terraplane_queue::JobQueue;
use terraplane_queue::memory::MemoryQueue;
use terraplane_queue::rabbit::RabbitQueue;
use terraplane_runner::{Runner, RunnerSettings};
use terraplane_scheduler::Scheduler;
use terraplane_store::Store;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub async fn connect_store(cfg: &Config) -> anyhow::Result<Store> {
    if let Some(path) = cfg
        .database
        .url
        .strip_prefix("sqlite://")
        .and_then(|p| p.split('?').next())
        && let Some(parent) = std::path::Path::new(path).parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let store = Store::connect(&cfg.database.url, cfg.database.max_connections)
        .await
        .with_context(|| "cannot connect to the database")?;
    if cfg.database.auto_migrate {
        store.migrate().await.context("database migration failed")?;
    }
    Ok(store)
}

/// The configured queue. `memory` is shared by the components of one process only.
pub async fn connect_queue(cfg: &Config, memory: Option<&MemoryQueue>) -> anyhow::Result<Arc<dyn JobQueue>> {
    if cfg.queue.url == "memory" {
        return match memory {
            Some(m) => Ok(Arc::new(m.clone())),
            None => {
                anyhow::bail!("queue.url = memory works only inside `terraplane dev`; set AMQP_URL")
            }
        };
    }
    Ok(Arc::new(
        RabbitQueue::connect(&cfg.queue.url, &cfg.queue.prefix)
            .await
            .context("cannot connect to RabbitMQ")?,
    ))
}

pub fn required_secret(s: &Option<terraplane_config::Secret>, name: &str) -> anyhow::Result<String> {
    s.as_ref()
        .map(|s| s.expose().to_owned())
        .with_context(|| format!("{name} must be set"))
}

pub struct ApiHandle {
    pub port: u16,
    pub state: Arc<AppState>,
    pub task: JoinHandle<std::io::Result<()>>,
}

pub async fn start_api(
    cfg: Arc<Config>,
    store: Store,
    queue: Arc<dyn JobQueue>,
    clock: Arc<dyn Clock>,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<ApiHandle> {
    let jwt = required_secret(&cfg.auth.jwt_secret, "auth.jwt_secret (TERRAPLANE_AUTH__JWT_SECRET)")?;
    let auth = Auth::new(
        jwt.as_bytes(),
        cfg.auth.session_ttl_secs,
        cfg.auth.run_token_ttl_secs,
        cfg.runner.pool_token.as_ref().map(|s| s.expose().to_owned()),
    );
    let dispatcher = Scheduler::new(store.clone(), queue.clone(), clock.clone(), cfg.scheduler.clone());
    let public_url = match &cfg.api.public_url {
        Some(u) => u.trim_end_matches('/').to_owned(),
        None => format!("http://{}", listener.local_addr()?),
    };
    let state = Arc::new(AppState {
        store,
        queue,
        clock,
        cfg,
        auth,
        bus: Bus::default(),
        public_url,
        dispatcher,
    });
    let app = Application::build(state.clone(), listener)?;
    let port = app.port();
    let task = tokio::spawn(app.run_until_stopped(shutdown));
    Ok(ApiHandle { port, state, task })
}

pub fn start_scheduler(
    cfg: &Config,
    store: Store,
    queue: Arc<dyn JobQueue>,
    clock: Arc<dyn Clock>,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    let s = Scheduler::new(store, queue, clock, cfg.scheduler.clone());
    tokio::spawn(s.run_until_stopped(shutdown))
}

/// Where the runner finds terraform: `runner.terraform_bin` / `TERRAFORM_BIN`, the
/// project's tools directory, then `PATH`.
pub fn find_terraform(cfg: &Config) -> PathBuf {
    if let Some(p) = &cfg.runner.terraform_bin {
        return p.clone();
    }
    let tools = std::env::var_os("TERRAPLANE_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".tools"));
    let local = tools.join("bin").join("terraform");
    if local.is_file() {
        return std::fs::canonicalize(&local).unwrap_or(local);
    }
    PathBuf::from("terraform")
}

pub fn runner_settings(cfg: &Config, api_url: String) -> anyhow::Result<RunnerSettings> {
    let id = cfg
        .runner
        .id
        .clone()
        .unwrap_or_else(|| format!("runner-{}", &uuid_like()));
    Ok(RunnerSettings {
        id,
        pool: cfg.runner.pool.clone(),
        api_url,
        pool_token: required_secret(
            &cfg.runner.pool_token,
            "runner.pool_token (TERRAPLANE_RUNNER__POOL_TOKEN)",
        )?,
        work_dir: cfg
            .runner
            .work_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("terraplane-runner")),
        terraform_bin: find_terraform(cfg),
    })
}

fn uuid_like() -> String {
    use rand::RngCore;
    let mut b = [0u8; 4];
    rand::thread_rng().fill_bytes(&mut b);
    hex::encode(b)
}

pub fn start_runner(
    settings: RunnerSettings,
    queue: Arc<dyn JobQueue>,
    shutdown: CancellationToken,
) -> anyhow::Result<JoinHandle<()>> {
    let runner = Runner::new(settings, queue)?;
    Ok(tokio::spawn(async move {
        if let Err(e) = runner.run_until_stopped(shutdown).await {
            tracing::error!(error = %e, "runner failed");
        }
    }))
}

pub fn system_clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}
