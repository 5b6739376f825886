//! `terraplane-scheduler`: the scheduler alone (same as `terraplane scheduler`).

fn main() -> std::process::ExitCode {
    terraplane_telemetry::init();
    terraplane_telemetry::exit(run())
}

fn run() -> anyhow::Result<()> {
    let cfg = terraplane_config::Config::load_from_args()?;
    tokio::runtime::Runtime::new()?.block_on(async {
        let shutdown = terraplane_telemetry::shutdown_on_signal();
        terraplane_scheduler::serve(&cfg, shutdown).await
    })
}
