//! Layered configuration: built-in defaults, then an optional TOML file, then environment
//! variables `TERRAPLANE_<SECTION>__<KEY>` (plus the conventional `DATABASE_URL` and
//! `AMQP_URL`). Unknown keys are errors. Secrets live in [`Secret`], which never prints.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

/// A value that must never reach a log or `print-config`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("[redacted]")
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub database: DatabaseConfig,
    pub queue: QueueConfig,
    pub api: ApiConfig,
    pub auth: AuthConfig,
    pub scheduler: SchedulerConfig,
    pub runner: RunnerConfig,
    pub bootstrap: BootstrapConfig,
    pub audit: AuditConfig,
    pub sso: SsoConfig,
    pub secrets: SecretsConfig,
    pub identity: IdentityConfig,
    pub notifications: NotificationsConfig,
    pub policy: PolicyConfig,
}

/// Bounds on one Rego policy evaluation: past either, the evaluation fails with "policy
/// evaluation exceeded its limit" (and so does the run it was for).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyConfig {
    pub eval_timeout_ms: u64,
    pub max_memory_mb: u64,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            eval_timeout_ms: 2000,
            max_memory_mb: 256,
        }
    }
}

/// Delivery of notifications (webhook, Slack, PagerDuty, Teams) from the outbox.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NotificationsConfig {
    pub delivery_interval_ms: u64,
    /// Attempts before a delivery is marked failed.
    pub max_attempts: u32,
    /// Cap of the exponential backoff between attempts (and of a `Retry-After`).
    pub max_backoff_secs: u64,
    pub timeout_secs: u64,
}

impl Default for NotificationsConfig {
    fn default() -> Self {
        Self {
            delivery_interval_ms: 500,
            max_attempts: 8,
            max_backoff_secs: 300,
            timeout_secs: 10,
        }
    }
}

/// The OIDC issuer that gives each run phase a signed identity token (workload identity).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IdentityConfig {
    /// `aud` of run tokens when an integration names none; defaults to the public URL's host.
    pub audience: Option<String>,
    /// Life of a run phase's identity token.
    pub token_ttl_secs: u64,
    /// How long a retired signing key stays in the JWKS so tokens it signed still verify.
    pub key_overlap_secs: u64,
}

impl Default for IdentityConfig {
    fn default() -> Self {
        Self {
            audience: None,
            token_ttl_secs: 3600,
            key_overlap_secs: 24 * 3600,
        }
    }
}

/// Encryption at rest.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecretsConfig {
    /// 64 hex characters (32 bytes): wraps every organization's data key. The api refuses
    /// to start without it; `terraplane dev` creates one in its data directory.
    pub master_key: Option<Secret>,
    /// Earlier master keys, comma-separated: data keys they wrapped still open, and
    /// `terraplane keys rotate` re-wraps them under `master_key`.
    pub previous_master_keys: Option<Secret>,
}

impl SecretsConfig {
    /// The master key's bytes, or why it is unusable.
    pub fn master_key_bytes(&self) -> Result<Option<[u8; 32]>, ConfigError> {
        let Some(k) = &self.master_key else { return Ok(None) };
        let bytes = hex::decode(k.expose().trim())
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .ok_or_else(|| ConfigError::Invalid("secrets.master_key must be 64 hex characters (32 bytes)".into()))?;
        Ok(Some(bytes))
    }

    /// The previous master keys' bytes.
    pub fn previous_key_bytes(&self) -> Result<Vec<[u8; 32]>, ConfigError> {
        let Some(k) = &self.previous_master_keys else {
            return Ok(Vec::new());
        };
        k.expose()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|h| {
                hex::decode(h)
                    .ok()
                    .and_then(|b| <[u8; 32]>::try_from(b).ok())
                    .ok_or_else(|| {
                        ConfigError::Invalid(
                            "secrets.previous_master_keys must be 64-hex-character keys, comma-separated".into(),
                        )
                    })
            })
            .collect()
    }
}

/// OpenID Connect single sign-on (authorization code flow with PKCE).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SsoConfig {
    /// The provider's issuer URL (its `/.well-known/openid-configuration` is read).
    pub oidc_issuer: Option<String>,
    pub oidc_client_id: Option<String>,
    pub oidc_client_secret: Option<Secret>,
    /// The ID token claim holding group names; groups map to teams of the same slug.
    pub oidc_groups_claim: Option<String>,
    /// The organization SSO users join (as members) and log in to; `default` if unset.
    pub oidc_organization: Option<String>,
    /// GitHub OAuth app; users join `oidc_organization` too, and their GitHub teams
    /// (`team-slug`) map to teams of the same slug.
    pub github_client_id: Option<String>,
    pub github_client_secret: Option<Secret>,
    /// GitHub Enterprise or a test server: `https://github.com` by default.
    pub github_url: Option<String>,
    /// The REST API: `https://api.github.com` by default.
    pub github_api_url: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Where every organization's audit events are POSTed, in order, when set.
    pub webhook_url: Option<String>,
    /// HMAC-SHA256 key for `X-Terraplane-Signature-256`; required with a webhook.
    pub webhook_secret: Option<Secret>,
    pub delivery_interval_ms: u64,
    /// The longest wait between retries of a failing delivery.
    pub max_backoff_secs: u64,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            webhook_url: None,
            webhook_secret: None,
            delivery_interval_ms: 1000,
            max_backoff_secs: 300,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DatabaseConfig {
    /// `sqlite://path?mode=rwc` or `postgres://…`.
    pub url: String,
    /// Run pending migrations at start (on by default; production may run `terraplane migrate`).
    pub auto_migrate: bool,
    pub max_connections: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QueueConfig {
    /// `memory` (in-process, single binary only) or `amqp://…`.
    pub url: String,
    /// Prefix of every AMQP name; tests use a fresh one per test.
    pub prefix: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiConfig {
    pub listen: String,
    /// How runners and terraform reach the api; defaults to `http://<listen>`.
    pub public_url: Option<String>,
    pub max_state_bytes: usize,
    pub max_plan_bytes: usize,
    /// Largest value of a variable or mounted file.
    pub max_variable_bytes: usize,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// HMAC key for session and run tokens.
    pub jwt_secret: Option<Secret>,
    /// Life of an access token; a refresh token renews it.
    pub session_ttl_secs: u64,
    /// Life of a login session (its refresh token).
    pub refresh_ttl_secs: u64,
    /// Upper bound of a run token's life; it also dies when its run ends.
    pub run_token_ttl_secs: u64,
    /// Anyone may create an account and an organization they own (`signUp`).
    pub signup_enabled: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerConfig {
    pub tick_ms: u64,
    /// A claim's lease; a runner renews it with heartbeats.
    pub lease_secs: u64,
    pub heartbeat_secs: u64,
    /// A run still QUEUED this long after its publish is published again.
    pub republish_after_secs: u64,
    /// A run held by a runner longer than this fails.
    pub run_timeout_secs: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunnerConfig {
    pub pool: String,
    /// Shared secret runners of `pool` present to claim jobs.
    pub pool_token: Option<Secret>,
    /// Where the runner reaches the api; defaults to the api's public url.
    pub api_url: Option<String>,
    pub work_dir: Option<PathBuf>,
    pub terraform_bin: Option<PathBuf>,
    pub id: Option<String>,
    /// AWS STS endpoint for `AssumeRoleWithWebIdentity` (the regional AWS endpoint when unset).
    pub sts_endpoint: Option<String>,
    /// Region for STS calls.
    pub sts_region: String,
    /// The `sandbox` provider's binary, installed for terraform through a filesystem mirror
    /// (default: `terraform-provider-sandbox` or `terraplane-sandbox-provider` next to the
    /// running binary, when there).
    pub sandbox_provider: Option<PathBuf>,
    /// Where the sandbox "cloud" lives (`SANDBOX_ROOT` for runs: `<root>/<org>/<stack>`);
    /// default `$SANDBOX_ROOT`, else `<work_dir>/sandbox`.
    pub sandbox_root: Option<PathBuf>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BootstrapConfig {
    pub admin_email: String,
    pub admin_password: Option<Secret>,
    /// When set, becomes an admin API key with exactly this secret.
    pub token: Option<Secret>,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            url: "sqlite://.terraplane/terraplane.db?mode=rwc".into(),
            auto_migrate: true,
            max_connections: 10,
        }
    }
}

impl Default for QueueConfig {
    fn default() -> Self {
        Self {
            url: "memory".into(),
            prefix: "terraplane".into(),
        }
    }
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            public_url: None,
            max_state_bytes: 64 * 1024 * 1024,
            max_plan_bytes: 256 * 1024 * 1024,
            max_variable_bytes: 64 * 1024,
        }
    }
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            jwt_secret: None,
            session_ttl_secs: 900,
            refresh_ttl_secs: 30 * 24 * 3600,
            run_token_ttl_secs: 6 * 3600,
            signup_enabled: false,
        }
    }
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            tick_ms: 500,
            lease_secs: 30,
            heartbeat_secs: 5,
            republish_after_secs: 60,
            run_timeout_secs: 3600,
        }
    }
}

impl Default for RunnerConfig {
    fn default() -> Self {
        Self {
            pool: "default".into(),
            pool_token: None,
            api_url: None,
            work_dir: None,
            terraform_bin: None,
            id: None,
            sts_endpoint: None,
            sts_region: "us-east-1".into(),
            sandbox_provider: None,
            sandbox_root: None,
        }
    }
}

impl Default for BootstrapConfig {
    fn default() -> Self {
        Self {
            admin_email: "admin@terraplane.local".into(),
            admin_password: None,
            token: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {path} is not valid TOML: {source}")]
    Parse { path: PathBuf, source: toml::de::Error },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl Config {
    /// Defaults, then `file`, then the process environment.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        Self::load_from(file, std::env::vars())
    }

    pub fn load_from(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        let mut tree = toml::Table::new();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.to_owned(),
                source,
            })?;
            tree = toml::from_str(&text).map_err(|source| ConfigError::Parse {
                path: path.to_owned(),
                source,
            })?;
        }
        for (key, value) in env {
            let path: Option<(String, String)> = match key.as_str() {
                "DATABASE_URL" => Some(("database".into(), "url".into())),
                "AMQP_URL" => Some(("queue".into(), "url".into())),
                "TERRAPLANE_ADMIN_EMAIL" => Some(("bootstrap".into(), "admin_email".into())),
                "TERRAPLANE_ADMIN_PASSWORD" => Some(("bootstrap".into(), "admin_password".into())),
                "TERRAPLANE_BOOTSTRAP_TOKEN" => Some(("bootstrap".into(), "token".into())),
                "TERRAFORM_BIN" => Some(("runner".into(), "terraform_bin".into())),
                k => k.strip_prefix("TERRAPLANE_").and_then(|rest| {
                    let (section, field) = rest.split_once("__")?;
                    Some((section.to_ascii_lowercase(), field.to_ascii_lowercase()))
                }),
            };
            let Some((section, field)) = path else {
                continue;
            };
            let table = tree
                .entry(section.clone())
                .or_insert_with(|| toml::Value::Table(Default::default()));
            let toml::Value::Table(table) = table else {
                return Err(ConfigError::Invalid(format!("{section} is not a section")));
            };
            table.insert(field, env_value(&value));
        }
        let cfg: Config = toml::Value::Table(tree)
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError::Invalid(e.message().to_owned()))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// For thin binaries: `--config PATH` from the command line or `TERRAPLANE_CONFIG`.
    pub fn load_from_args() -> Result<Config, ConfigError> {
        let mut args = std::env::args().skip(1);
        let mut file = std::env::var_os("TERRAPLANE_CONFIG").map(PathBuf::from);
        while let Some(a) = args.next() {
            match a.as_str() {
                "--config" => file = args.next().map(PathBuf::from),
                other => {
                    return Err(ConfigError::Invalid(format!(
                        "unknown argument {other:?} (only --config PATH)"
                    )));
                }
            }
        }
        Self::load(file.as_deref())
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let db = &self.database.url;
        if !(db.starts_with("sqlite:") || db.starts_with("postgres://") || db.starts_with("postgresql://")) {
            return Err(ConfigError::Invalid(format!(
                "database.url must be sqlite:… or postgres://…, got {db:?}"
            )));
        }
        let q = &self.queue.url;
        if !(q == "memory" || q.starts_with("amqp://") || q.starts_with("amqps://")) {
            return Err(ConfigError::Invalid(format!(
                "queue.url must be memory or amqp://…, got {q:?}"
            )));
        }
        if let Some(url) = &self.audit.webhook_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(ConfigError::Invalid(format!(
                    "audit.webhook_url must be http(s)://…, got {url:?}"
                )));
            }
            if self.audit.webhook_secret.as_ref().is_none_or(|s| s.expose().is_empty()) {
                return Err(ConfigError::Invalid(
                    "audit.webhook_url needs audit.webhook_secret to sign deliveries".into(),
                ));
            }
        }
        self.secrets.master_key_bytes()?;
        self.secrets.previous_key_bytes()?;
        if self.scheduler.heartbeat_secs == 0 || self.scheduler.heartbeat_secs * 2 > self.scheduler.lease_secs {
            return Err(ConfigError::Invalid(
                "scheduler.lease_secs must be at least twice heartbeat_secs".into(),
            ));
        }
        Ok(())
    }

    pub fn public_url(&self) -> String {
        self.api
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{}", self.api.listen))
    }

    /// The effective configuration as TOML, secrets redacted.
    pub fn to_redacted_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_else(|e| format!("# cannot render config: {e}"))
    }
}

/// Environment values are strings; numbers and booleans are recognised so that
/// `TERRAPLANE_API__MAX_STATE_BYTES=1024` works.
fn env_value(raw: &str) -> toml::Value {
    if let Ok(i) = raw.parse::<i64>() {
        return toml::Value::Integer(i);
    }
    match raw {
        "true" => toml::Value::Boolean(true),
        "false" => toml::Value::Boolean(false),
        _ => toml::Value::String(raw.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn env_overrides_defaults() -> Result<(), ConfigError> {
        let cfg = Config::load_from(
            None,
            env(&[
                ("DATABASE_URL", "postgres://localhost/x"),
                ("TERRAPLANE_API__MAX_STATE_BYTES", "1024"),
                ("TERRAPLANE_AUTH__JWT_SECRET", "s3cr3t"),
                ("UNRELATED", "x"),
            ]),
        )?;
        assert_eq!(cfg.database.url, "postgres://localhost/x");
        assert_eq!(cfg.api.max_state_bytes, 1024);
        assert_eq!(cfg.auth.jwt_secret.as_ref().map(Secret::expose), Some("s3cr3t"));
        assert!(!cfg.to_redacted_toml().contains("s3cr3t"));
        assert!(!format!("{cfg:?}").contains("s3cr3t"));
        Ok(())
    }

    #[test]
    fn the_example_configuration_loads() -> Result<(), ConfigError> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/terraplane.example.toml");
        let cfg = Config::load_from(Some(&path), env(&[("TERRAPLANE_AUTH__JWT_SECRET", "s3cr3t")]))?;
        assert_eq!(cfg.policy.eval_timeout_ms, 2000);
        assert_eq!(cfg.policy.max_memory_mb, 256);
        Ok(())
    }

    #[test]
    fn unknown_keys_and_bad_urls_are_errors() {
        let err = Config::load_from(None, env(&[("TERRAPLANE_API__LISTNE", "x")])).unwrap_err();
        assert!(err.to_string().contains("listne"), "{err}");
        assert!(Config::load_from(None, env(&[("DATABASE_URL", "mysql://x")])).is_err());
        let unsigned = Config::load_from(
            None,
            env(&[("TERRAPLANE_AUDIT__WEBHOOK_URL", "https://hooks.example.com/a")]),
        );
        assert!(unsigned.unwrap_err().to_string().contains("webhook_secret"));
        let signed = Config::load_from(
            None,
            env(&[
                ("TERRAPLANE_AUDIT__WEBHOOK_URL", "https://hooks.example.com/a"),
                ("TERRAPLANE_AUDIT__WEBHOOK_SECRET", "k"),
            ]),
        );
        assert!(signed.is_ok());
    }
}
