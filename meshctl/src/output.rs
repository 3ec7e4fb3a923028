//! How results are printed: an aligned table for people, JSON or YAML for scripts. Pure: rendering
//! returns a string; the command prints it to stdout (progress and warnings go to stderr).

use serde::Serialize;

/// `--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Output {
    /// Aligned columns.
    #[default]
    Table,
    /// The rows as JSON.
    Json,
    /// The rows as YAML.
    Yaml,
}

/// Rows with a header, rendered with columns padded to their widest cell.
pub trait Rows: Serialize {
    /// Column names.
    fn header(&self) -> Vec<&'static str>;
    /// Cells, one `Vec` per row, in header order.
    fn cells(&self) -> Vec<Vec<String>>;
}

/// Renders `rows` in `output`.
pub fn render(rows: &impl Rows, output: Output) -> Result<String, serde_json::Error> {
    Ok(match output {
        Output::Table => table(&rows.header(), &rows.cells()),
        Output::Json => serde_json::to_string_pretty(rows)? + "\n",
        Output::Yaml => serde_yaml::to_string(rows).unwrap_or_default(),
    })
}

/// Columns separated by at least two spaces; the last column is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i + 1 == widths.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(&mut header.iter().copied());
    for row in rows {
        out += &line(&mut row.iter().map(String::as_str));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_on_the_widest_cell() {
        type Case<'a> = (&'a [&'a str], Vec<Vec<String>>, &'a str);
        let cases: [Case<'_>; 3] = [
            (&["A", "B"], vec![], "A  B\n"),
            (
                &["NAME", "STATUS"],
                vec![
                    vec!["cluster1".into(), "synced".into()],
                    vec!["c2".into(), "timeout".into()],
                ],
                "NAME      STATUS\ncluster1  synced\nc2        timeout\n",
            ),
            (
                &["A", "B", "C"],
                vec![vec!["x".into(), "".into(), "".into()]],
                "A  B  C\nx\n",
            ),
        ];
        for (header, rows, want) in cases {
            assert_eq!(table(header, &rows), want);
        }
    }
}
