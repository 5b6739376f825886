//! The runner: consumes jobs from its worker pool's queue, claims each run through the api
//! (dropping deliveries it cannot claim), acknowledges the message, then executes the phase
//! with real terraform while heartbeating, streaming output and reporting the result. It
//! never touches the database; everything per-run comes with the run token.

pub mod api;
mod exec;
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
                    Some(Err(e)) => { tracing::error!(error = %e, "queue error"); continue; }
                    None => break,
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
