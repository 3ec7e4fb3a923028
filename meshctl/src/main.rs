//! meshctl: the meshd operator CLI. Parsing and the commands live in the `meshctl` library (`lib.rs`).

use clap::Parser;
use meshctl::{Cli, Error, run};
use meshd::telemetry::{self, LogFormat};
use tracing_subscriber::prelude::*;

fn main() -> std::process::ExitCode {
    tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::from_default_env())
        .with(telemetry::stderr_layer(LogFormat::Text))
        .init();
    let cli = Cli::parse();
    let result = tokio::runtime::Runtime::new()
        .map_err(|e| (e.to_string(), std::process::ExitCode::FAILURE))
        .and_then(|rt| {
            rt.block_on(run(cli)).map_err(|e| {
                // istioctl's status for "analyzers found issues", so CI scripts work unchanged.
                let code = match e {
                    Error::FoundIssues(_) => {
                        std::process::ExitCode::from(meshctl::analyze::EXIT_FOUND_ISSUES)
                    }
                    _ => std::process::ExitCode::FAILURE,
                };
                (telemetry::error_chain(&e), code)
            })
        });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err((e, code)) => {
            eprintln!("error: {e}");
            code
        }
    }
}
