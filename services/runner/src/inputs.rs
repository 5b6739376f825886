//! Puts a phase's values where terraform finds them: environment variables, mounted files
//! (relative to the project root, never through a symlink out of the work directory), the
//! Terraform variables as a `.tfvars.json` passed with `-var-file` (plan only: a saved plan
//! already carries them), and the OIDC token as `TERRAPLANE_OIDC_TOKEN` and a file. All of
//! it lives in the run's work directory, which is removed when the phase ends.

use std::io::Write;
use std::path::{Component, Path, PathBuf};

use terraplane_domain::RunPhase;
use terraplane_domain::vars::VarKind;
use terraplane_protocol::JobSpec;

pub struct Inputs {
    pub env: Vec<(String, String)>,
    pub var_file: Option<PathBuf>,
}

#[derive(Debug)]
pub struct InputError(pub String);

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Writes a file readable only by the runner's user.
fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(data)
}

/// Where a mounted file goes under `root`, creating its directories; refuses any path that
/// leaves `root` or passes through a symlink (a repository could hold one to `/etc`).
fn mount_path(root: &Path, rel: &str) -> Result<PathBuf, InputError> {
    let escape = || {
        InputError(format!(
            "mounted file {rel:?} would be written outside the work directory"
        ))
    };
    let rel_path = Path::new(rel);
    if rel_path.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(escape());
    }
    let mut cur = root.to_path_buf();
    let parts: Vec<_> = rel_path.components().collect();
    for (i, c) in parts.iter().enumerate() {
        cur.push(c.as_os_str());
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => return Err(escape()),
            Ok(m) if i + 1 < parts.len() && !m.is_dir() => {
                return Err(InputError(format!(
                    "mounted file {rel:?}: {} is not a directory",
                    cur.display()
                )));
            }
            Ok(_) => {}
            Err(_) if i + 1 < parts.len() => {
                std::fs::create_dir(&cur).map_err(|e| InputError(format!("mounted file {rel:?}: {e}")))?;
            }
            Err(_) => {}
        }
    }
    Ok(cur)
}

pub fn prepare(work: &Path, project: &Path, spec: &JobSpec) -> Result<Inputs, InputError> {
    let own = work.join("terraplane");
    std::fs::create_dir_all(&own).map_err(|e| InputError(format!("cannot prepare the run's inputs: {e}")))?;
    let io = |e: std::io::Error| InputError(format!("cannot prepare the run's inputs: {e}"));
    let mut env = Vec::new();
    let mut tfvars = serde_json::Map::new();
    for v in &spec.variables {
        match v.kind {
            VarKind::Env => env.push((v.name.clone(), v.value.clone())),
            VarKind::Terraform => {
                tfvars.insert(v.name.clone(), serde_json::Value::String(v.value.clone()));
            }
            VarKind::File => {
                let path = mount_path(project, &v.name)?;
                write_private(&path, v.value.as_bytes()).map_err(io)?;
            }
        }
    }
    let var_file = if spec.phase == RunPhase::Plan && !tfvars.is_empty() {
        let p = own.join("terraplane.tfvars.json");
        write_private(&p, serde_json::Value::Object(tfvars).to_string().as_bytes()).map_err(io)?;
        Some(p)
    } else {
        None
    };
    if let Some(t) = &spec.oidc_token {
        let p = own.join("oidc-token");
        write_private(&p, t.as_bytes()).map_err(io)?;
        env.push(("TERRAPLANE_OIDC_TOKEN".into(), t.clone()));
        env.push(("TERRAPLANE_OIDC_TOKEN_FILE".into(), p.display().to_string()));
    }
    env.push(("TERRAPLANE_RUN_ID".into(), spec.run_id.to_string()));
    env.push(("TERRAPLANE_RUN_PHASE".into(), spec.phase.as_str().into()));
    env.push(("TERRAPLANE_STACK".into(), spec.stack.clone()));
    Ok(Inputs { env, var_file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_inside_and_refuses_symlink_escapes() -> std::io::Result<()> {
        let d = tempfile::tempdir()?;
        let root = d.path().join("proj");
        std::fs::create_dir(&root)?;
        let p = mount_path(&root, "certs/ca.pem").map_err(|e| std::io::Error::other(e.0))?;
        assert_eq!(p, root.join("certs/ca.pem"));
        assert!(root.join("certs").is_dir());
        let outside = d.path().join("outside");
        std::fs::create_dir(&outside)?;
        std::os::unix::fs::symlink(&outside, root.join("link"))?;
        assert!(mount_path(&root, "link/x").is_err(), "through a symlink");
        assert!(mount_path(&root, "../x").is_err());
        assert!(mount_path(&root, "/etc/x").is_err());
        std::os::unix::fs::symlink(outside.join("f"), root.join("f"))?;
        assert!(mount_path(&root, "f").is_err(), "onto a symlink");
        Ok(())
    }
}
