//! `tpctl stack …`.

use anyhow::{Result, anyhow};
use terraplane_client::StackCreateInput;

use super::App;
use crate::cli::{StackCommand, StackCreateArgs};
use crate::output;

impl App<'_, '_> {
    pub(super) async fn stack(&mut self, cmd: StackCommand) -> Result<()> {
        match cmd {
            StackCommand::Create(a) => {
                let s = self.client.stack_create(&create_input(a)).await?;
                self.show(&s, |s| format!("Created stack {}\n\n{}", s.id, output::stack(s)))
            }
            StackCommand::List => {
                let stacks = self.client.stacks().await?;
                if stacks.is_empty() && !self.json_mode() {
                    return self.remark("No stacks.\n");
                }
                self.show(&stacks, |s| output::stacks_table(s))
            }
            StackCommand::Show { stack } => {
                let s = self
                    .client
                    .stack(&stack)
                    .await?
                    .ok_or_else(|| anyhow!("stack {stack} not found"))?;
                self.show(&s, output::stack)
            }
            StackCommand::Lock { stack, note } => {
                let s = self.client.stack_lock(&stack, note.as_deref()).await?;
                let holder = s.lock.as_ref().map(|l| l.holder.clone()).unwrap_or_default();
                self.show(&s, |s| format!("Stack {} locked by {holder}\n", s.id))
            }
            StackCommand::Unlock { stack, force } => {
                let s = self.client.stack_unlock(&stack, force).await?;
                self.show(&s, |s| format!("Stack {} unlocked\n", s.id))
            }
            StackCommand::Delete { stack } => {
                let s = self.client.stack_delete(&stack).await?;
                self.show(&s, |s| format!("Deleted stack {}\n", s.id))
            }
        }
    }
}

fn create_input(a: StackCreateArgs) -> StackCreateInput {
    StackCreateInput {
        slug: a.slug,
        name: a.name,
        description: a.description,
        repository: a.repository,
        branch: a.branch,
        project_root: a.project_root,
        tool: a.tool,
        tool_version: a.tool_version,
        // Unset means the server's default, not "off".
        autodeploy: a.autodeploy.then_some(true),
        labels: (!a.labels.is_empty()).then_some(a.labels),
        worker_pool: a.worker_pool,
    }
}
