//! Where `tpctl` finds its endpoint, credential and organization: flag, then environment,
//! then (endpoint and credential) the config file `login` writes. The environment is passed in as a lookup so tests never touch the
//! process environment or the real home directory.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub const ENV_ENDPOINT: &str = "TPCTL_ENDPOINT";
pub const ENV_TOKEN: &str = "TPCTL_TOKEN";
pub const ENV_CONFIG: &str = "TPCTL_CONFIG";
pub const ENV_ORG: &str = "TPCTL_ORG";

/// A lookup of environment variables; empty values count as unset.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The config file's content.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Renews `token` when it is a login session's access token (`tpctl login` with a
    /// password); API keys have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {} is not valid: {source}", path.display())]
    Parse { path: PathBuf, source: serde_json::Error },
    #[error("cannot write config file {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("no place for the config file: set TPCTL_CONFIG or HOME")]
    NoPath,
}

/// The endpoint and token a command uses, and where they came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub endpoint: Option<String>,
    pub token: Option<String>,
    /// The config file's refresh token, only when `token` is the file's own token (not
    /// one from the flag or the environment).
    pub refresh_token: Option<String>,
    pub config_path: Option<PathBuf>,
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

/// `$TPCTL_CONFIG`, else `$HOME/.config/tpctl/config.json`.
pub fn config_path(env: EnvLookup<'_>) -> Option<PathBuf> {
    if let Some(p) = non_empty(env(ENV_CONFIG)) {
        return Some(PathBuf::from(p));
    }
    non_empty(env("HOME")).map(|h| Path::new(&h).join(".config").join("tpctl").join("config.json"))
}

/// Reads the config file; a missing file is an empty config.
pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
    match fs::read(path) {
        Ok(b) => serde_json::from_slice(&b).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ConfigFile::default()),
        Err(source) => Err(ConfigError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Writes the config file readable by its owner only (it holds a credential), replacing
/// it atomically.
pub fn save(path: &Path, cfg: &ConfigFile) -> Result<(), ConfigError> {
    let err = |source| ConfigError::Write {
        path: path.to_owned(),
        source,
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    create_private_dir(dir).map_err(err)?;
    let body = serde_json::to_vec_pretty(cfg).map_err(|e| err(std::io::Error::other(e)))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "config.json".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = write_private(&tmp, &body).and_then(|()| fs::rename(&tmp, path));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written.map_err(err)
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)
}

#[cfg(unix)]
fn write_private(path: &Path, body: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    // `mode` only applies on creation; a leftover file keeps its bits otherwise.
    f.set_permissions(fs::Permissions::from_mode(0o600))?;
    f.write_all(body)?;
    f.write_all(b"\n")?;
    f.sync_all()
}

#[cfg(not(unix))]
fn write_private(path: &Path, body: &[u8]) -> std::io::Result<()> {
    let mut f = fs::File::create(path)?;
    f.write_all(body)?;
    f.write_all(b"\n")?;
    f.sync_all()
}

/// Replaces the saved session tokens with renewed ones (tokens rotate: the old refresh
/// token is dead). Leaves the file alone, returning `false`, when it no longer holds a
/// credential for `endpoint` (another login replaced it meanwhile).
pub fn save_renewed(path: &Path, endpoint: &str, token: &str, refresh_token: &str) -> Result<bool, ConfigError> {
    let mut file = load(path)?;
    if !file.endpoint.as_deref().is_some_and(|e| same_endpoint(e, endpoint)) || file.token.is_none() {
        return Ok(false);
    }
    file.token = Some(token.to_owned());
    file.refresh_token = Some(refresh_token.to_owned());
    save(path, &file)?;
    Ok(true)
}

/// Endpoints compare without trailing slashes.
pub fn same_endpoint(a: &str, b: &str) -> bool {
    a.trim().trim_end_matches('/') == b.trim().trim_end_matches('/')
}

/// The organization a command asks for: flag, then environment; `None` means whichever
/// the credential belongs to.
pub fn org(flag_org: Option<String>, env: EnvLookup<'_>) -> Option<String> {
    non_empty(flag_org).or_else(|| non_empty(env(ENV_ORG)))
}

/// Flag > environment > config file, for endpoint and token each. The file's token is
/// only used with the file's own endpoint: a token must never be sent to a server it
/// wasn't issued by.
pub fn resolve(
    flag_endpoint: Option<String>,
    flag_token: Option<String>,
    env: EnvLookup<'_>,
) -> Result<Settings, ConfigError> {
    let config_path = config_path(env);
    let file = match &config_path {
        Some(p) => load(p)?,
        None => ConfigFile::default(),
    };
    let file_endpoint = non_empty(file.endpoint);
    let endpoint = non_empty(flag_endpoint)
        .or_else(|| non_empty(env(ENV_ENDPOINT)))
        .or_else(|| file_endpoint.clone());
    let (file_token, file_refresh) = match (&endpoint, &file_endpoint) {
        (Some(e), Some(f)) if same_endpoint(e, f) => (non_empty(file.token), non_empty(file.refresh_token)),
        _ => (None, None),
    };
    let (token, refresh_token) = match non_empty(flag_token).or_else(|| non_empty(env(ENV_TOKEN))) {
        Some(t) => (Some(t), None),
        None if file_token.is_some() => (file_token, file_refresh),
        None => (None, None),
    };
    Ok(Settings {
        endpoint,
        token,
        refresh_token,
        config_path,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |k: &str| m.get(k).cloned()
    }

    fn write_config(dir: &Path, endpoint: &str, token: &str) -> Result<PathBuf, ConfigError> {
        let p = dir.join("cfg.json");
        save(
            &p,
            &ConfigFile {
                endpoint: Some(endpoint.into()),
                token: Some(token.into()),
                refresh_token: None,
            },
        )?;
        Ok(p)
    }

    #[test]
    fn flag_beats_env_beats_file() -> TestResult {
        let dir = tempfile::tempdir()?;
        let p = write_config(dir.path(), "http://file:1", "file-token")?;
        let p = p.to_string_lossy().into_owned();

        let only_file = env_of(&[(ENV_CONFIG, &p)]);
        let s = resolve(None, None, &only_file)?;
        assert_eq!(s.endpoint.as_deref(), Some("http://file:1"));
        assert_eq!(s.token.as_deref(), Some("file-token"));

        let with_env = env_of(&[
            (ENV_CONFIG, &p),
            (ENV_ENDPOINT, "http://env:2"),
            (ENV_TOKEN, "env-token"),
        ]);
        let s = resolve(None, None, &with_env)?;
        assert_eq!(s.endpoint.as_deref(), Some("http://env:2"));
        assert_eq!(s.token.as_deref(), Some("env-token"));

        let s = resolve(Some("http://flag:3".into()), Some("flag-token".into()), &with_env)?;
        assert_eq!(s.endpoint.as_deref(), Some("http://flag:3"));
        assert_eq!(s.token.as_deref(), Some("flag-token"));

        // Each value falls back on its own.
        let env_token_only = env_of(&[(ENV_CONFIG, &p), (ENV_TOKEN, "env-token")]);
        let s = resolve(None, None, &env_token_only)?;
        assert_eq!(s.endpoint.as_deref(), Some("http://file:1"));
        assert_eq!(s.token.as_deref(), Some("env-token"));
        Ok(())
    }

    #[test]
    fn refresh_token_goes_only_with_the_files_own_token() -> TestResult {
        let dir = tempfile::tempdir()?;
        let p = dir.path().join("cfg.json");
        save(
            &p,
            &ConfigFile {
                endpoint: Some("http://file:1".into()),
                token: Some("access".into()),
                refresh_token: Some("refresh".into()),
            },
        )?;
        let p = p.to_string_lossy().into_owned();
        let s = resolve(None, None, &env_of(&[(ENV_CONFIG, &p)]))?;
        assert_eq!(
            (s.token.as_deref(), s.refresh_token.as_deref()),
            (Some("access"), Some("refresh"))
        );
        let s = resolve(None, None, &env_of(&[(ENV_CONFIG, &p), (ENV_TOKEN, "env-token")]))?;
        assert_eq!((s.token.as_deref(), s.refresh_token), (Some("env-token"), None));
        let s = resolve(None, Some("flag-token".into()), &env_of(&[(ENV_CONFIG, &p)]))?;
        assert_eq!((s.token.as_deref(), s.refresh_token), (Some("flag-token"), None));
        let s = resolve(Some("http://elsewhere:2".into()), None, &env_of(&[(ENV_CONFIG, &p)]))?;
        assert_eq!((s.token, s.refresh_token), (None, None));
        Ok(())
    }

    #[test]
    fn org_comes_from_flag_then_env() {
        let env = env_of(&[(ENV_ORG, "env-org")]);
        assert_eq!(org(Some("flag-org".into()), &env).as_deref(), Some("flag-org"));
        assert_eq!(org(None, &env).as_deref(), Some("env-org"));
        assert_eq!(org(Some(" ".into()), &env).as_deref(), Some("env-org"));
        assert_eq!(org(None, &env_of(&[(ENV_ORG, "")])), None);
    }

    #[test]
    fn file_token_is_not_sent_to_another_endpoint() -> TestResult {
        let dir = tempfile::tempdir()?;
        let p = write_config(dir.path(), "http://file:1/", "file-token")?;
        let env = env_of(&[(ENV_CONFIG, &p.to_string_lossy())]);
        let s = resolve(Some("http://elsewhere:9".into()), None, &env)?;
        assert_eq!(s.token, None);
        let s = resolve(Some("http://file:1".into()), None, &env)?;
        assert_eq!(s.token.as_deref(), Some("file-token"), "trailing slash doesn't matter");
        Ok(())
    }

    #[test]
    fn config_path_prefers_tpctl_config_then_home() -> TestResult {
        let home = tempfile::tempdir()?;
        let h = home.path().to_string_lossy().into_owned();
        assert_eq!(
            config_path(&env_of(&[("HOME", &h)])),
            Some(home.path().join(".config/tpctl/config.json"))
        );
        assert_eq!(
            config_path(&env_of(&[("HOME", &h), (ENV_CONFIG, "/x/c.json")])),
            Some(PathBuf::from("/x/c.json"))
        );
        assert_eq!(config_path(&env_of(&[(ENV_CONFIG, "")])), None);

        // Through HOME, the file lands in (and is read from) the default place.
        let env = env_of(&[("HOME", &h)]);
        let p = config_path(&env).ok_or("no path")?;
        save(
            &p,
            &ConfigFile {
                endpoint: Some("http://h:1".into()),
                token: Some("t".into()),
                refresh_token: None,
            },
        )?;
        let s = resolve(None, None, &env)?;
        assert_eq!(
            (s.endpoint.as_deref(), s.token.as_deref()),
            (Some("http://h:1"), Some("t"))
        );
        Ok(())
    }

    #[test]
    fn nothing_configured_is_empty_not_an_error() -> TestResult {
        let home = tempfile::tempdir()?;
        let env = env_of(&[("HOME", &home.path().to_string_lossy())]);
        let s = resolve(None, None, &env)?;
        assert_eq!((s.endpoint, s.token), (None, None));
        Ok(())
    }

    #[test]
    fn invalid_file_is_reported() -> TestResult {
        let dir = tempfile::tempdir()?;
        let p = dir.path().join("c.json");
        fs::write(&p, "not json")?;
        let env = env_of(&[(ENV_CONFIG, &p.to_string_lossy())]);
        assert!(matches!(resolve(None, None, &env), Err(ConfigError::Parse { .. })));
        Ok(())
    }

    #[cfg(unix)]
    #[test]
    fn saved_file_is_private_and_round_trips() -> TestResult {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir()?;
        let p = dir.path().join("a/b/config.json");
        fs::create_dir_all(dir.path().join("a/b"))?;
        fs::write(&p, "{}")?;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644))?;
        let cfg = ConfigFile {
            endpoint: Some("http://x".into()),
            token: Some("secret".into()),
            refresh_token: None,
        };
        save(&p, &cfg)?;
        assert_eq!(fs::metadata(&p)?.permissions().mode() & 0o777, 0o600);
        assert_eq!(load(&p)?, cfg);
        let v: serde_json::Value = serde_json::from_slice(&fs::read(&p)?)?;
        assert_eq!(v, serde_json::json!({"endpoint": "http://x", "token": "secret"}));
        Ok(())
    }
}
