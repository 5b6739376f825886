//! The scheduler turns intent into queued work. Each tick it reads the unfinished runs and:
//! publishes the runs that may start (one active tracked run per stack, FIFO; proposed runs
//! don't wait), publishes confirmed runs' apply phase, re-publishes runs still QUEUED long
//! after their publish (lost messages), and fails runs whose runner stopped heartbeating or
//! that ran too long. An apply is never re-dispatched. Time comes from an injected clock.

pub mod audit_delivery;
pub mod notify_delivery;
pub mod policies;

use std::collections::{BTreeMap, HashMap};

use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use terraplane_config::SchedulerConfig;
use terraplane_domain::{Clock, RunPhase, RunState, RunType, StackId};
use terraplane_protocol::JobMessage;
use terraplane_queue::JobQueue;
use terraplane_store::{Run, Store, StoreError};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Runs a scheduler loop until `shutdown`.
pub fn start(
    cfg: &terraplane_config::Config,
    store: Store,
    queue: Arc<dyn JobQueue>,
    clock: Arc<dyn Clock>,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    match notify_delivery::NotificationDelivery::new(store.clone(), clock.clone(), cfg.notifications.clone()) {
        Ok(d) => {
            tokio::spawn(d.run_until_stopped(shutdown.clone()));
        }
        Err(e) => tracing::error!(error = %e, "cannot start notification delivery"),
    }
    let s = Scheduler::new(store, queue, clock, cfg.scheduler.clone())
        .with_public_url(cfg.public_url())
        .with_policy_config(cfg.policy.clone());
    tokio::spawn(s.run_until_stopped(shutdown))
}

/// Starts audit webhook delivery when a webhook is configured.
pub fn start_audit_delivery(
    cfg: &terraplane_config::Config,
    store: Store,
    clock: Arc<dyn Clock>,
    shutdown: CancellationToken,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    let (Some(url), Some(secret)) = (&cfg.audit.webhook_url, &cfg.audit.webhook_secret) else {
        return Ok(None);
    };
    let d = audit_delivery::AuditDelivery::new(
        store,
        url.clone(),
        secret.expose().to_owned(),
        clock,
        cfg.audit.max_backoff_secs,
    )?;
    let every = Duration::from_millis(cfg.audit.delivery_interval_ms.max(50));
    Ok(Some(tokio::spawn(d.run_until_stopped(every, shutdown))))
}

/// `terraplane scheduler`: connects and schedules until `shutdown`.
pub async fn serve(cfg: &terraplane_config::Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    let queue = terraplane_queue::open(&cfg.queue, None).await?;
    let store = Store::open(&cfg.database).await?;
    let clock: Arc<dyn Clock> = Arc::new(terraplane_domain::SystemClock);
    let delivery = start_audit_delivery(cfg, store.clone(), clock.clone(), shutdown.clone())?;
    start(cfg, store, queue, clock, shutdown).await?;
    if let Some(d) = delivery {
        d.await?;
    }
    Ok(())
}

#[derive(Clone)]
pub struct Scheduler {
    store: Store,
    queue: Arc<dyn JobQueue>,
    clock: Arc<dyn Clock>,
    cfg: SchedulerConfig,
    wake: Arc<Notify>,
    /// The api's public URL, for links in notifications.
    public_url: String,
    /// Bounds of notification policy evaluations.
    policy: terraplane_config::PolicyConfig,
}

/// What one tick did, for logs and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TickReport {
    pub published: Vec<(terraplane_domain::RunId, RunPhase)>,
    pub failed: Vec<(terraplane_domain::RunId, String)>,
    /// Drift checks queued by schedules that came due.
    pub drift_checks: Vec<terraplane_domain::RunId>,
    /// Waiting drift checks canceled because a tracked run came first.
    pub superseded: Vec<terraplane_domain::RunId>,
    /// When this tick's drift checks were all queued (committed).
    pub drift_fired_at: Option<DateTime<Utc>>,
}

impl Scheduler {
    pub fn new(store: Store, queue: Arc<dyn JobQueue>, clock: Arc<dyn Clock>, cfg: SchedulerConfig) -> Self {
        Self {
            store,
            queue,
            clock,
            cfg,
            wake: Arc::new(Notify::new()),
            public_url: String::new(),
            policy: terraplane_config::PolicyConfig::default(),
        }
    }

    /// Notification policies are evaluated within these bounds.
    pub fn with_policy_config(mut self, policy: terraplane_config::PolicyConfig) -> Self {
        self.policy = policy;
        self
    }

    /// Links in notifications point at `url`.
    pub fn with_public_url(mut self, url: String) -> Self {
        self.public_url = url;
        self
    }

    /// Asks the loop to tick now (a run was queued or confirmed in this process).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    pub async fn run_until_stopped(self, shutdown: CancellationToken) {
        let period = Duration::from_millis(self.cfg.tick_ms.max(10));
        loop {
            if let Err(e) = self.tick().await {
                tracing::error!(error = %e, "scheduler tick failed");
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(period) => {}
                _ = self.wake.notified() => {}
            }
        }
        tracing::info!("scheduler stopped");
    }

    pub async fn tick(&self) -> Result<TickReport, StoreError> {
        let now = self.clock.now();
        let mut report = TickReport {
            drift_checks: self.fire_drift_schedules(now).await?,
            drift_fired_at: Some(self.clock.now()),
            ..TickReport::default()
        };
        // Only stacks with a run to publish or a runner to give up on are read.
        let republish = chrono::Duration::seconds(self.cfg.republish_after_secs as i64);
        let timeout = chrono::Duration::seconds(self.cfg.run_timeout_secs as i64);
        let stacks = self
            .store
            .stacks_needing_dispatch(now, now - republish, now - timeout)
            .await?;
        if stacks.is_empty() {
            return Ok(report);
        }
        let runs = self.store.unfinished_runs_of(&stacks).await?;
        let pools = self.store.worker_pools(&stacks).await?;
        let mut to_publish: Vec<(terraplane_domain::RunId, RunState, RunPhase, String)> = Vec::new();
        let mut by_stack: BTreeMap<StackId, Vec<Run>> = BTreeMap::new();
        for run in runs {
            by_stack.entry(run.stack_id).or_default().push(run);
        }
        for (stack_id, mut runs) in by_stack {
            // A tracked run cancels drift checks still waiting on its stack.
            if runs.iter().any(|r| r.run_type == RunType::Tracked) {
                for r in runs.iter().filter(|r| r.drift_detection && r.state == RunState::Queued) {
                    match self
                        .store
                        .scope(r.org_id)
                        .cancel_run(r.id, "scheduler (superseded by a tracked run)", now)
                        .await
                    {
                        Ok(_) => report.superseded.push(r.id),
                        Err(StoreError::Conflict(_)) => {}
                        Err(e) => return Err(e),
                    }
                }
                runs.retain(|r| !report.superseded.contains(&r.id));
            }
            for run in &runs {
                if run.state.is_runner_held()
                    && let Some(reason) = self.expiry_reason(run, now)
                {
                    match self.store.fail_held_run(run, reason.clone(), now).await {
                        Ok(failed) => {
                            tracing::warn!(run_id = %run.id, %reason, "run failed by the scheduler");
                            self.notify_failed(&failed, &reason, now).await;
                            report.failed.push((run.id, reason));
                        }
                        // The runner reported meanwhile; next tick sees the new state.
                        Err(StoreError::Conflict(_)) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            let Some(pool) = pools.get(&stack_id) else {
                continue; // deleted meanwhile
            };
            for (run, phase) in self.ready(&runs, now) {
                to_publish.push((run.id, run.state, phase, pool.clone()));
            }
        }
        // Published a few at a time (a broker publish waits for its confirm), in order.
        let results: Vec<_> = futures::stream::iter(to_publish)
            .map(|(id, state, phase, pool)| async move {
                let r = self.queue.publish(&pool, &JobMessage::new(id, phase)).await;
                (id, state, phase, r)
            })
            .buffered(16)
            .collect()
            .await;
        let mut marked = Vec::new();
        for (id, state, phase, r) in results {
            match r {
                Ok(()) => {
                    marked.push((id, state));
                    report.published.push((id, phase));
                }
                Err(e) => tracing::error!(run_id = %id, error = %e, "cannot publish run"),
            }
        }
        self.store.mark_dispatched(&marked, now).await?;
        Ok(report)
    }

    /// Queues a drift check for every schedule that came due, and moves each schedule to
    /// its next firing whether or not its check could start. Batches of up to 2,000
    /// schedules, each a handful of statements in one transaction; on PostgreSQL several
    /// batches run at once (`SKIP LOCKED` keeps them apart).
    async fn fire_drift_schedules(&self, now: DateTime<Utc>) -> Result<Vec<terraplane_domain::RunId>, StoreError> {
        const BATCH: u64 = 2000;
        const MAX_ROUNDS: usize = 10;
        let parallel = if self.store.is_postgres() { 3 } else { 1 };
        let parsed: std::sync::Mutex<HashMap<(String, String), Option<terraplane_domain::drift::Schedule>>> =
            std::sync::Mutex::new(HashMap::new());
        let next_of = |s: &terraplane_store::DriftSchedule| {
            // A poisoned cache still holds parsed schedules; keep using it.
            let mut cache = parsed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            cache
                .entry((s.cron.clone(), s.timezone.clone()))
                .or_insert_with(|| terraplane_domain::drift::Schedule::parse(&s.cron, &s.timezone).ok())
                .as_ref()
                .and_then(|p| p.next_after(now))
                // A schedule stored before its expression stopped parsing: retried daily.
                .unwrap_or(now + chrono::Duration::days(1))
        };
        let mut queued = Vec::new();
        for _ in 0..MAX_ROUNDS {
            let rounds = futures::future::join_all(
                (0..parallel).map(|_| self.store.fire_due_drift_schedules(now, BATCH, next_of)),
            )
            .await;
            let mut more = false;
            for fired in rounds {
                let fired = match fired {
                    Ok(f) => f,
                    // Rows another pass moved first: that pass fires them.
                    Err(StoreError::Conflict(m)) => {
                        tracing::debug!(%m, "drift schedules fired elsewhere");
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                for (stack_id, why) in &fired.skipped {
                    tracing::debug!(%stack_id, %why, "scheduled drift check skipped");
                }
                queued.extend(fired.queued.iter().map(|(_, _, run)| *run));
                more |= fired.due == BATCH as usize;
            }
            if !more {
                break;
            }
        }
        if !queued.is_empty() {
            tracing::info!(checks = queued.len(), "scheduled drift checks queued");
        }
        Ok(queued)
    }

    /// Raises RunFailed for a run the scheduler failed, and lets the stack's notification
    /// policies route it like the api's events.
    async fn notify_failed(&self, failed: &Run, reason: &str, now: DateTime<Utc>) {
        let scope = self.store.scope(failed.org_id);
        let Ok(stack) = scope.get_stack(failed.stack_id).await else {
            return;
        };
        let raised = scope
            .notify(
                terraplane_domain::notify::EventKind::RunFailed,
                &stack,
                Some(failed.id.to_string()),
                format!("run {} failed", failed.id),
                Vec::new(),
                Some(reason.to_owned()),
                &self.public_url,
                now,
            )
            .await;
        let routed = match raised {
            Ok(ev) => {
                let limits = policies::limits(&self.policy);
                policies::route_notification(&self.store, limits, &ev, &stack, Some(failed), now).await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = routed {
            tracing::error!(run_id = %failed.id, error = %e, "cannot queue the notification");
        }
    }

    fn expiry_reason(&self, run: &Run, now: DateTime<Utc>) -> Option<String> {
        let lease_lost = run.lease_expires_at.is_some_and(|l| l < now);
        let timed_out = run
            .held_since
            .is_some_and(|h| now - h > chrono::Duration::seconds(self.cfg.run_timeout_secs as i64));
        let what = if run.state == RunState::Applying {
            "; the apply is not retried and the stack's state lock is kept for recovery \
             (inspect the state, then `tpctl state unlock --force`)"
        } else {
            ""
        };
        if lease_lost {
            let runner = run.runner_id.as_deref().unwrap_or("unknown");
            Some(format!(
                "runner {runner} stopped heartbeating while the run was {}{what}",
                run.state
            ))
        } else if timed_out {
            Some(format!(
                "run timed out after {} s while {}{what}",
                self.cfg.run_timeout_secs, run.state
            ))
        } else {
            None
        }
    }

    /// The runs of one stack (oldest first) that should be published now, with their phase.
    fn ready<'r>(&self, runs: &'r [Run], now: DateTime<Utc>) -> Vec<(&'r Run, RunPhase)> {
        let republish = chrono::Duration::seconds(self.cfg.republish_after_secs as i64);
        let due = |r: &Run| r.dispatched_at.is_none_or(|d| now - d > republish);
        let tracked_active = runs
            .iter()
            .any(|r| r.run_type == RunType::Tracked && !r.state.is_terminal() && r.state != RunState::Queued);
        let tracked_any = runs
            .iter()
            .any(|r| r.run_type == RunType::Tracked && !r.state.is_terminal());
        // A drift check holds the state lock while it refreshes: tracked runs wait for it,
        // and it never starts beside a tracked run.
        let check_active = runs
            .iter()
            .any(|r| r.drift_detection && !r.state.is_terminal() && r.state != RunState::Queued);
        let mut out = Vec::new();
        let mut first_tracked = true;
        for r in runs {
            match (r.state, r.run_type) {
                // A drift check waits while any tracked run is queued or active.
                (RunState::Queued, RunType::Proposed) if r.drift_detection && !tracked_any && due(r) => {
                    out.push((r, RunPhase::Plan))
                }
                (RunState::Queued, RunType::Proposed) if r.drift_detection => {}
                (RunState::Queued, RunType::Proposed) if due(r) => out.push((r, RunPhase::Plan)),
                (RunState::Queued, RunType::Tracked) => {
                    if first_tracked && !tracked_active && !check_active && due(r) {
                        out.push((r, RunPhase::Plan));
                    }
                    first_tracked = false;
                }
                (RunState::Confirmed, _) if due(r) => out.push((r, RunPhase::Apply)),
                _ => {}
            }
        }
        out
    }
}
