//! `tpctl stack …`.

use anyhow::{Result, anyhow, bail};
use terraplane_client::StackCreateInput;

use super::App;
use super::context::set_message;
use crate::cli::{StackCommand, StackCreateArgs, StackEnvArgs, StackEnvCommand};
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
            StackCommand::Env(a) => self.stack_env(a).await,
            StackCommand::Drift { stack } => self.stack_drift(&stack).await,
        }
    }

    async fn stack_env(&mut self, a: StackEnvArgs) -> Result<()> {
        let cmd = match (a.command, a.stack) {
            (Some(c), _) => c,
            (None, Some(stack)) => StackEnvCommand::List { stack },
            // clap asks for one or the other.
            (None, None) => bail!("name a stack: `tpctl stack env STACK`"),
        };
        match cmd {
            StackEnvCommand::Set { stack, variable } => {
                let input = self.variable_input(variable)?;
                let v = self.client.stack_set_variable(&stack, &input).await?;
                self.show(&v, |v| set_message(v, &format!("stack {stack}")))
            }
            StackEnvCommand::Unset { stack, key } => {
                let v = self.client.stack_unset_variable(&stack, &key).await?;
                self.show(&v, |v| {
                    format!("Removed {} from stack {stack}\n", output::variable_label(v))
                })
            }
            StackEnvCommand::List { stack } => {
                let vars = self.client.stack_environment(&stack).await?;
                if vars.is_empty() && !self.json_mode() {
                    return self.remark(&format!("Stack {stack} has no variables.\n"));
                }
                self.show(&vars, |v| output::environment_table(v))
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
