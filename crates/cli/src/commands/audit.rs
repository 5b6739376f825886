//! `tpctl audit …`: the organization's audit trail (owners). `verify` fails (exit 1) when
//! the hash chain is broken, so scripts and monitoring can run it as a check.

use anyhow::{Result, anyhow, bail};
use chrono::Utc;
use terraplane_client::AuditQuery;

use super::App;
use crate::cli::{AuditCommand, AuditListArgs};
use crate::output;
use crate::time::TimeArg;

impl App<'_, '_> {
    pub(super) async fn audit(&mut self, cmd: AuditCommand) -> Result<()> {
        match cmd {
            AuditCommand::List(a) => {
                let events = self.client.audit_events(&query(a)?).await?;
                if events.is_empty() && !self.json_mode() {
                    return self.remark("No audit events.\n");
                }
                self.show(&events, |e| output::audit_events_table(e))
            }
            AuditCommand::Verify => {
                let v = self.client.audit_verify().await?;
                if self.json_mode() {
                    self.json(&v)?;
                } else if v.ok {
                    self.out(&output::audit_intact(&v))?;
                }
                if !v.ok {
                    bail!(output::audit_problem(&v));
                }
                Ok(())
            }
        }
    }
}

/// The API's filters, durations resolved against the current time.
fn query(a: AuditListArgs) -> Result<AuditQuery> {
    let now = Utc::now();
    let resolve = |flag: &str, t: Option<TimeArg>| -> Result<_> {
        t.map(|t| t.resolve(now).ok_or_else(|| anyhow!("{flag} is too long ago")))
            .transpose()
    };
    let since = resolve("--since", a.since)?;
    let until = resolve("--until", a.until)?;
    if let (Some(s), Some(u)) = (since, until)
        && u <= s
    {
        bail!(
            "--until ({}) is not after --since ({}): no event can match",
            output::time(&u),
            output::time(&s)
        );
    }
    Ok(AuditQuery {
        actor: a.actor,
        action: a.action,
        target: a.target,
        since,
        until,
        limit: a.limit,
    })
}
