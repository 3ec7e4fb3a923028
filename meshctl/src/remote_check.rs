//! `meshctl remote-clusters --check`: meshd's check lines (`/debug/clusterz/check`) as a table, and the
//! verdict: any failed line makes the exit status non-zero.

use meshd::multicluster::check::{CheckRow, Outcome};
use serde::Serialize;

use super::output::Rows;

/// The check lines, as meshd returned them.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct Checks(pub Vec<CheckRow>);

impl Checks {
    /// How many lines failed and how many warn.
    pub fn counts(&self) -> (usize, usize) {
        let count = |o: Outcome| self.0.iter().filter(|r| r.result == o).count();
        (count(Outcome::Fail), count(Outcome::Warning))
    }

    /// The closing line for people: what passed, or how many problems.
    pub fn summary(&self) -> String {
        match self.counts() {
            (_, _) if self.0.is_empty() => "no remote clusters or gateways to check".into(),
            (0, 0) => format!("all {} checks passed", self.0.len()),
            (0, w) => format!("all checks passed; {w} warning(s)"),
            (f, w) => format!("{f} check(s) failed, {w} warning(s)"),
        }
    }
}

impl Rows for Checks {
    fn header(&self) -> Vec<&'static str> {
        vec!["CLUSTER", "CHECK", "RESULT", "DETAIL"]
    }
    fn cells(&self) -> Vec<Vec<String>> {
        self.0
            .iter()
            .map(|r| {
                let result = match r.result {
                    Outcome::Ok => "ok",
                    Outcome::Warning => "WARNING",
                    Outcome::Fail => "FAIL",
                };
                vec![
                    r.cluster.clone(),
                    r.check.clone(),
                    result.into(),
                    r.detail.clone(),
                ]
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(result: Outcome) -> CheckRow {
        CheckRow {
            cluster: "c2".into(),
            check: "sync".into(),
            result,
            detail: "d".into(),
        }
    }

    #[test]
    fn summary_and_counts_follow_the_worst_lines() {
        use Outcome::*;
        let cases: [(&[Outcome], (usize, usize), &str); 4] = [
            (&[], (0, 0), "no remote clusters or gateways to check"),
            (&[Ok, Ok], (0, 0), "all 2 checks passed"),
            (&[Ok, Warning], (0, 1), "all checks passed; 1 warning(s)"),
            (&[Fail, Warning, Fail], (2, 1), "2 check(s) failed, 1 warning(s)"),
        ];
        for (results, counts, summary) in cases {
            let checks = Checks(results.iter().map(|r| line(*r)).collect());
            assert_eq!(checks.counts(), counts);
            assert_eq!(checks.summary(), summary);
        }
    }

    #[test]
    fn failures_are_shouted_in_the_table() {
        let checks = Checks(vec![line(Outcome::Ok), line(Outcome::Fail)]);
        assert_eq!(
            checks.cells().iter().map(|c| c[2].as_str()).collect::<Vec<_>>(),
            ["ok", "FAIL"]
        );
    }
}
