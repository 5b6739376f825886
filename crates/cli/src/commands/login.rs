//! `tpctl login`: get a credential (password login, browser single sign-on, or an API key
//! checked with `me`) and save it with its endpoint to the config file; a login session
//! also saves the refresh token that renews its short-lived access token. `tpctl logout`
//! undoes it.

use std::io::{BufRead, IsTerminal, Read};

use anyhow::{Context as _, Result, anyhow, bail};
use chrono::{DateTime, Utc};
use serde::Serialize;
use terraplane_client::{Client, ClientError, Organization};

use crate::cli::{LoginArgs, OutputFormat};
use crate::config::{self, ConfigError, ConfigFile};
use crate::{Context, output};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LoginOutput {
    endpoint: String,
    name: String,
    organization: LoginOrg,
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<DateTime<Utc>>,
    config: String,
}

/// Single sign-on only tells the organization's slug.
#[derive(Serialize)]
#[serde(untagged)]
enum LoginOrg {
    Full(Organization),
    Slug { slug: String },
}

impl LoginOrg {
    fn slug(&self) -> &str {
        match self {
            LoginOrg::Full(o) => &o.slug,
            LoginOrg::Slug { slug } => slug,
        }
    }
}

pub async fn login(
    args: LoginArgs,
    flag_endpoint: Option<String>,
    flag_token: Option<String>,
    org: Option<String>,
    format: OutputFormat,
    ctx: &mut Context<'_>,
) -> Result<()> {
    let path = config::config_path(ctx.env).ok_or(ConfigError::NoPath)?;
    let file = config::load(&path)?;
    let endpoint = [flag_endpoint, (ctx.env)(config::ENV_ENDPOINT), file.endpoint]
        .into_iter()
        .flatten()
        .map(|e| e.trim().trim_end_matches('/').to_owned())
        .find(|e| !e.is_empty())
        .ok_or_else(|| anyhow!("no endpoint: pass --endpoint URL or set TPCTL_ENDPOINT"))?;
    let client = Client::new(&endpoint, None)?;
    let token = flag_token.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty());

    let (token, refresh_token, result) = match token {
        None if args.sso => {
            let cb = super::sso::sign_in(&endpoint, args.github, org.as_deref(), ctx).await?;
            let out = LoginOutput {
                endpoint: endpoint.clone(),
                name: cb.email,
                organization: LoginOrg::Slug { slug: cb.organization },
                role: None,
                expires_at: cb
                    .expires_at
                    .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
                    .map(|t| t.with_timezone(&Utc)),
                config: path.display().to_string(),
            };
            (cb.token, cb.refresh_token, out)
        }
        Some(_) if args.sso => bail!("pass either --token or --sso, not both"),
        Some(token) => {
            if args.email.is_some() || args.password.is_some() || args.password_stdin {
                bail!("pass either --token or --email/--password, not both");
            }
            let me = client
                .with_token(Some(token.clone()))
                .me()
                .await
                .map_err(refused)
                .context("the token was refused")?;
            if let Some(org) = &org
                && org != &me.organization.slug
            {
                bail!("the token belongs to organization {}, not {org}", me.organization.slug);
            }
            let out = LoginOutput {
                endpoint: endpoint.clone(),
                name: me.name,
                organization: LoginOrg::Full(me.organization),
                role: Some(me.role),
                expires_at: None,
                config: path.display().to_string(),
            };
            // An API key: nothing to refresh, and an older session's refresh token must go.
            (token, None, out)
        }
        None => {
            let email = match args.email {
                Some(e) => e,
                None if std::io::stdin().is_terminal() => prompt_line(ctx, "Email: ")?,
                None => bail!("--email is required when stdin is not a terminal (or log in with --token)"),
            };
            let password = match (args.password, args.password_stdin) {
                (Some(p), _) => p,
                (None, true) => read_password_stdin()?,
                (None, false) if std::io::stdin().is_terminal() => {
                    rpassword::prompt_password("Password: ").context("cannot read the password")?
                }
                (None, false) => {
                    bail!("--password or --password-stdin is required when stdin is not a terminal")
                }
            };
            if email.trim().is_empty() || password.is_empty() {
                bail!("email and password must not be empty");
            }
            let r = client
                .login(email.trim(), &password, org.as_deref())
                .await
                .map_err(refused)?;
            let out = LoginOutput {
                endpoint: endpoint.clone(),
                name: email.trim().to_owned(),
                organization: LoginOrg::Full(r.organization),
                role: None,
                expires_at: Some(r.expires_at),
                config: path.display().to_string(),
            };
            (r.token, r.refresh_token.filter(|t| !t.is_empty()), out)
        }
    };

    config::save(
        &path,
        &ConfigFile {
            endpoint: Some(endpoint),
            token: Some(token),
            refresh_token,
        },
    )?;
    let text = match format {
        OutputFormat::Json => {
            let mut s = serde_json::to_string_pretty(&result).context("cannot encode JSON")?;
            s.push('\n');
            s
        }
        OutputFormat::Table => {
            let mut s = format!(
                "Logged in to {} as {} in organization {}",
                result.endpoint,
                result.name,
                result.organization.slug()
            );
            if let Some(t) = &result.expires_at {
                s.push_str(&format!(" (session expires {} UTC)", output::time(t)));
            }
            s.push_str(&format!("\nCredential saved to {}\n", result.config));
            s
        }
    };
    ctx.out.write_all(text.as_bytes()).context("cannot write to stdout")
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LogoutOutput {
    endpoint: Option<String>,
    /// `session` or `apiKey`.
    credential: &'static str,
    /// The server ended the session (always false for an API key).
    session_ended: bool,
    config: String,
}

/// `tpctl logout`: end the saved login session on the server (best effort) and remove the
/// token and refresh token from the config file, keeping the endpoint. A saved API key is
/// only forgotten here; it stays valid on the server.
pub async fn logout(flag_endpoint: Option<String>, format: OutputFormat, ctx: &mut Context<'_>) -> Result<()> {
    let path = config::config_path(ctx.env).ok_or(ConfigError::NoPath)?;
    let file = config::load(&path)?;
    let nonempty = |s: Option<String>| s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    let endpoint = nonempty(file.endpoint.clone()).map(|e| e.trim_end_matches('/').to_owned());
    let asked = nonempty(flag_endpoint).or_else(|| nonempty((ctx.env)(config::ENV_ENDPOINT)));
    if let (Some(asked), Some(saved)) = (&asked, &endpoint)
        && !config::same_endpoint(asked, saved)
    {
        bail!("the saved credential is for {saved}, not {asked}; nothing was changed");
    }
    let Some(token) = nonempty(file.token.clone()) else {
        let msg = format!("Not logged in: no credential saved in {}\n", path.display());
        return ctx.err.write_all(msg.as_bytes()).context("cannot write to stderr");
    };
    let refresh_token = nonempty(file.refresh_token.clone());
    // Sessions saved before refresh tokens existed are JWTs; API keys are not.
    let session = refresh_token.is_some() || token.split('.').count() == 3;

    let mut session_ended = false;
    if session {
        let ended = match &endpoint {
            Some(e) => match super::client_for(e, token, refresh_token, Some(path.clone())) {
                Ok(client) => client.logout().await.map_err(anyhow::Error::from),
                Err(e) => Err(e),
            },
            None => Err(anyhow!("no endpoint is saved with it")),
        };
        match ended {
            Ok(()) => session_ended = true,
            Err(e) => {
                let msg =
                    format!("warning: could not end the session on the server ({e:#}); forgetting it locally anyway\n");
                ctx.err.write_all(msg.as_bytes()).context("cannot write to stderr")?;
            }
        }
    }

    // Read again: renewing the session to log out rotated the tokens in the file.
    let mut file = config::load(&path).unwrap_or(file);
    file.token = None;
    file.refresh_token = None;
    config::save(&path, &file)?;

    let result = LogoutOutput {
        endpoint,
        credential: if session { "session" } else { "apiKey" },
        session_ended,
        config: path.display().to_string(),
    };
    let text = match format {
        OutputFormat::Json => {
            let mut s = serde_json::to_string_pretty(&result).context("cannot encode JSON")?;
            s.push('\n');
            s
        }
        OutputFormat::Table => {
            let of = result
                .endpoint
                .as_deref()
                .map(|e| format!(" of {e}"))
                .unwrap_or_default();
            let at = result
                .endpoint
                .as_deref()
                .map(|e| format!(" for {e}"))
                .unwrap_or_default();
            match (session, session_ended) {
                (true, true) => format!(
                    "Logged out{of}: the session is ended and its tokens are removed from {}\n",
                    result.config
                ),
                (true, false) => format!("Removed the session tokens{at} from {}\n", result.config),
                (false, _) => format!(
                    "Removed the API key saved{at} from {}; the key itself stays valid \
                     (revoke it with `tpctl apikey revoke ID`)\n",
                    result.config
                ),
            }
        }
    };
    ctx.out.write_all(text.as_bytes()).context("cannot write to stdout")
}

/// A refused login is reported as it is, without `main`'s "log in again" hint.
fn refused(e: ClientError) -> anyhow::Error {
    if e.is_unauthenticated() {
        anyhow!("{e}")
    } else {
        e.into()
    }
}

fn prompt_line(ctx: &mut Context<'_>, prompt: &str) -> Result<String> {
    ctx.err.write_all(prompt.as_bytes())?;
    ctx.err.flush()?;
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("cannot read stdin")?;
    Ok(line.trim().to_owned())
}

pub(super) fn read_password_stdin() -> Result<String> {
    read_password(&mut std::io::stdin().lock())
}

fn read_password(r: &mut impl Read) -> Result<String> {
    let mut s = String::new();
    r.read_to_string(&mut s)
        .context("cannot read the password from stdin")?;
    // Only the line break `echo` adds; spaces may be part of the password.
    Ok(s.trim_end_matches(['\r', '\n']).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_from_stdin_loses_only_its_line_break() -> Result<()> {
        assert_eq!(read_password(&mut &b"  pass word \r\n"[..])?, "  pass word ");
        assert_eq!(read_password(&mut &b"pw"[..])?, "pw");
        assert_eq!(read_password(&mut &b"\n"[..])?, "");
        Ok(())
    }
}
