//! The `sandbox` Terraform provider (`registry.terraform.io/terraplane/sandbox`): a pretend
//! cloud kept as JSON files, so runs, drift and imports can be tested with real Terraform.
//!
//! The cloud is a directory (provider attribute `root`, else `SANDBOX_ROOT`) with one file
//! per resource at `<root>/<kind>/<id>.json` (`instance`, `security_group`, `bucket`). Read
//! reports the file as it is, so editing a file by hand is drift and deleting it deletes the
//! resource. The runner installs the binary for Terraform with [`install_mirror`] and
//! [`cli_config`].
//!
//! The files (pretty-printed; `tags`, `ingress`, `cidr_blocks` and `versioning` may be
//! left out by hand and default to empty / false; unknown keys are ignored):
//!
//! ```text
//! instance/i-0123456789abcdef0.json
//!   {"id": "i-0123456789abcdef0",
//!    "arn": "arn:sandbox:ec2:local:000000000000:instance/i-0123456789abcdef0",
//!    "name": "web", "instance_type": "t3.micro", "private_ip": "10.188.222.240",
//!    "tags": {"env": "dev"}}
//! security_group/sg-0123456789abcdef0.json
//!   {"id": "sg-…", "arn": "arn:sandbox:ec2:local:000000000000:security-group/sg-…",
//!    "name": "web",
//!    "ingress": [{"from_port": 443, "to_port": 443, "protocol": "tcp",
//!                 "cidr_blocks": ["0.0.0.0/0"]}],
//!    "tags": {}}
//! bucket/logs.json
//!   {"id": "logs", "arn": "arn:sandbox:s3:::logs", "name": "logs",
//!    "versioning": false, "tags": {}}
//! ```

mod bucket;
mod cloud;
mod instance;
mod mirror;
mod provider;
mod security_group;
mod values;

pub use mirror::{cli_config, install_mirror, mirror_binary_path, platform};
pub use provider::ROOT_ENV;

/// The provider's version, as Terraform sees it in the mirror.
pub const VERSION: &str = "0.1.0";

/// Source address parts: `registry.terraform.io/terraplane/sandbox`.
pub const HOSTNAME: &str = "registry.terraform.io";
pub const NAMESPACE: &str = "terraplane";
pub const TYPE: &str = "sandbox";

/// The provider's source address as written in `required_providers`.
pub const SOURCE: &str = "terraplane/sandbox";

/// The executable's name (without version or platform suffix).
pub const BINARY_NAME: &str = "terraform-provider-sandbox";

/// go-plugin's handshake: Terraform sets this before starting a provider.
const MAGIC_COOKIE_KEY: &str = "TF_PLUGIN_MAGIC_COOKIE";
const MAGIC_COOKIE_VALUE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";

/// Serves the provider over Terraform's plugin protocol (v6) until Terraform stops it.
///
/// Must be started by Terraform: without its handshake environment this returns an error
/// instead of printing a handshake line nobody reads. Nothing else may write to stdout.
pub async fn serve() -> anyhow::Result<()> {
    // Built with the rest of the workspace, rustls may have both crypto backends enabled
    // and then refuses to pick one; the plugin's mTLS uses ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    if std::env::var(MAGIC_COOKIE_KEY).as_deref() != Ok(MAGIC_COOKIE_VALUE) {
        anyhow::bail!(
            "this is a Terraform provider plugin, started by Terraform; install it with \
             terraplane_sandbox_provider::install_mirror and a CLI configuration from cli_config"
        );
    }
    tf_provider::serve(TYPE, provider::SandboxProvider::default()).await
}
