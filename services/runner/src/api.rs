//! The runner's side of the runner protocol: typed calls to the api over HTTP.

use std::time::Duration;

use base64::Engine;
use serde::de::DeserializeOwned;
use terraplane_domain::{RunId, RunPhase};
use terraplane_protocol::{
    ClaimRequest, ErrorBody, HeartbeatRequest, HeartbeatResponse, JobSpec, LogAppend, PhaseResult, ProgressRequest,
};

#[derive(Debug, thiserror::Error)]
pub enum ApiCallError {
    /// The api refused with a status and its error body.
    #[error("api answered {status}: {code}: {message}")]
    Refused { status: u16, code: String, message: String },
    #[error("cannot reach the api: {0}")]
    Transport(#[from] reqwest::Error),
}

impl ApiCallError {
    pub fn is_conflict(&self) -> bool {
        matches!(self, ApiCallError::Refused { status: 409, .. })
    }

    /// Worth retrying: the api or the network had a moment, not a refusal.
    pub fn is_transient(&self) -> bool {
        match self {
            ApiCallError::Transport(_) => true,
            ApiCallError::Refused { status, .. } => *status >= 500 || *status == 429,
        }
    }
}

#[derive(Clone)]
pub struct RunnerApi {
    http: reqwest::Client,
    base: String,
    pool_token: String,
}

impl RunnerApi {
    pub fn new(base: &str, pool_token: &str) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
            pool_token: pool_token.to_owned(),
        })
    }

    fn url(&self, run: RunId, what: &str) -> String {
        format!("{}/api/v1/runner/runs/{run}/{what}", self.base)
    }

    async fn decode<T: DeserializeOwned>(resp: reqwest::Response) -> Result<T, ApiCallError> {
        let status = resp.status();
        if status.is_success() {
            return Ok(resp.json().await?);
        }
        Err(Self::refusal(resp).await)
    }

    async fn refusal(resp: reqwest::Response) -> ApiCallError {
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        let (code, message) = match serde_json::from_str::<ErrorBody>(&text) {
            Ok(b) => (b.code, b.message),
            Err(_) => ("unknown".into(), text),
        };
        ApiCallError::Refused { status, code, message }
    }

    async fn ok(resp: reqwest::Response) -> Result<(), ApiCallError> {
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(Self::refusal(resp).await)
        }
    }

    pub async fn claim(&self, run: RunId, phase: RunPhase, runner_id: &str) -> Result<JobSpec, ApiCallError> {
        let body = ClaimRequest {
            runner_id: runner_id.to_owned(),
            phase,
        };
        let resp = self
            .http
            .post(self.url(run, "claim"))
            .bearer_auth(&self.pool_token)
            .json(&body)
            .send()
            .await?;
        Self::decode(resp).await
    }

    pub async fn heartbeat(&self, spec: &JobSpec) -> Result<HeartbeatResponse, ApiCallError> {
        let body = HeartbeatRequest {
            fencing_token: spec.fencing_token,
        };
        let resp = self
            .http
            .post(self.url(spec.run_id, "heartbeat"))
            .bearer_auth(&spec.run_token)
            .json(&body)
            .send()
            .await?;
        Self::decode(resp).await
    }

    pub async fn append_log(&self, spec: &JobSpec, seq: i64, data: &str) -> Result<(), ApiCallError> {
        let body = LogAppend {
            fencing_token: spec.fencing_token,
            seq,
            phase: spec.phase,
            data: data.to_owned(),
        };
        let resp = self
            .http
            .post(self.url(spec.run_id, "logs"))
            .bearer_auth(&spec.run_token)
            .json(&body)
            .send()
            .await?;
        Self::ok(resp).await
    }

    pub async fn progress(&self, spec: &JobSpec, body: &ProgressRequest) -> Result<(), ApiCallError> {
        let resp = self
            .http
            .post(self.url(spec.run_id, "progress"))
            .bearer_auth(&spec.run_token)
            .json(body)
            .send()
            .await?;
        Self::ok(resp).await
    }

    pub async fn upload_plan(
        &self,
        spec: &JobSpec,
        plan_file: &[u8],
        plan_json: serde_json::Value,
    ) -> Result<(), ApiCallError> {
        let body = serde_json::json!({
            "fencing_token": spec.fencing_token,
            "plan_file": base64::engine::general_purpose::STANDARD.encode(plan_file),
            "plan_json": plan_json,
        });
        let resp = self
            .http
            .put(self.url(spec.run_id, "plan"))
            .bearer_auth(&spec.run_token)
            .json(&body)
            .send()
            .await?;
        Self::ok(resp).await
    }

    pub async fn download_plan(&self, spec: &JobSpec) -> Result<Vec<u8>, ApiCallError> {
        let resp = self
            .http
            .get(self.url(spec.run_id, "plan"))
            .bearer_auth(&spec.run_token)
            .send()
            .await?;
        if !resp.status().is_success() {
            return Err(Self::refusal(resp).await);
        }
        Ok(resp.bytes().await?.to_vec())
    }

    pub async fn result(&self, spec: &JobSpec, result: &PhaseResult) -> Result<(), ApiCallError> {
        let resp = self
            .http
            .post(self.url(spec.run_id, "result"))
            .bearer_auth(&spec.run_token)
            .json(result)
            .send()
            .await?;
        Self::ok(resp).await
    }
}

/// Retries `f` on transient failures with capped exponential backoff.
pub async fn with_retry<T, F, Fut>(attempts: u32, mut f: F) -> Result<T, ApiCallError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ApiCallError>>,
{
    let mut delay = Duration::from_millis(100);
    let mut n = 0;
    loop {
        match f().await {
            Err(e) if e.is_transient() && n + 1 < attempts => {
                n += 1;
                tracing::warn!(error = %e, attempt = n, "api call failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
            other => return other,
        }
    }
}
