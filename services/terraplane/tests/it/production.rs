//! Production mode: `terraplane migrate`, `api`, `scheduler` and `runner` as separate
//! processes of the real binary against PostgreSQL and RabbitMQ.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use terraplane_client::{Client, RunState};

use crate::harness::*;

struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn separate_processes_run_a_stack() {
    let Some(pg) = terraplane_test_support::fresh_postgres("tp_prod").await else {
        return;
    };
    if terraplane_test_support::rabbit_or_skip(tokio::net::TcpStream::connect("127.0.0.1:5672").await).is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let prefix = format!("tp-prod-{}", uuid::Uuid::new_v4().simple());
    let env = |c: &mut Command| {
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", tmp.path())
            .env("TERRAPLANE_LOG", "warn")
            .env("DATABASE_URL", &pg.url)
            .env("TERRAPLANE_DATABASE__AUTO_MIGRATE", "false")
            .env("AMQP_URL", AMQP_URL)
            .env("TERRAPLANE_QUEUE__PREFIX", &prefix)
            .env("TERRAPLANE_API__LISTEN", format!("127.0.0.1:{port}"))
            .env("TERRAPLANE_AUTH__JWT_SECRET", "prod-test-jwt-secret")
            .env(
                "TERRAPLANE_SECRETS__MASTER_KEY",
                "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100",
            )
            .env("TERRAPLANE_RUNNER__POOL_TOKEN", "prod-test-pool-token")
            .env("TERRAPLANE_RUNNER__API_URL", &base)
            .env("TERRAPLANE_RUNNER__WORK_DIR", tmp.path().join("work"))
            .env("TERRAPLANE_BOOTSTRAP_TOKEN", "tpk_prod_test_bootstrap")
            .env("TERRAPLANE_ADMIN_PASSWORD", "prod-admin")
            .env("TERRAFORM_BIN", terraform_bin());
    };
    let bin = env!("CARGO_BIN_EXE_terraplane");

    // print-config shows the effective configuration with secrets redacted.
    let mut c = Command::new(bin);
    env(&mut c);
    let out = c.arg("print-config").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(&pg.url), "{text}");
    assert!(
        text.contains("[redacted]") && !text.contains("prod-test-jwt-secret") && !text.contains("prod-admin"),
        "{text}"
    );
    // An unknown key is an error naming it.
    let mut c = Command::new(bin);
    env(&mut c);
    let out = c
        .arg("print-config")
        .env("TERRAPLANE_API__LISTNE", "x")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("listne"));

    let mut c = Command::new(bin);
    env(&mut c);
    let out = c.arg("migrate").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut procs = Procs(Vec::new());
    for cmd in ["api", "scheduler", "runner"] {
        let mut c = Command::new(bin);
        env(&mut c);
        procs.0.push(c.arg(cmd).spawn().unwrap());
    }
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(r) = http.get(format!("{base}/readyz")).send().await
            && r.status() == 200
        {
            break;
        }
        assert!(Instant::now() < deadline, "api never became ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let client = Client::new(&base, Some("tpk_prod_test_bootstrap".into())).unwrap();
    let repo = git_repo(&tmp.path().join("repo"), &[("main.tf", TWO_RESOURCES)]);
    let input = terraplane_client::StackCreateInput {
        slug: Some("prod".into()),
        name: "prod".into(),
        repository: repo,
        autodeploy: Some(true),
        ..Default::default()
    };
    client.stack_create(&input).await.unwrap();
    let run = client.run_trigger("prod", false).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let run = loop {
        let r = client.run(&run.id).await.unwrap().unwrap();
        if r.terminal {
            break r;
        }
        assert!(Instant::now() < deadline, "run stuck in {}", r.state);
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(run.state, RunState::Finished, "{:?}", run.error);
    assert_eq!(client.state_versions("prod").await.unwrap().len(), 1);
    // The admin can log in with the configured password.
    let login = client
        .with_token(None)
        .login("admin@terraplane.local", "prod-admin", None)
        .await
        .unwrap();
    assert_eq!(login.organization.slug, "default");

    // Keys: a secret stored, the OIDC signing key rotated, then the master key rotated by
    // the `keys` commands while the services run.
    client
        .stack_set_variable(
            "prod",
            &terraplane_client::VariableInput {
                name: "DB_PASSWORD".into(),
                value: "prod-secret-value".into(),
                secret: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let keys = |args: &[&str], extra: &[(&str, &str)]| {
        let mut c = Command::new(bin);
        env(&mut c);
        for (k, v) in extra {
            c.env(k, v);
        }
        c.args(args).output().unwrap()
    };
    let out = keys(&["keys", "rotate-oidc"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("new OIDC signing key"));
    let new_key = String::from_utf8(keys(&["keys", "generate"], &[]).stdout).unwrap();
    let new_key = new_key.trim();
    assert_eq!(new_key.len(), 64);
    let old_key = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";
    let rotate_env = [
        ("TERRAPLANE_SECRETS__MASTER_KEY", new_key),
        ("TERRAPLANE_SECRETS__PREVIOUS_MASTER_KEYS", old_key),
    ];
    let out = keys(&["keys", "rotate"], &rotate_env);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("re-wrapped 1 data key(s) and 2 OIDC signing key(s)"),
        "{text}"
    );
    let out = keys(&["keys", "rotate"], &rotate_env);
    assert!(String::from_utf8_lossy(&out.stdout).contains("re-wrapped 0 data key(s)"));
    // The old key alone no longer opens anything: the api refuses to start, saying why.
    let out = keys(&["api"], &[("TERRAPLANE_API__LISTEN", "127.0.0.1:0")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot open the stored encryption keys"), "{err}");
    // Nor does no key at all.
    let mut c = Command::new(bin);
    env(&mut c);
    let out = c
        .env_remove("TERRAPLANE_SECRETS__MASTER_KEY")
        .arg("api")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("secrets.master_key"));
    drop(procs);
    if let Ok(q) = terraplane_queue::rabbit::RabbitQueue::connect(AMQP_URL, &prefix).await {
        let _ = q.delete_topology(&["default"]).await;
    }
    drop(pg);
}
