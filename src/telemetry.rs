//! Logging: a tracing subscriber writing text or JSON lines to stderr, and how errors are printed.

use std::io::IsTerminal;

use tracing::{Level, Metadata};
use tracing_subscriber::{EnvFilter, filter::filter_fn, fmt, prelude::*};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Library events that only repeat a failure meshd reports itself, with the cluster and server named:
/// kube-client's request tracing logs every failed request at ERROR (`failed with error …`), its
/// client logs a watch stream cut short at WARN (`eof in poll: Custom { … }`, a `Debug` dump; the watcher
/// resumes, and meshd reports the reconnect if it fails) and an unparsable answer before returning it,
/// and kube-runtime's watcher logs every 403 at WARN before returning it to the watcher's owner.
///
/// They are dropped by target and level: the config cluster's client is the stack `kube::Client::try_from`
/// builds, tracing layer included (remote clients, built by `multicluster::client` for their small read
/// buffers, leave that layer out). The filter is exact (these events only, the libraries' debug tracing
/// stays available through `--log-level`) and covers every client at once.
const LIBRARY_DUPLICATES: &[(&str, Level)] = &[
    ("kube_client::client::builder", Level::ERROR),
    ("kube_client::client", Level::WARN),
    ("kube_runtime::watcher", Level::WARN),
];

/// Whether an event is one of [`LIBRARY_DUPLICATES`] (that level or less verbose).
pub fn is_library_duplicate(meta: &Metadata<'_>) -> bool {
    meta.is_event()
        && LIBRARY_DUPLICATES
            .iter()
            .any(|(target, level)| meta.target() == *target && meta.level() <= level)
}

/// Installs the global subscriber. `filter` is a level or tracing directives (`info,meshd::xds=debug`).
pub fn init(filter: &str, format: LogFormat) -> Result<(), String> {
    let filter = EnvFilter::try_new(filter).map_err(|e| format!("invalid --log-level {filter:?}: {e}"))?;
    stderr_layer(format)
        .with_subscriber(tracing_subscriber::registry().with(filter))
        .try_init()
        .map_err(|e| format!("cannot install the log subscriber: {e}"))
}

/// Lines to stderr, coloured only when stderr is a terminal (not in files, pipes or `kubectl logs`).
pub fn stderr_layer<S>(format: LogFormat) -> Box<dyn tracing_subscriber::Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    layer(format, std::io::stderr().is_terminal(), std::io::stderr)
}

/// The formatting layer: `format` lines to `writer`, with ANSI colour only if `ansi` (a terminal), and
/// without [`LIBRARY_DUPLICATES`].
fn layer<S, W>(
    format: LogFormat,
    ansi: bool,
    writer: W,
) -> Box<dyn tracing_subscriber::Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    W: for<'w> fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let keep = filter_fn(|meta| !is_library_duplicate(meta));
    match format {
        LogFormat::Text => fmt::layer()
            .with_writer(writer)
            .with_ansi(ansi)
            .with_filter(keep)
            .boxed(),
        LogFormat::Json => fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_writer(writer)
            .with_filter(keep)
            .boxed(),
    }
}

/// An error and its causes, each once: `a: b: c`. Error types here and in libraries (kube's
/// `failed to read kubeconfig from "x": {io error}`, which is also its `source()`) often include their
/// cause in their message, so printing every `source()` (anyhow's `{:#}`) repeats it; a cause whose
/// text is already shown is skipped.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

/// Rate-limits one source's repeated identical failure lines (a watch retrying against a down API server
/// fails every backoff step with the same words): the first occurrence is logged; identical repeats are
/// counted, and logged at most once per window with how many there were, until the failure changes or
/// [`Repeats::clear`] reports a recovery. Pure: the caller passes the clock.
#[derive(Debug)]
pub struct Repeats {
    window: std::time::Duration,
    last: Option<Logged>,
}

#[derive(Debug)]
struct Logged {
    what: String,
    at: tokio::time::Instant,
    suppressed: u32,
}

impl Repeats {
    /// Identical failures are logged at most once per `window`.
    pub fn new(window: std::time::Duration) -> Self {
        Self { window, last: None }
    }

    /// One occurrence of failure `what` at `now`: `Some(n)` to log it, with `n` identical occurrences
    /// suppressed since the last line (0 for a new failure), or `None` to suppress it.
    pub fn observe(&mut self, what: &str, now: tokio::time::Instant) -> Option<u32> {
        match &mut self.last {
            Some(l) if l.what == what && now.duration_since(l.at) < self.window => {
                l.suppressed += 1;
                None
            }
            Some(l) if l.what == what => {
                let n = std::mem::take(&mut l.suppressed);
                l.at = now;
                Some(n)
            }
            _ => {
                self.last = Some(Logged {
                    what: what.to_owned(),
                    at: now,
                    suppressed: 0,
                });
                Some(0)
            }
        }
    }

    /// The failure is over: `Some(n)` if there was one (`n` repeats not yet logged), and the next
    /// occurrence of any failure is logged again.
    pub fn clear(&mut self) -> Option<u32> {
        self.last.take().map(|l| l.suppressed)
    }

    /// The window, for log lines (`repeated N times in the last 60s`).
    pub fn window(&self) -> std::time::Duration {
        self.window
    }
}

/// How long identical failures of one cluster are summarised rather than logged each time.
pub const REPEAT_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parking_lot::Mutex;

    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("mesh config file /x: {source}")]
    struct Read {
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn a_cause_the_message_already_shows_is_printed_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let io_text = io.to_string();
        let e = anyhow::Error::new(Read { source: io }).context("loading config");
        let shown = error_chain(e.as_ref());
        assert_eq!(shown, format!("loading config: mesh config file /x: {io_text}"));
        assert_eq!(shown.matches(&io_text).count(), 1, "{shown}");
        // A cause not in the message is still printed.
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_chain(e.as_ref()), "outer: inner");
    }

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn logged(format: LogFormat, ansi: bool, emit: impl FnOnce()) -> String {
        let buf = Buf::default();
        let writer = buf.clone();
        let subscriber = layer(format, ansi, move || writer.clone())
            .with_subscriber(tracing_subscriber::registry().with(EnvFilter::new("debug")));
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = buf.0.lock().clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[test]
    fn library_duplicates_are_dropped_and_meshd_lines_kept() {
        for format in [LogFormat::Text, LogFormat::Json] {
            let out = logged(format, false, || {
                tracing::error!(target: "kube_client::client::builder", "failed with error client error (Connect)");
                tracing::warn!(target: "kube_runtime::watcher", "watch list error with 403");
                tracing::warn!(target: "kube_client::client", "eof in poll: Custom {{ kind: UnexpectedEof }}");
                tracing::debug!(target: "kube_client::client::builder", "requesting");
                tracing::warn!(target: "meshd::registry", "watch failed; backing off and relisting");
            });
            assert!(!out.contains("failed with error"), "{out}");
            assert!(!out.contains("403") && !out.contains("eof in poll"), "{out}");
            assert!(
                out.contains("requesting"),
                "the library's debug tracing stays: {out}"
            );
            assert!(out.contains("backing off"), "{out}");
        }
    }

    #[test]
    fn no_colour_unless_asked() {
        let out = logged(LogFormat::Text, false, || tracing::warn!(cluster = "c1", "x"));
        assert!(!out.contains('\u{1b}'), "{out:?}");
        let out = logged(LogFormat::Text, true, || tracing::warn!(cluster = "c1", "x"));
        assert!(out.contains('\u{1b}'), "{out:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn identical_failures_are_logged_once_per_window_until_they_change_or_recover() {
        use std::time::Duration;
        use tokio::time::{Instant, advance};

        let mut r = Repeats::new(Duration::from_secs(60));
        assert_eq!(
            r.observe("unreachable", Instant::now()),
            Some(0),
            "the first is logged"
        );
        for _ in 0..5 {
            advance(Duration::from_secs(5)).await;
            assert_eq!(
                r.observe("unreachable", Instant::now()),
                None,
                "repeats are suppressed"
            );
        }
        advance(Duration::from_secs(35)).await;
        assert_eq!(
            r.observe("unreachable", Instant::now()),
            Some(5),
            "after the window: one line with the count"
        );
        advance(Duration::from_secs(1)).await;
        assert_eq!(r.observe("unreachable", Instant::now()), None);
        assert_eq!(
            r.observe("forbidden", Instant::now()),
            Some(0),
            "a different failure is logged at once"
        );
        assert_eq!(r.observe("forbidden", Instant::now()), None);
        assert_eq!(r.clear(), Some(1), "recovery reports what was not logged");
        assert_eq!(r.clear(), None, "nothing to recover from");
        assert_eq!(
            r.observe("forbidden", Instant::now()),
            Some(0),
            "after a recovery the failure is new"
        );
    }
}
