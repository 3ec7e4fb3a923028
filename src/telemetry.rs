//! Logging: a tracing subscriber writing text or JSON lines to stderr.

use std::io::IsTerminal;

use tracing_subscriber::{EnvFilter, fmt, prelude::*};

use crate::cli::LogFormat;

/// Installs the global subscriber. `filter` is a level or tracing directives (`info,meshd::xds=debug`).
pub fn init(filter: &str, format: LogFormat) -> Result<(), String> {
    let filter = EnvFilter::try_new(filter).map_err(|e| format!("invalid --log-level {filter:?}: {e}"))?;
    let registry = tracing_subscriber::registry().with(filter);
    let result = match format {
        LogFormat::Text => registry
            .with(fmt::layer().with_writer(std::io::stderr).with_target(true))
            .try_init(),
        LogFormat::Json => registry
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
    };
    result.map_err(|e| format!("cannot install the log subscriber: {e}"))
}
