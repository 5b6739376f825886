//! The command line as clap sees it: every flag and subcommand of `tpctl`, nothing else.
//! Endpoint, token and organization env variables are resolved in `config`, not by clap,
//! so tests can inject them.

use std::path::PathBuf;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};

use crate::time::{TIME_HELP, TimeArg};

#[derive(Debug, Parser)]
#[command(
    name = "tpctl",
    version,
    about = "Command-line client of Terraplane",
    propagate_version = true
)]
pub struct Cli {
    /// Base URL of the Terraplane server [env: TPCTL_ENDPOINT; default: the one `login` saved]
    #[arg(long, global = true, value_name = "URL")]
    pub endpoint: Option<String>,
    /// Session token or API key [env: TPCTL_TOKEN; default: the one `login` saved]
    #[arg(long, global = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// Organization to work in: `login` logs in to it; other commands check that the
    /// credential belongs to it (tokens are per-organization) [env: TPCTL_ORG]
    #[arg(long, global = true, value_name = "ORG")]
    pub org: Option<String>,
    /// Output format
    #[arg(short, long, global = true, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Aligned columns for people
    #[default]
    Table,
    /// The API's JSON objects
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Log in with email and password, or in the browser with --sso (or store an API key
    /// given with --token), and save the credential to the config file ($TPCTL_CONFIG or
    /// ~/.config/tpctl/config.json)
    Login(LoginArgs),
    /// End the saved login session on the server and remove its tokens from the config
    /// file (a saved API key is only forgotten locally; the endpoint stays)
    Logout,
    /// Show who the credential belongs to
    Whoami,
    /// Manage stacks
    #[command(subcommand)]
    Stack(StackCommand),
    /// Trigger, follow and decide runs
    #[command(subcommand)]
    Run(RunCommand),
    /// Read a stack's Terraform state
    #[command(subcommand)]
    State(StateCommand),
    /// Create and list organizations
    #[command(subcommand)]
    Org(OrgCommand),
    /// Manage spaces, the tree stacks live in and roles are granted on
    #[command(subcommand)]
    Space(SpaceCommand),
    /// Manage the organization's members and their roles
    #[command(subcommand)]
    User(UserCommand),
    /// Manage teams
    #[command(subcommand)]
    Team(TeamCommand),
    /// Grant, revoke and list roles on spaces
    #[command(subcommand)]
    Role(RoleCommand),
    /// Create, list and revoke API keys
    #[command(subcommand, name = "apikey", alias = "api-key")]
    ApiKey(ApiKeyCommand),
    /// Read and verify the organization's audit trail (owners)
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Manage contexts: sets of variables and files that stacks share by attaching them
    #[command(subcommand)]
    Context(ContextCommand),
    /// Manage cloud integrations: credentials runs get without stored secrets
    #[command(subcommand)]
    Integration(IntegrationCommand),
    /// Check stacks for drift now or on a schedule, and list what drifted
    #[command(subcommand)]
    Drift(DriftCommand),
    /// Send run, drift and policy events to webhooks, Slack, PagerDuty or Microsoft Teams
    #[command(subcommand)]
    Notification(NotificationCommand),
    /// Write, test and attach Rego policies that decide on plans, approvals, triggers,
    /// pushes, notifications and logins
    #[command(subcommand)]
    Policy(PolicyCommand),
}

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// Account email (prompted for when stdin is a terminal)
    #[arg(long)]
    pub email: Option<String>,
    /// Password (prompted for when stdin is a terminal); prefer --password-stdin in scripts
    #[arg(long, conflicts_with = "password_stdin")]
    pub password: Option<String>,
    /// Read the password from stdin
    #[arg(long)]
    pub password_stdin: bool,
    /// Sign in in the browser through the server's single sign-on (OpenID Connect): prints
    /// a URL to open, then waits for the browser to come back to a local port. Logs in to
    /// the organization the server's single sign-on is configured for
    #[arg(long, conflicts_with_all = ["email", "password", "password_stdin", "token"])]
    pub sso: bool,
    /// With --sso: sign in with GitHub instead of OpenID Connect
    #[arg(long, requires = "sso")]
    pub github: bool,
}

#[derive(Debug, Subcommand)]
pub enum StackCommand {
    /// Create a stack
    Create(StackCreateArgs),
    /// List the organization's stacks
    List,
    /// Show a stack with its locks
    Show {
        #[arg(value_name = "STACK")]
        stack: String,
    },
    /// Lock a stack so only you can trigger runs on it
    Lock {
        #[arg(value_name = "STACK")]
        stack: String,
        /// Why it is locked
        #[arg(long)]
        note: Option<String>,
    },
    /// Release a stack lock
    Unlock {
        #[arg(value_name = "STACK")]
        stack: String,
        /// Release a lock somebody else holds (admin)
        #[arg(long)]
        force: bool,
    },
    /// Delete a stack
    Delete {
        #[arg(value_name = "STACK")]
        stack: String,
    },
    /// Set, unset and list a stack's variables; `stack env STACK` lists the effective set
    Env(StackEnvArgs),
    /// Show a stack's drift: its status, what a check that finds drift does, the last
    /// check, and the resources and attributes that drifted
    Drift {
        #[arg(value_name = "STACK")]
        stack: String,
    },
}

// `stack env STACK` is short for `stack env list STACK`: the optional positional and the
// subcommands exclude each other.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, arg_required_else_help = true)]
pub struct StackEnvArgs {
    #[command(subcommand)]
    pub command: Option<StackEnvCommand>,
    /// The stack whose effective variables to list
    #[arg(value_name = "STACK")]
    pub stack: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum StackEnvCommand {
    /// Set one of the stack's own variables (they win over every context's)
    Set {
        #[arg(value_name = "STACK")]
        stack: String,
        #[command(flatten)]
        variable: VariableArgs,
    },
    /// Remove one of the stack's own variables
    Unset {
        #[arg(value_name = "STACK")]
        stack: String,
        /// The variable's name (a file's path)
        #[arg(value_name = "KEY")]
        key: String,
    },
    /// List the variables the stack's runs get: its own and its contexts', after precedence
    List {
        #[arg(value_name = "STACK")]
        stack: String,
    },
}

/// A variable to set: `KEY VALUE` and how runs get it.
#[derive(Debug, Args)]
pub struct VariableArgs {
    /// Environment variable name; with --type terraform the Terraform variable's name,
    /// with --type file the file's path relative to the project root
    #[arg(value_name = "KEY")]
    pub key: String,
    /// The value; `-` reads it from stdin (keeps secrets out of shell history; a value
    /// starting with `-` goes after `--`)
    #[arg(value_name = "VALUE")]
    pub value: String,
    /// Write-only: the value is never shown again, only its checksum
    #[arg(long)]
    pub secret: bool,
    /// What the value becomes in a run
    #[arg(long = "type", value_name = "TYPE", value_enum, default_value_t = VariableKindArg::Env)]
    pub kind: VariableKindArg,
    /// Give the value to the apply phase only, not to plans
    #[arg(long)]
    pub apply_only: bool,
}

/// What a variable becomes in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VariableKindArg {
    /// An environment variable
    Env,
    /// A Terraform input variable
    Terraform,
    /// A file in the workspace
    File,
}

#[derive(Debug, Subcommand)]
pub enum ContextCommand {
    /// Create a context
    Create(ContextCreateArgs),
    /// Set a variable or file of a context
    Set {
        #[arg(value_name = "CONTEXT")]
        context: String,
        #[command(flatten)]
        variable: VariableArgs,
    },
    /// Remove a variable or file from a context
    Unset {
        #[arg(value_name = "CONTEXT")]
        context: String,
        /// The variable's name (a file's path)
        #[arg(value_name = "KEY")]
        key: String,
    },
    /// List the contexts you can see
    List,
    /// Show a context with its variables (secrets masked) and the stacks it is attached to
    Show {
        #[arg(value_name = "CONTEXT")]
        context: String,
    },
    /// Attach a context to a stack
    Attach {
        #[arg(value_name = "CONTEXT")]
        context: String,
        #[arg(value_name = "STACK")]
        stack: String,
        /// Of two attached contexts setting the same variable, the lower number wins (0 beats
        /// 1); the stack's own values beat every context's
        #[arg(long, value_name = "N", default_value_t = 0, allow_negative_numbers = true)]
        priority: i32,
    },
    /// Detach a context from a stack
    Detach {
        #[arg(value_name = "CONTEXT")]
        context: String,
        #[arg(value_name = "STACK")]
        stack: String,
    },
    /// Delete a context
    Delete {
        #[arg(value_name = "CONTEXT")]
        context: String,
    },
}

#[derive(Debug, Args)]
pub struct ContextCreateArgs {
    /// Display name
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Context id (default: derived from the name)
    #[arg(long)]
    pub id: Option<String>,
    /// Label (repeatable); `autoattach:L` attaches the context to every stack labelled L
    /// (`autoattach:*` to every stack)
    #[arg(long = "label", value_name = "LABEL")]
    pub labels: Vec<String>,
    #[arg(long)]
    pub description: Option<String>,
    /// Space the context lives in (default: the root space)
    #[arg(long, value_name = "SPACE")]
    pub space: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum IntegrationCommand {
    /// AWS: runs assume an IAM role with their identity token
    #[command(subcommand)]
    Aws(AwsIntegrationCommand),
}

#[derive(Debug, Subcommand)]
pub enum AwsIntegrationCommand {
    /// Create an AWS integration
    Create(AwsIntegrationCreateArgs),
    /// List the AWS integrations you can see
    List,
    /// Make a stack's runs use an integration (replacing the stack's current one)
    Attach {
        #[arg(value_name = "INTEGRATION")]
        integration: String,
        #[arg(value_name = "STACK")]
        stack: String,
    },
    /// Detach a stack's AWS integration
    Detach {
        #[arg(value_name = "STACK")]
        stack: String,
    },
    /// Delete an AWS integration
    Delete {
        #[arg(value_name = "INTEGRATION")]
        integration: String,
    },
}

#[derive(Debug, Args)]
pub struct AwsIntegrationCreateArgs {
    /// Display name
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The IAM role runs assume
    #[arg(long, value_name = "ARN")]
    pub role_arn: String,
    /// A role for plans (read-only work) [default: --role-arn]
    #[arg(long, value_name = "ARN")]
    pub read_role_arn: Option<String>,
    /// Audience of the identity token [default: the server's]
    #[arg(long, value_name = "AUD")]
    pub audience: Option<String>,
    /// Lifetime of the role session in seconds (900-43200) [default: the server's]
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(i32).range(900..=43200))]
    pub duration: Option<i32>,
    /// Space the integration lives in (default: the root space)
    #[arg(long, value_name = "SPACE")]
    pub space: Option<String>,
    /// Integration id (default: derived from the name)
    #[arg(long)]
    pub id: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum DriftCommand {
    /// Check a stack for drift now: a proposed, refresh-only run whose plan is the drift
    Check {
        #[arg(value_name = "STACK")]
        stack: String,
        /// Follow the check until it ends and say whether it found drift; exit 1 unless it
        /// finishes
        #[arg(long)]
        wait: bool,
    },
    /// Check a stack for drift on a schedule (admin)
    Schedule(DriftScheduleArgs),
    /// List a stack's drift-check schedules
    Schedules {
        #[arg(value_name = "STACK")]
        stack: String,
    },
    /// Delete a drift-check schedule (admin)
    Unschedule {
        #[arg(value_name = "ID")]
        id: String,
    },
    /// The drift inbox: open drift across the organization, newest first
    List {
        /// Also drift that has been resolved
        #[arg(long)]
        all: bool,
    },
}

#[derive(Debug, Args)]
pub struct DriftScheduleArgs {
    #[arg(value_name = "STACK")]
    pub stack: String,
    /// When to check, quoted: 5 fields (minute hour day-of-month month day-of-week), or 6
    /// with seconds first, e.g. --cron '0 */6 * * *'
    #[arg(long, value_name = "EXPR")]
    pub cron: String,
    /// Time zone the cron expression is read in: an IANA name such as Europe/Berlin
    #[arg(long = "tz", alias = "timezone", value_name = "ZONE", default_value = "UTC")]
    pub timezone: String,
    /// Also set what a check that finds drift does [default: keep the stack's]
    #[arg(long, value_enum)]
    pub reaction: Option<DriftReactionArg>,
}

/// What a drift check that finds drift does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DriftReactionArg {
    /// Record the drift and notify
    Alert,
    /// Also trigger a tracked run that converges (it waits for confirmation unless the
    /// stack deploys automatically)
    Reconcile,
}

#[derive(Debug, Subcommand)]
pub enum NotificationCommand {
    /// Create, list and delete notification endpoints
    #[command(subcommand)]
    Endpoint(NotificationEndpointCommand),
    /// List the latest deliveries, newest first, with their attempts and last error
    Deliveries {
        /// Only this endpoint's, by id (`--endpoint` is the server's URL)
        #[arg(value_name = "ENDPOINT")]
        endpoint_id: Option<String>,
        /// At most N deliveries [default: the server's, 50]
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        limit: Option<u32>,
    },
}

#[derive(Debug, Subcommand)]
pub enum NotificationEndpointCommand {
    /// Create a notification endpoint
    Create(NotificationEndpointCreateArgs),
    /// List the notification endpoints you can see
    List,
    /// Delete a notification endpoint
    Delete {
        #[arg(value_name = "ID")]
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct NotificationEndpointCreateArgs {
    /// Display name
    #[arg(value_name = "NAME")]
    pub name: String,
    /// What receives the notifications
    #[arg(long, value_enum)]
    pub kind: NotificationKindArg,
    /// Where to send them: the webhook's URL, or the Slack or Teams incoming webhook's
    #[arg(long, value_name = "URL")]
    pub url: String,
    /// Write-only: a webhook's HMAC signing key, or a PagerDuty routing key; `-` reads it
    /// from stdin (keeps it out of shell history)
    #[arg(long, value_name = "VALUE")]
    pub secret: Option<String>,
    /// An event to send, e.g. drift-detected (or drift_detected); repeatable or
    /// comma-separated, at least one
    #[arg(
        long = "event",
        value_name = "EVENT",
        value_enum,
        required = true,
        value_delimiter = ',',
        ignore_case = true
    )]
    pub events: Vec<NotificationEventArg>,
    /// Only for stacks with this label (repeatable) [default: every stack]
    #[arg(long = "label", value_name = "LABEL")]
    pub labels: Vec<String>,
    /// Space the endpoint lives in; it hears about the stacks of that space and its
    /// sub-spaces (default: the root space)
    #[arg(long, value_name = "SPACE")]
    pub space: Option<String>,
    /// Endpoint id (default: derived from the name)
    #[arg(long)]
    pub id: Option<String>,
}

/// What receives notifications.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum NotificationKindArg {
    /// A JSON POST, signed with HMAC-SHA256 when it has a secret
    Webhook,
    /// A Slack incoming webhook
    Slack,
    /// PagerDuty Events v2 (the secret is the routing key)
    Pagerduty,
    /// A Microsoft Teams incoming webhook
    Teams,
}

/// An event a notification endpoint subscribes to; `_` works as well as `-`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum NotificationEventArg {
    /// A tracked run's plan waits for confirmation
    #[value(alias = "run_needs_confirmation")]
    RunNeedsConfirmation,
    /// A run waits for review
    #[value(alias = "run_pending_review")]
    RunPendingReview,
    /// A run failed
    #[value(alias = "run_failed")]
    RunFailed,
    /// A run finished
    #[value(alias = "run_finished")]
    RunFinished,
    /// A drift check found drift
    #[value(alias = "drift_detected")]
    DriftDetected,
    /// A drift check found a drifted stack in sync again
    #[value(alias = "drift_resolved")]
    DriftResolved,
    /// A policy denied a run
    #[value(alias = "policy_denied")]
    PolicyDenied,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Create a policy from a Rego file (`package spacelift`, v0 or v1 syntax)
    Create(PolicyCreateArgs),
    /// Change a policy; a new body or new labels make a new version
    Update(PolicyUpdateArgs),
    /// List the policies you can see
    List,
    /// Show a policy with its versions, the stacks it is attached to and its latest
    /// evaluations (`-o json` includes the Rego source)
    Show {
        #[arg(value_name = "POLICY")]
        policy: String,
    },
    /// Delete a policy
    Delete {
        #[arg(value_name = "POLICY")]
        policy: String,
    },
    /// Attach a policy to a stack (admin on the stack); `autoattach:L` labels attach it to
    /// every stack labelled L without this
    Attach {
        #[arg(value_name = "POLICY")]
        policy: String,
        #[arg(value_name = "STACK")]
        stack: String,
    },
    /// Detach a policy from a stack
    Detach {
        #[arg(value_name = "POLICY")]
        policy: String,
        #[arg(value_name = "STACK")]
        stack: String,
    },
    /// Evaluate a Rego file on an input document here, with the server's engine (no server
    /// needed)
    ///
    /// Prints each rule's value, the messages (`deny: …`, `warn: …`) and the verdict, under the
    /// server's default limits (2 seconds, 256 MiB). Exits 0 whatever the verdict; 1 when the
    /// file does not compile (with its line and column), the input is not JSON, or the
    /// evaluation fails or exceeds its limits
    Test(PolicyTestArgs),
    /// Judge a run's recorded input with the policy as it is now (nothing is stored)
    ///
    /// Uses the input the run gave policies of this policy's type: how a change to the policy
    /// would have decided that run
    Simulate {
        #[arg(value_name = "POLICY")]
        policy: String,
        /// The run whose recorded input to use
        #[arg(long, value_name = "RUN")]
        run: String,
    },
}

#[derive(Debug, Args)]
pub struct PolicyCreateArgs {
    /// Display name
    #[arg(value_name = "NAME")]
    pub name: String,
    /// What the policy decides
    #[arg(long = "type", value_name = "TYPE", value_enum, ignore_case = true)]
    pub policy_type: PolicyTypeArg,
    /// The Rego source; `-` reads it from stdin
    #[arg(long, value_name = "FILE")]
    pub file: PathBuf,
    /// Label (repeatable); `autoattach:L` attaches the policy to every stack labelled L
    /// (`autoattach:*` to every stack)
    #[arg(long = "label", value_name = "LABEL")]
    pub labels: Vec<String>,
    /// Policy id (default: derived from the name)
    #[arg(long)]
    pub id: Option<String>,
    /// Space the policy lives in; stacks of that space and of the spaces inheriting from it
    /// can use it (default: the root space)
    #[arg(long, value_name = "SPACE")]
    pub space: Option<String>,
    #[arg(long)]
    pub description: Option<String>,
}

#[derive(Debug, Args)]
#[command(group(
    ArgGroup::new("change")
        .required(true)
        .multiple(true)
        .args(["file", "labels", "clear_labels", "name", "description"])
))]
pub struct PolicyUpdateArgs {
    #[arg(value_name = "POLICY")]
    pub policy: String,
    /// New Rego source; `-` reads it from stdin
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Label (repeatable); the labels given replace all of the policy's labels
    #[arg(long = "label", value_name = "LABEL")]
    pub labels: Vec<String>,
    /// Remove all of the policy's labels
    #[arg(long, conflicts_with = "labels")]
    pub clear_labels: bool,
    /// New display name
    #[arg(long)]
    pub name: Option<String>,
    #[arg(long)]
    pub description: Option<String>,
}

#[derive(Debug, Args)]
pub struct PolicyTestArgs {
    /// The Rego file to evaluate
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The input document, as JSON (what the policy reads as `input`); `-` reads it from
    /// stdin
    #[arg(long, value_name = "INPUT.json")]
    pub input: PathBuf,
    /// Which rules to read and how to decide
    #[arg(
        long = "type",
        value_name = "TYPE",
        value_enum,
        ignore_case = true,
        default_value_t = PolicyTypeArg::Plan
    )]
    pub policy_type: PolicyTypeArg,
}

/// What a policy decides; `PLAN` works as well as `plan`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PolicyTypeArg {
    /// After a plan: `deny` fails the run, `warn` asks for a human
    Plan,
    /// Whether a run may proceed: `approve` / `reject`
    Approval,
    /// The stacks to run after a tracked run finishes: `trigger`
    Trigger,
    /// How a push is handled: `track`, `propose`, `ignore`, …
    Push,
    /// Where notifications go: `inbox`, `slack`, `webhook`
    Notification,
    /// Who may log in and with what access: `allow`, `admin`, `deny`, `roles`
    Login,
}

#[derive(Debug, Args)]
pub struct StackCreateArgs {
    /// Display name
    #[arg(long)]
    pub name: String,
    /// Stack id (default: derived from the name)
    #[arg(long)]
    pub slug: Option<String>,
    /// Git repository URL
    #[arg(long, value_name = "URL")]
    pub repository: String,
    /// Tracked branch (default: the server's)
    #[arg(long)]
    pub branch: Option<String>,
    /// Directory of the Terraform root module inside the repository
    #[arg(long, value_name = "PATH")]
    pub project_root: Option<String>,
    #[arg(long)]
    pub description: Option<String>,
    /// terraform or opentofu
    #[arg(long)]
    pub tool: Option<String>,
    /// Version constraint of the tool
    #[arg(long, value_name = "VERSION")]
    pub tool_version: Option<String>,
    /// Apply tracked runs without waiting for confirmation
    #[arg(long)]
    pub autodeploy: bool,
    /// Label (repeatable)
    #[arg(long = "label", value_name = "LABEL")]
    pub labels: Vec<String>,
    /// Worker pool that runs the stack
    #[arg(long, value_name = "POOL")]
    pub worker_pool: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// Trigger a tracked run (or a proposed, plan-only one)
    Trigger {
        #[arg(value_name = "STACK")]
        stack: String,
        /// Plan only
        #[arg(long)]
        proposed: bool,
        /// Commit to run (default: the branch's head)
        #[arg(long, value_name = "SHA")]
        commit: Option<String>,
        /// Follow the run until it needs a decision (confirmation or review) or ends; exit 1
        /// unless it succeeds
        #[arg(long)]
        wait: bool,
    },
    /// List a stack's latest runs
    List {
        #[arg(value_name = "STACK")]
        stack: String,
        /// How many runs
        #[arg(long, default_value_t = 20)]
        limit: u64,
    },
    /// Show a run with its state changes
    Show {
        #[arg(value_name = "RUN")]
        run: String,
    },
    /// Print a run's logs
    Logs {
        #[arg(value_name = "RUN")]
        run: String,
        /// Keep printing new logs until the run ends
        #[arg(short, long)]
        follow: bool,
    },
    /// Apply an unconfirmed run's plan
    Confirm {
        #[arg(value_name = "RUN")]
        run: String,
    },
    /// Throw away an unconfirmed run's plan, or a run waiting for review
    Discard {
        #[arg(value_name = "RUN")]
        run: String,
    },
    /// Cancel a run that has not started applying
    Cancel {
        #[arg(value_name = "RUN")]
        run: String,
    },
    /// Approve or reject a run (QUEUED, PENDING_REVIEW or UNCONFIRMED); its approval
    /// policies decide whose reviews count
    Review {
        #[arg(value_name = "RUN")]
        run: String,
        #[command(flatten)]
        decision: ReviewDecisionArgs,
        /// Why, kept with the review
        #[arg(long)]
        note: Option<String>,
    },
}

/// Exactly one review decision.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct ReviewDecisionArgs {
    /// Approve the run
    #[arg(long)]
    pub approve: bool,
    /// Reject the run
    #[arg(long)]
    pub reject: bool,
}

#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// List a stack's state versions
    Versions {
        #[arg(value_name = "STACK")]
        stack: String,
    },
    /// Write a stack's raw state to stdout
    Pull {
        #[arg(value_name = "STACK")]
        stack: String,
        /// A past version instead of the current one
        #[arg(long, value_name = "N")]
        serial: Option<i64>,
    },
    /// Release a stack's Terraform state lock whoever holds it (admin)
    Unlock {
        #[arg(value_name = "STACK")]
        stack: String,
        /// Required: releasing a lock a run still holds can corrupt the state
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum OrgCommand {
    /// Create an organization (instance administrators); you become its owner
    Create {
        #[arg(value_name = "SLUG")]
        slug: String,
        /// Display name (default: the slug)
        #[arg(long)]
        name: Option<String>,
    },
    /// List your organizations (all of them for instance administrators)
    List,
}

#[derive(Debug, Subcommand)]
pub enum SpaceCommand {
    /// Create a space (admin on the parent)
    Create(SpaceCreateArgs),
    /// List the spaces you can see
    List,
    /// Delete an empty space (admin on its parent)
    Delete {
        #[arg(value_name = "SPACE")]
        space: String,
    },
}

#[derive(Debug, Args)]
pub struct SpaceCreateArgs {
    #[arg(value_name = "SLUG")]
    pub slug: String,
    /// Parent space (default: the root space)
    #[arg(long, value_name = "SPACE")]
    pub parent: Option<String>,
    /// Let roles granted on the parent apply in this space too
    #[arg(long)]
    pub inherit: bool,
    /// Display name (default: the slug)
    #[arg(long)]
    pub name: Option<String>,
    #[arg(long)]
    pub description: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a user to the organization (owners), creating the account when it is new
    Create(UserCreateArgs),
    /// List the organization's members
    List,
    /// Make a member an owner of the organization, or an owner a plain member (owners; the
    /// last owner cannot be demoted)
    SetRole {
        #[arg(value_name = "EMAIL")]
        email: String,
        #[command(flatten)]
        role: MemberRoleArgs,
    },
    /// Remove a member from the organization with their team memberships, role bindings and
    /// sessions (owners; the last owner cannot be removed)
    Remove {
        #[arg(value_name = "EMAIL")]
        email: String,
    },
}

/// Exactly one organization role.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct MemberRoleArgs {
    /// Make the user an owner of the organization
    #[arg(long)]
    pub owner: bool,
    /// Make the user a plain member (their space roles stay)
    #[arg(long)]
    pub member: bool,
}

#[derive(Debug, Args)]
pub struct UserCreateArgs {
    #[arg(value_name = "EMAIL")]
    pub email: String,
    /// Display name of a new account
    #[arg(long)]
    pub name: Option<String>,
    /// Read a new account's password from stdin (without one it cannot log in with a
    /// password)
    #[arg(long)]
    pub password_stdin: bool,
    /// Make the user an owner of the organization
    #[arg(long)]
    pub owner: bool,
}

#[derive(Debug, Subcommand)]
pub enum TeamCommand {
    /// Create a team (owners)
    Create {
        #[arg(value_name = "SLUG")]
        slug: String,
        /// Display name (default: the slug)
        #[arg(long)]
        name: Option<String>,
    },
    /// Add a member of the organization to a team
    AddMember {
        #[arg(value_name = "TEAM")]
        team: String,
        #[arg(value_name = "EMAIL")]
        email: String,
    },
    /// List teams with their members
    List,
}

#[derive(Debug, Subcommand)]
pub enum RoleCommand {
    /// Grant a role on a space to a user, a team or an API key (admin on the space)
    Grant {
        /// The space's slug
        #[arg(long, value_name = "SPACE")]
        space: String,
        #[command(flatten)]
        subject: SubjectArgs,
        /// The role on the space (replaces the subject's previous one there)
        #[arg(long, value_enum)]
        role: SpaceRole,
    },
    /// Revoke a user's, team's or API key's role on a space
    Revoke {
        /// The space's slug
        #[arg(long, value_name = "SPACE")]
        space: String,
        #[command(flatten)]
        subject: SubjectArgs,
    },
    /// List the role bindings of the spaces you administer
    List,
}

/// Exactly one subject.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct SubjectArgs {
    /// A user, by email
    #[arg(long, value_name = "EMAIL")]
    pub user: Option<String>,
    /// A team, by slug
    #[arg(long, value_name = "SLUG")]
    pub team: Option<String>,
    /// An API key, by id
    #[arg(long, value_name = "ID")]
    pub api_key: Option<String>,
}

/// A role on a space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SpaceRole {
    /// See its stacks, runs and logs
    Reader,
    /// Also trigger, confirm and discard runs, edit stacks
    Writer,
    /// Also manage the space: its stacks' lifecycle, its role bindings, its sub-spaces
    Admin,
}

#[derive(Debug, Subcommand)]
pub enum ApiKeyCommand {
    /// Create an API key and print its secret, which is shown this once
    Create(ApiKeyCreateArgs),
    /// List API keys (every key for owners, your personal keys otherwise)
    List,
    /// Revoke an API key at once
    Revoke {
        #[arg(value_name = "ID")]
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct ApiKeyCreateArgs {
    #[arg(value_name = "NAME")]
    pub name: String,
    /// personal: acts as you, never beyond your rights; service: the organization's, with
    /// its own role (owners) [default: personal]
    #[arg(long, value_enum)]
    pub kind: Option<ApiKeyKindArg>,
    /// Organization-wide role, for a personal key a cap on your own rights (default: no
    /// cap); with --space, the service key's role on that space (reader, writer or admin)
    #[arg(long, value_enum)]
    pub role: Option<KeyRole>,
    /// Limit a service key to this space
    #[arg(long, value_name = "SPACE")]
    pub space: Option<String>,
    /// Days until the key expires [default: the server's]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..))]
    pub expires_in_days: Option<i32>,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// List audit events, newest first
    #[command(after_help = TIME_HELP)]
    List(AuditListArgs),
    /// Recompute the audit trail's hash chain: exit 0 when it is intact, 1 when an event
    /// was altered or removed
    Verify,
}

#[derive(Debug, Args)]
pub struct AuditListArgs {
    /// Only events by this actor (e.g. a user's email)
    #[arg(long, value_name = "ACTOR")]
    pub actor: Option<String>,
    /// Only this action (e.g. stack.create, role.grant, login.failure)
    #[arg(long, value_name = "ACTION")]
    pub action: Option<String>,
    /// Only events on this target (e.g. a stack's slug, a user's email)
    #[arg(long, value_name = "TARGET")]
    pub target: Option<String>,
    /// Only events at or after TIME: RFC 3339 (2026-11-30T10:00:00Z) or that long ago (30m, 1h, 7d)
    #[arg(long, value_name = "TIME", value_parser = TimeArg::parse)]
    pub since: Option<TimeArg>,
    /// Only events before TIME: RFC 3339 (2026-11-30T10:00:00Z) or that long ago (30m, 1h, 7d)
    #[arg(long, value_name = "TIME", value_parser = TimeArg::parse)]
    pub until: Option<TimeArg>,
    /// At most N events, the newest (1-1000) [default: the server's, 100]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: Option<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ApiKeyKindArg {
    Personal,
    Service,
}

/// A role an API key can get.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KeyRole {
    Owner,
    Admin,
    Writer,
    Reader,
}

impl SpaceRole {
    /// The API's name.
    pub fn as_str(self) -> &'static str {
        match self {
            SpaceRole::Reader => "reader",
            SpaceRole::Writer => "writer",
            SpaceRole::Admin => "admin",
        }
    }
}

impl KeyRole {
    /// The API's name.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyRole::Owner => "owner",
            KeyRole::Admin => "admin",
            KeyRole::Writer => "writer",
            KeyRole::Reader => "reader",
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use clap::error::ErrorKind;

    use super::*;

    type TestResult = Result<(), clap::Error>;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("tpctl").chain(args.iter().copied()))
    }

    fn usage_error(args: &[&str]) -> Option<ErrorKind> {
        parse(args).err().map(|e| e.kind())
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_go_anywhere_and_default_to_table() -> TestResult {
        let c = parse(&["whoami"])?;
        assert_eq!((c.endpoint, c.token, c.output), (None, None, OutputFormat::Table));
        assert_eq!(c.org, None);
        assert_eq!(parse(&["--org", "acme", "space", "list"])?.org.as_deref(), Some("acme"));
        assert_eq!(parse(&["space", "list", "--org", "acme"])?.org.as_deref(), Some("acme"));
        assert!(matches!(c.command, Command::Whoami));

        let c = parse(&["--endpoint", "http://a", "stack", "list", "-o", "json", "--token", "t"])?;
        assert_eq!(c.endpoint.as_deref(), Some("http://a"));
        assert_eq!(c.token.as_deref(), Some("t"));
        assert_eq!(c.output, OutputFormat::Json);
        assert!(matches!(c.command, Command::Stack(StackCommand::List)));

        assert_eq!(parse(&["--output", "table", "whoami"])?.output, OutputFormat::Table);
        assert_eq!(usage_error(&["-o", "yaml", "whoami"]), Some(ErrorKind::InvalidValue));
        Ok(())
    }

    #[test]
    fn login() -> TestResult {
        let c = parse(&[
            "login",
            "--endpoint",
            "http://x",
            "--email",
            "a@b.c",
            "--password",
            "pw",
            "--org",
            "acme",
        ])?;
        assert_eq!(c.endpoint.as_deref(), Some("http://x"));
        assert_eq!(c.org.as_deref(), Some("acme"));
        let Command::Login(a) = c.command else {
            panic!("not login")
        };
        assert_eq!(a.email.as_deref(), Some("a@b.c"));
        assert_eq!(a.password.as_deref(), Some("pw"));
        assert!(!a.password_stdin);

        let c = parse(&["login", "--email", "a@b.c", "--password-stdin"])?;
        let Command::Login(a) = c.command else {
            panic!("not login")
        };
        assert!(a.password_stdin && a.password.is_none());

        let c = parse(&["login", "--token", "key-1"])?;
        assert_eq!(c.token.as_deref(), Some("key-1"));
        assert!(matches!(c.command, Command::Login(LoginArgs { email: None, .. })));

        assert_eq!(
            usage_error(&["login", "--password", "x", "--password-stdin"]),
            Some(ErrorKind::ArgumentConflict)
        );
        Ok(())
    }

    #[test]
    fn login_sso() -> TestResult {
        let c = parse(&["login", "--sso", "--endpoint", "http://x", "--org", "acme"])?;
        assert_eq!(
            (c.endpoint.as_deref(), c.org.as_deref()),
            (Some("http://x"), Some("acme"))
        );
        let Command::Login(a) = c.command else {
            panic!("not login")
        };
        assert!(a.sso && !a.github && a.email.is_none());
        let Command::Login(a) = parse(&["login", "--sso", "--github"])?.command else {
            panic!("not login")
        };
        assert!(a.sso && a.github);

        for other in [
            &["--email", "a@b.c"][..],
            &["--password", "pw"],
            &["--password-stdin"],
            &["--token", "key-1"],
        ] {
            let args: Vec<&str> = ["login", "--sso"].iter().chain(other).copied().collect();
            assert_eq!(usage_error(&args), Some(ErrorKind::ArgumentConflict), "{other:?}");
        }
        // A global flag before the subcommand escapes clap's conflict; `login` refuses it.
        assert!(parse(&["--token", "key-1", "login", "--sso"]).is_ok());
        assert_eq!(
            usage_error(&["login", "--github"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        Ok(())
    }

    #[test]
    fn stack_create_with_every_option() -> TestResult {
        let c = parse(&[
            "stack",
            "create",
            "--name",
            "Network",
            "--slug",
            "net",
            "--repository",
            "https://g/x.git",
            "--branch",
            "dev",
            "--project-root",
            "envs/prod",
            "--autodeploy",
            "--label",
            "prod",
            "--label",
            "team:net",
            "--description",
            "d",
            "--tool",
            "opentofu",
            "--tool-version",
            "~> 1.8",
            "--worker-pool",
            "private",
        ])?;
        let Command::Stack(StackCommand::Create(a)) = c.command else {
            panic!("not stack create")
        };
        assert_eq!(a.name, "Network");
        assert_eq!(a.slug.as_deref(), Some("net"));
        assert_eq!(a.repository, "https://g/x.git");
        assert_eq!(a.branch.as_deref(), Some("dev"));
        assert_eq!(a.project_root.as_deref(), Some("envs/prod"));
        assert!(a.autodeploy);
        assert_eq!(a.labels, ["prod", "team:net"]);
        assert_eq!(a.description.as_deref(), Some("d"));
        assert_eq!(a.tool.as_deref(), Some("opentofu"));
        assert_eq!(a.tool_version.as_deref(), Some("~> 1.8"));
        assert_eq!(a.worker_pool.as_deref(), Some("private"));

        let c = parse(&["stack", "create", "--name", "n", "--repository", "r"])?;
        let Command::Stack(StackCommand::Create(a)) = c.command else {
            panic!("not stack create")
        };
        assert!(!a.autodeploy && a.labels.is_empty() && a.slug.is_none() && a.branch.is_none());

        assert_eq!(
            usage_error(&["stack", "create", "--name", "n"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["stack", "create", "--repository", "r"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        Ok(())
    }

    #[test]
    fn stack_subcommands() -> TestResult {
        assert!(matches!(
            parse(&["stack", "list"])?.command,
            Command::Stack(StackCommand::List)
        ));
        assert!(
            matches!(parse(&["stack", "show", "net"])?.command, Command::Stack(StackCommand::Show { stack }) if stack == "net")
        );
        assert!(matches!(
            parse(&["stack", "lock", "net", "--note", "maintenance"])?.command,
            Command::Stack(StackCommand::Lock { stack, note: Some(n) }) if stack == "net" && n == "maintenance"
        ));
        assert!(matches!(
            parse(&["stack", "lock", "net"])?.command,
            Command::Stack(StackCommand::Lock { note: None, .. })
        ));
        assert!(matches!(
            parse(&["stack", "unlock", "net"])?.command,
            Command::Stack(StackCommand::Unlock { force: false, .. })
        ));
        assert!(matches!(
            parse(&["stack", "unlock", "net", "--force"])?.command,
            Command::Stack(StackCommand::Unlock { force: true, .. })
        ));
        assert!(
            matches!(parse(&["stack", "delete", "net"])?.command, Command::Stack(StackCommand::Delete { stack }) if stack == "net")
        );
        assert_eq!(
            usage_error(&["stack", "show"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["stack", "frobnicate"]),
            Some(ErrorKind::InvalidSubcommand)
        );
        assert_eq!(
            usage_error(&["stack"]),
            Some(ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand)
        );
        Ok(())
    }

    #[test]
    fn run_subcommands() -> TestResult {
        assert!(matches!(
            parse(&["run", "trigger", "net"])?.command,
            Command::Run(RunCommand::Trigger { stack, proposed: false, commit: None, wait: false }) if stack == "net"
        ));
        assert!(matches!(
            parse(&["run", "trigger", "net", "--proposed", "--wait", "--commit", "abc"])?.command,
            Command::Run(RunCommand::Trigger { proposed: true, wait: true, commit: Some(c), .. }) if c == "abc"
        ));
        assert!(matches!(
            parse(&["run", "list", "net"])?.command,
            Command::Run(RunCommand::List { stack, limit: 20 }) if stack == "net"
        ));
        assert!(matches!(
            parse(&["run", "list", "net", "--limit", "5"])?.command,
            Command::Run(RunCommand::List { limit: 5, .. })
        ));
        assert!(
            matches!(parse(&["run", "show", "r1"])?.command, Command::Run(RunCommand::Show { run }) if run == "r1")
        );
        assert!(matches!(
            parse(&["run", "logs", "r1"])?.command,
            Command::Run(RunCommand::Logs { follow: false, .. })
        ));
        assert!(matches!(
            parse(&["run", "logs", "r1", "--follow"])?.command,
            Command::Run(RunCommand::Logs { follow: true, .. })
        ));
        assert!(matches!(
            parse(&["run", "logs", "-f", "r1"])?.command,
            Command::Run(RunCommand::Logs { follow: true, .. })
        ));
        assert!(
            matches!(parse(&["run", "confirm", "r1"])?.command, Command::Run(RunCommand::Confirm { run }) if run == "r1")
        );
        assert!(
            matches!(parse(&["run", "discard", "r1"])?.command, Command::Run(RunCommand::Discard { run }) if run == "r1")
        );
        assert!(
            matches!(parse(&["run", "cancel", "r1"])?.command, Command::Run(RunCommand::Cancel { run }) if run == "r1")
        );
        let Command::Run(RunCommand::Review { run, decision, note }) =
            parse(&["run", "review", "r1", "--approve"])?.command
        else {
            panic!("not run review")
        };
        assert_eq!(
            (run.as_str(), decision.approve, decision.reject, note),
            ("r1", true, false, None)
        );
        let Command::Run(RunCommand::Review { decision, note, .. }) =
            parse(&["run", "review", "r1", "--reject", "--note", "too big"])?.command
        else {
            panic!("not run review")
        };
        assert_eq!(
            (decision.approve, decision.reject, note.as_deref()),
            (false, true, Some("too big"))
        );
        assert_eq!(
            usage_error(&["run", "review", "r1", "--approve", "--reject"]),
            Some(ErrorKind::ArgumentConflict)
        );
        assert_eq!(
            usage_error(&["run", "review", "r1", "--note", "n"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["run", "review", "--approve"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["run", "list", "net", "--limit", "many"]),
            Some(ErrorKind::ValueValidation)
        );
        assert_eq!(
            usage_error(&["run", "confirm"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        Ok(())
    }

    #[test]
    fn state_subcommands() -> TestResult {
        assert!(
            matches!(parse(&["state", "versions", "net"])?.command, Command::State(StateCommand::Versions { stack }) if stack == "net")
        );
        assert!(matches!(
            parse(&["state", "pull", "net"])?.command,
            Command::State(StateCommand::Pull { serial: None, .. })
        ));
        assert!(matches!(
            parse(&["state", "pull", "net", "--serial", "7"])?.command,
            Command::State(StateCommand::Pull { serial: Some(7), .. })
        ));
        assert!(matches!(
            parse(&["state", "unlock", "net"])?.command,
            Command::State(StateCommand::Unlock { force: false, .. })
        ));
        assert!(matches!(
            parse(&["state", "unlock", "net", "--force"])?.command,
            Command::State(StateCommand::Unlock { force: true, .. })
        ));
        assert_eq!(
            usage_error(&["state", "pull", "net", "--serial", "x"]),
            Some(ErrorKind::ValueValidation)
        );
        Ok(())
    }

    #[test]
    fn org_subcommands() -> TestResult {
        assert!(matches!(
            parse(&["org", "create", "beta"])?.command,
            Command::Org(OrgCommand::Create { slug, name: None }) if slug == "beta"
        ));
        assert!(matches!(
            parse(&["org", "create", "beta", "--name", "Beta Inc"])?.command,
            Command::Org(OrgCommand::Create { name: Some(n), .. }) if n == "Beta Inc"
        ));
        assert!(matches!(
            parse(&["org", "list"])?.command,
            Command::Org(OrgCommand::List)
        ));
        assert_eq!(
            usage_error(&["org", "create"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["org", "create", "a", "b"]),
            Some(ErrorKind::UnknownArgument)
        );
        Ok(())
    }

    #[test]
    fn space_subcommands() -> TestResult {
        let c = parse(&[
            "space",
            "create",
            "prod",
            "--parent",
            "root",
            "--inherit",
            "--name",
            "Production",
            "--description",
            "live systems",
        ])?;
        let Command::Space(SpaceCommand::Create(a)) = c.command else {
            panic!("not space create")
        };
        assert_eq!(a.slug, "prod");
        assert_eq!(a.parent.as_deref(), Some("root"));
        assert!(a.inherit);
        assert_eq!(a.name.as_deref(), Some("Production"));
        assert_eq!(a.description.as_deref(), Some("live systems"));

        let Command::Space(SpaceCommand::Create(a)) = parse(&["space", "create", "dev"])?.command else {
            panic!("not space create")
        };
        assert!(!a.inherit && a.parent.is_none() && a.name.is_none() && a.description.is_none());

        assert!(matches!(
            parse(&["space", "list"])?.command,
            Command::Space(SpaceCommand::List)
        ));
        assert!(
            matches!(parse(&["space", "delete", "dev"])?.command, Command::Space(SpaceCommand::Delete { space }) if space == "dev")
        );
        assert_eq!(
            usage_error(&["space", "create"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["space", "create", "x", "--inherit=maybe"]),
            Some(ErrorKind::TooManyValues)
        );
        assert_eq!(
            usage_error(&["space", "delete"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        Ok(())
    }

    #[test]
    fn user_subcommands() -> TestResult {
        let Command::User(UserCommand::Create(a)) = parse(&[
            "user",
            "create",
            "bob@example.com",
            "--name",
            "Bob",
            "--password-stdin",
            "--owner",
        ])?
        .command
        else {
            panic!("not user create")
        };
        assert_eq!(a.email, "bob@example.com");
        assert_eq!(a.name.as_deref(), Some("Bob"));
        assert!(a.password_stdin && a.owner);

        let Command::User(UserCommand::Create(a)) = parse(&["user", "create", "bob@example.com"])?.command else {
            panic!("not user create")
        };
        assert!(!a.password_stdin && !a.owner && a.name.is_none());

        assert!(matches!(
            parse(&["user", "list"])?.command,
            Command::User(UserCommand::List)
        ));
        // A password never goes on the command line.
        assert_eq!(
            usage_error(&["user", "create", "bob@example.com", "--password", "pw"]),
            Some(ErrorKind::UnknownArgument)
        );
        assert_eq!(
            usage_error(&["user", "create"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        Ok(())
    }

    #[test]
    fn team_subcommands() -> TestResult {
        assert!(matches!(
            parse(&["team", "create", "ops", "--name", "Operations"])?.command,
            Command::Team(TeamCommand::Create { slug, name: Some(n) }) if slug == "ops" && n == "Operations"
        ));
        assert!(matches!(
            parse(&["team", "add-member", "ops", "ada@example.com"])?.command,
            Command::Team(TeamCommand::AddMember { team, email }) if team == "ops" && email == "ada@example.com"
        ));
        assert!(matches!(
            parse(&["team", "list"])?.command,
            Command::Team(TeamCommand::List)
        ));
        assert_eq!(
            usage_error(&["team", "add-member", "ops"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["team", "add_member", "ops", "a@b.c"]),
            Some(ErrorKind::InvalidSubcommand)
        );
        Ok(())
    }

    #[test]
    fn role_subcommands_take_exactly_one_subject() -> TestResult {
        let Command::Role(RoleCommand::Grant { space, subject, role }) = parse(&[
            "role",
            "grant",
            "--space",
            "prod",
            "--user",
            "ada@example.com",
            "--role",
            "writer",
        ])?
        .command
        else {
            panic!("not role grant")
        };
        assert_eq!((space.as_str(), role), ("prod", SpaceRole::Writer));
        assert_eq!(subject.user.as_deref(), Some("ada@example.com"));
        assert!(subject.team.is_none() && subject.api_key.is_none());

        let Command::Role(RoleCommand::Grant { subject, role, .. }) =
            parse(&["role", "grant", "--space", "prod", "--team", "ops", "--role", "admin"])?.command
        else {
            panic!("not role grant")
        };
        assert_eq!((subject.team.as_deref(), role), (Some("ops"), SpaceRole::Admin));

        let Command::Role(RoleCommand::Revoke { space, subject }) =
            parse(&["role", "revoke", "--space", "prod", "--api-key", "k1"])?.command
        else {
            panic!("not role revoke")
        };
        assert_eq!((space.as_str(), subject.api_key.as_deref()), ("prod", Some("k1")));
        assert!(matches!(
            parse(&["role", "list"])?.command,
            Command::Role(RoleCommand::List)
        ));

        assert_eq!(
            usage_error(&[
                "role", "grant", "--space", "p", "--user", "a", "--team", "t", "--role", "reader"
            ]),
            Some(ErrorKind::ArgumentConflict)
        );
        assert_eq!(
            usage_error(&["role", "revoke", "--space", "p", "--team", "t", "--api-key", "k"]),
            Some(ErrorKind::ArgumentConflict)
        );
        assert_eq!(
            usage_error(&["role", "grant", "--space", "p", "--role", "reader"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["role", "revoke", "--user", "a"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["role", "grant", "--space", "p", "--user", "a"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        // Owner is an organization role, not a space role.
        assert_eq!(
            usage_error(&["role", "grant", "--space", "p", "--user", "a", "--role", "owner"]),
            Some(ErrorKind::InvalidValue)
        );
        Ok(())
    }

    #[test]
    fn apikey_subcommands() -> TestResult {
        let Command::ApiKey(ApiKeyCommand::Create(a)) = parse(&[
            "apikey",
            "create",
            "ci",
            "--kind",
            "service",
            "--role",
            "writer",
            "--space",
            "prod",
            "--expires-in-days",
            "30",
            "-o",
            "json",
        ])?
        .command
        else {
            panic!("not apikey create")
        };
        assert_eq!(a.name, "ci");
        assert_eq!(a.kind, Some(ApiKeyKindArg::Service));
        assert_eq!(a.role, Some(KeyRole::Writer));
        assert_eq!(a.space.as_deref(), Some("prod"));
        assert_eq!(a.expires_in_days, Some(30));

        let Command::ApiKey(ApiKeyCommand::Create(a)) = parse(&["api-key", "create", "laptop"])?.command else {
            panic!("not apikey create")
        };
        assert!(a.kind.is_none() && a.role.is_none() && a.space.is_none() && a.expires_in_days.is_none());
        assert!(matches!(
            parse(&["apikey", "create", "x", "--kind", "personal", "--role", "owner"])?.command,
            Command::ApiKey(ApiKeyCommand::Create(ApiKeyCreateArgs {
                kind: Some(ApiKeyKindArg::Personal),
                role: Some(KeyRole::Owner),
                ..
            }))
        ));
        assert!(matches!(
            parse(&["apikey", "list"])?.command,
            Command::ApiKey(ApiKeyCommand::List)
        ));
        assert!(
            matches!(parse(&["apikey", "revoke", "k1"])?.command, Command::ApiKey(ApiKeyCommand::Revoke { id }) if id == "k1")
        );

        assert_eq!(
            usage_error(&["apikey", "create", "x", "--kind", "robot"]),
            Some(ErrorKind::InvalidValue)
        );
        assert_eq!(
            usage_error(&["apikey", "create", "x", "--role", "superuser"]),
            Some(ErrorKind::InvalidValue)
        );
        assert_eq!(
            usage_error(&["apikey", "create", "x", "--expires-in-days", "0"]),
            Some(ErrorKind::ValueValidation)
        );
        assert_eq!(
            usage_error(&["apikey", "create", "x", "--expires-in-days", "soon"]),
            Some(ErrorKind::ValueValidation)
        );
        assert_eq!(
            usage_error(&["apikey", "create"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["apikey", "revoke"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        Ok(())
    }

    #[test]
    fn user_set_role_and_remove() -> TestResult {
        let Command::User(UserCommand::SetRole { email, role }) =
            parse(&["user", "set-role", "bob@example.com", "--owner"])?.command
        else {
            panic!("not user set-role")
        };
        assert_eq!(email, "bob@example.com");
        assert!(role.owner && !role.member);
        let Command::User(UserCommand::SetRole { role, .. }) =
            parse(&["user", "set-role", "--member", "bob@example.com"])?.command
        else {
            panic!("not user set-role")
        };
        assert!(role.member && !role.owner);
        assert!(matches!(
            parse(&["user", "remove", "bob@example.com"])?.command,
            Command::User(UserCommand::Remove { email }) if email == "bob@example.com"
        ));

        assert_eq!(
            usage_error(&["user", "set-role", "bob@example.com"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["user", "set-role", "bob@example.com", "--owner", "--member"]),
            Some(ErrorKind::ArgumentConflict)
        );
        assert_eq!(
            usage_error(&["user", "set-role", "--owner"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["user", "remove"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        Ok(())
    }

    #[test]
    fn audit_list_filters_and_times() -> Result<(), Box<dyn std::error::Error>> {
        let Command::Audit(AuditCommand::List(a)) = parse(&["audit", "list"])?.command else {
            panic!("not audit list")
        };
        assert!(a.actor.is_none() && a.action.is_none() && a.target.is_none());
        assert!(a.since.is_none() && a.until.is_none() && a.limit.is_none());

        let Command::Audit(AuditCommand::List(a)) = parse(&[
            "audit",
            "list",
            "--actor",
            "ada@example.com",
            "--action",
            "stack.create",
            "--target",
            "net",
            "--since",
            "2026-11-30T10:00:00Z",
            "--until",
            "1h",
            "--limit",
            "1000",
        ])?
        .command
        else {
            panic!("not audit list")
        };
        assert_eq!(a.actor.as_deref(), Some("ada@example.com"));
        assert_eq!(a.action.as_deref(), Some("stack.create"));
        assert_eq!(a.target.as_deref(), Some("net"));
        assert_eq!(a.since, Some(TimeArg::At("2026-11-30T10:00:00Z".parse()?)));
        assert_eq!(a.until, Some(TimeArg::Ago(chrono::TimeDelta::hours(1))));
        assert_eq!(a.limit, Some(1000));

        assert!(matches!(
            parse(&["audit", "verify"])?.command,
            Command::Audit(AuditCommand::Verify)
        ));
        for limit in ["0", "1001", "ten"] {
            assert_eq!(
                usage_error(&["audit", "list", "--limit", limit]),
                Some(ErrorKind::ValueValidation),
                "{limit}"
            );
        }
        assert_eq!(
            usage_error(&["audit", "verify", "--since", "1h"]),
            Some(ErrorKind::UnknownArgument)
        );
        Ok(())
    }

    #[test]
    fn bad_audit_times_are_usage_errors_that_say_what_a_time_is() -> Result<(), Box<dyn std::error::Error>> {
        for (flag, value, says) in [
            (
                "--since",
                "yesterday",
                "\"yesterday\" is not a time: expected an RFC 3339 time like",
            ),
            (
                "--since",
                "2026-11-30",
                "a time needs a date, a time of day and an offset",
            ),
            ("--until", "3x", "unknown unit 'x'; use s, m, h, d or w"),
            ("--since", "15", "\"15\" has no unit"),
        ] {
            let e = parse(&["audit", "list", flag, value]).err().ok_or("accepted")?;
            assert_eq!(e.kind(), ErrorKind::ValueValidation, "{value}");
            let msg = e.to_string();
            assert!(
                msg.contains(&format!("invalid value '{value}' for '{flag} <TIME>'")),
                "{msg}"
            );
            assert!(msg.contains(says), "{msg}");
        }
        Ok(())
    }

    #[test]
    fn audit_list_help_explains_times() -> Result<(), Box<dyn std::error::Error>> {
        let e = parse(&["audit", "list", "--help"]).err().ok_or("no help")?;
        assert_eq!(e.kind(), ErrorKind::DisplayHelp);
        let help = e.to_string();
        assert!(help.contains("--since <TIME>"), "{help}");
        assert!(help.contains("RFC 3339"), "{help}");
        assert!(help.contains("duration meaning that long ago"), "{help}");
        assert!(help.contains("7d"), "{help}");
        Ok(())
    }

    #[test]
    fn context_create_with_every_option() -> TestResult {
        let Command::Context(ContextCommand::Create(a)) = parse(&[
            "context",
            "create",
            "AWS prod",
            "--id",
            "aws-prod",
            "--label",
            "autoattach:prod",
            "--label",
            "aws",
            "--description",
            "prod account",
            "--space",
            "prod",
            "-o",
            "json",
        ])?
        .command
        else {
            panic!("not context create")
        };
        assert_eq!(a.name, "AWS prod");
        assert_eq!(a.id.as_deref(), Some("aws-prod"));
        assert_eq!(a.labels, ["autoattach:prod", "aws"]);
        assert_eq!(a.description.as_deref(), Some("prod account"));
        assert_eq!(a.space.as_deref(), Some("prod"));

        let Command::Context(ContextCommand::Create(a)) = parse(&["context", "create", "shared"])?.command else {
            panic!("not context create")
        };
        assert!(a.id.is_none() && a.labels.is_empty() && a.description.is_none() && a.space.is_none());
        assert_eq!(
            usage_error(&["context", "create"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        // The name is positional.
        assert_eq!(
            usage_error(&["context", "create", "--name", "x"]),
            Some(ErrorKind::UnknownArgument)
        );
        Ok(())
    }

    #[test]
    fn context_set_takes_key_value_type_and_flags() -> TestResult {
        let Command::Context(ContextCommand::Set { context, variable: v }) =
            parse(&["context", "set", "aws-prod", "AWS_REGION", "eu-west-1"])?.command
        else {
            panic!("not context set")
        };
        assert_eq!(context, "aws-prod");
        assert_eq!((v.key.as_str(), v.value.as_str()), ("AWS_REGION", "eu-west-1"));
        assert_eq!(v.kind, VariableKindArg::Env);
        assert!(!v.secret && !v.apply_only);

        let Command::Context(ContextCommand::Set { variable: v, .. }) = parse(&[
            "context",
            "set",
            "aws-prod",
            "db_password",
            "-",
            "--secret",
            "--type",
            "terraform",
            "--apply-only",
        ])?
        .command
        else {
            panic!("not context set")
        };
        // `-` is a value (read from stdin by the command), not a flag.
        assert_eq!((v.key.as_str(), v.value.as_str()), ("db_password", "-"));
        assert_eq!(v.kind, VariableKindArg::Terraform);
        assert!(v.secret && v.apply_only);

        let Command::Context(ContextCommand::Set { variable: v, .. }) = parse(&[
            "context",
            "set",
            "--type",
            "file",
            "aws-prod",
            "config/backend.hcl",
            "bucket = \"x\"",
        ])?
        .command
        else {
            panic!("not context set")
        };
        assert_eq!(v.kind, VariableKindArg::File);
        assert_eq!(v.key, "config/backend.hcl");

        // A value that looks like a flag goes after `--`.
        let Command::Context(ContextCommand::Set { variable: v, .. }) =
            parse(&["context", "set", "c", "OFFSET", "--", "-5"])?.command
        else {
            panic!("not context set")
        };
        assert_eq!(v.value, "-5");

        assert_eq!(
            usage_error(&["context", "set", "c", "KEY"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["context", "set", "c", "KEY", "v", "--type", "secret"]),
            Some(ErrorKind::InvalidValue)
        );
        assert_eq!(
            usage_error(&["context", "set", "c", "KEY", "v", "extra"]),
            Some(ErrorKind::UnknownArgument)
        );
        Ok(())
    }

    #[test]
    fn context_subcommands() -> TestResult {
        assert!(matches!(
            parse(&["context", "unset", "aws-prod", "AWS_REGION"])?.command,
            Command::Context(ContextCommand::Unset { context, key }) if context == "aws-prod" && key == "AWS_REGION"
        ));
        assert!(matches!(
            parse(&["context", "list", "-o", "json"])?.command,
            Command::Context(ContextCommand::List)
        ));
        assert!(matches!(
            parse(&["context", "show", "aws-prod"])?.command,
            Command::Context(ContextCommand::Show { context }) if context == "aws-prod"
        ));
        assert!(matches!(
            parse(&["context", "attach", "aws-prod", "net"])?.command,
            Command::Context(ContextCommand::Attach { context, stack, priority: 0 }) if context == "aws-prod" && stack == "net"
        ));
        assert!(matches!(
            parse(&["context", "attach", "aws-prod", "net", "--priority", "5"])?.command,
            Command::Context(ContextCommand::Attach { priority: 5, .. })
        ));
        assert!(matches!(
            parse(&["context", "attach", "--priority", "-2", "aws-prod", "net"])?.command,
            Command::Context(ContextCommand::Attach { priority: -2, .. })
        ));
        assert!(matches!(
            parse(&["context", "detach", "aws-prod", "net"])?.command,
            Command::Context(ContextCommand::Detach { context, stack }) if context == "aws-prod" && stack == "net"
        ));
        assert!(matches!(
            parse(&["context", "delete", "aws-prod"])?.command,
            Command::Context(ContextCommand::Delete { context }) if context == "aws-prod"
        ));

        assert_eq!(
            usage_error(&["context", "unset", "aws-prod"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["context", "attach", "aws-prod"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["context", "attach", "c", "s", "--priority", "high"]),
            Some(ErrorKind::ValueValidation)
        );
        assert_eq!(
            usage_error(&["context", "show"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["context"]),
            Some(ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand)
        );
        Ok(())
    }

    #[test]
    fn stack_env_lists_with_or_without_the_list_subcommand() -> TestResult {
        let Command::Stack(StackCommand::Env(a)) = parse(&["stack", "env", "net"])?.command else {
            panic!("not stack env")
        };
        assert_eq!(a.stack.as_deref(), Some("net"));
        assert!(a.command.is_none());

        let c = parse(&["stack", "env", "net", "-o", "json"])?;
        assert_eq!(c.output, OutputFormat::Json);
        assert!(
            matches!(c.command, Command::Stack(StackCommand::Env(StackEnvArgs { stack: Some(s), command: None })) if s == "net")
        );

        let Command::Stack(StackCommand::Env(a)) = parse(&["stack", "env", "list", "net"])?.command else {
            panic!("not stack env")
        };
        assert!(a.stack.is_none());
        assert!(matches!(a.command, Some(StackEnvCommand::List { stack }) if stack == "net"));

        assert_eq!(
            usage_error(&["stack", "env"]),
            Some(ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand)
        );
        assert_eq!(
            usage_error(&["stack", "env", "list"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        // The short form takes the stack only; a stack named like a subcommand needs `list`.
        assert_eq!(
            usage_error(&["stack", "env", "net", "extra"]),
            Some(ErrorKind::ArgumentConflict)
        );
        assert!(matches!(
            parse(&["stack", "env", "list", "list"])?.command,
            Command::Stack(StackCommand::Env(StackEnvArgs { command: Some(StackEnvCommand::List { stack }), .. })) if stack == "list"
        ));
        Ok(())
    }

    #[test]
    fn stack_env_set_and_unset() -> TestResult {
        let Command::Stack(StackCommand::Env(StackEnvArgs {
            command: Some(StackEnvCommand::Set { stack, variable: v }),
            stack: None,
        })) = parse(&["stack", "env", "set", "net", "TF_LOG", "debug", "--apply-only"])?.command
        else {
            panic!("not stack env set")
        };
        assert_eq!(stack, "net");
        assert_eq!((v.key.as_str(), v.value.as_str()), ("TF_LOG", "debug"));
        assert_eq!(v.kind, VariableKindArg::Env);
        assert!(v.apply_only && !v.secret);

        let Command::Stack(StackCommand::Env(StackEnvArgs {
            command: Some(StackEnvCommand::Set { variable: v, .. }),
            ..
        })) = parse(&[
            "stack",
            "env",
            "set",
            "net",
            "token",
            "-",
            "--secret",
            "--type",
            "terraform",
        ])?
        .command
        else {
            panic!("not stack env set")
        };
        assert_eq!((v.key.as_str(), v.value.as_str()), ("token", "-"));
        assert_eq!(v.kind, VariableKindArg::Terraform);
        assert!(v.secret);

        assert!(matches!(
            parse(&["stack", "env", "unset", "net", "TF_LOG"])?.command,
            Command::Stack(StackCommand::Env(StackEnvArgs {
                command: Some(StackEnvCommand::Unset { stack, key }),
                stack: None,
            })) if stack == "net" && key == "TF_LOG"
        ));

        assert_eq!(
            usage_error(&["stack", "env", "set", "net", "TF_LOG"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["stack", "env", "unset", "net"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["stack", "env", "set", "net", "K", "v", "--type", "json"]),
            Some(ErrorKind::InvalidValue)
        );
        Ok(())
    }

    #[test]
    fn integration_aws_create_with_every_option() -> TestResult {
        let Command::Integration(IntegrationCommand::Aws(AwsIntegrationCommand::Create(a))) = parse(&[
            "integration",
            "aws",
            "create",
            "Prod account",
            "--role-arn",
            "arn:aws:iam::123456789012:role/terraplane",
            "--read-role-arn",
            "arn:aws:iam::123456789012:role/terraplane-read",
            "--audience",
            "sts.amazonaws.com",
            "--duration",
            "3600",
            "--space",
            "prod",
            "--id",
            "aws-prod",
        ])?
        .command
        else {
            panic!("not integration aws create")
        };
        assert_eq!(a.name, "Prod account");
        assert_eq!(a.role_arn, "arn:aws:iam::123456789012:role/terraplane");
        assert_eq!(
            a.read_role_arn.as_deref(),
            Some("arn:aws:iam::123456789012:role/terraplane-read")
        );
        assert_eq!(a.audience.as_deref(), Some("sts.amazonaws.com"));
        assert_eq!(a.duration, Some(3600));
        assert_eq!(a.space.as_deref(), Some("prod"));
        assert_eq!(a.id.as_deref(), Some("aws-prod"));

        let Command::Integration(IntegrationCommand::Aws(AwsIntegrationCommand::Create(a))) =
            parse(&["integration", "aws", "create", "dev", "--role-arn", "arn:x"])?.command
        else {
            panic!("not integration aws create")
        };
        assert!(a.read_role_arn.is_none() && a.audience.is_none() && a.duration.is_none());
        assert!(a.space.is_none() && a.id.is_none());

        assert_eq!(
            usage_error(&["integration", "aws", "create", "dev"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        for secs in ["899", "43201", "1h"] {
            assert_eq!(
                usage_error(&[
                    "integration",
                    "aws",
                    "create",
                    "d",
                    "--role-arn",
                    "a",
                    "--duration",
                    secs
                ]),
                Some(ErrorKind::ValueValidation),
                "{secs}"
            );
        }
        Ok(())
    }

    #[test]
    fn integration_aws_subcommands() -> TestResult {
        assert!(matches!(
            parse(&["integration", "aws", "list", "-o", "json"])?.command,
            Command::Integration(IntegrationCommand::Aws(AwsIntegrationCommand::List))
        ));
        assert!(matches!(
            parse(&["integration", "aws", "attach", "aws-prod", "net"])?.command,
            Command::Integration(IntegrationCommand::Aws(AwsIntegrationCommand::Attach { integration, stack }))
                if integration == "aws-prod" && stack == "net"
        ));
        assert!(matches!(
            parse(&["integration", "aws", "detach", "net"])?.command,
            Command::Integration(IntegrationCommand::Aws(AwsIntegrationCommand::Detach { stack })) if stack == "net"
        ));
        assert!(matches!(
            parse(&["integration", "aws", "delete", "aws-prod"])?.command,
            Command::Integration(IntegrationCommand::Aws(AwsIntegrationCommand::Delete { integration }))
                if integration == "aws-prod"
        ));
        assert_eq!(
            usage_error(&["integration", "aws", "attach", "aws-prod"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["integration", "aws", "detach", "aws-prod", "net"]),
            Some(ErrorKind::UnknownArgument)
        );
        assert_eq!(
            usage_error(&["integration", "gcp", "list"]),
            Some(ErrorKind::InvalidSubcommand)
        );
        Ok(())
    }

    #[test]
    fn stack_drift_takes_a_stack() -> TestResult {
        let c = parse(&["stack", "drift", "net", "-o", "json"])?;
        assert_eq!(c.output, OutputFormat::Json);
        assert!(matches!(c.command, Command::Stack(StackCommand::Drift { stack }) if stack == "net"));
        assert_eq!(
            usage_error(&["stack", "drift"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["stack", "drift", "net", "app"]),
            Some(ErrorKind::UnknownArgument)
        );
        Ok(())
    }

    #[test]
    fn drift_check_list_and_schedules() -> TestResult {
        assert!(matches!(
            parse(&["drift", "check", "net"])?.command,
            Command::Drift(DriftCommand::Check { stack, wait: false }) if stack == "net"
        ));
        assert!(matches!(
            parse(&["drift", "check", "--wait", "net"])?.command,
            Command::Drift(DriftCommand::Check { wait: true, .. })
        ));
        assert!(matches!(
            parse(&["drift", "list"])?.command,
            Command::Drift(DriftCommand::List { all: false })
        ));
        assert!(matches!(
            parse(&["drift", "list", "--all", "-o", "json"])?.command,
            Command::Drift(DriftCommand::List { all: true })
        ));
        assert!(matches!(
            parse(&["drift", "schedules", "net"])?.command,
            Command::Drift(DriftCommand::Schedules { stack }) if stack == "net"
        ));
        assert!(matches!(
            parse(&["drift", "unschedule", "ds-1"])?.command,
            Command::Drift(DriftCommand::Unschedule { id }) if id == "ds-1"
        ));
        assert_eq!(
            usage_error(&["drift", "check"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(usage_error(&["drift", "list", "net"]), Some(ErrorKind::UnknownArgument));
        assert_eq!(
            usage_error(&["drift", "unschedule"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["drift"]),
            Some(ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand)
        );
        Ok(())
    }

    #[test]
    fn drift_schedule_takes_cron_zone_and_reaction() -> TestResult {
        let Command::Drift(DriftCommand::Schedule(a)) = parse(&[
            "drift",
            "schedule",
            "net",
            "--cron",
            "0 */6 * * *",
            "--tz",
            "Europe/Berlin",
            "--reaction",
            "reconcile",
        ])?
        .command
        else {
            panic!("not drift schedule")
        };
        assert_eq!(a.stack, "net");
        assert_eq!(a.cron, "0 */6 * * *");
        assert_eq!(a.timezone, "Europe/Berlin");
        assert_eq!(a.reaction, Some(DriftReactionArg::Reconcile));

        let Command::Drift(DriftCommand::Schedule(a)) =
            parse(&["drift", "schedule", "net", "--cron", "*/30 * * * *"])?.command
        else {
            panic!("not drift schedule")
        };
        assert_eq!((a.timezone.as_str(), a.reaction), ("UTC", None));

        let Command::Drift(DriftCommand::Schedule(a)) = parse(&[
            "drift",
            "schedule",
            "net",
            "--cron",
            "0 0 * * *",
            "--timezone",
            "Asia/Tokyo",
            "--reaction",
            "alert",
        ])?
        .command
        else {
            panic!("not drift schedule")
        };
        assert_eq!(a.timezone, "Asia/Tokyo");
        assert_eq!(a.reaction, Some(DriftReactionArg::Alert));

        assert_eq!(
            usage_error(&["drift", "schedule", "net"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["drift", "schedule", "--cron", "0 * * * *"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&[
                "drift",
                "schedule",
                "net",
                "--cron",
                "0 * * * *",
                "--reaction",
                "ignore"
            ]),
            Some(ErrorKind::InvalidValue)
        );
        // An unquoted cron expression is refused rather than half taken.
        assert_eq!(
            usage_error(&["drift", "schedule", "net", "--cron", "0", "6", "*", "*", "*"]),
            Some(ErrorKind::UnknownArgument)
        );
        Ok(())
    }

    #[test]
    fn notification_endpoint_create_with_every_option() -> TestResult {
        let Command::Notification(NotificationCommand::Endpoint(NotificationEndpointCommand::Create(a))) = parse(&[
            "notification",
            "endpoint",
            "create",
            "Ops pager",
            "--kind",
            "pagerduty",
            "--url",
            "https://events.pagerduty.com/v2/enqueue",
            "--secret",
            "-",
            "--event",
            "drift-detected",
            "--event",
            "drift_resolved,RUN_FAILED",
            "--label",
            "prod",
            "--label",
            "team:net",
            "--space",
            "prod",
            "--id",
            "ops-pager",
        ])?
        .command
        else {
            panic!("not notification endpoint create")
        };
        assert_eq!(a.name, "Ops pager");
        assert_eq!(a.kind, NotificationKindArg::Pagerduty);
        assert_eq!(a.url, "https://events.pagerduty.com/v2/enqueue");
        // `-` is a value (read from stdin by the command), not a flag.
        assert_eq!(a.secret.as_deref(), Some("-"));
        assert_eq!(
            a.events,
            [
                NotificationEventArg::DriftDetected,
                NotificationEventArg::DriftResolved,
                NotificationEventArg::RunFailed
            ]
        );
        assert_eq!(a.labels, ["prod", "team:net"]);
        assert_eq!(a.space.as_deref(), Some("prod"));
        assert_eq!(a.id.as_deref(), Some("ops-pager"));

        let Command::Notification(NotificationCommand::Endpoint(NotificationEndpointCommand::Create(a))) = parse(&[
            "notification",
            "endpoint",
            "create",
            "chat",
            "--kind",
            "slack",
            "--url",
            "https://hooks.slack.com/services/x",
            "--event",
            "run-needs-confirmation",
        ])?
        .command
        else {
            panic!("not notification endpoint create")
        };
        assert_eq!(a.kind, NotificationKindArg::Slack);
        assert_eq!(a.events, [NotificationEventArg::RunNeedsConfirmation]);
        assert!(a.secret.is_none() && a.labels.is_empty() && a.space.is_none() && a.id.is_none());

        let base = ["notification", "endpoint", "create", "n", "--url", "https://x"];
        let with = |extra: &[&'static str]| -> Vec<&str> { base.iter().chain(extra).copied().collect() };
        // At least one event.
        assert_eq!(
            usage_error(&with(&["--kind", "webhook"])),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&with(&["--event", "run-failed"])),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&with(&["--kind", "email", "--event", "run-failed"])),
            Some(ErrorKind::InvalidValue)
        );
        assert_eq!(
            usage_error(&with(&["--kind", "teams", "--event", "run-started"])),
            Some(ErrorKind::InvalidValue)
        );
        assert_eq!(
            usage_error(&[
                "notification",
                "endpoint",
                "create",
                "n",
                "--kind",
                "teams",
                "--event",
                "run-failed"
            ]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        Ok(())
    }

    #[test]
    fn notification_event_names_take_dashes_underscores_and_any_case() -> TestResult {
        for (flag, event) in [
            ("run-needs-confirmation", NotificationEventArg::RunNeedsConfirmation),
            ("run_pending_review", NotificationEventArg::RunPendingReview),
            ("RUN_FAILED", NotificationEventArg::RunFailed),
            ("Run-Finished", NotificationEventArg::RunFinished),
            ("drift-detected", NotificationEventArg::DriftDetected),
            ("drift_resolved", NotificationEventArg::DriftResolved),
            ("policy-denied", NotificationEventArg::PolicyDenied),
        ] {
            let Command::Notification(NotificationCommand::Endpoint(NotificationEndpointCommand::Create(a))) =
                parse(&[
                    "notification",
                    "endpoint",
                    "create",
                    "n",
                    "--kind",
                    "webhook",
                    "--url",
                    "u",
                    "--event",
                    flag,
                ])?
                .command
            else {
                panic!("not notification endpoint create")
            };
            assert_eq!(a.events, [event], "{flag}");
        }
        Ok(())
    }

    #[test]
    fn notification_list_delete_and_deliveries() -> TestResult {
        assert!(matches!(
            parse(&["notification", "endpoint", "list", "-o", "json"])?.command,
            Command::Notification(NotificationCommand::Endpoint(NotificationEndpointCommand::List))
        ));
        assert!(matches!(
            parse(&["notification", "endpoint", "delete", "ops-pager"])?.command,
            Command::Notification(NotificationCommand::Endpoint(NotificationEndpointCommand::Delete { id }))
                if id == "ops-pager"
        ));
        assert!(matches!(
            parse(&["notification", "deliveries"])?.command,
            Command::Notification(NotificationCommand::Deliveries {
                endpoint_id: None,
                limit: None
            })
        ));
        let c = parse(&["notification", "deliveries", "ops-pager", "--limit", "5"])?;
        assert!(c.endpoint.is_none());
        assert!(matches!(
            c.command,
            Command::Notification(NotificationCommand::Deliveries { endpoint_id: Some(e), limit: Some(5) })
                if e == "ops-pager"
        ));
        // `--endpoint` stays the server's URL.
        let c = parse(&["notification", "deliveries", "--endpoint", "http://tp"])?;
        assert_eq!(c.endpoint.as_deref(), Some("http://tp"));
        assert!(matches!(
            c.command,
            Command::Notification(NotificationCommand::Deliveries { endpoint_id: None, .. })
        ));
        for limit in ["0", "-1", "many"] {
            assert!(
                matches!(
                    usage_error(&["notification", "deliveries", "--limit", limit]),
                    Some(ErrorKind::ValueValidation | ErrorKind::UnknownArgument)
                ),
                "{limit}"
            );
        }
        assert_eq!(
            usage_error(&["notification", "endpoint", "delete"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["notification", "endpoint"]),
            Some(ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand)
        );
        assert_eq!(
            usage_error(&["notification", "deliveries", "ops-pager", "chat"]),
            Some(ErrorKind::UnknownArgument)
        );
        Ok(())
    }

    #[test]
    fn policy_create_and_update() -> TestResult {
        let Command::Policy(PolicyCommand::Create(a)) = parse(&[
            "policy",
            "create",
            "Deny big",
            "--type",
            "PLAN",
            "--file",
            "deny.rego",
            "--label",
            "autoattach:prod",
            "--label",
            "cost",
            "--id",
            "deny-big",
            "--space",
            "prod",
            "--description",
            "d",
        ])?
        .command
        else {
            panic!("not policy create")
        };
        assert_eq!((a.name.as_str(), a.policy_type), ("Deny big", PolicyTypeArg::Plan));
        assert_eq!(a.file, PathBuf::from("deny.rego"));
        assert_eq!(a.labels, ["autoattach:prod", "cost"]);
        assert_eq!(
            (a.id.as_deref(), a.space.as_deref(), a.description.as_deref()),
            (Some("deny-big"), Some("prod"), Some("d"))
        );
        let Command::Policy(PolicyCommand::Create(a)) =
            parse(&["policy", "create", "n", "--type", "login", "--file", "-"])?.command
        else {
            panic!("not policy create")
        };
        assert_eq!((a.policy_type, a.file), (PolicyTypeArg::Login, PathBuf::from("-")));
        assert!(a.labels.is_empty() && a.id.is_none() && a.space.is_none());
        assert_eq!(
            usage_error(&["policy", "create", "n", "--file", "p.rego"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["policy", "create", "n", "--type", "plan"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["policy", "create", "n", "--type", "access", "--file", "p.rego"]),
            Some(ErrorKind::InvalidValue)
        );

        let Command::Policy(PolicyCommand::Update(a)) = parse(&[
            "policy", "update", "deny-big", "--file", "v2.rego", "--label", "a", "--name", "N",
        ])?
        .command
        else {
            panic!("not policy update")
        };
        assert_eq!(a.policy, "deny-big");
        assert_eq!(a.file, Some(PathBuf::from("v2.rego")));
        assert_eq!(
            (a.labels, a.clear_labels, a.name.as_deref()),
            (vec!["a".to_owned()], false, Some("N"))
        );
        let Command::Policy(PolicyCommand::Update(a)) =
            parse(&["policy", "update", "deny-big", "--clear-labels"])?.command
        else {
            panic!("not policy update")
        };
        assert!(a.clear_labels && a.file.is_none());
        // Something must change; clearing and setting labels exclude each other.
        assert_eq!(
            usage_error(&["policy", "update", "deny-big"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["policy", "update", "deny-big", "--clear-labels", "--label", "a"]),
            Some(ErrorKind::ArgumentConflict)
        );
        Ok(())
    }

    #[test]
    fn policy_test_simulate_and_the_rest() -> TestResult {
        let Command::Policy(PolicyCommand::Test(a)) =
            parse(&["policy", "test", "p.rego", "--input", "in.json"])?.command
        else {
            panic!("not policy test")
        };
        assert_eq!(
            (a.file, a.input, a.policy_type),
            (PathBuf::from("p.rego"), PathBuf::from("in.json"), PolicyTypeArg::Plan)
        );
        let c = parse(&[
            "policy", "test", "p.rego", "--input", "in.json", "--type", "Approval", "-o", "json",
        ])?;
        assert_eq!(c.output, OutputFormat::Json);
        assert!(matches!(
            c.command,
            Command::Policy(PolicyCommand::Test(PolicyTestArgs {
                policy_type: PolicyTypeArg::Approval,
                ..
            }))
        ));
        assert_eq!(
            usage_error(&["policy", "test", "p.rego"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert!(matches!(
            parse(&["policy", "simulate", "deny-big", "--run", "run-1"])?.command,
            Command::Policy(PolicyCommand::Simulate { policy, run }) if policy == "deny-big" && run == "run-1"
        ));
        assert_eq!(
            usage_error(&["policy", "simulate", "deny-big"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert!(matches!(
            parse(&["policy", "list"])?.command,
            Command::Policy(PolicyCommand::List)
        ));
        assert!(matches!(
            parse(&["policy", "show", "deny-big"])?.command,
            Command::Policy(PolicyCommand::Show { policy }) if policy == "deny-big"
        ));
        assert!(matches!(
            parse(&["policy", "delete", "deny-big"])?.command,
            Command::Policy(PolicyCommand::Delete { policy }) if policy == "deny-big"
        ));
        assert!(matches!(
            parse(&["policy", "attach", "deny-big", "net"])?.command,
            Command::Policy(PolicyCommand::Attach { policy, stack }) if policy == "deny-big" && stack == "net"
        ));
        assert!(matches!(
            parse(&["policy", "detach", "deny-big", "net"])?.command,
            Command::Policy(PolicyCommand::Detach { policy, stack }) if policy == "deny-big" && stack == "net"
        ));
        assert_eq!(
            usage_error(&["policy", "attach", "deny-big"]),
            Some(ErrorKind::MissingRequiredArgument)
        );
        assert_eq!(
            usage_error(&["policy"]),
            Some(ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand)
        );
        Ok(())
    }

    #[test]
    fn variable_kinds_are_the_flag_values() {
        let names: Vec<String> = VariableKindArg::value_variants()
            .iter()
            .filter_map(|k| k.to_possible_value().map(|v| v.get_name().to_owned()))
            .collect();
        assert_eq!(names, ["env", "terraform", "file"]);
    }

    #[test]
    fn role_names_are_the_apis() {
        let space: Vec<&str> = SpaceRole::value_variants().iter().map(|r| r.as_str()).collect();
        assert_eq!(space, ["reader", "writer", "admin"]);
        for r in KeyRole::value_variants() {
            assert_eq!(
                r.to_possible_value().map(|v| v.get_name().to_owned()).as_deref(),
                Some(r.as_str())
            );
        }
        for r in SpaceRole::value_variants() {
            assert_eq!(
                r.to_possible_value().map(|v| v.get_name().to_owned()).as_deref(),
                Some(r.as_str())
            );
        }
    }
}
