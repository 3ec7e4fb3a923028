//! The `meshd` command line, modelled on istiod's `pilot-discovery discovery`. Every flag has an
//! environment fallback so the Helm chart can set them either way.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    path::PathBuf,
    str::FromStr,
    time::Duration,
};

use clap::{CommandFactory, FromArgMatches, Parser, parser::ValueSource};

use crate::{aggregate::EdsDebounce, multicluster::kubeconfig::InsecureOption, telemetry::LogFormat};

/// meshd: a multi-cluster service-mesh control plane.
///
/// With no --kubeconfig and outside a pod, meshd runs the embedded sandbox: simulated Kubernetes API
/// servers for the clusters/ topology, with the real control plane on top.
#[derive(Debug, Clone, Parser)]
#[command(name = "meshd", version, about, long_about = None, max_term_width = 110)]
pub struct Args {
    /// Kubeconfig of the primary (config) cluster. Default: in-cluster config when running in a pod,
    /// otherwise the embedded sandbox.
    #[arg(long, env = "MESHD_KUBECONFIG", value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Serve this clusters folder (one sub-folder of manifests per cluster) from simulated API servers.
    #[arg(
        long,
        env = "MESHD_SANDBOX",
        value_name = "DIR",
        conflicts_with = "kubeconfig"
    )]
    pub sandbox: Option<PathBuf>,

    /// Where the sandbox writes its kubeconfigs and keeps its clusters' objects (restored at the next
    /// start).
    #[arg(long, env = "MESHD_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Start the sandbox's clusters empty: forget the objects (and with them the mesh CA) kept in the
    /// state folder.
    #[arg(long, conflicts_with = "kubeconfig")]
    pub fresh: bool,

    /// ID of the cluster meshd runs in (istiod's CLUSTER_ID). Default: `Kubernetes`, or in the sandbox
    /// the first cluster folder.
    #[arg(long, env = "CLUSTER_ID", value_name = "ID")]
    pub cluster_id: Option<String>,

    /// Namespace of the control plane: remote secrets, CA and leases live here.
    #[arg(
        long,
        env = "POD_NAMESPACE",
        default_value = "istio-system",
        value_name = "NS"
    )]
    pub system_namespace: String,

    /// DNS suffix of the clusters' services.
    #[arg(
        long,
        env = "MESHD_DOMAIN_SUFFIX",
        default_value = "cluster.local",
        value_name = "SUFFIX"
    )]
    pub domain_suffix: String,

    /// Mesh config file (Istio MeshConfig YAML); watched and hot-reloaded. Default: built-in defaults.
    #[arg(long, env = "MESHD_MESH_CONFIG", value_name = "PATH")]
    pub mesh_config: Option<PathBuf>,

    /// meshNetworks file (Istio `networks:` YAML); watched and hot-reloaded. Default: no networks.
    #[arg(long, env = "MESHD_MESH_NETWORKS", value_name = "PATH")]
    pub mesh_networks: Option<PathBuf>,

    /// Directory of Istio config YAML (istiod's `--configDir`): DestinationRules, VirtualServices,
    /// ServiceEntries, … in `*.yaml`/`*.yml` files, recursively; polled like the config files. Read
    /// besides the config cluster's Istio objects (a conflict is reported; the cluster's copy wins).
    #[arg(long, env = "MESHD_CONFIG_DIR", value_name = "DIR")]
    pub config_dir: Option<PathBuf>,

    /// Plaintext xDS gRPC address. `:PORT` means every interface (loopback only in the sandbox).
    #[arg(long, env = "MESHD_GRPC_ADDR", default_value = ":15010", value_name = "ADDR")]
    pub grpc_addr: ListenAddr,

    /// mTLS xDS gRPC address; clients must present a valid identity.
    #[arg(
        long,
        env = "MESHD_SECURE_GRPC_ADDR",
        default_value = ":15012",
        value_name = "ADDR"
    )]
    pub secure_grpc_addr: ListenAddr,

    /// Plugged-in CA folder in Istio's `cacerts` layout (`ca-cert.pem`, `ca-key.pem`, `root-cert.pem`,
    /// optional `cert-chain.pem`), hot-reloaded. Default: a self-signed root kept in the
    /// `istio-ca-secret` Secret of the system namespace, created by the leader.
    #[arg(long, env = "MESHD_CA_DIR", value_name = "DIR")]
    pub ca_dir: Option<PathBuf>,

    /// Extra DNS names or IPs for the secure gRPC serving certificate (istiod's ISTIOD_CUSTOM_HOST).
    #[arg(
        long,
        env = "ISTIOD_CUSTOM_HOST",
        value_delimiter = ',',
        value_name = "HOST,..."
    )]
    pub tls_hosts: Vec<String>,

    /// Audience a service-account token must be issued for (istiod's TOKEN_AUDIENCES).
    #[arg(long, env = "TOKEN_AUDIENCES", default_value = "istio-ca", value_name = "AUD")]
    pub token_audience: String,

    /// Validity of workload certificates when a CSR asks for none (istiod's DEFAULT_WORKLOAD_CERT_TTL).
    #[arg(long, env = "DEFAULT_WORKLOAD_CERT_TTL", default_value = "24h", value_parser = parse_duration)]
    pub workload_cert_ttl: Duration,

    /// Longest workload certificate validity a CSR may ask for (istiod's MAX_WORKLOAD_CERT_TTL).
    #[arg(long, env = "MAX_WORKLOAD_CERT_TTL", default_value = "90d", value_parser = parse_duration)]
    pub max_workload_cert_ttl: Duration,

    /// HTTP address for /ready and the debug endpoints.
    #[arg(long, env = "MESHD_HTTP_ADDR", default_value = ":8080", value_name = "ADDR")]
    pub http_addr: ListenAddr,

    /// Monitoring address for /metrics and the debug endpoints.
    #[arg(
        long,
        env = "MESHD_MONITORING_ADDR",
        default_value = ":15014",
        value_name = "ADDR"
    )]
    pub monitoring_addr: ListenAddr,

    /// Longest a client of the HTTP and monitoring addresses may take to send a request's headers, or
    /// stay idle between requests, before its connection is closed (slowloris).
    #[arg(long, env = "MESHD_HTTP_HEADER_TIMEOUT", default_value = "10s", value_parser = parse_nonzero_duration)]
    pub http_header_timeout: Duration,

    /// Folder of remote cluster kubeconfigs (one file per cluster, its ID from the kubeconfig's current
    /// context), polled every --config-poll; replaces the remote Secrets when set (as in istiod 1.30).
    #[arg(long, env = "PILOT_MULTICLUSTER_KUBECONFIG_PATH", value_name = "DIR")]
    pub multicluster_kubeconfig_path: Option<PathBuf>,

    /// How long a remote cluster may take to sync before it stops blocking readiness.
    #[arg(long, env = "PILOT_REMOTE_CLUSTER_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub remote_cluster_timeout: Duration,

    /// ★ What to do with a remote cluster's endpoints once its API server has been unreachable for
    /// --stale-endpoints-after: keep (istiod), deprioritize (after every other endpoint) or drop. A
    /// remote Secret's `meshd.io/stale-endpoints` annotation overrides it for its clusters.
    #[arg(
        long,
        env = "MESHD_STALE_ENDPOINTS",
        default_value = "keep",
        value_name = "ACTION"
    )]
    pub stale_endpoints: crate::model::StaleAction,

    /// ★ How long a remote cluster's API server may be unreachable before --stale-endpoints acts
    /// (`meshd.io/stale-endpoints-after` on a remote Secret overrides it).
    #[arg(long, env = "MESHD_STALE_ENDPOINTS_AFTER", default_value = "5m", value_parser = parse_stale_after)]
    pub stale_endpoints_after: Duration,

    /// Server-side timeout of each Kubernetes watch (whole seconds). A watch silent for 5 s longer (a
    /// blackholed connection) is presumed dead and re-established.
    #[arg(long, env = "MESHD_WATCH_TIMEOUT", default_value = "290s", value_parser = parse_watch_timeout)]
    pub watch_timeout: u32,

    /// Kubeconfig features remote-cluster secrets may use, comma-separated (`exec,auth-provider,file-paths`).
    /// Default: none, since whoever can write a remote secret could otherwise run commands or read files.
    #[arg(
        long,
        env = "PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS",
        value_delimiter = ',',
        value_enum
    )]
    pub insecure_kubeconfig_options: Vec<InsecureOption>,

    /// Quiet time after the last change before a push (istiod's PILOT_DEBOUNCE_AFTER).
    #[arg(long, env = "PILOT_DEBOUNCE_AFTER", default_value = "100ms", value_parser = parse_duration)]
    pub debounce_after: Duration,

    /// Longest a push may be delayed by a stream of changes (istiod's PILOT_DEBOUNCE_MAX).
    #[arg(long, env = "PILOT_DEBOUNCE_MAX", default_value = "10s", value_parser = parse_duration)]
    pub debounce_max: Duration,

    /// ★ How endpoint-only changes are debounced: `paced` publishes --eds-settle after the first change
    /// and at most once per --debounce-after (a storm converges in ≈ --debounce-after, not
    /// --debounce-max); `quiet` waits for quiet like every other change, as istiod.
    #[arg(long, env = "MESHD_EDS_DEBOUNCE", default_value = "paced", value_enum)]
    pub eds_debounce: EdsDebounceMode,

    /// ★ With --eds-debounce=paced: how long the first endpoint change waits for the events the same
    /// write causes (a Pod and its EndpointSlice, other clusters' watches).
    #[arg(long, env = "MESHD_EDS_SETTLE", default_value = "10ms", value_parser = parse_duration)]
    pub eds_settle: Duration,

    /// New xDS streams accepted per second, excess refused with RESOURCE_EXHAUSTED (istiod's
    /// PILOT_MAX_REQUESTS_PER_SECOND); bursts up to one second's worth. 0: automatic,
    /// min(15 + 5 × cores, 100).
    #[arg(long, env = "PILOT_MAX_REQUESTS_PER_SECOND", default_value = "0", value_parser = parse_rate, value_name = "RATE")]
    pub max_new_streams_per_second: f64,

    /// How often config files are checked for changes.
    #[arg(long, env = "MESHD_CONFIG_POLL", default_value = "1s", value_parser = parse_duration)]
    pub config_poll: Duration,

    /// Longest a graceful shutdown may take before remaining tasks are abandoned.
    #[arg(long, env = "MESHD_DRAIN_DEADLINE", default_value = "10s", value_parser = parse_duration)]
    pub drain_deadline: Duration,

    /// Lease replicas elect a leader with; only the leader writes (e.g. creates the CA Secret).
    #[arg(
        long,
        env = "MESHD_LEADER_LEASE",
        default_value = "meshd-leader",
        value_name = "NAME"
    )]
    pub leader_lease: String,

    /// Log filter: a level (`info`) or tracing directives (`info,meshd::xds=debug`).
    #[arg(long, env = "MESHD_LOG_LEVEL", default_value = "info", value_name = "FILTER")]
    pub log_level: String,

    /// Log format.
    #[arg(long, env = "MESHD_LOG_FORMAT", default_value = "text", value_enum)]
    pub log_format: LogFormat,

    /// Listen flags left at their default (set neither on the command line nor in the environment);
    /// filled by [`Args::try_parse_tracking_defaults`].
    #[arg(skip)]
    pub defaulted_listen_flags: Vec<&'static str>,
}

/// The listen flags: argument ID and flag.
pub const LISTEN_FLAGS: [(&str, &str); 4] = [
    ("grpc_addr", "--grpc-addr"),
    ("secure_grpc_addr", "--secure-grpc-addr"),
    ("http_addr", "--http-addr"),
    ("monitoring_addr", "--monitoring-addr"),
];

/// A listen address: `HOST:PORT`, or `:PORT` for "every interface" (Go style, as istiod's flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenAddr {
    /// Explicit host, or `None` for `:PORT`.
    pub host: Option<IpAddr>,
    /// The port; 0 picks a free one.
    pub port: u16,
}

impl ListenAddr {
    /// The socket address, with `:PORT` bound to `unspecified_host`.
    pub fn resolve(&self, unspecified_host: IpAddr) -> SocketAddr {
        SocketAddr::new(self.host.unwrap_or(unspecified_host), self.port)
    }
}

impl FromStr for ListenAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(port) = s.strip_prefix(':') {
            let port = port.parse().map_err(|_| format!("{s:?}: port must be 0-65535"))?;
            return Ok(ListenAddr { host: None, port });
        }
        let addr: SocketAddr = s
            .parse()
            .map_err(|_| format!("{s:?} is not HOST:PORT or :PORT (e.g. 127.0.0.1:15010)"))?;
        Ok(ListenAddr {
            host: Some(addr.ip()),
            port: addr.port(),
        })
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.host {
            Some(h) => write!(f, "{}", SocketAddr::new(h, self.port)),
            None => write!(f, ":{}", self.port),
        }
    }
}

fn parse_stale_after(s: &str) -> Result<Duration, String> {
    crate::multicluster::stale::parse_after(s).map_err(|e| e.to_string())
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{s:?}: {e} (e.g. 100ms, 30s, 1m)"))
}

/// A rate per second: a finite number, at least 0 (fractions allowed, as istiod's float).
fn parse_rate(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|r| r.is_finite() && *r >= 0.0)
        .ok_or_else(|| format!("{s:?}: want a number of streams per second, at least 0 (0: automatic)"))
}

/// A duration that must not be zero (a zero timeout would close every connection at once).
fn parse_nonzero_duration(s: &str) -> Result<Duration, String> {
    Some(parse_duration(s)?)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{s:?}: must be longer than 0"))
}

/// A watch timeout: whole seconds, at least 1 (the API takes `timeoutSeconds`; 0 would disable the idle
/// timeout).
fn parse_watch_timeout(s: &str) -> Result<u32, String> {
    let d = parse_duration(s)?;
    u32::try_from(d.as_secs())
        .ok()
        .filter(|n| *n >= 1 && d.subsec_nanos() == 0)
        .ok_or_else(|| format!("{s:?}: want whole seconds from 1s"))
}

/// Where the primary cluster's API comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeSource {
    /// A kubeconfig file.
    Kubeconfig(PathBuf),
    /// The pod's service account.
    InCluster,
    /// The embedded sandbox; `None` means the built-in `clusters/` topology.
    Sandbox(Option<PathBuf>),
}

/// `--eds-debounce`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EdsDebounceMode {
    /// ★ Settle, then at most one publish per --debounce-after.
    Paced,
    /// After --debounce-after of quiet, as istiod.
    Quiet,
}

impl Args {
    /// How the aggregate debounces endpoint-only changes.
    pub fn eds_debounce(&self) -> EdsDebounce {
        match self.eds_debounce {
            EdsDebounceMode::Paced => EdsDebounce::Paced {
                settle: self.eds_settle,
            },
            EdsDebounceMode::Quiet => EdsDebounce::Quiet,
        }
    }

    /// Parses `argv`, remembering which listen flags were left at their default: the sandbox may move
    /// those off a taken port, never one the operator chose.
    pub fn try_parse_tracking_defaults<I, T>(argv: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = Self::command().try_get_matches_from(argv)?;
        let mut args = Self::from_arg_matches(&matches)?;
        args.defaulted_listen_flags = LISTEN_FLAGS
            .iter()
            .filter(|(id, _)| matches.value_source(id) == Some(ValueSource::DefaultValue))
            .map(|(_, flag)| *flag)
            .collect();
        Ok(args)
    }

    /// Decides the primary cluster's API source: flags first, then the pod environment, else sandbox.
    pub fn kube_source(&self) -> KubeSource {
        if let Some(k) = &self.kubeconfig {
            KubeSource::Kubeconfig(k.clone())
        } else if self.sandbox.is_some() {
            KubeSource::Sandbox(self.sandbox.clone())
        } else if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
            KubeSource::InCluster
        } else {
            KubeSource::Sandbox(None)
        }
    }

    /// Host that `:PORT` addresses bind: every interface in a real deployment, loopback in the sandbox
    /// (a developer's sandbox should not be reachable from the network).
    pub fn unspecified_host(&self) -> IpAddr {
        match self.kube_source() {
            KubeSource::Sandbox(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            _ => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addr_forms() {
        let any: ListenAddr = ":15010".parse().unwrap();
        assert_eq!(
            any,
            ListenAddr {
                host: None,
                port: 15010
            }
        );
        assert_eq!(
            any.resolve(Ipv4Addr::LOCALHOST.into()).to_string(),
            "127.0.0.1:15010"
        );
        assert_eq!(
            "127.0.0.1:0".parse::<ListenAddr>().unwrap().to_string(),
            "127.0.0.1:0"
        );
        assert_eq!(
            "[::1]:8080".parse::<ListenAddr>().unwrap().to_string(),
            "[::1]:8080"
        );
        for bad in ["15010", ":99999", "localhost:80", ""] {
            assert!(bad.parse::<ListenAddr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn only_listen_flags_left_at_their_default_are_tracked() {
        let a = Args::try_parse_tracking_defaults(["meshd", "--http-addr", ":8080"]).unwrap();
        assert_eq!(
            a.defaulted_listen_flags,
            ["--grpc-addr", "--secure-grpc-addr", "--monitoring-addr"]
        );
        assert!(
            Args::try_parse_from(["meshd"])
                .unwrap()
                .defaulted_listen_flags
                .is_empty()
        );
    }

    #[test]
    fn defaults_match_istiod() {
        let a = Args::try_parse_from(["meshd"]).unwrap();
        assert_eq!(a.system_namespace, "istio-system");
        assert_eq!(a.domain_suffix, "cluster.local");
        assert_eq!((a.grpc_addr.port, a.secure_grpc_addr.port), (15010, 15012));
        assert_eq!((a.http_addr.port, a.monitoring_addr.port), (8080, 15014));
        assert_eq!(a.remote_cluster_timeout, Duration::from_secs(30));
        assert_eq!(a.watch_timeout, 290);
        assert_eq!(a.http_header_timeout, Duration::from_secs(10));
        assert_eq!(
            (a.debounce_after, a.debounce_max),
            (Duration::from_millis(100), Duration::from_secs(10))
        );
        assert_eq!(
            a.eds_debounce(),
            EdsDebounce::Paced {
                settle: Duration::from_millis(10)
            }
        );
        let quiet = Args::try_parse_from(["meshd", "--eds-debounce", "quiet"]).unwrap();
        assert_eq!(quiet.eds_debounce(), EdsDebounce::Quiet);
        assert_eq!(a.log_format, LogFormat::Text);
        assert_eq!(a.token_audience, "istio-ca");
        assert_eq!(
            (a.workload_cert_ttl, a.max_workload_cert_ttl),
            (
                Duration::from_secs(24 * 3600),
                Duration::from_secs(90 * 24 * 3600)
            )
        );
        assert_eq!(a.max_new_streams_per_second, 0.0, "automatic, as istiod");
        let hosts = Args::try_parse_from(["meshd", "--tls-hosts", "a.example,10.0.0.1"]).unwrap();
        assert_eq!(hosts.tls_hosts, ["a.example", "10.0.0.1"]);
        assert!(a.insecure_kubeconfig_options.is_empty());
        let a = Args::try_parse_from(["meshd", "--insecure-kubeconfig-options", "exec,file-paths"]).unwrap();
        assert_eq!(
            a.insecure_kubeconfig_options,
            [InsecureOption::Exec, InsecureOption::FilePaths]
        );
    }

    #[test]
    fn new_stream_rate_is_a_non_negative_number() {
        for (given, rate) in [("7", 7.0), ("0.5", 0.5), ("0", 0.0), ("250", 250.0)] {
            let a = Args::try_parse_from(["meshd", "--max-new-streams-per-second", given]).unwrap();
            assert_eq!(a.max_new_streams_per_second, rate, "{given}");
        }
        for bad in ["-1", "NaN", "inf", "fast", ""] {
            let flag = format!("--max-new-streams-per-second={bad}");
            let e = Args::try_parse_from(["meshd", flag.as_str()]).unwrap_err();
            assert!(e.to_string().contains("streams per second"), "{bad}: {e}");
        }
    }

    #[test]
    fn kubeconfig_and_sandbox_conflict() {
        assert!(Args::try_parse_from(["meshd", "--kubeconfig", "k", "--sandbox", "d"]).is_err());
        assert!(Args::try_parse_from(["meshd", "--kubeconfig", "k", "--fresh"]).is_err());
        assert!(Args::try_parse_from(["meshd", "--fresh"]).unwrap().fresh);
        for bad in ["0s", "1500ms", "200y", "soon"] {
            assert!(
                Args::try_parse_from(["meshd", "--watch-timeout", bad]).is_err(),
                "{bad}"
            );
        }
        let a = Args::try_parse_from(["meshd", "--watch-timeout", "2s"]).unwrap();
        assert_eq!(a.watch_timeout, 2);
        assert!(Args::try_parse_from(["meshd", "--http-header-timeout", "0s"]).is_err());
        let a = Args::try_parse_from(["meshd", "--http-header-timeout", "500ms"]).unwrap();
        assert_eq!(a.http_header_timeout, Duration::from_millis(500));
        let a = Args::try_parse_from(["meshd", "--kubeconfig", "k"]).unwrap();
        assert_eq!(a.kube_source(), KubeSource::Kubeconfig("k".into()));
        assert_eq!(a.unspecified_host(), IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    }
}
