//! `tpctl drift …` and `tpctl stack drift`: checks now (`--wait` follows the check like
//! `run trigger --wait`) or on a schedule, the drift inbox, and what drifted on a stack.

use anyhow::Result;
use terraplane_client::{DriftReaction, Run, RunState};

use super::App;
use crate::cli::{DriftCommand, DriftReactionArg, DriftScheduleArgs};
use crate::output;

impl App<'_, '_> {
    pub(super) async fn drift(&mut self, cmd: DriftCommand) -> Result<()> {
        match cmd {
            DriftCommand::Check { stack, wait } => {
                let run = self.client.drift_check(&stack).await?;
                if !wait {
                    return self.show(&run, |r| {
                        format!("Queued drift check run {} on stack {}: {}\n", r.id, r.stack_id, r.state)
                    });
                }
                self.note(&format!(
                    "Queued drift check run {} on stack {}\n",
                    run.id, run.stack_id
                ))?;
                let run = self.wait_for_run(&run.id).await?;
                self.finish_drift_check(&run)
            }
            DriftCommand::Schedule(a) => self.drift_schedule(a).await,
            DriftCommand::Schedules { stack } => {
                let schedules = self.client.drift_schedules(&stack).await?;
                if schedules.is_empty() && !self.json_mode() {
                    return self.remark(&format!("Stack {stack} has no drift schedules.\n"));
                }
                self.show(&schedules, |s| output::drift_schedules_table(s))
            }
            DriftCommand::Unschedule { id } => {
                let s = self.client.drift_schedule_delete(&id).await?;
                self.show(&s, |s| {
                    format!(
                        "Deleted drift schedule {} of stack {} ({} in {})\n",
                        s.id, s.stack, s.cron, s.timezone
                    )
                })
            }
            DriftCommand::List { all } => {
                let records = self.client.drift_records(None, !all).await?;
                if records.is_empty() && !self.json_mode() {
                    return self.remark(if all {
                        "No drift recorded.\n"
                    } else {
                        "No open drift.\n"
                    });
                }
                self.show(&records, |r| output::drift_records_table(r))
            }
        }
    }

    /// `tpctl stack drift STACK`.
    pub(super) async fn stack_drift(&mut self, stack: &str) -> Result<()> {
        let d = self.client.stack_drift(stack).await?;
        self.show(&d, output::stack_drift)
    }

    async fn drift_schedule(&mut self, a: DriftScheduleArgs) -> Result<()> {
        let reaction = a.reaction.map(reaction_of);
        let s = self
            .client
            .drift_schedule_add(&a.stack, &a.cron, &a.timezone, reaction.as_ref())
            .await?;
        self.show(&s, |s| {
            let mut out = format!(
                "Added drift schedule {} to stack {}\n\n{}",
                s.id,
                s.stack,
                output::drift_schedule(s)
            );
            if let Some(r) = &reaction {
                out.push_str(&format!("\nStack {} now reacts to drift with {r}\n", s.stack));
            }
            out
        })
    }

    /// Where a waited-for check stopped: whether it found drift, or (any end but FINISHED)
    /// an error, as `run trigger --wait` reports it.
    fn finish_drift_check(&mut self, run: &Run) -> Result<()> {
        if run.state != RunState::Finished {
            return self.finish_wait(run);
        }
        if self.json_mode() {
            self.json(run)?;
        }
        let (id, stack) = (&run.id, &run.stack_id);
        self.note(&match run.has_changes {
            Some(true) => format!("Drift found on stack {stack} by run {id}: see `tpctl stack drift {stack}`\n"),
            Some(false) => format!("No drift on stack {stack} (run {id})\n"),
            None => format!("Drift check run {id} finished without a plan\n"),
        })
    }
}

fn reaction_of(r: DriftReactionArg) -> DriftReaction {
    match r {
        DriftReactionArg::Alert => DriftReaction::Alert,
        DriftReactionArg::Reconcile => DriftReaction::Reconcile,
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    #[test]
    fn reactions_are_the_apis() {
        for r in DriftReactionArg::value_variants() {
            let flag = r.to_possible_value().map(|v| v.get_name().to_uppercase());
            assert_eq!(flag.as_deref(), Some(reaction_of(*r).as_str()));
        }
    }
}
