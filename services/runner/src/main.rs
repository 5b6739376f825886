//! `terraplane-runner`: one runner (same as `terraplane runner`).

fn main() -> anyhow::Result<()> {
    terraplane_telemetry::init();
    let cfg = terraplane_config::Config::load_from_args()?;
    tokio::runtime::Runtime::new()?.block_on(async {
        let shutdown = terraplane_telemetry::shutdown_on_signal();
        terraplane_runner::serve(&cfg, shutdown).await
    })
}
