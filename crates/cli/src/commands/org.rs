//! `tpctl org …`: organizations, which only instance administrators create.

use anyhow::Result;

use super::App;
use crate::cli::OrgCommand;
use crate::output;

impl App<'_, '_> {
    pub(super) async fn org(&mut self, cmd: OrgCommand) -> Result<()> {
        match cmd {
            OrgCommand::Create { slug, name } => {
                let o = self.client.org_create(&slug, name.as_deref()).await?;
                self.show(&o, |o| {
                    format!(
                        "Created organization {} ({}); you are its owner.\n\
                         Tokens are per-organization: work in it after `tpctl login --org {}`.\n",
                        o.slug, o.name, o.slug
                    )
                })
            }
            OrgCommand::List => {
                let orgs = self.client.organizations().await?;
                if orgs.is_empty() && !self.json_mode() {
                    return self.remark("No organizations.\n");
                }
                self.show(&orgs, |o| output::orgs_table(o))
            }
        }
    }
}
