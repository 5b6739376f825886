//! `tpctl login`: get a credential (password login, or an API key checked with `me`) and
//! save it with its endpoint to the config file.

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
    organization: Organization,
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<DateTime<Utc>>,
    config: String,
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

    let (token, result) = match token {
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
                organization: me.organization,
                role: Some(me.role),
                expires_at: None,
                config: path.display().to_string(),
            };
            (token, out)
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
                organization: r.organization,
                role: None,
                expires_at: Some(r.expires_at),
                config: path.display().to_string(),
            };
            (r.token, out)
        }
    };

    config::save(
        &path,
        &ConfigFile {
            endpoint: Some(endpoint),
            token: Some(token),
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
                result.endpoint, result.name, result.organization.slug
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
