//! `terraplane-runner`: one runner (same as `terraplane runner`).

fn main() -> std::process::ExitCode {
    terraplane_telemetry::init();
    terraplane_telemetry::exit(run())
}

fn run() -> anyhow::Result<()> {
    let cfg = terraplane_config::Config::load_from_args()?;
    tokio::runtime::Runtime::new()?.block_on(async {
        let shutdown = terraplane_telemetry::shutdown_on_signal();
        terraplane_runner::serve(&cfg, shutdown).await
    })
}
