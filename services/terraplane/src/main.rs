//! `terraplane`: one binary for every server component.

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use terraplane::*;
use terraplane_config::{Config, Secret};
use terraplane_queue::memory::MemoryQueue;
use terraplane_telemetry::shutdown_on_signal;

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
    /// Encryption keys.
    #[command(subcommand)]
    Keys(KeysCmd),
}

#[derive(Subcommand)]
enum KeysCmd {
    /// Re-wrap every organization's data key (and the OIDC signing keys) under
    /// `secrets.master_key`, opening them with it or a key in `secrets.previous_master_keys`.
    /// Safe while the services run, once they know both keys.
    Rotate,
    /// Start signing run identity tokens with a new key; the old one stays in the JWKS for
    /// `identity.key_overlap_secs`.
    RotateOidc,
    /// Print a new random master key (64 hex characters).
    Generate,
}

fn main() -> std::process::ExitCode {
    terraplane_telemetry::init();
    let cli = Cli::parse();
    terraplane_telemetry::exit(
        tokio::runtime::Runtime::new()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(run(cli))),
    )
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
            terraplane_api::serve(cfg, shutdown_on_signal()).await
        }
        Cmd::Scheduler => {
            let cfg = Config::load(cli.config.as_deref())?;
            terraplane_scheduler::serve(&cfg, shutdown_on_signal()).await
        }
        Cmd::Keys(k) => keys(cli.config, k).await,
        Cmd::Runner => {
            let cfg = Config::load(cli.config.as_deref())?;
            terraplane_runner::serve(&cfg, shutdown_on_signal()).await
        }
    }
}

async fn keys(config: Option<PathBuf>, cmd: KeysCmd) -> anyhow::Result<()> {
    if let KeysCmd::Generate = cmd {
        use rand::RngCore;
        let mut b = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut b);
        println!("{}", hex::encode(b));
        return Ok(());
    }
    let cfg = Config::load(config.as_deref())?;
    let store = terraplane_api::open_store(&cfg).await?;
    match cmd {
        KeysCmd::Rotate => {
            let r = store.rotate_master_key().await?;
            println!(
                "re-wrapped {} data key(s) and {} OIDC signing key(s) under the current master key; {} data key(s) already used it",
                r.data_keys_rewrapped, r.oidc_keys_rewrapped, r.data_keys_current
            );
        }
        KeysCmd::RotateOidc => {
            let kid = terraplane_api::identity::rotate(&store, chrono::Utc::now()).await?;
            println!("new OIDC signing key {kid}; earlier keys stay published for the overlap");
        }
        KeysCmd::Generate => {}
    }
    Ok(())
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
    if cfg.secrets.master_key.is_none() {
        cfg.secrets.master_key = Some(Secret::new(data_secret(&data_dir, "master.key")?));
    }
    if cfg.runner.pool_token.is_none() {
        cfg.runner.pool_token = Some(Secret::new(data_secret(&data_dir, "pool.token")?));
    }
    if cfg.runner.sandbox_root.is_none() && std::env::var_os("SANDBOX_ROOT").is_none() {
        cfg.runner.sandbox_root = Some(data_dir.join("sandbox"));
    }
    if cfg.runner.work_dir.is_none() {
        cfg.runner.work_dir = Some(data_dir.join("work"));
    }
    let listener = TcpListener::bind(&listen).with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;
    let cfg = Arc::new(cfg);
    let store = connect_store(&cfg).await?;
    let memory = MemoryQueue::new();
    let queue = terraplane_queue::open(&cfg.queue, Some(&memory)).await?;
    let clock = system_clock();
    let seeded = terraplane_api::bootstrap::seed(&store, &cfg, clock.now()).await?;
    let repo = demo::ensure_demo_repo(&data_dir)?;
    demo::ensure_demo_stack(&store, seeded.org.id, repo.clone(), &cfg.runner.pool).await?;
    let viewer_password =
        demo::ensure_isolation_demo(&store, seeded.org.id, seeded.admin.id, repo, &cfg.runner.pool).await?;

    let shutdown = shutdown_on_signal();
    let api = start_api(
        cfg.clone(),
        store.clone(),
        queue.clone(),
        clock.clone(),
        listener,
        shutdown.clone(),
    )
    .await?;
    let delivery = terraplane_scheduler::start_audit_delivery(&cfg, store.clone(), clock.clone(), shutdown.clone())?;
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
    if let Some(p) = &viewer_password {
        println!(
            "  reader:         {} / {p} (may only read organization `default`)",
            demo::VIEWER_EMAIL
        );
    }
    println!("  organizations:  default, and acme (`tpctl login --org acme`): each sees only its own stacks");
    println!("  try:            tpctl run trigger demo --wait");
    api.task.await??;
    let _ = sched.await;
    if let Some(d) = delivery {
        let _ = d.await;
    }
    let _ = runner.await;
    Ok(())
}
