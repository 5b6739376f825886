//! `terraform-provider-sandbox`: the sandbox provider's plugin binary (started by Terraform).

fn main() -> std::process::ExitCode {
    // No log setup: stdout carries the plugin handshake and must hold nothing else.
    terraplane_telemetry::exit(run())
}

fn run() -> anyhow::Result<()> {
    tokio::runtime::Runtime::new()?.block_on(terraplane_sandbox_provider::serve())
}
