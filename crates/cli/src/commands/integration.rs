//! `tpctl integration aws …`: IAM roles a stack's runs assume with their identity token,
//! so no long-lived AWS keys are stored.

use anyhow::Result;
use terraplane_client::AwsIntegrationInput;

use super::App;
use crate::cli::{AwsIntegrationCommand, AwsIntegrationCreateArgs, IntegrationCommand};
use crate::output;

impl App<'_, '_> {
    pub(super) async fn integration(&mut self, cmd: IntegrationCommand) -> Result<()> {
        match cmd {
            IntegrationCommand::Aws(c) => self.aws_integration(c).await,
        }
    }

    async fn aws_integration(&mut self, cmd: AwsIntegrationCommand) -> Result<()> {
        match cmd {
            AwsIntegrationCommand::Create(a) => {
                let i = self.client.aws_integration_create(&create_input(a)).await?;
                self.show(&i, |i| {
                    format!("Created AWS integration {}\n\n{}", i.id, output::aws_integration(i))
                })
            }
            AwsIntegrationCommand::List => {
                let integrations = self.client.aws_integrations().await?;
                if integrations.is_empty() && !self.json_mode() {
                    return self.remark("No AWS integrations.\n");
                }
                self.show(&integrations, |i| output::aws_integrations_table(i))
            }
            AwsIntegrationCommand::Attach { integration, stack } => {
                let i = self.client.aws_integration_attach(&integration, &stack).await?;
                self.show(&i, |i| format!("Attached AWS integration {} to stack {stack}\n", i.id))
            }
            AwsIntegrationCommand::Detach { stack } => {
                let i = self.client.aws_integration_detach(&stack).await?;
                self.show(&i, |i| {
                    format!("Detached AWS integration {} from stack {stack}\n", i.id)
                })
            }
            AwsIntegrationCommand::Delete { integration } => {
                let i = self.client.aws_integration_delete(&integration).await?;
                self.show(&i, |i| format!("Deleted AWS integration {}\n", i.id))
            }
        }
    }
}

fn create_input(a: AwsIntegrationCreateArgs) -> AwsIntegrationInput {
    AwsIntegrationInput {
        id: a.id,
        name: a.name,
        role_arn: a.role_arn,
        read_role_arn: a.read_role_arn,
        audience: a.audience,
        duration_seconds: a.duration,
        space: a.space,
    }
}
