//! meshctl: the meshd operator CLI.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use meshd::{bench, sandbox::serve};
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(name = "meshctl", about = "Operate meshd and its sandbox", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the version.
    Version,
    /// Load-test a control plane: simulated clusters, ADS clients, endpoint churn; writes a report.
    Bench(bench::Args),
    /// Simulated clusters for development and tests.
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
}

#[derive(Subcommand)]
enum SandboxCommand {
    /// Serve one simulated Kubernetes API server per cluster until SIGTERM or ctrl-c.
    Serve {
        /// Comma-separated cluster names, or a directory whose subdirectories name the clusters.
        #[arg(long)]
        clusters: String,
        /// Where `<cluster>/kubeconfig` files are written.
        #[arg(long)]
        state_dir: PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Version => {
            println!("meshctl {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        Command::Bench(args) => {
            let plot = args.plot;
            let config = args.config()?;
            let report = tokio::runtime::Runtime::new()?.block_on(bench::run(config, plot))?;
            print!("{}", report.table());
            println!("report: {}", report.config.out_dir.join("report.json").display());
            Ok(())
        }
        Command::Sandbox {
            command: SandboxCommand::Serve { clusters, state_dir },
        } => tokio::runtime::Runtime::new()?.block_on(sandbox_serve(&clusters, &state_dir)),
    }
}

async fn sandbox_serve(clusters: &str, state_dir: &std::path::Path) -> anyhow::Result<()> {
    let names = serve::cluster_names(clusters)?;
    let shutdown = CancellationToken::new();
    let started = serve::start_clusters(&names, state_dir, shutdown.clone()).await?;
    println!("{}", serve::ready_report(&started));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("SIGTERM handler")?;
    tokio::select! {
        _ = term.recv() => {}
        r = tokio::signal::ctrl_c() => r.context("ctrl-c handler")?,
    }
    shutdown.cancel();
    Ok(())
}
