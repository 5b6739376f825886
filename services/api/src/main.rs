//! `terraplane-api`: the api alone (same as `terraplane api`).

fn main() -> anyhow::Result<()> {
    terraplane_telemetry::init();
    let cfg = std::sync::Arc::new(terraplane_config::Config::load_from_args()?);
    tokio::runtime::Runtime::new()?.block_on(async {
        let shutdown = terraplane_telemetry::shutdown_on_signal();
        terraplane_api::serve(cfg, shutdown).await
    })
}
