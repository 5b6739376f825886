//! `terraplane dev` demo data: the example configuration shipped in `examples/demo`,
//! committed into a local git repository under the data directory, and a stack using it.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use chrono::Utc;
use terraplane_store::{NewStack, Store, StoreError};

const DEMO_MAIN_TF: &str = include_str!("../../../examples/demo/main.tf");

/// Creates `<data_dir>/demo-repo` as a git repository holding the demo configuration
/// (once) and returns its `file://` URL.
pub fn ensure_demo_repo(data_dir: &Path) -> anyhow::Result<String> {
    let repo = data_dir.join("demo-repo");
    if !repo.join(".git").is_dir() {
        std::fs::create_dir_all(&repo)?;
        std::fs::write(repo.join("main.tf"), DEMO_MAIN_TF)?;
        for args in [
            vec!["init", "--quiet", "--initial-branch=main"],
            vec!["add", "main.tf"],
            vec![
                "-c",
                "user.name=Terraplane",
                "-c",
                "user.email=demo@terraplane.local",
                "commit",
                "--quiet",
                "-m",
                "Demo stack",
            ],
        ] {
            let st = Command::new("git")
                .args(&args)
                .current_dir(&repo)
                .status()
                .context("cannot run git")?;
            if !st.success() {
                bail!("git {} failed in {}", args.join(" "), repo.display());
            }
        }
    }
    let abs = std::fs::canonicalize(&repo)?;
    Ok(format!("file://{}", abs.display()))
}

pub async fn ensure_demo_stack(
    store: &Store,
    org: terraplane_domain::OrgId,
    repository: String,
    pool: &str,
) -> anyhow::Result<()> {
    let scope = store.scope(org);
    match scope.get_stack_by_slug("demo").await {
        Ok(_) => Ok(()),
        Err(StoreError::NotFound(_)) => {
            let s = NewStack {
                slug: "demo".into(),
                name: "Demo".into(),
                description: "The example configuration from examples/demo".into(),
                repository,
                branch: "main".into(),
                project_root: String::new(),
                tool: "terraform".into(),
                tool_version: None,
                autodeploy: false,
                labels: vec!["demo".into()],
                worker_pool: pool.to_owned(),
                space_id: None,
            };
            scope.create_stack(s, Utc::now()).await?;
            // A context that attaches itself to stacks labelled `demo` and sets the
            // demo's `environment` variable (`tpctl stack env demo` shows where it comes from).
            let root = scope.root_space().await?;
            let ctx = scope
                .create_context(
                    terraplane_store::NewContext {
                        slug: "demo-settings".into(),
                        name: "Demo settings".into(),
                        description: "Values for stacks labelled demo".into(),
                        labels: vec!["autoattach:demo".into()],
                        space_id: root.id,
                    },
                    Utc::now(),
                )
                .await?;
            scope
                .set_value(
                    &terraplane_store::Owner::Context(ctx.id),
                    terraplane_store::NewValue {
                        kind: terraplane_domain::vars::VarKind::Terraform,
                        name: "environment".into(),
                        value: "dev".into(),
                        secret: false,
                        apply_only: false,
                    },
                    Utc::now(),
                )
                .await?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

pub const VIEWER_EMAIL: &str = "viewer@terraplane.local";

/// A second organization (`acme`, owned by the admin, with its own stack) and a
/// non-admin user who may only read `default`: logging in as each shows the isolation.
/// Returns the viewer's password when the viewer was created now.
pub async fn ensure_isolation_demo(
    store: &Store,
    default_org: terraplane_domain::OrgId,
    admin: terraplane_domain::UserId,
    repository: String,
    pool: &str,
) -> anyhow::Result<Option<String>> {
    let now = Utc::now();
    if matches!(store.get_org_by_slug("acme").await, Err(StoreError::NotFound(_))) {
        let acme = store.create_org("acme", "Acme Corp", now).await?;
        store.add_member(acme.id, admin, "owner", now).await?;
        ensure_demo_stack(store, acme.id, repository, pool).await?;
    }
    match store.get_user_by_email(VIEWER_EMAIL).await {
        Ok(_) => Ok(None),
        Err(StoreError::NotFound(_)) => {
            let password = format!("viewer-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
            let hash = terraplane_api::auth::hash_password(&password).map_err(|e| anyhow::anyhow!("{e}"))?;
            let viewer = store
                .create_user(VIEWER_EMAIL, "Viewer", Some(hash), false, now)
                .await?;
            store.add_member(default_org, viewer.id, "member", now).await?;
            let scope = store.scope(default_org);
            let root = scope.root_space().await?;
            scope
                .grant(
                    root.id,
                    terraplane_store::Subject::User(viewer.id),
                    terraplane_domain::Role::Reader,
                    now,
                )
                .await?;
            Ok(Some(password))
        }
        Err(e) => Err(e.into()),
    }
}
