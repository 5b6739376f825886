//! Installing the provider for Terraform without a registry: an unpacked filesystem mirror
//! and the CLI configuration that uses it (and keeps `terraplane/*` off the network).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::{BINARY_NAME, HOSTNAME, NAMESPACE, TYPE, VERSION};

/// Terraform's name for this machine's platform, e.g. `linux_amd64`.
pub fn platform() -> String {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        other => other,
    };
    format!("{os}_{arch}")
}

/// Where [`install_mirror`] puts the binary under `mirror_dir`.
pub fn mirror_binary_path(mirror_dir: &Path) -> PathBuf {
    mirror_dir
        .join(HOSTNAME)
        .join(NAMESPACE)
        .join(TYPE)
        .join(VERSION)
        .join(platform())
        .join(format!("{BINARY_NAME}_v{VERSION}{}", std::env::consts::EXE_SUFFIX))
}

/// Lays out Terraform's unpacked filesystem mirror:
/// `<mirror>/registry.terraform.io/terraplane/sandbox/<VERSION>/<os>_<arch>/terraform-provider-sandbox_v<VERSION>`.
///
/// The binary is copied (not linked), so the mirror survives a rebuild of `provider_bin`
/// and works across file systems. Replacing an existing copy is atomic.
pub fn install_mirror(mirror_dir: &Path, provider_bin: &Path) -> io::Result<()> {
    let dest = mirror_binary_path(mirror_dir);
    let dir = dest
        .parent()
        .ok_or_else(|| io::Error::other("mirror path has no parent"))?;
    fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{BINARY_NAME}.{}.tmp", std::process::id()));
    if let Err(e) = fs::copy(provider_bin, &tmp) {
        let _ = fs::remove_file(&tmp);
        return Err(io::Error::new(
            e.kind(),
            format!("copying {} into the mirror: {e}", provider_bin.display()),
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755))?;
    }
    fs::rename(&tmp, &dest).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}

/// A Terraform CLI configuration (for `TF_CLI_CONFIG_FILE`) that installs
/// `registry.terraform.io/terraplane/*` from `mirror_dir` only, every other provider
/// directly from its registry, and turns off the version checkpoint.
pub fn cli_config(mirror_dir: &Path) -> String {
    let path = hcl_string(&mirror_dir.to_string_lossy());
    let pattern = format!("{HOSTNAME}/{NAMESPACE}/*");
    format!(
        r#"disable_checkpoint = true

provider_installation {{
  filesystem_mirror {{
    path    = {path}
    include = ["{pattern}"]
  }}
  direct {{
    exclude = ["{pattern}"]
  }}
}}
"#
    )
}

/// A quoted HCL string literal: escapes quotes, backslashes, control characters and the
/// `${` / `%{` template sequences.
fn hcl_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '$' | '%' if chars.peek() == Some(&'{') => {
                out.push(c);
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_layout_is_terraforms() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("provider");
        fs::write(&bin, b"#!/bin/sh\n").unwrap();
        let mirror = dir.path().join("mirror");
        install_mirror(&mirror, &bin).unwrap();
        // Installing again replaces the copy.
        install_mirror(&mirror, &bin).unwrap();
        let expected = mirror.join(format!(
            "registry.terraform.io/terraplane/sandbox/0.1.0/{}/terraform-provider-sandbox_v0.1.0{}",
            platform(),
            std::env::consts::EXE_SUFFIX
        ));
        assert_eq!(mirror_binary_path(&mirror), expected);
        assert_eq!(fs::read(&expected).unwrap(), b"#!/bin/sh\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(fs::metadata(&expected).unwrap().permissions().mode() & 0o777, 0o755);
        }
        let leftovers: Vec<_> = fs::read_dir(expected.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "{leftovers:?}");
    }

    #[test]
    fn missing_binary_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let err = install_mirror(dir.path(), &dir.path().join("nope")).unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
    }

    #[test]
    fn cli_config_mirrors_terraplane_only() {
        let config = cli_config(Path::new("/tmp/mirror"));
        assert!(config.contains(r#"path    = "/tmp/mirror""#), "{config}");
        assert_eq!(config.matches(r#"["registry.terraform.io/terraplane/*"]"#).count(), 2);
        assert!(config.contains("exclude"));
    }

    #[test]
    fn hcl_strings_are_escaped() {
        assert_eq!(hcl_string(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(hcl_string("${x} %{y} $z"), r#""$${x} %%{y} $z""#);
        assert_eq!(hcl_string("a\nb"), r#""a\nb""#);
    }

    #[test]
    fn platform_uses_go_names() {
        let p = platform();
        assert!(
            !p.contains("x86_64") && !p.contains("aarch64") && !p.contains("macos"),
            "{p}"
        );
        assert_eq!(p.split('_').count(), 2, "{p}");
    }
}
