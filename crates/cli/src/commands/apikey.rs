//! `tpctl apikey …`. A new key's secret is printed once and never again: the server keeps
//! only its hash.

use anyhow::Result;
use chrono::Utc;
use terraplane_client::{ApiKeyCreate, ApiKeyKind};

use super::App;
use crate::cli::{ApiKeyCommand, ApiKeyCreateArgs, ApiKeyKindArg};
use crate::output;

impl App<'_, '_> {
    pub(super) async fn api_key(&mut self, cmd: ApiKeyCommand) -> Result<()> {
        let now = Utc::now();
        match cmd {
            ApiKeyCommand::Create(a) => {
                let created = self.client.api_key_create(&create_input(a)).await?;
                if self.json_mode() {
                    self.json(&created)?;
                    self.remark("The secret is shown only this once; store it now.\n")
                } else {
                    self.out(&output::api_key_created(&created, now))
                }
            }
            ApiKeyCommand::List => {
                let keys = self.client.api_keys().await?;
                if keys.is_empty() && !self.json_mode() {
                    return self.remark("No API keys.\n");
                }
                self.show(&keys, |k| output::api_keys_table(k, now))
            }
            ApiKeyCommand::Revoke { id } => {
                let k = self.client.api_key_revoke(&id).await?;
                self.show(&k, |k| format!("Revoked API key {} ({})\n", k.id, k.name))
            }
        }
    }
}

fn create_input(a: ApiKeyCreateArgs) -> ApiKeyCreate {
    ApiKeyCreate {
        name: a.name,
        kind: a.kind.map(|k| match k {
            ApiKeyKindArg::Personal => ApiKeyKind::Personal,
            ApiKeyKindArg::Service => ApiKeyKind::Service,
        }),
        role: a.role.map(|r| r.as_str().to_owned()),
        space: a.space,
        expires_in_days: a.expires_in_days,
    }
}
