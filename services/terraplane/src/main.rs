//! `terraplane`: one binary for every server component.

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use terraplane::*;
use terraplane_config::{Config, Secret};
use terraplane_queue::memory::MemoryQueue;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(
    name = "terraplane",
    version,
    about = "Terraplane: a control plane for Terraform and OpenTofu"
)]
struct Cli {
    /// TOML configuration file (then TERRAPLANE_<SECTION>__<KEY> environment variables).
    #[arg(long, global = true, env = "TERRAPLANE_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Everything in one process: SQLite, in-process queue, api, scheduler and one runner.
    Dev {
        #[arg(long, default_value = ".terraplane")]
        data_dir: PathBuf,
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: String,
    },
    /// The api (GraphQL, state backend, runner protocol).
    Api,
    /// The scheduler.
    Scheduler,
    /// A runner.
    Runner,
    /// Apply pending database migrations and exit.
    Migrate,
    /// Print the effective configuration, secrets redacted.
    PrintConfig,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TERRAPLANE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn,lapin=warn,actix_server=warn")),
        )
        .init();
    let cli = Cli::parse();
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(run(cli))
}

async fn shutdown_on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {}
        }
        tracing::info!("signal received; shutting down");
        t.cancel();
    });
    token
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.cmd {
        Cmd::Dev { data_dir, listen } => dev(cli.config, data_dir, listen).await,
        Cmd::PrintConfig => {
            print!("{}", Config::load(cli.config.as_deref())?.to_redacted_toml());
            Ok(())
        }
        Cmd::Migrate => {
            let mut cfg = Config::load(cli.config.as_deref())?;
            cfg.database.auto_migrate = true;
            connect_store(&cfg).await?;
            println!("migrations applied");
            Ok(())
        }
        Cmd::Api => {
            let cfg = Arc::new(Config::load(cli.config.as_deref())?);
            let store = connect_store(&cfg).await?;
            let queue = connect_queue(&cfg, None).await?;
            terraplane_api::bootstrap::seed(&store, &cfg, chrono::Utc::now()).await?;
            let listener =
                TcpListener::bind(&cfg.api.listen).with_context(|| format!("cannot listen on {}", cfg.api.listen))?;
            let shutdown = shutdown_on_signal().await;
            let api = start_api(cfg.clone(), store, queue, system_clock(), listener, shutdown).await?;
            tracing::info!(port = api.port, "api listening");
            api.task.await??;
            Ok(())
        }
        Cmd::Scheduler => {
            let cfg = Config::load(cli.config.as_deref())?;
            let store = connect_store(&cfg).await?;
            let queue = connect_queue(&cfg, None).await?;
            let shutdown = shutdown_on_signal().await;
            start_scheduler(&cfg, store, queue, system_clock(), shutdown).await?;
            Ok(())
        }
        Cmd::Runner => {
            let cfg = Config::load(cli.config.as_deref())?;
            let queue = connect_queue(&cfg, None).await?;
            let api_url = cfg.runner.api_url.clone().unwrap_or_else(|| cfg.public_url());
            let shutdown = shutdown_on_signal().await;
            start_runner(runner_settings(&cfg, api_url)?, queue, shutdown)?.await?;
            Ok(())
        }
    }
}

/// Reads a secret kept in the data directory, creating it on first start.
fn data_secret(data_dir: &std::path::Path, name: &str) -> anyhow::Result<String> {
    let path = data_dir.join(name);
    if let Ok(s) = std::fs::read_to_string(&path) {
        return Ok(s.trim().to_owned());
    }
    use rand::RngCore;
    let mut b = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut b);
    let s = hex::encode(b);
    std::fs::write(&path, &s)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(s)
}

async fn dev(config: Option<PathBuf>, data_dir: PathBuf, listen: String) -> anyhow::Result<()> {
    std::fs::create_dir_all(&data_dir).with_context(|| format!("cannot create {}", data_dir.display()))?;
    let data_dir = std::fs::canonicalize(&data_dir)?;
    let mut cfg = Config::load(config.as_deref())?;
    cfg.database.url = format!("sqlite://{}?mode=rwc", data_dir.join("terraplane.db").display());
    cfg.database.auto_migrate = true;
    cfg.queue.url = "memory".into();
    cfg.api.listen = listen.clone();
    if cfg.auth.jwt_secret.is_none() {
        cfg.auth.jwt_secret = Some(Secret::new(data_secret(&data_dir, "jwt.key")?));
    }
    if cfg.runner.pool_token.is_none() {
        cfg.runner.pool_token = Some(Secret::new(data_secret(&data_dir, "pool.token")?));
    }
    if cfg.runner.work_dir.is_none() {
        cfg.runner.work_dir = Some(data_dir.join("work"));
    }
    let listener = TcpListener::bind(&listen).with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;
    let cfg = Arc::new(cfg);
    let store = connect_store(&cfg).await?;
    let memory = MemoryQueue::new();
    let queue = connect_queue(&cfg, Some(&memory)).await?;
    let clock = system_clock();
    let seeded = terraplane_api::bootstrap::seed(&store, &cfg, clock.now()).await?;
    let repo = demo::ensure_demo_repo(&data_dir)?;
    demo::ensure_demo_stack(&store, seeded.org.id, repo, &cfg.runner.pool).await?;

    let shutdown = shutdown_on_signal().await;
    let api = start_api(
        cfg.clone(),
        store.clone(),
        queue.clone(),
        clock.clone(),
        listener,
        shutdown.clone(),
    )
    .await?;
    let sched = start_scheduler(&cfg, store, queue.clone(), clock, shutdown.clone());
    let settings = runner_settings(&cfg, format!("http://{addr}"))?;
    let terraform = settings.terraform_bin.clone();
    let runner = start_runner(settings, queue, shutdown.clone())?;

    println!("Terraplane is running at http://{addr}");
    println!("  data directory: {}", data_dir.display());
    println!("  terraform:      {}", terraform.display());
    match &seeded.generated_password {
        Some(p) => println!(
            "  log in:         tpctl login --endpoint http://{addr} --email {} --password {p}",
            seeded.admin.email
        ),
        None => println!(
            "  log in:         tpctl login --endpoint http://{addr} --email {} (password from TERRAPLANE_ADMIN_PASSWORD or the first start)",
            seeded.admin.email
        ),
    }
    if cfg.bootstrap.token.is_some() {
        println!("  API key:        the value of TERRAPLANE_BOOTSTRAP_TOKEN (admin)");
    }
    println!("  try:            tpctl run trigger demo --wait");
    api.task.await??;
    let _ = sched.await;
    let _ = runner.await;
    Ok(())
}
