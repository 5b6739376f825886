//! `tpctl space …`: the space tree stacks live in and roles are granted on.

use anyhow::Result;
use serde_json::json;
use terraplane_client::SpaceCreate;

use super::App;
use crate::cli::{SpaceCommand, SpaceCreateArgs};
use crate::output;

impl App<'_, '_> {
    pub(super) async fn space(&mut self, cmd: SpaceCommand) -> Result<()> {
        match cmd {
            SpaceCommand::Create(a) => {
                let s = self.client.space_create(&create_input(a)).await?;
                self.show(&s, |s| format!("Created space {}\n\n{}", s.id, output::space(s)))
            }
            SpaceCommand::List => {
                let spaces = self.client.spaces().await?;
                if spaces.is_empty() && !self.json_mode() {
                    return self.remark("No spaces.\n");
                }
                self.show(&spaces, |s| output::spaces_table(s))
            }
            SpaceCommand::Delete { space } => {
                self.client.space_delete(&space).await?;
                self.show(&json!({ "id": space, "deleted": true }), |_| {
                    format!("Deleted space {space}\n")
                })
            }
        }
    }
}

fn create_input(a: SpaceCreateArgs) -> SpaceCreate {
    SpaceCreate {
        slug: a.slug,
        name: a.name,
        parent: a.parent,
        inherit: a.inherit,
        description: a.description,
    }
}
