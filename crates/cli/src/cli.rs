//! The command line as clap sees it: every flag and subcommand of `tpctl`, nothing else.
//! Endpoint and token env variables are resolved in `config`, not by clap, so tests can
//! inject them.

use clap::{Args, Parser, Subcommand, ValueEnum};

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
    /// Log in with email and password (or store an API key given with --token) and save the
    /// credential to the config file ($TPCTL_CONFIG or ~/.config/tpctl/config.json)
    Login(LoginArgs),
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
    /// Organization slug to log in to (default: your first organization)
    #[arg(long, value_name = "ORG")]
    pub org: Option<String>,
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
        /// Follow the run until it needs a decision or ends; exit 1 unless it succeeds
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
    /// Throw away an unconfirmed run's plan
    Discard {
        #[arg(value_name = "RUN")]
        run: String,
    },
    /// Cancel a run that has not started applying
    Cancel {
        #[arg(value_name = "RUN")]
        run: String,
    },
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
        let Command::Login(a) = c.command else {
            panic!("not login")
        };
        assert_eq!(a.email.as_deref(), Some("a@b.c"));
        assert_eq!(a.password.as_deref(), Some("pw"));
        assert_eq!(a.org.as_deref(), Some("acme"));
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
}
