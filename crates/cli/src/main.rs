fn main() -> std::process::ExitCode {
    terraplane_cli::main_entry()
}
