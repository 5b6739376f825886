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
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}
