//! `tpctl login --sso`: the test plays the browser. It reads the login URL the command
//! prints (or gets it from a fake `$BROWSER`), then calls the command's loopback callback
//! the way the server's redirect would.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use serde_json::{Value, json};
use terraplane_cli::{Cli, Context};
use url::Url;

use super::{TestResult, read_config};

const CALLBACK_QUERY: &str =
    "token=t&refresh_token=tpr_x&expires_at=2026-11-30T10:00:00Z&organization=default&email=a@b.c";

/// Stderr the test reads while the command still runs.
#[derive(Clone, Default)]
struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl SharedBuf {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

impl Write for SharedBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `tpctl args` waiting at most `timeout` for the browser; returns the result and stdout.
async fn tpctl(
    env: &HashMap<String, String>,
    args: &[&str],
    timeout: Duration,
    err: SharedBuf,
) -> Result<(anyhow::Result<()>, String), clap::Error> {
    let cli = Cli::try_parse_from(std::iter::once("tpctl").chain(args.iter().copied()))?;
    let lookup = |k: &str| env.get(k).cloned();
    let mut out = Vec::new();
    let mut err = err;
    let mut ctx = Context {
        env: &lookup,
        out: &mut out,
        err: &mut err,
        poll_interval: Duration::from_millis(5),
    };
    let result = terraplane_cli::with_sso_timeout(timeout, terraplane_cli::run(cli, &mut ctx)).await;
    Ok((result, String::from_utf8_lossy(&out).into_owned()))
}

/// The login URL once the command printed it.
async fn printed_url(err: &SharedBuf) -> Result<Url, Box<dyn std::error::Error>> {
    for _ in 0..500 {
        let text = err.text();
        if let Some(line) = text.lines().map(str::trim).find(|l| l.starts_with("http")) {
            assert!(
                text.starts_with("Open this URL in your browser to sign in:\n"),
                "{text}"
            );
            return Ok(Url::parse(line)?);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err(format!("no URL printed: {}", err.text()).into())
}

/// The `return_to` of a login URL, checked to be the loopback callback.
fn return_to(url: &Url) -> Result<String, Box<dyn std::error::Error>> {
    let rt = url
        .query_pairs()
        .find(|(k, _)| k == "return_to")
        .map(|(_, v)| v.into_owned())
        .ok_or("no return_to")?;
    let parsed = Url::parse(&rt)?;
    assert_eq!(
        (parsed.scheme(), parsed.host_str(), parsed.path()),
        ("http", Some("127.0.0.1"), "/callback")
    );
    assert!(parsed.port().is_some_and(|p| p > 0), "{rt}");
    Ok(rt)
}

/// What the browser shows: status and HTML.
async fn browse(url: &str) -> Result<(u16, String, String), Box<dyn std::error::Error>> {
    let r = reqwest::Client::builder().no_proxy().build()?.get(url).send().await?;
    let status = r.status().as_u16();
    let ctype = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    Ok((status, ctype, r.text().await?))
}

fn env_with_config(home: &tempfile::TempDir) -> (HashMap<String, String>, PathBuf) {
    let path = home.path().join("tp.json");
    let env = HashMap::from([("TPCTL_CONFIG".to_owned(), path.to_string_lossy().into_owned())]);
    (env, path)
}

#[cfg(unix)]
fn mode(path: &Path) -> std::io::Result<u32> {
    use std::os::unix::fs::PermissionsExt;
    Ok(std::fs::metadata(path)?.permissions().mode() & 0o777)
}

#[tokio::test]
async fn sso_login_saves_the_session_the_browser_brings_back() -> TestResult {
    let home = tempfile::tempdir()?;
    let (env, path) = env_with_config(&home);
    let err = SharedBuf::default();
    let args = ["login", "--sso", "--endpoint", "http://tp.example:8080/"];
    let browser = async {
        let url = printed_url(&err).await?;
        assert_eq!(
            (url.host_str(), url.port(), url.path()),
            (Some("tp.example"), Some(8080), "/auth/oidc/login")
        );
        let rt = return_to(&url)?;
        // Anything but the callback is not found, and the wait goes on.
        let base = rt.trim_end_matches("/callback");
        assert_eq!(browse(&format!("{base}/favicon.ico")).await?.0, 404);
        browse(&format!("{rt}?{CALLBACK_QUERY}")).await
    };
    let (ran, page) = tokio::join!(tpctl(&env, &args, Duration::from_secs(10), err.clone()), browser);
    let (result, out) = ran?;
    result?;
    let (status, ctype, html) = page?;
    assert_eq!((status, ctype.as_str()), (200, "text/html; charset=utf-8"));
    assert!(
        html.contains("Signed in to Terraplane as a@b.c. You can close this window."),
        "{html}"
    );
    assert!(
        out.starts_with(
            "Logged in to http://tp.example:8080 as a@b.c in organization default \
             (session expires 2026-11-30 10:00:00 UTC)\n"
        ),
        "{out}"
    );
    assert_eq!(
        read_config(&path)?,
        json!({"endpoint": "http://tp.example:8080", "token": "t", "refresh_token": "tpr_x"})
    );
    #[cfg(unix)]
    assert_eq!(mode(&path)?, 0o600);
    Ok(())
}

#[tokio::test]
async fn sso_login_json_output_names_the_organization_by_slug() -> TestResult {
    let home = tempfile::tempdir()?;
    let (env, _) = env_with_config(&home);
    let err = SharedBuf::default();
    let args = ["-o", "json", "login", "--sso", "--github", "--endpoint", "http://tp"];
    let browser = async {
        let url = printed_url(&err).await?;
        assert_eq!(url.path(), "/auth/github/login");
        let rt = return_to(&url)?;
        browse(&format!("{rt}?{CALLBACK_QUERY}")).await
    };
    let (ran, page) = tokio::join!(tpctl(&env, &args, Duration::from_secs(10), err.clone()), browser);
    let (result, out) = ran?;
    result?;
    assert_eq!(page?.0, 200);
    let v: Value = serde_json::from_str(&out)?;
    assert_eq!(v["organization"], json!({"slug": "default"}));
    assert_eq!(v["name"], "a@b.c");
    assert_eq!(v["expiresAt"], "2026-11-30T10:00:00Z");
    Ok(())
}

#[tokio::test]
async fn sso_callback_escapes_the_email_in_its_page() -> TestResult {
    let home = tempfile::tempdir()?;
    let (env, _) = env_with_config(&home);
    let err = SharedBuf::default();
    let browser = async {
        let rt = return_to(&printed_url(&err).await?)?;
        browse(&format!("{rt}?token=t&organization=default&email=%3Cscript%3E%40b.c")).await
    };
    let args = ["login", "--sso", "--endpoint", "http://tp"];
    let (ran, page) = tokio::join!(tpctl(&env, &args, Duration::from_secs(10), err.clone()), browser);
    ran?.0?;
    let html = page?.2;
    assert!(html.contains("as &lt;script&gt;@b.c."), "{html}");
    assert!(!html.contains("<script>"), "{html}");
    Ok(())
}

#[tokio::test]
async fn sso_callback_without_a_token_fails_and_saves_nothing() -> TestResult {
    let home = tempfile::tempdir()?;
    let (env, path) = env_with_config(&home);
    let err = SharedBuf::default();
    let browser = async {
        let rt = return_to(&printed_url(&err).await?)?;
        browse(&format!("{rt}?organization=default&email=a@b.c")).await
    };
    let args = ["login", "--sso", "--endpoint", "http://tp"];
    let (ran, page) = tokio::join!(tpctl(&env, &args, Duration::from_secs(10), err.clone()), browser);
    let e = ran?.0.err().ok_or("a callback without a token was accepted")?;
    assert_eq!(
        terraplane_cli::error_message(&e),
        "the server's sign-in callback carried no token"
    );
    let (status, _, html) = page?;
    assert_eq!(status, 400);
    assert!(html.contains("Sign-in failed"), "{html}");
    assert!(!path.exists());
    Ok(())
}

#[tokio::test]
async fn sso_login_into_another_organization_than_org_fails() -> TestResult {
    let home = tempfile::tempdir()?;
    let (env, path) = env_with_config(&home);
    let err = SharedBuf::default();
    let browser = async {
        let rt = return_to(&printed_url(&err).await?)?;
        browse(&format!("{rt}?{CALLBACK_QUERY}")).await
    };
    let args = ["login", "--sso", "--org", "acme", "--endpoint", "http://tp"];
    let (ran, page) = tokio::join!(tpctl(&env, &args, Duration::from_secs(10), err.clone()), browser);
    let e = ran?.0.err().ok_or("another organization was accepted")?;
    assert!(
        e.to_string().starts_with(
            "single sign-on logged you in to organization default, not acme; it always logs in to the \
             organization the server is configured for"
        ),
        "{e}"
    );
    assert_eq!(page?.0, 400);
    assert!(!path.exists());
    Ok(())
}

#[tokio::test]
async fn sso_login_times_out_with_a_clear_error() -> TestResult {
    let home = tempfile::tempdir()?;
    let (env, path) = env_with_config(&home);
    let err = SharedBuf::default();
    let args = ["login", "--sso", "--endpoint", "http://tp"];
    let (result, _) = tpctl(&env, &args, Duration::from_millis(200), err.clone()).await?;
    let e = result.err().ok_or("no timeout")?;
    assert_eq!(
        e.to_string(),
        "no sign-in came back from the browser within 200ms; run `tpctl login --sso` again"
    );
    assert!(err.text().contains("/auth/oidc/login?return_to="), "{}", err.text());
    assert!(!path.exists());
    Ok(())
}

#[tokio::test]
async fn sso_login_refuses_a_token_given_before_the_subcommand() -> TestResult {
    let home = tempfile::tempdir()?;
    let (env, _) = env_with_config(&home);
    let args = ["--token", "key-1", "login", "--sso", "--endpoint", "http://tp"];
    let (result, _) = tpctl(&env, &args, Duration::from_millis(200), SharedBuf::default()).await?;
    assert_eq!(
        result.err().map(|e| e.to_string()).as_deref(),
        Some("pass either --token or --sso, not both")
    );
    Ok(())
}

#[cfg(unix)]
#[tokio::test]
async fn sso_login_opens_browser_with_the_login_url() -> TestResult {
    use std::os::unix::fs::PermissionsExt;
    let home = tempfile::tempdir()?;
    let (mut env, path) = env_with_config(&home);
    let opened = home.path().join("opened.txt");
    let script = home.path().join("browser.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s' \"$1\" > {}.tmp && mv {0}.tmp {0}\n",
            opened.display()
        ),
    )?;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    env.insert("BROWSER".to_owned(), script.to_string_lossy().into_owned());
    let err = SharedBuf::default();
    let browser = async {
        for _ in 0..500 {
            if let Ok(u) = std::fs::read_to_string(&opened) {
                let url = Url::parse(&u)?;
                assert_eq!(url, printed_url(&err).await?);
                let rt = return_to(&url)?;
                return browse(&format!("{rt}?{CALLBACK_QUERY}")).await;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Err("$BROWSER was not run".into())
    };
    let args = ["login", "--sso", "--endpoint", "http://tp"];
    let (ran, page) = tokio::join!(tpctl(&env, &args, Duration::from_secs(10), err.clone()), browser);
    ran?.0?;
    assert_eq!(page?.0, 200);
    assert_eq!(read_config(&path)?["token"], "t");
    Ok(())
}
