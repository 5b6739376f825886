//! `tpctl state …`: versions, raw pull, forced unlock.

use anyhow::{Result, anyhow, bail};

use super::App;
use crate::cli::StateCommand;
use crate::output;

impl App<'_, '_> {
    pub(super) async fn state(&mut self, cmd: StateCommand) -> Result<()> {
        match cmd {
            StateCommand::Versions { stack } => {
                let versions = self.client.state_versions(&stack).await?;
                if versions.is_empty() && !self.json_mode() {
                    return self.remark(&format!("Stack {stack} has no state versions.\n"));
                }
                self.show(&versions, |v| output::versions_table(v))
            }
            StateCommand::Pull { stack, serial } => {
                // The state backend is addressed by organization; the credential knows which
                // (`--org` was already checked against it).
                let org = match self.org.clone() {
                    Some(org) => org,
                    None => self.client.me().await?.organization.slug,
                };
                match self.client.state_pull(&org, &stack, serial).await? {
                    Some(bytes) => {
                        self.out_bytes(&bytes)?;
                        self.flush()
                    }
                    None => match serial {
                        Some(n) => bail!("stack {stack} has no state with serial {n}"),
                        None => bail!("stack {stack} has no state yet"),
                    },
                }
            }
            StateCommand::Unlock { stack, force: false } => {
                let s = self
                    .client
                    .stack(&stack)
                    .await?
                    .ok_or_else(|| anyhow!("stack {stack} not found"))?;
                match s.state_lock {
                    None => bail!("the state of stack {stack} is not locked"),
                    Some(l) => bail!(
                        "refusing to release the state lock of stack {stack} held by {}{} without --force: \
                         if a run still writes the state, releasing its lock can corrupt it",
                        l.holder,
                        l.run_id.map(|r| format!(" (run {r})")).unwrap_or_default()
                    ),
                }
            }
            StateCommand::Unlock { stack, force: true } => {
                let l = self.client.state_force_unlock(&stack).await?;
                self.show(&l, |l| {
                    format!("Released the state lock of stack {stack}\n{}", output::state_lock(l))
                })
            }
        }
    }
}
