//! meshctl: the meshd operator CLI. Parsing and the commands live in the `meshctl` library (`lib.rs`).

use clap::Parser;
use meshctl::{Cli, run};
use meshd::telemetry::{self, LogFormat};
use tracing_subscriber::prelude::*;

fn main() -> std::process::ExitCode {
    tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::from_default_env())
        .with(telemetry::stderr_layer(LogFormat::Text))
        .init();
    let cli = Cli::parse();
    let result = tokio::runtime::Runtime::new()
        .map_err(|e| e.to_string())
        .and_then(|rt| rt.block_on(run(cli)).map_err(|e| telemetry::error_chain(&e)));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
