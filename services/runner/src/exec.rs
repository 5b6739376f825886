//! Executes one claimed phase: fetch the source at the pinned commit, inject the backend,
//! run terraform, upload the plan or report the outputs. The work directory is removed
//! when the phase ends, whatever happened.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use sha2::{Digest, Sha256};
use terraplane_domain::plan::PlanSummary;
use terraplane_domain::{RunPhase, RunState};
use terraplane_protocol::{JobSpec, PhaseOutcome, PhaseResult, ProgressRequest};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

use crate::RunnerSettings;
use crate::api::{RunnerApi, with_retry};
use crate::logs::{LogShipper, LogSink};
use terraplane_domain::mask::Masker;

/// Why a phase stopped early. The message is what the run shows as its reason.
#[derive(Debug)]
struct Failure(String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(e.to_string())
    }
}

/// Everything secret this phase holds: masked in its logs, reasons, plan and outputs.
fn masker_for(spec: &JobSpec) -> Masker {
    let mut m = Masker::new(
        spec.variables
            .iter()
            .filter(|v| v.secret)
            .map(|v| v.value.as_str())
            .chain(spec.also_mask.0.iter().map(String::as_str)),
    );
    m.add(&spec.run_token);
    if let Some(t) = &spec.oidc_token {
        m.add(t);
    }
    if let Some(a) = &spec.aws {
        m.add(&a.web_identity_token);
    }
    m
}

pub async fn execute(settings: &RunnerSettings, api: &RunnerApi, spec: JobSpec, shutdown: CancellationToken) {
    // `stop` interrupts terraform (run canceled, lease lost); `done` ends the heartbeats.
    // Both futures run in this task, so a runner that dies takes its heartbeats with it.
    let stop = CancellationToken::new();
    let done = CancellationToken::new();
    let masker = std::sync::Mutex::new(masker_for(&spec));
    let shipper = LogShipper::start(api.clone(), spec.clone(), masker_for(&spec));
    let log = shipper.sink();
    let work = async {
        let r = run_in_workdir(settings, api, &spec, &log, &masker, &stop, &shutdown).await;
        done.cancel();
        r
    };
    let (outcome, ()) = tokio::join!(work, heartbeat(api.clone(), spec.clone(), stop.clone(), done.clone()));
    let outcome = match outcome {
        Ok(o) => o,
        Err(Failure(reason)) => {
            let reason = match masker.lock() {
                Ok(m) => m.mask(&reason),
                Err(_) => "the phase failed (its message could not be masked)".into(),
            };
            log.line(format!("[terraplane] {} failed: {reason}", spec.phase.as_str()));
            PhaseOutcome::Failed { reason }
        }
    };
    drop(log);
    if let Err(e) = shipper.finish().await {
        tracing::error!(run_id = %spec.run_id, error = %e, "could not deliver all log lines");
    }
    if stop.is_cancelled() {
        tracing::info!(run_id = %spec.run_id, "run ended elsewhere (canceled or lease lost); not reporting");
        return;
    }
    let result = PhaseResult {
        fencing_token: spec.fencing_token,
        phase: spec.phase,
        outcome,
    };
    if let Err(e) = with_retry(8, || api.result(&spec, &result)).await {
        tracing::error!(run_id = %spec.run_id, error = %e, "cannot report the phase result");
    }
}

async fn run_in_workdir(
    settings: &RunnerSettings,
    api: &RunnerApi,
    spec: &JobSpec,
    log: &LogSink,
    masker: &std::sync::Mutex<Masker>,
    stop: &CancellationToken,
    shutdown: &CancellationToken,
) -> Result<PhaseOutcome, Failure> {
    let dir = tempfile::Builder::new()
        .prefix("run-")
        .tempdir_in(&settings.work_dir)
        .map_err(|e| Failure(format!("cannot create a work directory: {e}")))?;
    let r = tokio::select! {
        r = phase(settings, api, spec, dir.path(), log, masker, stop) => r,
        _ = shutdown.cancelled() => Err(Failure("runner shut down during the run".into())),
    };
    if let Err(e) = dir.close() {
        tracing::warn!(error = %e, "cannot remove work directory");
    }
    r
}

/// Renews the lease until `done`; cancels `stop` when the api says the run ended
/// (canceled) or the lease is gone, so terraform is interrupted.
async fn heartbeat(api: RunnerApi, spec: JobSpec, stop: CancellationToken, done: CancellationToken) {
    let every = Duration::from_secs(spec.heartbeat_interval_secs.max(1));
    loop {
        tokio::select! {
            _ = done.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        match api.heartbeat(&spec).await {
            Ok(r) if r.cancel_requested || r.state.is_terminal() => {
                tracing::info!(run_id = %spec.run_id, state = %r.state, "run canceled; stopping");
                stop.cancel();
                return;
            }
            Ok(_) => {}
            Err(e) if e.is_conflict() => {
                tracing::warn!(run_id = %spec.run_id, error = %e, "lease lost; stopping");
                stop.cancel();
                return;
            }
            Err(e) => {
                tracing::warn!(run_id = %spec.run_id, error = %e, "heartbeat failed; will retry")
            }
        }
    }
}

async fn phase(
    settings: &RunnerSettings,
    api: &RunnerApi,
    spec: &JobSpec,
    work: &Path,
    log: &LogSink,
    masker: &std::sync::Mutex<Masker>,
    stop: &CancellationToken,
) -> Result<PhaseOutcome, Failure> {
    let mask_json = |v: &mut serde_json::Value| {
        if let Ok(m) = masker.lock() {
            m.mask_json(v);
        }
    };
    let src = work.join("src");
    let home = work.join("home");
    std::fs::create_dir_all(&home)?;
    let commit = fetch_source(spec, &src, &home, log, stop).await?;
    let dir = src.join(&spec.project_root);
    if !dir.is_dir() {
        return Err(Failure(format!(
            "project root {:?} does not exist in the repository",
            spec.project_root
        )));
    }
    write_backend_override(&dir, &spec.state_address)?;
    let inputs = crate::inputs::prepare(work, &dir, spec)?;
    let mut env = inputs.env;
    if let Some(aws) = &spec.aws {
        log.line(format!(
            "[terraplane] assuming AWS role {} for the {} phase",
            aws.role_arn,
            spec.phase.as_str()
        ));
        let creds = crate::aws::assume_role(settings, aws).await.map_err(Failure)?;
        for s in [&creds.access_key_id, &creds.secret_access_key, &creds.session_token] {
            log.secret(s.as_str());
            if let Ok(mut m) = masker.lock() {
                m.add(s);
            }
        }
        env.push(("AWS_ACCESS_KEY_ID".into(), creds.access_key_id));
        env.push(("AWS_SECRET_ACCESS_KEY".into(), creds.secret_access_key));
        env.push(("AWS_SESSION_TOKEN".into(), creds.session_token));
    }
    if settings.sandbox_provider.is_some() {
        let root = settings.sandbox_root.join(&spec.org).join(&spec.stack);
        std::fs::create_dir_all(&root)?;
        // First, so that a stack's own SANDBOX_ROOT value wins.
        env.insert(0, ("SANDBOX_ROOT".into(), root.display().to_string()));
    }
    std::fs::write(home.join("terraformrc"), &settings.cli_config)?;
    let tf = Terraform {
        bin: settings.terraform_bin.clone(),
        dir: dir.clone(),
        home,
        token: spec.run_token.clone(),
        env,
    };
    let var_file_arg = inputs.var_file.map(|p| format!("-var-file={}", p.display()));
    match spec.phase {
        RunPhase::Plan => {
            let p = ProgressRequest {
                fencing_token: spec.fencing_token,
                state: RunState::Initializing,
                commit_sha: Some(commit),
            };
            with_retry(5, || api.progress(spec, &p)).await?;
            tf.run(&["init", "-input=false", "-no-color"], log, stop)
                .await?
                .success()?;
            let p = ProgressRequest {
                fencing_token: spec.fencing_token,
                state: RunState::Planning,
                commit_sha: None,
            };
            with_retry(5, || api.progress(spec, &p)).await?;
            let mut args = vec![
                "plan",
                "-input=false",
                "-no-color",
                "-detailed-exitcode",
                "-out=terraplane.tfplan",
            ];
            if let Some(a) = &var_file_arg {
                args.push(a.as_str());
            }
            if spec.drift_detection {
                // Compares the real infrastructure with the state: exit 2 means drift.
                args.push("-refresh-only");
            }
            let code = tf.run(&args, log, stop).await?;
            let has_changes = match code.0 {
                Some(0) => false,
                Some(2) => true,
                _ => return Err(Failure(format!("terraform plan {}", code.describe()))),
            };
            let plan_file = std::fs::read(dir.join("terraplane.tfplan"))?;
            let json = tf
                .capture(&["show", "-json", "-no-color", "terraplane.tfplan"], stop)
                .await?;
            let mut plan_json: serde_json::Value = serde_json::from_slice(&json)
                .map_err(|e| Failure(format!("terraform show -json printed invalid JSON: {e}")))?;
            mask_json(&mut plan_json);
            let summary = PlanSummary::from_plan_json(&plan_json);
            with_retry(5, || api.upload_plan(spec, &plan_file, plan_json.clone())).await?;
            log.line(format!(
                "[terraplane] plan: {} to add, {} to change, {} to destroy",
                summary.add, summary.change, summary.destroy
            ));
            Ok(PhaseOutcome::Planned { has_changes, summary })
        }
        RunPhase::Apply => {
            tf.run(&["init", "-input=false", "-no-color"], log, stop)
                .await?
                .success()?;
            let plan = with_retry(5, || api.download_plan(spec)).await?;
            let sha = hex::encode(Sha256::digest(&plan));
            if spec.plan_sha256.as_deref() != Some(sha.as_str()) {
                return Err(Failure(format!(
                    "plan file hash {sha} does not match the plan that was confirmed ({}); refusing to apply",
                    spec.plan_sha256.as_deref().unwrap_or("none")
                )));
            }
            std::fs::write(dir.join("terraplane.tfplan"), &plan)?;
            log.line(format!("[terraplane] applying the confirmed plan (sha256 {sha})"));
            tf.run(&["apply", "-input=false", "-no-color", "terraplane.tfplan"], log, stop)
                .await?
                .success()?;
            let out = tf.capture(&["output", "-json", "-no-color"], stop).await?;
            let mut outputs = sanitize_outputs(&out);
            mask_json(&mut outputs);
            Ok(PhaseOutcome::Applied { outputs })
        }
    }
}

/// Clones the repository and checks out the run's commit; returns the commit checked out.
async fn fetch_source(
    spec: &JobSpec,
    src: &Path,
    home: &Path,
    log: &LogSink,
    stop: &CancellationToken,
) -> Result<String, Failure> {
    log.line(format!(
        "[terraplane] cloning {} (branch {})",
        spec.repository, spec.branch
    ));
    let src_s = src.to_string_lossy().into_owned();
    let clone = [
        "clone",
        "--quiet",
        "--no-tags",
        "--branch",
        spec.branch.as_str(),
        "--",
        spec.repository.as_str(),
        src_s.as_str(),
    ];
    let code = run_logged(git(home, None), &clone, log, stop).await?;
    if code.0 != Some(0) {
        return Err(Failure(format!("git clone {}", code.describe())));
    }
    if let Some(sha) = &spec.commit_sha {
        let code = run_logged(
            git(home, Some(src)),
            &["checkout", "--quiet", "--detach", sha.as_str()],
            log,
            stop,
        )
        .await?;
        if code.0 != Some(0) {
            return Err(Failure(format!("git checkout {sha} {}", code.describe())));
        }
    }
    let out = git(home, Some(src)).args(["rev-parse", "HEAD"]).output().await?;
    let commit = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    log.line(format!("[terraplane] checked out {commit}"));
    Ok(commit)
}

fn git(home: &Path, dir: Option<&Path>) -> tokio::process::Command {
    let mut c = tokio::process::Command::new("git");
    if let Some(d) = dir {
        c.current_dir(d);
    }
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1");
    c
}

/// The backend is injected, so users declare none (an override file replaces any the
/// configuration has). Credentials go through the environment, never to disk.
fn write_backend_override(dir: &Path, address: &str) -> std::io::Result<()> {
    let a = serde_json::to_string(address).unwrap_or_default();
    let text = format!(
        "# Written by the Terraplane runner.\nterraform {{\n  backend \"http\" {{\n    address        = {a}\n    lock_address   = {a}\n    unlock_address = {a}\n    lock_method    = \"LOCK\"\n    unlock_method  = \"UNLOCK\"\n  }}\n}}\n"
    );
    std::fs::write(dir.join("terraplane_backend_override.tf"), text)
}

struct ExitCode(Option<i32>);

impl ExitCode {
    fn describe(&self) -> String {
        match self.0 {
            Some(c) => format!("exited with code {c}"),
            None => "was interrupted".into(),
        }
    }
    fn success(&self) -> Result<(), Failure> {
        if self.0 == Some(0) {
            Ok(())
        } else {
            Err(Failure(format!("terraform {}", self.describe())))
        }
    }
}

struct Terraform {
    bin: PathBuf,
    dir: PathBuf,
    home: PathBuf,
    token: String,
    /// The run's environment variables (set first: the runner's own win).
    env: Vec<(String, String)>,
}

impl Terraform {
    fn command(&self) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(&self.bin);
        let cli_config = self.home.join("terraformrc");
        c.current_dir(&self.dir).env_clear().envs(self.env.iter().cloned());
        c.env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_CLI_CONFIG_FILE", cli_config)
            .env("TF_HTTP_USERNAME", "terraplane-run")
            .env("TF_HTTP_PASSWORD", &self.token);
        c
    }

    async fn run(&self, args: &[&str], log: &LogSink, stop: &CancellationToken) -> Result<ExitCode, Failure> {
        log.line(format!("[terraplane] terraform {}", args.join(" ")));
        run_logged(self.command(), args, log, stop).await
    }

    /// Runs and returns stdout (stderr goes nowhere: `show -json` output is the plan).
    async fn capture(&self, args: &[&str], stop: &CancellationToken) -> Result<Vec<u8>, Failure> {
        let mut c = self.command();
        c.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let out = tokio::select! {
            o = c.output() => o?,
            _ = stop.cancelled() => return Err(Failure("canceled".into())),
        };
        if !out.status.success() {
            return Err(Failure(format!(
                "terraform {} failed: {}",
                args.first().unwrap_or(&""),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(out.stdout)
    }
}

/// Runs a command, sending stdout and stderr line by line to the log. On `stop`, sends
/// SIGINT (terraform stops gracefully and releases its lock), then SIGKILL after 60 s.
async fn run_logged(
    mut cmd: tokio::process::Command,
    args: &[&str],
    log: &LogSink,
    stop: &CancellationToken,
) -> Result<ExitCode, Failure> {
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| Failure(format!("cannot start {:?}: {e}", cmd.as_std().get_program())))?;
    let out = child.stdout.take().map(|s| pump(BufReader::new(s), log.clone()));
    let err = child.stderr.take().map(|s| pump(BufReader::new(s), log.clone()));
    let status = tokio::select! {
        s = child.wait() => s?,
        _ = stop.cancelled() => {
            if let Some(pid) = child.id() {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGINT);
            }
            match tokio::time::timeout(Duration::from_secs(60), child.wait()).await {
                Ok(s) => s?,
                Err(_) => { child.kill().await?; child.wait().await? }
            }
        }
    };
    if let Some(t) = out {
        let _ = t.await;
    }
    if let Some(t) = err {
        let _ = t.await;
    }
    Ok(ExitCode(status.code()))
}

fn pump<R: tokio::io::AsyncRead + Unpin + Send + 'static>(
    reader: BufReader<R>,
    log: LogSink,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut lines = reader.lines();
        while let Ok(Some(l)) = lines.next_line().await {
            log.line(l);
        }
    })
}

/// `terraform output -json` with sensitive values hidden.
fn sanitize_outputs(raw: &[u8]) -> serde_json::Value {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_slice::<serde_json::Value>(raw) else {
        return serde_json::json!({});
    };
    let mut out = serde_json::Map::new();
    for (k, v) in map {
        let sensitive = v.get("sensitive").and_then(|s| s.as_bool()).unwrap_or(false);
        let value = if sensitive {
            serde_json::Value::String("<sensitive>".into())
        } else {
            v.get("value").cloned().unwrap_or_default()
        };
        out.insert(k, serde_json::json!({ "value": value, "sensitive": sensitive }));
    }
    serde_json::Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_hide_sensitive_values() {
        let o = sanitize_outputs(br#"{"a":{"value":"x","type":"string","sensitive":false},"p":{"value":"pw","type":"string","sensitive":true}}"#);
        assert_eq!(o["a"]["value"], "x");
        assert_eq!(o["p"]["value"], "<sensitive>");
        assert_eq!(sanitize_outputs(b"garbage"), serde_json::json!({}));
    }

    #[test]
    fn backend_override_points_at_the_address() -> std::io::Result<()> {
        let d = tempfile::tempdir()?;
        write_backend_override(d.path(), "http://127.0.0.1:1/api/v1/orgs/o/stacks/s/state")?;
        let text = std::fs::read_to_string(d.path().join("terraplane_backend_override.tf"))?;
        assert!(
            text.contains(r#"lock_address   = "http://127.0.0.1:1/api/v1/orgs/o/stacks/s/state""#),
            "{text}"
        );
        assert!(!text.contains("password"));
        Ok(())
    }
}
