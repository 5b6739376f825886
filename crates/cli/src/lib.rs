//! `tpctl`, the command-line client of Terraplane. `main.rs` only calls [`main_entry`];
//! everything else is here so tests drive the same code with their own environment,
//! output buffers and server.

mod cli;
mod commands;
pub mod config;
pub mod output;
pub mod time;

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use terraplane_client::ClientError;

pub use cli::{
    ApiKeyCommand, ApiKeyCreateArgs, ApiKeyKindArg, AuditCommand, AuditListArgs, AwsIntegrationCommand,
    AwsIntegrationCreateArgs, Cli, Command, ContextCommand, ContextCreateArgs, DriftCommand, DriftReactionArg,
    DriftScheduleArgs, IntegrationCommand, KeyRole, LoginArgs, MemberRoleArgs, NotificationCommand,
    NotificationEndpointCommand, NotificationEndpointCreateArgs, NotificationEventArg, NotificationKindArg, OrgCommand,
    OutputFormat, PolicyCommand, PolicyCreateArgs, PolicyTestArgs, PolicyTypeArg, PolicyUpdateArgs, ReviewDecisionArgs,
    RoleCommand, RunCommand, SpaceCommand, SpaceCreateArgs, SpaceRole, StackCommand, StackCreateArgs, StackEnvArgs,
    StackEnvCommand, StateCommand, SubjectArgs, TeamCommand, UserCommand, UserCreateArgs, VariableArgs,
    VariableKindArg,
};
pub use config::EnvLookup;

/// How often `--wait` and `--follow` ask the server.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// How long `login --sso` waits for the browser to come back.
pub const SSO_TIMEOUT: Duration = Duration::from_secs(300);

tokio::task_local! {
    static SSO_TIMEOUT_OVERRIDE: Duration;
}

/// Runs `f` with `login --sso` waiting `timeout` for the browser instead of
/// [`SSO_TIMEOUT`]; for tests.
#[doc(hidden)]
pub async fn with_sso_timeout<F: Future>(timeout: Duration, f: F) -> F::Output {
    SSO_TIMEOUT_OVERRIDE.scope(timeout, f).await
}

fn sso_timeout() -> Duration {
    SSO_TIMEOUT_OVERRIDE.try_with(|d| *d).unwrap_or(SSO_TIMEOUT)
}

/// What a command talks to besides the server.
pub struct Context<'a> {
    pub env: EnvLookup<'a>,
    pub out: &'a mut dyn Write,
    pub err: &'a mut dyn Write,
    pub poll_interval: Duration,
}

/// Runs one parsed command line.
pub async fn run(cli: Cli, ctx: &mut Context<'_>) -> anyhow::Result<()> {
    commands::dispatch(cli, ctx).await
}

/// The binary: parse (clap exits 2 on usage errors), run, report `error: …` and exit 1 on
/// failure.
pub fn main_entry() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr();
    let mut ctx = Context {
        env: &env,
        out: &mut out,
        err: &mut err,
        poll_interval: POLL_INTERVAL,
    };
    let result = rt.block_on(run(cli, &mut ctx));
    let _ = out.flush();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `tpctl run logs X | head` is not an error.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_message(&e));
            ExitCode::FAILURE
        }
    }
}

/// The message `main_entry` prints after `error: `.
pub fn error_message(e: &anyhow::Error) -> String {
    let mut msg = format!("{e:#}");
    if e.chain().any(|c| {
        c.downcast_ref::<ClientError>()
            .is_some_and(ClientError::is_unauthenticated)
    }) {
        msg.push_str(" (log in with `tpctl login`, or pass --token / set TPCTL_TOKEN)");
    }
    msg
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
