//! Every Kubernetes watch meshd opens is made here, so none can silently lack a setting: the
//! server-side timeout from `--watch-timeout` (kube-runtime then gives up a watch silent for 5 s
//! longer, a blackholed connection, and re-establishes it), a re-list after 410 Gone (kube-runtime's
//! watcher) and the default backoff between attempts. Owners of watches pass their selectors; a test
//! below checks that no other file builds a watcher.

use std::fmt::Debug;

use futures::Stream;
use kube::{
    Api, Resource,
    runtime::{WatchStreamExt, watcher},
};
use serde::de::DeserializeOwned;

/// A watch's settings: its server-side timeout, in whole seconds (`--watch-timeout`). Add selectors
/// with [`watcher::Config`]'s builders.
pub fn config(timeout_secs: u32) -> watcher::Config {
    watcher::Config::default()
        .timeout(timeout_secs)
        .page_size(LIST_PAGE_SIZE)
}

/// Objects per list page. With kube-runtime's default (500) each page's body and objects are a few MiB
/// that glibc's allocator keeps after the initial list: 100 cut memory per remote by about 3 MiB
/// (docs/benchmarks.md), for a list request per 100 objects instead of per 500.
pub const LIST_PAGE_SIZE: u32 = 100;

/// The watch of `api` with `config` ([`config`]), backing off between failed attempts.
pub fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher(api, config).default_backoff()
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The audit row "every watch applies `--watch-timeout`" as a check: a watcher built anywhere else
    /// (as the secret controller's and the root publisher's once were, hiding remote-secret changes for
    /// 295 s behind a silent primary) fails here.
    #[test]
    fn every_watch_is_built_here() {
        let mut files = Vec::new();
        sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
        let here = Path::new(file!()).file_name().expect("file name");
        let offenders: Vec<String> = files
            .iter()
            .filter(|f| f.file_name() != Some(here))
            .filter(|f| {
                let text = std::fs::read_to_string(f).expect("read source");
                text.contains("watcher::Config::default()")
                    || text.contains("watcher(Api")
                    || text.contains("runtime::watcher(")
                    || text.lines().any(|l| l.trim_start().starts_with("watcher("))
                    || text.contains("= watcher(")
            })
            .map(|f| f.display().to_string())
            .collect();
        assert!(
            offenders.is_empty(),
            "watches built outside kube_watch: {offenders:?}"
        );
    }

    #[test]
    fn the_flag_reaches_the_watch() {
        assert_eq!(super::config(7).timeout, Some(7));
        assert_eq!(super::config(7).page_size, Some(super::LIST_PAGE_SIZE));
    }
}
