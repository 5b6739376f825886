//! What each subcommand does: resolve the credential, call the client, print the result
//! as a table or as JSON. Long-running commands (`--wait`, `--follow`) live in `run`
//! (`drift check --wait` reuses them).

mod apikey;
mod audit;
mod context;
mod drift;
mod integration;
mod login;
mod notification;
mod org;
mod policy;
mod role;
mod run;
mod space;
mod sso;
mod stack;
mod state;
mod team;
mod user;

use std::path::PathBuf;

use anyhow::{Context as _, Result, anyhow, bail};
use serde::Serialize;
use terraplane_client::{Client, ClientError, LoginResult};

use crate::cli::{Cli, Command, OutputFormat, PolicyCommand};
use crate::{Context, config};

/// Consecutive transport failures a polling loop rides out before giving up.
const MAX_POLL_RETRIES: u32 = 5;

pub async fn dispatch(cli: Cli, ctx: &mut Context<'_>) -> Result<()> {
    dispatch_command(cli, ctx).await.map_err(session_ended)
}

async fn dispatch_command(cli: Cli, ctx: &mut Context<'_>) -> Result<()> {
    let Cli {
        endpoint,
        token,
        org,
        output,
        command,
    } = cli;
    let org = config::org(org, ctx.env);
    if let Command::Login(args) = command {
        return login::login(args, endpoint, token, org, output, ctx).await;
    }
    if let Command::Logout = command {
        return login::logout(endpoint, output, ctx).await;
    }
    // Evaluates locally: no server, no credential.
    if let Command::Policy(PolicyCommand::Test(args)) = command {
        return policy::test(args, output, ctx);
    }
    let settings = config::resolve(endpoint, token, ctx.env)?;
    let endpoint = settings.endpoint.ok_or_else(|| {
        anyhow!("no endpoint: pass --endpoint URL, set TPCTL_ENDPOINT, or run `tpctl login --endpoint URL`")
    })?;
    let token = settings
        .token
        .ok_or_else(|| anyhow!("not logged in to {endpoint}: run `tpctl login`, or pass --token / set TPCTL_TOKEN"))?;
    let client = client_for(&endpoint, token, settings.refresh_token, settings.config_path)?;
    if let Some(org) = &org {
        check_org(&client, org).await?;
    }
    let mut app = App {
        client,
        org,
        format: output,
        ctx,
    };
    match command {
        Command::Login(_) | Command::Logout => Ok(()),
        Command::Whoami => app.whoami().await,
        Command::Stack(c) => app.stack(c).await,
        Command::Run(c) => app.run(c).await,
        Command::State(c) => app.state(c).await,
        Command::Org(c) => app.org(c).await,
        Command::Space(c) => app.space(c).await,
        Command::User(c) => app.user(c).await,
        Command::Team(c) => app.team(c).await,
        Command::Role(c) => app.role(c).await,
        Command::ApiKey(c) => app.api_key(c).await,
        Command::Audit(c) => app.audit(c).await,
        Command::Context(c) => app.context(c).await,
        Command::Integration(c) => app.integration(c).await,
        Command::Drift(c) => app.drift(c).await,
        Command::Notification(c) => app.notification(c).await,
        Command::Policy(c) => app.policy(c).await,
    }
}

/// The client for `token`. With the config file's refresh token (`token` being the file's
/// own session token), an expired access token is renewed once per request: the client
/// calls `refresh`, the rotated pair replaces the old one in the file, and the request is
/// retried (see `Client::with_session`). Every command gets this from here, never by itself.
pub(crate) fn client_for(
    endpoint: &str,
    token: String,
    refresh_token: Option<String>,
    config_path: Option<PathBuf>,
) -> Result<Client> {
    let client = Client::new(endpoint, Some(token))?;
    let (Some(refresh_token), Some(path)) = (refresh_token, config_path) else {
        return Ok(client);
    };
    let endpoint = endpoint.to_owned();
    Ok(client.with_session(refresh_token, move |r: &LoginResult| {
        let refresh = r.refresh_token.as_deref().unwrap_or_default();
        config::save_renewed(&path, &endpoint, &r.token, refresh)
            .map(drop)
            .map_err(|e| e.to_string())
    }))
}

/// A session that could not be renewed needs a new login, whatever the command was.
fn session_ended(e: anyhow::Error) -> anyhow::Error {
    let msg = e.chain().find_map(|c| match c.downcast_ref::<ClientError>()? {
        ClientError::SessionRenewal { source } => Some(format!(
            "the login session expired and could not be renewed ({source}): run `tpctl login` again"
        )),
        ClientError::SessionSave(why) => Some(format!(
            "the login session was renewed but the new tokens could not be saved ({why}): run `tpctl login` again"
        )),
        _ => None,
    });
    match msg {
        Some(m) => anyhow!(m),
        None => e,
    }
}

/// A session token or API key works in one organization only; asking for another one
/// through `--org` needs a new login, not a silent fallback to the token's organization.
async fn check_org(client: &Client, org: &str) -> Result<()> {
    let me = client.me().await?;
    let current = me.organization.slug;
    if current != org {
        bail!(
            "the credential belongs to organization {current}, not {org}; tokens are per-organization: \
             run `tpctl login --org {org}` (or use an API key of {org})"
        );
    }
    Ok(())
}

/// A command in progress: the client, the output format and where to write.
pub(crate) struct App<'c, 'a> {
    client: Client,
    /// The organization `--org` asked for, already checked against the credential.
    org: Option<String>,
    format: OutputFormat,
    ctx: &'c mut Context<'a>,
}

impl App<'_, '_> {
    fn json_mode(&self) -> bool {
        self.format == OutputFormat::Json
    }

    /// The command's result on stdout.
    fn out(&mut self, s: &str) -> Result<()> {
        self.ctx.out.write_all(s.as_bytes()).context("cannot write to stdout")
    }

    fn out_bytes(&mut self, b: &[u8]) -> Result<()> {
        self.ctx.out.write_all(b).context("cannot write to stdout")
    }

    fn flush(&mut self) -> Result<()> {
        self.ctx.out.flush().context("cannot write to stdout")
    }

    /// Progress and remarks: stdout for people, stderr when stdout carries JSON.
    fn note(&mut self, s: &str) -> Result<()> {
        if self.json_mode() {
            self.ctx.err.write_all(s.as_bytes()).context("cannot write to stderr")
        } else {
            self.out(s)
        }
    }

    /// Always stderr (e.g. "no stacks" stays out of pipelines).
    fn remark(&mut self, s: &str) -> Result<()> {
        self.ctx.err.write_all(s.as_bytes()).context("cannot write to stderr")
    }

    fn json<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<()> {
        let mut s = serde_json::to_string_pretty(v).context("cannot encode JSON")?;
        s.push('\n');
        self.out(&s)
    }

    /// `v` as JSON, or as `human` renders it.
    fn show<T: Serialize + ?Sized>(&mut self, v: &T, human: impl FnOnce(&T) -> String) -> Result<()> {
        if self.json_mode() {
            self.json(v)
        } else {
            self.out(&human(v))
        }
    }

    async fn whoami(&mut self) -> Result<()> {
        let me = self.client.me().await?;
        let endpoint = self.client.endpoint().trim_end_matches('/').to_owned();
        self.show(&me, |m| crate::output::viewer(m, &endpoint))
    }

    async fn pause(&self) {
        tokio::time::sleep(self.ctx.poll_interval).await;
    }
}

/// Worth retrying in a polling loop: the server may be restarting.
fn transient(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Transport(_) | ClientError::Http { status: 502..=504, .. }
    )
}
