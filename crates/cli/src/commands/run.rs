//! `tpctl run …`, including the polling loops of `trigger --wait` and `logs --follow`.

use anyhow::{Result, anyhow, bail};
use serde::Serialize;
use terraplane_client::{LOGS_PAGE_LIMIT, PolicyEvaluation, Run, RunReview, RunState, RunType};

use super::{App, MAX_POLL_RETRIES, transient};
use crate::cli::RunCommand;
use crate::output;

/// `run show`: the run with its reviews and the policy evaluations made for it (`-o json`:
/// the run's fields, `reviews` and `policyEvaluations`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RunDetails {
    #[serde(flatten)]
    run: Run,
    reviews: Vec<RunReview>,
    policy_evaluations: Vec<PolicyEvaluation>,
}

impl App<'_, '_> {
    pub(super) async fn run(&mut self, cmd: RunCommand) -> Result<()> {
        match cmd {
            RunCommand::Trigger {
                stack,
                proposed,
                commit,
                wait,
            } => {
                let t = if proposed { RunType::Proposed } else { RunType::Tracked };
                let run = self.client.run_trigger_with(&stack, &t, commit.as_deref()).await?;
                if !wait {
                    return self.show(&run, |r| {
                        format!(
                            "Triggered run {} ({}) on stack {}: {}\n",
                            r.id, r.run_type, r.stack_id, r.state
                        )
                    });
                }
                self.note(&format!(
                    "Triggered run {} ({}) on stack {}\n",
                    run.id, run.run_type, run.stack_id
                ))?;
                let run = self.wait_for_run(&run.id).await?;
                self.finish_wait(&run)
            }
            RunCommand::List { stack, limit } => {
                let runs = self.client.runs(&stack, limit).await?;
                if runs.is_empty() && !self.json_mode() {
                    return self.remark(&format!("Stack {stack} has no runs.\n"));
                }
                self.show(&runs, |r| output::runs_table(r))
            }
            RunCommand::Show { run } => {
                let r = self
                    .client
                    .run(&run)
                    .await?
                    .ok_or_else(|| anyhow!("run {run} not found"))?;
                let details = RunDetails {
                    policy_evaluations: self.client.run_policy_evaluations(&r.id).await?,
                    reviews: self.client.run_reviews(&r.id).await?,
                    run: r,
                };
                self.show(&details, |d| {
                    format!(
                        "{}\n{}\n{}",
                        output::run(&d.run),
                        output::run_reviews(&d.reviews),
                        output::run_policy_evaluations(&d.policy_evaluations)
                    )
                })
            }
            RunCommand::Logs { run, follow } => self.logs(&run, follow).await,
            RunCommand::Confirm { run } => {
                let r = self.client.run_confirm(&run).await?;
                self.show(&r, |r| format!("Run {} confirmed: {}\n", r.id, r.state))
            }
            RunCommand::Discard { run } => {
                let r = self.client.run_discard(&run).await?;
                self.show(&r, |r| format!("Run {} discarded: {}\n", r.id, r.state))
            }
            RunCommand::Cancel { run } => {
                let r = self.client.run_cancel(&run).await?;
                self.show(&r, |r| format!("Run {} canceled: {}\n", r.id, r.state))
            }
            RunCommand::Review { run, decision, note } => {
                let r = self.client.run_review(&run, decision.approve, note.as_deref()).await?;
                let verb = if decision.approve { "approved" } else { "rejected" };
                self.show(&r, |r| format!("Run {} {verb}: {}\n", r.id, r.state))
            }
        }
    }

    /// Polls the run until it needs a decision (confirmation or review) or has ended, printing
    /// each state it passes through (from its events, so short-lived states are not missed
    /// between polls).
    pub(super) async fn wait_for_run(&mut self, id: &str) -> Result<Run> {
        let mut seen_events = 0usize;
        let mut last: Option<RunState> = None;
        let mut failures = 0u32;
        loop {
            let run = match self.client.run(id).await {
                Ok(Some(r)) => r,
                Ok(None) => bail!("run {id} not found"),
                Err(e) if transient(&e) && failures < MAX_POLL_RETRIES => {
                    failures += 1;
                    self.pause().await;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            failures = 0;
            let mut lines = String::new();
            for ev in run.events.iter().skip(seen_events) {
                if last.as_ref() != Some(&ev.state) {
                    lines.push_str(&output::transition(&ev.at, ev.state.as_str(), ev.note.as_deref()));
                    last = Some(ev.state.clone());
                }
            }
            seen_events = seen_events.max(run.events.len());
            // The run row is read before its events, so events are never older than the
            // state; the state itself only fills in for a server that records no events
            // and for the final line.
            let done = run.terminal || matches!(run.state, RunState::Unconfirmed | RunState::PendingReview);
            let recorded = run.events.iter().any(|e| e.state == run.state);
            if (run.events.is_empty() || (done && !recorded)) && last.as_ref() != Some(&run.state) {
                lines.push_str(&output::transition(&run.updated_at, run.state.as_str(), None));
                last = Some(run.state.clone());
            }
            if !lines.is_empty() {
                self.note(&lines)?;
                self.flush()?;
            }
            if done {
                return Ok(run);
            }
            self.pause().await;
        }
    }

    /// Reports where a waited-for run stopped; an unsuccessful end is an error (exit 1).
    pub(super) fn finish_wait(&mut self, run: &Run) -> Result<()> {
        if self.json_mode() {
            self.json(run)?;
        }
        let plan = run.plan_summary.map(|p| format!(" (plan {p})")).unwrap_or_default();
        if run.state == RunState::Unconfirmed && !run.terminal {
            return self.note(&format!(
                "Run {id} is waiting for a decision{plan}: `tpctl run confirm {id}` or `tpctl run discard {id}`\n",
                id = run.id
            ));
        }
        if run.state == RunState::PendingReview && !run.terminal {
            return self.note(&format!(
                "Run {id} is waiting for review{plan}: `tpctl run review {id} --approve` or `--reject`\n",
                id = run.id
            ));
        }
        if run.state == RunState::Finished {
            return self.note(&format!("Run {} finished{plan}\n", run.id));
        }
        match &run.error {
            Some(e) if !e.is_empty() => bail!("run {} ended {}: {e}", run.id, run.state),
            _ => bail!("run {} ended {}", run.id, run.state),
        }
    }

    /// Prints log chunks verbatim (JSON mode: one chunk object per line). With `follow`,
    /// keeps polling until the run has ended and no chunk is left.
    async fn logs(&mut self, id: &str, follow: bool) -> Result<()> {
        let mut after: Option<i64> = None;
        let mut failures = 0u32;
        loop {
            let page = match self.client.run_logs(id, after).await {
                Ok(p) => p,
                Err(e) if follow && transient(&e) && failures < MAX_POLL_RETRIES => {
                    failures += 1;
                    self.pause().await;
                    continue;
                }
                Err(e) if e.is_not_found() => bail!("run {id} not found"),
                Err(e) => return Err(e.into()),
            };
            failures = 0;
            let n = page.logs.len();
            for c in &page.logs {
                if self.json_mode() {
                    let mut line = serde_json::to_string(c)?;
                    line.push('\n');
                    self.out(&line)?;
                } else {
                    self.out(&c.data)?;
                }
                after = Some(c.seq);
            }
            self.flush()?;
            if n >= LOGS_PAGE_LIMIT {
                continue;
            }
            // The state is read before the logs in the same request, so after a terminal
            // state one more empty page proves nothing is left.
            if !follow || (page.terminal && n == 0) {
                return Ok(());
            }
            if !page.terminal {
                self.pause().await;
            }
        }
    }
}
