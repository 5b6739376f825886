//! Process plumbing shared by every binary: log setup (`TERRAPLANE_LOG`, an env-filter
//! directive, default `info`) and the shutdown signal (Ctrl-C or SIGTERM → one
//! cancellation token for graceful shutdown).

use tokio_util::sync::CancellationToken;

pub fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TERRAPLANE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn,lapin=warn,actix_server=warn"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).try_init();
}

/// A token cancelled on Ctrl-C or SIGTERM. Call inside a tokio runtime.
pub fn shutdown_on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async {
                match term.as_mut() {
                    Some(s) => { s.recv().await; }
                    None => std::future::pending::<()>().await,
                }
            } => {}
        }
        tracing::info!("signal received; shutting down");
        t.cancel();
    });
    token
}

/// Ends a binary: `error: <cause chain>` on stderr and exit code 1 on failure.
pub fn exit(result: anyhow::Result<()>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
