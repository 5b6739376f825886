//! The `sandbox` Terraform provider, built with the `terraplane` binary so that `terraplane
//! dev` and the tests always have it; runners install it for terraform through a filesystem
//! mirror (the same program as `terraform-provider-sandbox`).

fn main() -> std::process::ExitCode {
    // No log setup: stdout carries the plugin handshake and must hold nothing else.
    terraplane_telemetry::exit(
        tokio::runtime::Runtime::new()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(terraplane_sandbox_provider::serve())),
    )
}
