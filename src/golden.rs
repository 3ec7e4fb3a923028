//! Golden files for table tests: the rendered value is compared with `<dir>/<name>.json`, and
//! `UPDATE_GOLDENS=1` rewrites the file instead (review the diff).
// Test support only (also gated where the module is declared): a panic here fails a test, not the server.
#![cfg(test)]

use std::path::Path;

/// Compares `actual`, pretty JSON, with the golden file `dir/name.json` (relative to the crate root).
pub(crate) fn check(dir: &str, name: &str, actual: &impl serde::Serialize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(dir)
        .join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(actual).unwrap() + "\n";
    if std::env::var_os("UPDATE_GOLDENS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing {}; UPDATE_GOLDENS=1", path.display()));
    assert_eq!(
        text,
        want,
        "{} differs; rerun with UPDATE_GOLDENS=1 and review",
        path.display()
    );
}
