//! `tpctl login --sso`: the browser half of single sign-on. The CLI listens on a loopback
//! port, sends the user to `{endpoint}/auth/{oidc,github}/login?return_to=…`, and the
//! server, once the provider signed the user in, redirects the browser back to
//! `http://127.0.0.1:PORT/callback` with the session's tokens in the query.

use std::time::Duration;

use anyhow::{Context as _, Result, anyhow};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use url::Url;

use crate::Context;

/// What the server hands back through the browser.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Callback {
    pub token: String,
    pub refresh_token: Option<String>,
    /// RFC 3339, as the server sent it.
    pub expires_at: Option<String>,
    pub organization: String,
    pub email: String,
}

/// Largest request head the callback listener reads.
const MAX_REQUEST: usize = 16 * 1024;

/// Runs the browser sign-in against `endpoint` (no trailing slash) and returns the session
/// the server issued. With `org`, a sign-in into another organization fails (SSO logs in to
/// the organization the server is configured for).
pub(super) async fn sign_in(
    endpoint: &str,
    github: bool,
    org: Option<&str>,
    ctx: &mut Context<'_>,
) -> Result<Callback> {
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .await
        .context("cannot listen on a local port for the browser to come back to")?;
    let port = listener.local_addr().context("cannot read the local port")?.port();
    let return_to = format!("http://127.0.0.1:{port}/callback");
    let url = login_url(endpoint, github, &return_to)?;
    let msg = format!("Open this URL in your browser to sign in:\n\n    {url}\n\n");
    ctx.err.write_all(msg.as_bytes()).context("cannot write to stderr")?;
    ctx.err.flush().context("cannot write to stderr")?;
    if let Some(browser) = (ctx.env)("BROWSER").filter(|b| !b.trim().is_empty()) {
        // Best effort: the URL is printed anyway.
        let _ = std::process::Command::new(browser.trim())
            .arg(url.as_str())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
    }
    let timeout = crate::sso_timeout();
    tokio::time::timeout(timeout, serve(&listener, org))
        .await
        .map_err(|_| {
            anyhow!(
                "no sign-in came back from the browser within {}; run `tpctl login --sso` again",
                human(timeout)
            )
        })?
}

/// `{endpoint}/auth/{oidc|github}/login?return_to=…`.
pub(super) fn login_url(endpoint: &str, github: bool, return_to: &str) -> Result<Url> {
    let provider = if github { "github" } else { "oidc" };
    let mut url = Url::parse(&format!("{endpoint}/auth/{provider}/login"))
        .with_context(|| format!("invalid endpoint {endpoint}"))?;
    url.query_pairs_mut().append_pair("return_to", return_to);
    Ok(url)
}

fn human(d: Duration) -> String {
    match d.as_secs() {
        s if s >= 60 && s % 60 == 0 => format!("{} minutes", s / 60),
        _ => format!("{d:?}"),
    }
}

/// Answers connections until one is a `GET /callback`: other requests get a 404, and
/// connections are read concurrently so an idle one (a browser's preconnect) blocks
/// nothing.
async fn serve(listener: &TcpListener, org: Option<&str>) -> Result<Callback> {
    let mut reading = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _) = accepted.context("cannot accept the browser's connection")?;
                reading.spawn(read_request_line(stream));
            }
            Some(read) = reading.join_next() => {
                let Ok(Ok((mut stream, line))) = read else { continue };
                let Some(target) = callback_target(&line) else {
                    respond(&mut stream, "404 Not Found", "Not found.").await;
                    continue;
                };
                let checked = parse_callback(target).and_then(|cb| match org {
                    Some(org) if org != cb.organization => Err(format!(
                        "single sign-on logged you in to organization {}, not {org}; it always logs in to \
                         the organization the server is configured for (drop --org / TPCTL_ORG)",
                        cb.organization
                    )),
                    _ => Ok(cb),
                });
                return match checked {
                    Ok(cb) => {
                        let page = format!(
                            "Signed in to Terraplane as {}. You can close this window.",
                            html_escape(&cb.email)
                        );
                        respond(&mut stream, "200 OK", &page).await;
                        Ok(cb)
                    }
                    Err(why) => {
                        let page = format!("Sign-in failed: {}", html_escape(&why));
                        respond(&mut stream, "400 Bad Request", &page).await;
                        Err(anyhow!(why))
                    }
                };
            }
        }
    }
}

/// Reads a request head and returns its first line.
async fn read_request_line(mut stream: TcpStream) -> std::io::Result<(TcpStream, String)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_REQUEST {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let line = head.lines().next().unwrap_or_default().to_owned();
    Ok((stream, line))
}

/// The target of `GET /callback?… HTTP/1.1`, else `None`.
fn callback_target(request_line: &str) -> Option<&str> {
    let mut parts = request_line.split(' ');
    let (method, target) = (parts.next()?, parts.next()?);
    let path = target.split('?').next()?;
    (method == "GET" && path == "/callback").then_some(target)
}

/// The callback's query; a missing token (or the server's `error`) is the reason sign-in
/// failed.
fn parse_callback(target: &str) -> std::result::Result<Callback, String> {
    let url = Url::parse(&format!("http://127.0.0.1{target}")).map_err(|e| format!("invalid callback: {e}"))?;
    let get = |name: &str| {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let Some(token) = get("token") else {
        return Err(match get("error") {
            Some(e) => format!("the server refused the sign-in: {e}"),
            None => "the server's sign-in callback carried no token".to_owned(),
        });
    };
    Ok(Callback {
        token,
        refresh_token: get("refresh_token"),
        expires_at: get("expires_at"),
        organization: get("organization").unwrap_or_default(),
        email: get("email").unwrap_or_default(),
    })
}

async fn respond(stream: &mut TcpStream, status: &str, message: &str) {
    let body = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Terraplane</title></head>\
         <body><p>{message}</p></body></html>\n"
    );
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    // The browser may be gone; the sign-in result stands either way.
    let _ = stream.write_all(format!("{head}{body}").as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_url_encodes_return_to() -> Result<()> {
        let u = login_url("http://tp:8080/base", false, "http://127.0.0.1:5000/callback")?;
        assert_eq!(
            u.as_str(),
            "http://tp:8080/base/auth/oidc/login?return_to=http%3A%2F%2F127.0.0.1%3A5000%2Fcallback"
        );
        let u = login_url("https://tp", true, "http://127.0.0.1:1/callback")?;
        assert_eq!(u.path(), "/auth/github/login");
        Ok(())
    }

    #[test]
    fn only_get_callback_is_the_callback() {
        assert_eq!(
            callback_target("GET /callback?token=t HTTP/1.1"),
            Some("/callback?token=t")
        );
        assert_eq!(callback_target("GET /callback HTTP/1.1"), Some("/callback"));
        assert_eq!(callback_target("GET /favicon.ico HTTP/1.1"), None);
        assert_eq!(callback_target("POST /callback?token=t HTTP/1.1"), None);
        assert_eq!(callback_target(""), None);
    }

    #[test]
    fn callback_query_is_decoded_and_needs_a_token() {
        let cb = parse_callback(
            "/callback?token=a%2Bb&refresh_token=tpr_x&expires_at=2026-11-30T10%3A00%3A00Z&organization=acme&email=a%40b.c",
        );
        assert_eq!(
            cb,
            Ok(Callback {
                token: "a+b".into(),
                refresh_token: Some("tpr_x".into()),
                expires_at: Some("2026-11-30T10:00:00Z".into()),
                organization: "acme".into(),
                email: "a@b.c".into(),
            })
        );
        assert_eq!(
            parse_callback("/callback?email=a@b.c&token="),
            Err("the server's sign-in callback carried no token".into())
        );
        assert_eq!(
            parse_callback("/callback?error=access_denied"),
            Err("the server refused the sign-in: access_denied".into())
        );
    }

    #[test]
    fn html_is_escaped_and_durations_read_well() {
        assert_eq!(
            html_escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(human(Duration::from_secs(300)), "5 minutes");
        assert_eq!(human(Duration::from_millis(200)), "200ms");
    }
}
