//! `tpctl team …`.

use anyhow::Result;

use super::App;
use crate::cli::TeamCommand;
use crate::output;

impl App<'_, '_> {
    pub(super) async fn team(&mut self, cmd: TeamCommand) -> Result<()> {
        match cmd {
            TeamCommand::Create { slug, name } => {
                let t = self.client.team_create(&slug, name.as_deref()).await?;
                self.show(&t, |t| format!("Created team {} ({})\n", t.id, t.name))
            }
            TeamCommand::AddMember { team, email } => {
                let t = self.client.team_add_member(&team, &email).await?;
                self.show(&t, |t| {
                    format!("Added {email} to team {} ({} members)\n", t.id, t.members.len())
                })
            }
            TeamCommand::List => {
                let teams = self.client.teams().await?;
                if teams.is_empty() && !self.json_mode() {
                    return self.remark("No teams.\n");
                }
                self.show(&teams, |t| output::teams_table(t))
            }
        }
    }
}
