//! `tpctl user …`: the organization's members.

use anyhow::{Result, bail};
use serde_json::json;
use terraplane_client::UserCreate;

use super::App;
use super::login::read_password_stdin;
use crate::cli::UserCommand;
use crate::output;

impl App<'_, '_> {
    pub(super) async fn user(&mut self, cmd: UserCommand) -> Result<()> {
        match cmd {
            UserCommand::Create(a) => {
                let password = if a.password_stdin {
                    let p = read_password_stdin()?;
                    if p.is_empty() {
                        bail!("--password-stdin: the password on stdin is empty");
                    }
                    Some(p)
                } else {
                    None
                };
                let input = UserCreate {
                    email: a.email,
                    name: a.name,
                    password,
                    owner: a.owner,
                };
                let m = self.client.user_create(&input).await?;
                self.show(&m, |m| format!("Added {} to the organization as {}\n", m.email, m.role))
            }
            UserCommand::List => {
                let users = self.client.users().await?;
                if users.is_empty() && !self.json_mode() {
                    return self.remark("No members.\n");
                }
                self.show(&users, |u| output::members_table(u))
            }
            UserCommand::SetRole { email, role } => {
                // clap's group lets exactly one of --owner and --member through.
                let m = self.client.member_set_role(&email, role.owner).await?;
                self.show(&m, output::member_role)
            }
            UserCommand::Remove { email } => {
                self.client.member_remove(&email).await?;
                self.show(&json!({ "email": email, "removed": true }), |_| {
                    format!("Removed {email} from the organization\n")
                })
            }
        }
    }
}
