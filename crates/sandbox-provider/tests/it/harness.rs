//! Runs real Terraform against the provider binary in a temporary directory: the provider
//! comes from a filesystem mirror (`install_mirror` + `cli_config`), so nothing goes to the
//! network, and the sandbox's files live under `<tmp>/cloud`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value as Json;

/// Real terraform: `TERRAFORM_BIN`, else `<repo>/.tools/bin/terraform`, installed by
/// `scripts/install-terraform.sh` when missing (once per test binary).
pub fn terraform_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("TERRAFORM_BIN") {
            return PathBuf::from(p);
        }
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let p = repo.join(".tools/bin/terraform");
        if !p.is_file() {
            let status = Command::new(repo.join("scripts/install-terraform.sh"))
                .stdout(std::process::Stdio::null())
                .status()
                .expect("run scripts/install-terraform.sh");
            assert!(status.success(), "scripts/install-terraform.sh failed");
        }
        assert!(p.is_file(), "terraform not found at {}", p.display());
        p
    })
    .clone()
}

pub const PROVIDER_BLOCK: &str = r#"
terraform {
  required_providers {
    sandbox = {
      source  = "terraplane/sandbox"
      version = "0.1.0"
    }
  }
}
"#;

pub struct Sandbox {
    pub tmp: tempfile::TempDir,
    pub work: PathBuf,
    pub root: PathBuf,
    cli_config: PathBuf,
    /// Whether terraform gets `SANDBOX_ROOT` (off to test the provider's `root` attribute).
    pub root_env: bool,
}

impl Sandbox {
    /// A working directory with `main.tf` = the `required_providers` block + `config`, and
    /// the provider installed in a private mirror.
    pub fn new(config: &str) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let mirror = tmp.path().join("mirror");
        terraplane_sandbox_provider::install_mirror(
            &mirror,
            Path::new(env!("CARGO_BIN_EXE_terraform-provider-sandbox")),
        )
        .unwrap();
        let cli_config = tmp.path().join("terraform.rc");
        std::fs::write(&cli_config, terraplane_sandbox_provider::cli_config(&mirror)).unwrap();
        let work = tmp.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let root = tmp.path().join("cloud");
        let sandbox = Self {
            tmp,
            work,
            root,
            cli_config,
            root_env: true,
        };
        sandbox.write_config(config);
        sandbox
    }

    pub fn write_config(&self, config: &str) {
        std::fs::write(self.work.join("main.tf"), format!("{PROVIDER_BLOCK}\n{config}")).unwrap();
    }

    /// Runs terraform in the working directory; returns whatever it did.
    pub fn run(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(terraform_bin());
        cmd.args(args)
            .current_dir(&self.work)
            .env("TF_CLI_CONFIG_FILE", &self.cli_config)
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0");
        // Settings from the caller's shell that would change what terraform does here.
        for var in [
            "TF_CLI_ARGS",
            "TF_CLI_ARGS_init",
            "TF_CLI_ARGS_plan",
            "TF_CLI_ARGS_apply",
            "TF_CLI_ARGS_import",
            "TF_DATA_DIR",
            "TF_WORKSPACE",
            "TF_PLUGIN_CACHE_DIR",
            "TF_LOG",
        ] {
            cmd.env_remove(var);
        }
        if self.root_env {
            cmd.env("SANDBOX_ROOT", &self.root);
        } else {
            cmd.env_remove("SANDBOX_ROOT");
        }
        cmd.output().expect("start terraform")
    }

    /// Runs terraform and requires this exit code; panics with its output otherwise.
    pub fn run_expect(&self, args: &[&str], code: i32) -> Output {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "terraform {} exited {:?}, expected {code}\n--- stdout\n{}\n--- stderr\n{}",
            args.join(" "),
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        out
    }

    pub fn init(&self) {
        self.run_expect(&["init", "-no-color", "-input=false"], 0);
    }

    pub fn apply(&self) {
        self.run_expect(&["apply", "-auto-approve", "-no-color", "-input=false"], 0);
    }

    /// `plan -detailed-exitcode`: 0 no changes, 2 changes.
    pub fn plan_exit(&self, extra: &[&str]) -> (i32, Output) {
        let mut args = vec!["plan", "-detailed-exitcode", "-no-color", "-input=false"];
        args.extend_from_slice(extra);
        let out = self.run(&args);
        let code = out.status.code().unwrap_or(-1);
        assert!(
            code == 0 || code == 2,
            "terraform plan failed ({code})\n--- stdout\n{}\n--- stderr\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (code, out)
    }

    /// `terraform show -json [file]`.
    pub fn show_json(&self, plan_file: Option<&str>) -> Json {
        let mut args = vec!["show", "-json", "-no-color"];
        args.extend(plan_file);
        let out = self.run_expect(&args, 0);
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The attribute values of one resource in the state, by address.
    pub fn state_values(&self, address: &str) -> Json {
        let state = self.show_json(None);
        let resources = state["values"]["root_module"]["resources"].as_array().unwrap();
        resources
            .iter()
            .find(|r| r["address"] == address)
            .unwrap_or_else(|| panic!("{address} not in state: {state:#}"))["values"]
            .clone()
    }

    pub fn file(&self, kind: &str, id: &str) -> PathBuf {
        self.root.join(kind).join(format!("{id}.json"))
    }

    pub fn read_file(&self, kind: &str, id: &str) -> Json {
        let path = self.file(kind, id);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap()
    }

    pub fn write_file(&self, kind: &str, id: &str, value: &Json) {
        let path = self.file(kind, id);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
    }

    /// Edits a resource's file in place, as a console change would.
    pub fn edit_file(&self, kind: &str, id: &str, edit: impl FnOnce(&mut Json)) {
        let mut value = self.read_file(kind, id);
        edit(&mut value);
        self.write_file(kind, id, &value);
    }
}

/// Terraform's output with every run of whitespace made one space: it wraps diagnostics.
pub fn flat(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The top-level attributes whose values differ between a change's `before` and `after`.
pub fn changed_attributes(change: &Json) -> Vec<String> {
    let empty = serde_json::Map::new();
    let before = change["before"].as_object().unwrap_or(&empty);
    let after = change["after"].as_object().unwrap_or(&empty);
    let mut keys: Vec<String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .cloned()
        .collect();
    keys.sort();
    keys.dedup();
    keys
}
