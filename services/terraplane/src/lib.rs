//! Wiring for the `terraplane` binary, which runs any component (`api`, `scheduler`,
//! `runner`: each service's own `serve`) or all of them in one process (`dev`).
//! Integration tests start the product through the same functions.

pub mod demo;

use std::sync::Arc;

use terraplane_config::Config;
use terraplane_domain::{Clock, SystemClock};
use terraplane_store::Store;

pub use terraplane_api::{ApiHandle, start as start_api};
pub use terraplane_runner::{RunnerSettings, find_terraform, start as start_runner};
pub use terraplane_scheduler::start as start_scheduler;

/// The store, with encryption at rest when a master key is configured (and checked to
/// open the stored keys).
pub async fn connect_store(cfg: &Config) -> anyhow::Result<Store> {
    if cfg.secrets.master_key.is_some() {
        return terraplane_api::open_store(cfg).await;
    }
    Ok(Store::open(&cfg.database).await?)
}

pub fn runner_settings(cfg: &Config, api_url: String) -> anyhow::Result<RunnerSettings> {
    RunnerSettings::from_config(cfg, api_url)
}

pub fn system_clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}
