//! meshctl, the operator CLI: its commands, parsed by clap, and what they do. The binary only parses
//! and calls [`run`].
//!
//! - [`client`]: meshd's admin API; [`target`]: which meshd (`--meshd`, the sandbox on `$MESHD_STATE_DIR`
//!   or the default folder, else `http://127.0.0.1:15014`), never another when pointed at one.
//! - [`views`]: the readable views of the debug JSON (pure).
//! - [`remote_check`]: `remote-clusters --check`'s table and verdict.
//! - [`proxy_config`]: `proxy-config`'s tables from a proxy's Envoy config dump (pure).
//! - [`output`]: tables, JSON, YAML.
//! - [`cluster`]: `add-cluster` / `remove-cluster` (Kubernetes, not meshd).
//! - [`bootstrap`]: a proxyless gRPC client's xDS bootstrap (files only).
//! - [`bench`]: `meshctl bench`, the end-to-end load tool (simulated clusters, ADS clients, churn).
//!
//! Results go to stdout; progress and warnings to stderr.

pub mod analyze;
pub mod bench;
pub mod bootstrap;
pub mod client;
pub mod cluster;
pub mod output;
pub mod proxy_config;
pub mod remote_check;
pub mod target;
pub mod views;

use std::{io::IsTerminal, path::PathBuf, time::Duration};

use clap::{CommandFactory, Parser, Subcommand};
use serde_json::Value;

use client::{AdminClient, ClientError, query_value};
use cluster::{AddCluster, ClusterError, Role, TokenKind};
use output::{Output, render};
use target::{Target, TargetError};

/// `meshctl`.
#[derive(Debug, Parser)]
#[command(
    name = "meshctl",
    about = "Operate meshd: clusters, proxies, and why a proxy gets what it gets",
    version
)]
pub struct Cli {
    /// meshd's admin address (monitoring port; `kubectl port-forward` to it for a cluster install).
    /// Default: the sandbox meshd running on `$MESHD_STATE_DIR` (or the default state folder), else
    /// `http://127.0.0.1:15014`.
    #[arg(long, global = true, env = "MESHCTL_MESHD")]
    pub meshd: Option<String>,
    /// Bearer token for meshd's debug endpoints when not calling over loopback.
    #[arg(long, global = true, env = "MESHCTL_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Output format.
    #[arg(long, short, global = true, value_enum, default_value_t)]
    pub output: Output,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// meshctl's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the version.
    Version,
    /// Join a remote cluster: reader identity and token in the remote, remote Secret for the primary.
    AddCluster(AddClusterArgs),
    /// Remove a remote cluster's Secret from the primary.
    RemoveCluster {
        /// The cluster ID.
        id: String,
        /// The primary cluster.
        #[command(flatten)]
        primary: PrimaryArgs,
        /// The system namespace.
        #[arg(long, default_value = "istio-system")]
        namespace: String,
    },
    /// One row per cluster meshd knows: status, and why when not synced.
    RemoteClusters {
        /// ★ Check each remote instead (meshd asks it, with its own credentials): sync, last event,
        /// credentials expiry, RBAC it grants against what meshd needs, stale endpoints, and whether each
        /// network gateway resolves and accepts connections from meshd. Exits non-zero on any failure.
        #[arg(long)]
        check: bool,
    },
    /// One row per connected proxy: cluster, network, SYNCED / STALE / NOT SENT per type, last NACK.
    ProxyStatus,
    /// Every endpoint and gateway a proxy receives for a service, and every endpoint dropped, with why.
    Explain {
        /// The proxy's node ID (see `meshctl proxy-status`).
        proxy_id: String,
        /// `host[:port]`; the host may be `name.namespace`.
        service: String,
        /// For a proxy that is not connected: its `NETWORK`, to explain what it would be sent.
        #[arg(long)]
        network: Option<String>,
        /// For a proxy that is not connected: its `CLUSTER_ID`.
        #[arg(long, requires = "network")]
        cluster: Option<String>,
        /// For a proxy that is not connected: its `GENERATOR` (`grpc` for proxyless gRPC).
        #[arg(long, requires = "network")]
        generator: Option<String>,
        /// A DestinationRule subset: explain its clusters (`outbound|<port>|<subset>|<host>`).
        #[arg(long)]
        subset: Option<String>,
    },
    /// What meshd last sent a proxy, as istioctl's proxy-config tables; `-o json|yaml` print that
    /// section of `/debug/config_dump` (Envoy's admin `ConfigDump`) as is. istioctl's spellings work
    /// too: `pc`, and `cluster`, `endpoint`, `listener`, `route`.
    #[command(visible_alias = "pc")]
    ProxyConfig {
        /// Which part: clusters, endpoints, listeners or routes.
        #[arg(value_enum)]
        kind: proxy_config::ConfigKind,
        /// The proxy's node ID (see `meshctl proxy-status`).
        proxy_id: String,
    },
    /// Write a proxyless gRPC xDS bootstrap (`GRPC_XDS_BOOTSTRAP`) for a proxy of the sandbox.
    Bootstrap(crate::bootstrap::Args),
    /// Connected xDS clients.
    Adsz,
    /// Network gateways.
    Networks,
    /// istioctl analyze's messages (IST codes), computed live by meshd across every cluster, and every
    /// Istio object it rejected or ignored; exits 79 (table output) when a message reaches
    /// `--failure-threshold`, as istioctl.
    Analyze {
        /// The level at which a message makes the exit status 79.
        #[arg(long, value_enum, ignore_case = true, default_value = "Error")]
        failure_threshold: crate::analyze::Threshold,
        /// The lowest level printed.
        #[arg(long, value_enum, ignore_case = true, default_value = "Info")]
        output_threshold: crate::analyze::Threshold,
        /// Analyze these YAML or JSON files (a folder: its `.yaml`, `.yml` and `.json` files) instead of
        /// asking meshd, as `istioctl analyze --use-kube=false`: Istio objects, and Services, Pods and
        /// Nodes as one cluster's registry.
        #[arg(short = 'f', long = "file")]
        files: Vec<PathBuf>,
        /// With `-f`: the mesh config to analyze with.
        #[arg(long, requires = "files")]
        mesh_config: Option<PathBuf>,
    },
    /// Shell completion script.
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Load-test a control plane: simulated clusters, ADS clients, endpoint churn; writes a report.
    Bench(crate::bench::Args),
    /// Scaling curves from several `meshctl bench` reports: a markdown table and an SVG.
    BenchSummary(crate::bench::summary::Args),
    /// The floor under `meshctl bench`'s CPU per change: the same bytes to N sockets, no xDS.
    BenchFloor(crate::bench::floor::Args),
    /// Simulated clusters for development and tests.
    Sandbox {
        /// The sandbox command.
        #[command(subcommand)]
        command: SandboxCommand,
    },
}

/// `meshctl sandbox …`.
#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Serve one simulated Kubernetes API server per cluster until SIGTERM or ctrl-c. Given a
    /// directory, each subdirectory is a cluster and its manifests are loaded.
    Serve {
        /// Comma-separated cluster names, or a directory of cluster folders.
        #[arg(long)]
        clusters: String,
        /// Where `<cluster>/kubeconfig` files are written.
        #[arg(long)]
        state_dir: PathBuf,
        /// Append one JSON line per API request to this file: cluster, user, verb, API group,
        /// resource, subresource, namespace, name (what RBAC would authorise).
        #[arg(long, value_name = "FILE")]
        request_log: Option<PathBuf>,
        /// Authorize requests with the stored Roles, ClusterRoles and bindings (403 otherwise); the
        /// admin kubeconfig's user is in `system:masters`.
        #[arg(long)]
        enforce_rbac: bool,
    },
}

/// The primary (config) cluster's kubeconfig.
#[derive(Debug, clap::Args)]
pub struct PrimaryArgs {
    /// Kubeconfig of the primary cluster (default: `$KUBECONFIG`, `~/.kube/config`).
    #[arg(long)]
    pub primary_kubeconfig: Option<String>,
    /// Context in it.
    #[arg(long)]
    pub primary_context: Option<String>,
}

/// `meshctl add-cluster`.
#[derive(Debug, clap::Args)]
pub struct AddClusterArgs {
    /// Cluster ID (a DNS label): the Secret's data key.
    #[arg(long)]
    pub name: String,
    /// Kubeconfig of the remote cluster (default: `$KUBECONFIG`, `~/.kube/config`).
    #[arg(long)]
    pub kubeconfig: Option<String>,
    /// Context in it.
    #[arg(long)]
    pub context: Option<String>,
    /// API server URL as meshd reaches it (default: the kubeconfig's).
    #[arg(long)]
    pub server: Option<String>,
    /// Accept a loopback API server (the sandbox, or meshd on this machine).
    #[arg(long)]
    pub allow_loopback: bool,
    /// Create the reader service account and its ClusterRole/Binding if missing.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub create_service_account: bool,
    /// The reader service account.
    #[arg(long, default_value = remote_secret_sa())]
    pub service_account: String,
    /// Namespace of the reader and of the Secret.
    #[arg(long, default_value = "istio-system")]
    pub namespace: String,
    /// Lifetime of the TokenRequest token (rotate by re-running before it ends).
    #[arg(long, default_value = "8760h", value_parser = humantime::parse_duration, conflicts_with = "long_lived")]
    pub token_duration: Duration,
    /// Use a long-lived token Secret instead (istioctl's way).
    #[arg(long)]
    pub long_lived: bool,
    /// Write the Secret to the primary instead of printing it.
    #[arg(long)]
    pub apply: bool,
    /// The primary cluster (with --apply).
    #[command(flatten)]
    pub primary: PrimaryArgs,
}

const fn remote_secret_sa() -> &'static str {
    meshd::multicluster::remote_secret::READER_SERVICE_ACCOUNT
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// meshd's admin API.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// Which meshd to ask.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// Adding or removing a cluster.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// Encoding the output.
    #[error("encoding the output: {0}")]
    Encode(#[from] serde_json::Error),
    /// The sandbox.
    #[error("sandbox: {0:#}")]
    Sandbox(anyhow::Error),
    /// The load run failed.
    #[error(transparent)]
    Bench(#[from] crate::bench::Error),
    /// Writing a bootstrap.
    #[error(transparent)]
    Bootstrap(#[from] crate::bootstrap::Error),
    /// `meshctl analyze -f` could not read its files.
    #[error(transparent)]
    AnalyzeFiles(#[from] crate::analyze::FilesError),
    /// `meshctl analyze` found messages at or above `--failure-threshold` (exit status 79).
    #[error(
        "analyzers found issues at or above {0}; see https://istio.io/latest/docs/reference/config/analysis \
         for causes and resolutions"
    )]
    FoundIssues(&'static str),
    /// `meshctl remote-clusters --check` found problems.
    #[error("{0} remote-cluster check(s) failed")]
    CheckFailed(usize),
}

/// Runs one command; prints its result to stdout.
pub async fn run(cli: Cli) -> Result<(), Error> {
    let env_dir = std::env::var_os("MESHD_STATE_DIR").map(PathBuf::from);
    let default_dir = meshd::sandbox::default_state_dir();
    // Chosen only by the commands that ask meshd: the others need no running meshd.
    let admin = || -> Result<AdminClient, Error> {
        let target = Target::choose(cli.meshd.as_deref(), env_dir.as_deref(), &default_dir)?;
        if let Some(note) = target.note()
            && std::io::stderr().is_terminal()
        {
            eprintln!("{note}");
        }
        Ok(AdminClient::new(target.url(), cli.token.clone())?)
    };
    let out = cli.output;
    match cli.command {
        Command::Version => println!("meshctl {}", env!("CARGO_PKG_VERSION")),
        Command::Completion { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "meshctl", &mut std::io::stdout());
        }
        Command::Sandbox {
            command:
                SandboxCommand::Serve {
                    clusters,
                    state_dir,
                    request_log,
                    enforce_rbac,
                },
        } => meshd::sandbox::serve::run(&clusters, &state_dir, request_log.as_deref(), enforce_rbac)
            .await
            .map_err(Error::Sandbox)?,
        Command::Bench(args) => {
            let plot = args.plot;
            let report = crate::bench::run(args.config()?, plot).await?;
            print!("{}", report.table());
            println!("report: {}", report.config.out_dir.join("report.json").display());
        }
        Command::BenchSummary(args) => {
            print!("{}", crate::bench::summary::run(&args)?);
            println!("written: {}", args.out.display());
        }
        Command::BenchFloor(args) => {
            let floor = crate::bench::floor::run(&args)?;
            println!("{}", serde_json::to_string_pretty(&floor).unwrap_or_default());
        }
        Command::Bootstrap(args) => crate::bootstrap::run(args)?,
        Command::AddCluster(args) => add_cluster(args).await?,
        Command::RemoveCluster {
            id,
            primary,
            namespace,
        } => {
            let (client, _, _) = cluster::client(
                Role::Primary,
                primary.primary_kubeconfig.as_deref(),
                primary.primary_context.as_deref(),
            )
            .await?;
            let secret = cluster::remove(&client, &namespace, &id).await?;
            eprintln!("removed cluster {id} (Secret {secret})");
        }
        Command::RemoteClusters { check: true } => {
            let rows: Vec<meshd::multicluster::check::CheckRow> =
                admin()?.get("/debug/clusterz/check").await?;
            let checks = remote_check::Checks(rows);
            print!("{}", render(&checks, out)?);
            if out == Output::Table {
                eprintln!("{}", checks.summary());
            }
            let (failed, _) = checks.counts();
            if failed > 0 {
                return Err(Error::CheckFailed(failed));
            }
        }
        Command::RemoteClusters { check: false } => {
            let rows: Vec<views::ClusterzRow> = admin()?.get("/debug/clusterz").await?;
            let rows = views::RemoteClusters(rows.iter().map(views::remote_cluster).collect());
            print!("{}", render(&rows, out)?);
        }
        Command::ProxyStatus => {
            let rows: Vec<views::SyncStatus> = admin()?.get("/debug/syncz").await?;
            if rows.is_empty() && out == Output::Table {
                // An empty table reads like a failure: say what it means and how to connect one.
                eprintln!(
                    "no proxies are connected (meshctl bootstrap writes a proxyless gRPC client's bootstrap)"
                );
            }
            let rows = views::ProxyStatuses(rows.iter().map(views::proxy_status).collect());
            print!("{}", render(&rows, out)?);
            if out == Output::Table && rows.0.iter().any(|r| !r.waiting_for.is_empty()) {
                eprintln!(
                    "WAITING FOR: resources a proxy asked for that meshd does not have; its traffic there fails \
                     (meshctl analyze and meshctl explain say why, e.g. a subset no DestinationRule defines)"
                );
            }
        }
        Command::Adsz => {
            let adsz: Value = admin()?.get("/debug/adsz").await?;
            let clients = adsz["clients"].as_array().cloned().unwrap_or_default();
            print!("{}", render(&views::AdsClients(clients), out)?);
        }
        Command::Analyze {
            failure_threshold,
            output_threshold,
            files,
            mesh_config,
        } => {
            let (all, analyzed) = if files.is_empty() {
                let admin = admin()?;
                let configz: Value = admin.get("/debug/configz").await?;
                let view: meshd::config_controller::ConfigzView =
                    serde_json::from_value(configz["istioConfig"].clone())?;
                let analyzez: Value = admin.get("/debug/analyzez").await?;
                let messages: Vec<meshd::analysis::Message> =
                    serde_json::from_value(analyzez["messages"].clone())?;
                let what = format!("{} Istio objects in every cluster", view.objects.len());
                (crate::analyze::findings(&view, &messages), what)
            } else {
                crate::analyze::files(&files, mesh_config.as_deref())?
            };
            let failure = failure_threshold.into();
            let (text, failed) = crate::analyze::report(&all, out, output_threshold.into(), failure)?;
            if text.is_empty() {
                eprintln!("\u{2714} No validation issues found when analyzing {analyzed}.");
            }
            print!("{text}");
            if failed {
                return Err(Error::FoundIssues(failure.name()));
            }
        }
        Command::Networks => {
            let gws: Vec<Value> = admin()?.get("/debug/networkz").await?;
            print!("{}", render(&views::Networks(gws), out)?);
        }
        Command::ProxyConfig { kind, proxy_id } => {
            let path = format!("/debug/config_dump?proxyID={}", query_value(&proxy_id));
            let dump: Value = admin()?.get(&path).await?;
            let section = proxy_config::dump_section(&dump, kind);
            match out {
                Output::Table => print!("{}", proxy_config::proxy_config_table(kind, &section)),
                Output::Json => println!("{}", serde_json::to_string_pretty(&section)?),
                Output::Yaml => print!("{}", serde_yaml::to_string(&section).unwrap_or_default()),
            }
        }
        Command::Explain {
            proxy_id,
            service,
            network,
            cluster,
            generator,
            subset,
        } => {
            let mut path = format!(
                "/debug/explain?proxyID={}&service={}",
                query_value(&proxy_id),
                query_value(&service)
            );
            for (key, value) in [
                ("network", network),
                ("cluster", cluster),
                ("generator", generator),
                ("subset", subset),
            ] {
                if let Some(v) = value {
                    path += &format!("&{key}={}", query_value(&v));
                }
            }
            let report: Value = admin()?.get(&path).await?;
            match out {
                Output::Table => print!("{}", views::explain_text(&report)),
                Output::Json => println!("{}", serde_json::to_string_pretty(&report)?),
                Output::Yaml => print!("{}", serde_yaml::to_string(&report).unwrap_or_default()),
            }
        }
    }
    Ok(())
}

/// Every local input (the name, both kubeconfigs, the server) is checked before the remote is contacted,
/// so a typo costs no reader account and no token.
async fn add_cluster(a: AddClusterArgs) -> Result<(), Error> {
    meshd::multicluster::remote_secret::check_cluster_name(&a.name).map_err(ClusterError::from)?;
    let (remote, server, ca) =
        cluster::client(Role::Remote, a.kubeconfig.as_deref(), a.context.as_deref()).await?;
    let primary = if a.apply {
        let (client, _, _) = cluster::client(
            Role::Primary,
            a.primary.primary_kubeconfig.as_deref(),
            a.primary.primary_context.as_deref(),
        )
        .await?;
        Some(client)
    } else {
        None
    };
    let opts = AddCluster {
        name: a.name.clone(),
        namespace: a.namespace,
        service_account: a.service_account,
        create_service_account: a.create_service_account,
        token: if a.long_lived {
            TokenKind::LongLived
        } else {
            TokenKind::Bound(a.token_duration)
        },
        server: a.server,
        allow_loopback: a.allow_loopback,
    };
    let target = opts.server.as_deref().unwrap_or(&server);
    if cluster::is_loopback(target) && a.allow_loopback {
        eprintln!("warning: {target} is a loopback address; only a meshd on this machine can reach it");
    }
    let secret = cluster::remote_secret(&remote, &server, ca, &opts).await?;
    match primary {
        Some(primary) => {
            cluster::apply(&primary, &secret).await?;
            eprintln!(
                "cluster {} added: Secret {}/{} written to the primary",
                a.name,
                secret.metadata.namespace.as_deref().unwrap_or(""),
                secret.metadata.name.as_deref().unwrap_or("")
            );
        }
        None => print!("{}", cluster::secret_yaml(&secret)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn istioctl_spellings_of_proxy_config_parse() {
        for args in [
            ["meshctl", "proxy-config", "clusters", "p"],
            ["meshctl", "pc", "cluster", "p"],
            ["meshctl", "pc", "route", "p"],
            ["meshctl", "proxy-config", "endpoint", "p"],
            ["meshctl", "pc", "listener", "p"],
        ] {
            let cli = Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            assert!(matches!(cli.command, Command::ProxyConfig { .. }), "{args:?}");
        }
        assert!(Cli::try_parse_from(["meshctl", "pc", "secrets", "p"]).is_err());
    }

    /// A remote kubeconfig whose API server refuses connections: reaching it would fail differently.
    fn unreachable_remote(dir: &std::path::Path) -> String {
        let path = dir.join("remote");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\ncurrent-context: r\nclusters:\n- name: r\n  cluster:\n    server: https://127.0.0.1:1\n\
             contexts:\n- name: r\n  context:\n    cluster: r\n    user: u\nusers:\n- name: u\n  user:\n    token: t\n",
        )
        .unwrap();
        path.display().to_string()
    }

    async fn add(args: &[&str]) -> String {
        let cli = Cli::parse_from(["meshctl", "add-cluster", "--allow-loopback"].iter().chain(args));
        run(cli).await.unwrap_err().to_string()
    }

    #[tokio::test]
    async fn add_cluster_checks_local_inputs_before_the_remote() {
        let dir = tempfile::tempdir().unwrap();
        let remote = unreachable_remote(dir.path());
        let e = add(&["--name", "Bad_Name", "--kubeconfig", &remote]).await;
        assert!(e.contains("DNS-1123"), "{e}");
        let missing = dir.path().join("missing").display().to_string();
        let e = add(&[
            "--name",
            "c3",
            "--kubeconfig",
            &remote,
            "--apply",
            "--primary-kubeconfig",
            &missing,
        ])
        .await;
        assert!(
            e.starts_with("primary cluster (--primary-kubeconfig): kubeconfig "),
            "{e}"
        );
        assert!(e.contains(&missing), "{e}");
        let e = add(&["--name", "c3", "--kubeconfig", &missing]).await;
        assert!(e.starts_with("remote cluster (--kubeconfig): kubeconfig "), "{e}");
    }
}
