//! `tpctl role …`: role bindings on spaces, for users, teams and API keys.

use anyhow::{Result, bail};
use serde_json::json;
use terraplane_client::Subject;

use super::App;
use crate::cli::{RoleCommand, SubjectArgs};
use crate::output;

impl App<'_, '_> {
    pub(super) async fn role(&mut self, cmd: RoleCommand) -> Result<()> {
        match cmd {
            RoleCommand::Grant { space, subject, role } => {
                let subject = subject_of(subject)?;
                let b = self.client.role_grant(&space, &subject, role.as_str()).await?;
                self.show(&b, |b| {
                    format!("Granted {} on space {} to {subject}\n", b.role, b.space)
                })
            }
            RoleCommand::Revoke { space, subject } => {
                let subject = subject_of(subject)?;
                self.client.role_revoke(&space, &subject).await?;
                let v = json!({ "space": space, "subject": subject, "revoked": true });
                self.show(&v, |_| format!("Revoked the role of {subject} on space {space}\n"))
            }
            RoleCommand::List => {
                let bindings = self.client.role_bindings().await?;
                if bindings.is_empty() && !self.json_mode() {
                    return self.remark("No role bindings.\n");
                }
                self.show(&bindings, |b| output::bindings_table(b))
            }
        }
    }
}

/// clap's group lets exactly one flag through; this only names it.
fn subject_of(a: SubjectArgs) -> Result<Subject> {
    match (a.user, a.team, a.api_key) {
        (Some(u), None, None) => Ok(Subject::User(u)),
        (None, Some(t), None) => Ok(Subject::Team(t)),
        (None, None, Some(k)) => Ok(Subject::ApiKey(k)),
        _ => bail!("give exactly one of --user, --team or --api-key"),
    }
}
