//! `meshctl bench-summary`: scaling curves from the `report.json` of several runs that vary one
//! parameter (clients, clusters, endpoints per service, or the services a Sidecar imports), as a
//! markdown table, the growth between steps with anything super-linear flagged, and an SVG.
//!
//! Owns: reading reports by field (older reports without the newer figures still load) and the
//! growth classification. Does NOT: run anything.

use std::{fmt::Write as _, path::PathBuf};

use serde_json::Value;

use super::{Error, plot};

/// `meshctl bench-summary` options.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The runs' `report.json` files (or the folders holding them).
    #[arg(required = true)]
    pub reports: Vec<PathBuf>,
    /// The parameter the runs vary.
    #[arg(long, value_enum)]
    pub vary: Vary,
    /// Output folder for `scaling-<vary>.md` and `scaling-<vary>.svg`.
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
}

/// What a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Vary {
    /// Client streams.
    Clients,
    /// Simulated clusters.
    Clusters,
    /// Endpoints per service per cluster.
    Endpoints,
    /// Services each client sees (its Sidecar's hosts; every service without one).
    Hosts,
}

impl Vary {
    fn name(self) -> &'static str {
        match self {
            Self::Clients => "clients",
            Self::Clusters => "clusters",
            Self::Endpoints => "endpoints",
            Self::Hosts => "hosts",
        }
    }

    /// What one step of the parameter adds: a stream, a cluster, an endpoint, a visible service.
    fn unit(self) -> &'static str {
        match self {
            Self::Clients => "stream",
            Self::Clusters => "cluster",
            Self::Endpoints => "endpoint",
            Self::Hosts => "service",
        }
    }
}

/// One run's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The varied parameter.
    pub param: f64,
    /// How many units it amounts to (endpoints: in the whole mesh).
    pub units: f64,
    /// The control plane's RSS, MiB: ready and with every client configured.
    pub rss_ready: Option<f64>,
    /// …with every client configured.
    pub rss_configured: Option<f64>,
    /// The control plane's churn CPU per change, ms.
    pub cpu_per_change: Option<f64>,
    /// …per 1,000 client streams.
    pub cpu_per_change_1k: Option<f64>,
    /// Convergence (every client), ms.
    pub convergence_p50: f64,
    /// Convergence p99 (every client), ms.
    pub convergence_p99: f64,
    /// Initial config p99 from accept, ms.
    pub initial_p99: f64,
    /// Initial config per client, MiB.
    pub bytes_per_client: Option<f64>,
    /// The tool's CPU during the churn, s: clients and simulators.
    pub tool_churn: Option<(f64, f64)>,
    /// Load at start.
    pub load: f64,
}

impl Point {
    /// The figures of one `report.json`.
    pub fn of(report: &Value, vary: Vary) -> Result<Self, String> {
        let num = |path: &str| report.pointer(path).and_then(Value::as_f64);
        let need = |path: &str| num(path).ok_or_else(|| format!("no {path}"));
        let (clusters, services) = (need("/config/shape/clusters")?, need("/config/shape/services")?);
        let endpoints = need("/config/shape/endpoints")?;
        let (param, units) = match vary {
            Vary::Clients => (need("/config/clients")?, need("/config/clients")?),
            Vary::Clusters => (clusters, clusters),
            Vary::Endpoints => (endpoints, endpoints * services * clusters),
            Vary::Hosts => {
                let hosts = num("/config/scope/hosts").unwrap_or(services);
                (hosts, hosts)
            }
        };
        let changes = need("/convergence/changes")?;
        let churn_cpu = num("/target/churnCpuSeconds");
        Ok(Self {
            param,
            units,
            rss_ready: num("/target/ready/rss_mib"),
            rss_configured: num("/target/configured/rss_mib"),
            cpu_per_change: churn_cpu.filter(|_| changes > 0.0).map(|s| s * 1e3 / changes),
            cpu_per_change_1k: num("/cost/targetMsPerChangePer1kStreams"),
            convergence_p50: need("/convergence/allClientsMs/p50")?,
            convergence_p99: need("/convergence/allClientsMs/p99")?,
            initial_p99: need("/initial/sinceAcceptMs/p99")?,
            bytes_per_client: num("/initial/bytesPerClient").map(|b| b / (1 << 20) as f64),
            tool_churn: num("/cost/churn/tool/clientsS").zip(num("/cost/churn/tool/simsS")),
            load: num("/machine/loadAtStart").unwrap_or(0.0),
        })
    }
}

/// How a figure grew over a step, against how the parameter grew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Growth {
    /// Grew by less than a fifth of the parameter's growth (in log terms), or shrank.
    Flat,
    /// Grew, but less than in proportion.
    SubLinear,
    /// In proportion (within 15%).
    Linear,
    /// Faster than the parameter: flagged.
    SuperLinear,
}

impl Growth {
    /// Growth exponent `ln(figure ratio) / ln(parameter ratio)`, classified; `None` when either pair
    /// is not positive or the parameter did not grow.
    pub fn classify(param: (f64, f64), figure: (f64, f64)) -> Option<Self> {
        if param.0 <= 0.0 || param.1 <= param.0 || figure.0 <= 0.0 || figure.1 <= 0.0 {
            return None;
        }
        let exponent = (figure.1 / figure.0).ln() / (param.1 / param.0).ln();
        Some(match exponent {
            e if e < 0.2 => Self::Flat,
            e if e < 0.85 => Self::SubLinear,
            e if e <= 1.15 => Self::Linear,
            _ => Self::SuperLinear,
        })
    }

    fn word(self) -> &'static str {
        match self {
            Self::Flat => "flat",
            Self::SubLinear => "sub-linear",
            Self::Linear => "linear",
            Self::SuperLinear => "**super-linear**",
        }
    }
}

/// Reads the reports, writes `scaling-<vary>.md` and `.svg` into `out`, returns the markdown.
pub fn run(args: &Args) -> Result<String, Error> {
    let mut points = Vec::with_capacity(args.reports.len());
    for path in &args.reports {
        let file = if path.is_dir() {
            path.join("report.json")
        } else {
            path.clone()
        };
        let text = std::fs::read_to_string(&file).map_err(|e| Error::io(&file, e))?;
        let json: Value = serde_json::from_str(&text).map_err(|e| Error::io(&file, e.into()))?;
        let point =
            Point::of(&json, args.vary).map_err(|e| Error::Options(format!("{}: {e}", file.display())))?;
        points.push(point);
    }
    points.sort_by(|a, b| a.param.total_cmp(&b.param));
    let markdown = markdown(&points, args.vary);
    std::fs::create_dir_all(&args.out).map_err(|e| Error::io(&args.out, e))?;
    let name = format!("scaling-{}", args.vary.name());
    let files = [("md", markdown.clone()), ("svg", svg(&points, args.vary))];
    for (ext, text) in files {
        let path = args.out.join(format!("{name}.{ext}"));
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
    }
    Ok(markdown)
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.decimals$}"))
}

/// The table of figures, then the growth per step and over the whole sweep.
pub fn markdown(points: &[Point], vary: Vary) -> String {
    let mut out = format!(
        "| {} | meshd RSS ready / configured MiB | meshd CPU ms per change | CPU ms per change per 1,000 streams | \
         convergence p50 / p99 ms | initial p99 ms | MiB per client | tool CPU s in churn (clients / simulators) | load |\n\
         |---|---|---|---|---|---|---|---|---|\n",
        vary.name()
    );
    for p in points {
        let tool = p
            .tool_churn
            .map_or_else(|| "–".to_owned(), |(c, s)| format!("{c:.1} / {s:.1}"));
        let _ = writeln!(
            out,
            "| {} | {} / {} | {} | {} | {:.0} / {:.0} | {:.0} | {} | {tool} | {:.1} |",
            p.param,
            opt(p.rss_ready, 0),
            opt(p.rss_configured, 0),
            opt(p.cpu_per_change, 1),
            opt(p.cpu_per_change_1k, 1),
            p.convergence_p50,
            p.convergence_p99,
            p.initial_p99,
            opt(p.bytes_per_client, 2),
            p.load
        );
    }
    let unit = vary.unit();
    let _ = write!(
        out,
        "\nGrowth ({} ratio vs the figure's; super-linear = faster than the parameter):\n\n\
         | step | RSS ready per {unit} | RSS configured per {unit} | CPU per change per {unit} | RSS configured | \
         CPU per change | convergence p99 | initial p99 |\n|---|---|---|---|---|---|---|---|\n",
        vary.name()
    );
    let steps = points.windows(2).map(|w| (&w[0], &w[1]));
    let whole = points.first().zip(points.last()).filter(|_| points.len() > 2);
    for (a, b) in steps.chain(whole) {
        let _ = writeln!(out, "{}", growth_row(a, b));
    }
    out
}

fn growth_row(a: &Point, b: &Point) -> String {
    let per_unit = |f: fn(&Point) -> Option<f64>, scale: f64, suffix: &str| {
        let du = b.units - a.units;
        match (f(a), f(b)) {
            (Some(x), Some(y)) if du > 0.0 => format!("{:.2} {suffix}", (y - x) * scale / du),
            _ => "–".to_owned(),
        }
    };
    let class = |x: Option<f64>, y: Option<f64>| match x.zip(y) {
        Some((x, y)) => {
            let word = Growth::classify((a.param, b.param), (x, y)).map_or("–", Growth::word);
            format!("×{:.2} {word}", y / x)
        }
        None => "–".to_owned(),
    };
    format!(
        "| {} → {} (×{:.1}) | {} | {} | {} | {} | {} | {} | {} |",
        a.param,
        b.param,
        b.param / a.param,
        per_unit(|p| p.rss_ready, 1024.0, "KiB"),
        per_unit(|p| p.rss_configured, 1024.0, "KiB"),
        per_unit(|p| p.cpu_per_change, 1e3, "µs"),
        class(a.rss_configured, b.rss_configured),
        class(a.cpu_per_change, b.cpu_per_change),
        class(Some(a.convergence_p99), Some(b.convergence_p99)),
        class(Some(a.initial_p99), Some(b.initial_p99)),
    )
}

/// One panel per figure, the parameter across.
pub fn svg(points: &[Point], vary: Vary) -> String {
    let series = |f: fn(&Point) -> Option<f64>| -> Vec<(f64, f64)> {
        points.iter().filter_map(|p| f(p).map(|v| (p.param, v))).collect()
    };
    let panels = [
        ("meshd RSS ready, MiB", series(|p| p.rss_ready)),
        ("meshd RSS configured, MiB", series(|p| p.rss_configured)),
        ("meshd CPU per change, ms", series(|p| p.cpu_per_change)),
        (
            "meshd CPU per change per 1,000 streams, ms",
            series(|p| p.cpu_per_change_1k),
        ),
        ("convergence p99, ms", series(|p| Some(p.convergence_p99))),
        ("initial config p99, ms", series(|p| Some(p.initial_p99))),
    ];
    plot::panels(&format!("Scaling with {}", vary.name()), vary.name(), &panels)
}

#[cfg(test)]
#[path = "summary_tests.rs"]
mod tests;
