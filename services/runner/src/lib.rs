//! The runner: consumes jobs from its worker pool's queue, claims each run through the api
//! (dropping deliveries it cannot claim), acknowledges the message, then executes the phase
//! with real terraform while heartbeating, streaming output and reporting the result. It
//! never touches the database; everything per-run comes with the run token.

pub mod api;
mod aws;
mod exec;
mod inputs;
pub mod logs;

use std::path::PathBuf;
use std::sync::Arc;

use terraplane_protocol::JobMessage;
use terraplane_queue::{Delivery, JobQueue};
use tokio_util::sync::CancellationToken;

use crate::api::RunnerApi;

#[derive(Clone, Debug)]
pub struct RunnerSettings {
    pub id: String,
    pub pool: String,
    pub api_url: String,
    pub pool_token: String,
    pub work_dir: PathBuf,
    pub terraform_bin: PathBuf,
    /// AWS STS endpoint (the regional AWS endpoint when `None`).
    pub sts_endpoint: Option<String>,
    pub sts_region: String,
    /// The sandbox provider's binary, when this runner offers it.
    pub sandbox_provider: Option<PathBuf>,
    /// Root of the sandbox "cloud"; each stack gets `<root>/<org>/<stack>`.
    pub sandbox_root: PathBuf,
    /// The terraform CLI configuration runs get (set when the runner starts).
    pub cli_config: String,
}

impl RunnerSettings {
    /// Settings from configuration; `api_url` is where this runner reaches the api.
    pub fn from_config(cfg: &terraplane_config::Config, api_url: String) -> anyhow::Result<Self> {
        let pool_token = cfg
            .runner
            .pool_token
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("runner.pool_token (TERRAPLANE_RUNNER__POOL_TOKEN) must be set"))?;
        let id = cfg
            .runner
            .id
            .clone()
            .unwrap_or_else(|| format!("runner-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]));
        Ok(Self {
            id,
            pool: cfg.runner.pool.clone(),
            api_url,
            pool_token: pool_token.expose().to_owned(),
            work_dir: cfg
                .runner
                .work_dir
                .clone()
                .unwrap_or_else(|| std::env::temp_dir().join("terraplane-runner")),
            terraform_bin: find_terraform(cfg),
            sts_endpoint: cfg.runner.sts_endpoint.clone(),
            sts_region: cfg.runner.sts_region.clone(),
            sandbox_provider: cfg.runner.sandbox_provider.clone().or_else(find_sandbox_provider),
            sandbox_root: cfg
                .runner
                .sandbox_root
                .clone()
                .or_else(|| std::env::var_os("SANDBOX_ROOT").map(PathBuf::from))
                .unwrap_or_else(|| {
                    cfg.runner
                        .work_dir
                        .clone()
                        .unwrap_or_else(|| std::env::temp_dir().join("terraplane-runner"))
                        .join("sandbox")
                }),
            cli_config: String::new(),
        })
    }
}

/// Where the runner finds terraform: `runner.terraform_bin` / `TERRAFORM_BIN`, the
/// project's tools directory (`TERRAPLANE_TOOLS_DIR`, default `.tools`), then `PATH`.
pub fn find_terraform(cfg: &terraplane_config::Config) -> PathBuf {
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

/// The sandbox provider next to the running binary, if it was built there.
fn find_sandbox_provider() -> Option<PathBuf> {
    let dir = std::env::current_exe().ok()?.parent()?.to_path_buf();
    ["terraform-provider-sandbox", "terraplane-sandbox-provider"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

/// Runs a runner until `shutdown`.
pub fn start(
    settings: RunnerSettings,
    queue: Arc<dyn JobQueue>,
    shutdown: CancellationToken,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let runner = Runner::new(settings, queue)?;
    Ok(tokio::spawn(async move {
        if let Err(e) = runner.run_until_stopped(shutdown).await {
            tracing::error!(error = %e, "runner failed");
        }
    }))
}

/// `terraplane runner`: consumes its pool's queue until `shutdown`.
pub async fn serve(cfg: &terraplane_config::Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    let queue = terraplane_queue::open(&cfg.queue, None).await?;
    let api_url = cfg.runner.api_url.clone().unwrap_or_else(|| cfg.public_url());
    start(RunnerSettings::from_config(cfg, api_url)?, queue, shutdown)?.await?;
    Ok(())
}

pub struct Runner {
    settings: RunnerSettings,
    api: RunnerApi,
    queue: Arc<dyn JobQueue>,
}

impl Runner {
    pub fn new(settings: RunnerSettings, queue: Arc<dyn JobQueue>) -> anyhow::Result<Self> {
        let api = RunnerApi::new(&settings.api_url, &settings.pool_token)?;
        std::fs::create_dir_all(&settings.work_dir)?;
        let mut settings = settings;
        if let Some(bin) = settings.sandbox_provider.clone() {
            // Offered to terraform through a filesystem mirror (no registry is reachable).
            let mirror = settings.work_dir.join(format!(".provider-mirror-{}", settings.id));
            match terraplane_sandbox_provider::install_mirror(&mirror, &bin) {
                Ok(()) => settings.cli_config = terraplane_sandbox_provider::cli_config(&mirror),
                Err(e) => {
                    tracing::warn!(error = %e, bin = %bin.display(), "cannot install the sandbox provider; runs won't have it");
                    settings.sandbox_provider = None;
                }
            }
        }
        Ok(Self { settings, api, queue })
    }

    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let mut consumer = self.queue.consume(&self.settings.pool, &self.settings.id).await?;
        tracing::info!(runner = %self.settings.id, pool = %self.settings.pool, "runner waiting for jobs");
        loop {
            let delivery = tokio::select! {
                _ = shutdown.cancelled() => break,
                d = consumer.next() => match d {
                    Some(Ok(d)) => d,
                    Some(Err(e)) => {
                        // A broken connection keeps failing: exit so a supervisor restarts
                        // the runner with a fresh one (nothing is lost: unacked messages
                        // go back to the queue, claimed runs are failed by their lease).
                        anyhow::bail!("job queue failed: {e}");
                    }
                    None => anyhow::bail!("job queue closed"),
                },
            };
            self.handle(delivery, &shutdown).await;
        }
        tracing::info!(runner = %self.settings.id, "runner stopped");
        Ok(())
    }

    async fn handle(&self, delivery: Delivery, shutdown: &CancellationToken) {
        let msg: JobMessage = match &delivery.message {
            Ok(m) => m.clone(),
            Err(reason) => {
                tracing::error!(%reason, "unparsable job message; dead-lettering it");
                if let Err(e) = delivery.reject().await {
                    tracing::error!(error = %e, "cannot reject message");
                }
                return;
            }
        };
        let claimed = api::with_retry(5, || self.api.claim(msg.run_id, msg.phase, &self.settings.id)).await;
        // Ack right after the claim, not after the run: liveness is the lease now. A
        // delivery we could not claim (already taken, canceled, applied) is dropped; one
        // lost to an unreachable api is re-published by the scheduler.
        if let Err(e) = delivery.ack().await {
            tracing::error!(error = %e, "cannot ack message");
        }
        let spec = match claimed {
            Ok(spec) => spec,
            Err(e) if e.is_conflict() => {
                tracing::debug!(run_id = %msg.run_id, error = %e, "delivery not claimable; dropped");
                return;
            }
            Err(e) => {
                tracing::warn!(run_id = %msg.run_id, error = %e, "claim failed");
                return;
            }
        };
        tracing::info!(run_id = %spec.run_id, phase = spec.phase.as_str(), "claimed run");
        exec::execute(&self.settings, &self.api, spec, shutdown.clone()).await;
    }
}
