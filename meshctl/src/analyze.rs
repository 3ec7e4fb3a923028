//! `meshctl analyze`: every Istio object meshd rejected or ignored, with the reason (istioctl
//! analyze's role, from meshd's own validation), and every route to a subset no DestinationRule
//! defines (IST0101), read from `/debug/configz`.

use meshd::{config_controller::ConfigzView, istio::Source, traffic::MissingSubset};
use serde::Serialize;

use crate::output::Rows;

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// `Error` (rejected: not applied, or its last valid version still serving), `Warning` (ignored:
    /// another source's copy is in force; a source that cannot be read) or `Info` (a field meshd
    /// ignores).
    pub level: &'static str,
    /// The kind (`-` for a source).
    pub kind: String,
    /// `namespace/name`, or the source's name.
    pub name: String,
    /// Where the object came from.
    pub source: String,
    /// Why.
    pub reason: String,
}

/// The findings, table or JSON.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct Findings(pub Vec<Finding>);

impl Findings {
    /// How many objects were rejected (the exit status is non-zero when any was).
    pub fn rejected(&self) -> usize {
        self.0.iter().filter(|f| f.level == "Error").count()
    }
}

impl Rows for Findings {
    fn header(&self) -> Vec<&'static str> {
        vec!["LEVEL", "KIND", "NAME", "SOURCE", "REASON"]
    }

    fn cells(&self) -> Vec<Vec<String>> {
        self.0
            .iter()
            .map(|f| {
                vec![
                    f.level.into(),
                    f.kind.clone(),
                    f.name.clone(),
                    f.source.clone(),
                    f.reason.clone(),
                ]
            })
            .collect()
    }
}

fn source(s: &Source) -> String {
    match s {
        Source::Cluster(c) => format!("cluster {c}"),
        Source::File { path, index } => format!("{path}#{index}"),
    }
}

/// The findings in a configz view: rejected objects, ignored copies, ignored fields, failing sources,
/// and routes to subsets that `missing` says no DestinationRule defines.
pub fn findings(view: &ConfigzView, missing: &[MissingSubset]) -> Findings {
    let mut out = Vec::new();
    for o in &view.objects {
        let name = format!("{}/{}", o.namespace, o.name);
        let mut push = |level, reason: String| {
            out.push(Finding {
                level,
                kind: o.kind.to_string(),
                name: name.clone(),
                source: source(&o.source),
                reason,
            })
        };
        match o.status.as_str() {
            "rejected" => {
                let mut reason = o.reason.clone().unwrap_or_default();
                if let Some(rev) = &o.serving_revision {
                    reason += &format!(" (revision {rev} still serving)");
                }
                push("Error", reason);
            }
            "ignored" => push("Warning", o.reason.clone().unwrap_or_default()),
            _ => {}
        }
        for w in &o.warnings {
            push("Info", w.to_string());
        }
    }
    for (name, state) in &view.sources {
        if let Some(e) = &state.error {
            out.push(Finding {
                level: "Warning",
                kind: "-".into(),
                name: name.clone(),
                source: name.clone(),
                reason: e.clone(),
            });
        }
    }
    for m in missing {
        out.push(Finding {
            level: "Warning",
            kind: m.virtual_service.kind.to_string(),
            name: format!("{}/{}", m.virtual_service.namespace, m.virtual_service.name),
            source: "-".into(),
            reason: format!(
                "IST0101: routes to subset {} of {}, which no DestinationRule defines: that share of the \
                 traffic fails (no proxy is sent the cluster)",
                m.subset, m.host
            ),
        });
    }
    Findings(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshd::{config_controller::ObjectView, istio::Kind};

    #[test]
    fn rejected_ignored_and_warnings_become_findings() {
        let obj = |name: &str, status: &str, reason: Option<&str>| ObjectView {
            kind: Kind::DestinationRule,
            namespace: "ns".into(),
            name: name.into(),
            source: Source::Cluster("c1".into()),
            revision: "2".into(),
            status: status.into(),
            reason: reason.map(Into::into),
            field: None,
            serving_revision: None,
            warnings: Vec::new(),
        };
        let mut rejected = obj(
            "bad",
            "rejected",
            Some("DestinationRule ns/bad: spec.host: host must not be empty"),
        );
        rejected.serving_revision = Some("1".into());
        let view = ConfigzView {
            version: 3,
            sources: [(
                "cluster c1 Gateway".to_owned(),
                meshd::config_controller::SourceState {
                    synced: false,
                    error: Some("CRD gateways.networking.istio.io is missing".into()),
                },
            )]
            .into(),
            objects: vec![
                obj("ok", "valid", None),
                rejected,
                obj("dup", "ignored", Some("conflict")),
            ],
        };
        let f = findings(&view, &[]);
        assert_eq!(f.rejected(), 1);
        let levels: Vec<(&str, &str)> = f.0.iter().map(|f| (f.level, f.name.as_str())).collect();
        assert_eq!(
            levels,
            [
                ("Error", "ns/bad"),
                ("Warning", "ns/dup"),
                ("Warning", "cluster c1 Gateway")
            ]
        );
        assert!(
            f.0[0].reason.ends_with("(revision 1 still serving)"),
            "{}",
            f.0[0].reason
        );
        assert!(crate::output::table(&f.header(), &f.cells()).starts_with("LEVEL"));
    }

    #[test]
    fn a_route_to_an_undefined_subset_is_a_warning_that_names_it() {
        let view = ConfigzView {
            version: 1,
            sources: Default::default(),
            objects: vec![],
        };
        let missing = MissingSubset {
            virtual_service: meshd::istio::ObjectRef {
                kind: Kind::VirtualService,
                namespace: "sample".into(),
                name: "helloworld".into(),
            },
            host: "helloworld.sample.svc.cluster.local".into(),
            subset: "v3".into(),
        };
        let f = findings(&view, &[missing]);
        assert_eq!(f.rejected(), 0);
        assert_eq!(
            (f.0[0].level, f.0[0].name.as_str()),
            ("Warning", "sample/helloworld")
        );
        assert!(
            f.0[0]
                .reason
                .starts_with("IST0101: routes to subset v3 of helloworld.sample.svc.cluster.local"),
            "{}",
            f.0[0].reason
        );
    }
}
