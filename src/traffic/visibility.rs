//! `exportTo`: which namespaces may see a service or a rule (istiod's `initServiceRegistry`,
//! `initVirtualServices`, `initDestinationRules`).

use std::{collections::BTreeSet, sync::Arc};

use crate::model::{ExportTo, Service};

/// Where an object is visible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visibility {
    /// Every namespace (`*`, and the default).
    Public,
    /// These namespaces only (`.` is the object's own).
    Namespaces(BTreeSet<Arc<str>>),
    /// Nowhere (`~`).
    Hidden,
}

/// Where MeshConfig's `defaultServiceExportTo` / `defaultVirtualServiceExportTo` /
/// `defaultDestinationRuleExportTo` puts objects that set no `exportTo`. istiod
/// (`initDefaultExportMaps`, `initServiceRegistry`) honours only `.` (before `*`) and `*`; a list with
/// neither leaves such objects visible nowhere, and an unset (or empty) one is `*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExportDefault {
    /// `*`, and unset.
    #[default]
    Public,
    /// `.`: the object's own namespace.
    Private,
    /// Neither `.` nor `*` listed.
    Hidden,
}

impl ExportDefault {
    /// From the MeshConfig list.
    pub fn of(values: &[String]) -> Self {
        let has = |v: &str| values.iter().any(|x| x.trim() == v);
        match () {
            () if values.is_empty() => Self::Public,
            () if has(".") => Self::Private,
            () if has("*") => Self::Public,
            () => Self::Hidden,
        }
    }

    fn visibility(self, own: &str) -> Visibility {
        match self {
            Self::Public => Visibility::Public,
            Self::Private => Visibility::Namespaces([Arc::from(own)].into()),
            Self::Hidden => Visibility::Hidden,
        }
    }
}

impl Visibility {
    /// A rule's `exportTo` written in namespace `own`; `default` applies when it is empty.
    pub fn of_config(export_to: &[String], own: &str, default: ExportDefault) -> Self {
        Self::from_export(
            ExportTo::parse(export_to.iter().map(String::as_str), own),
            own,
            default,
        )
    }

    /// A service's `exportTo` (or `networking.istio.io/exportTo` annotation).
    pub fn of_service(service: &Service, default: ExportDefault) -> Self {
        Self::from_export(service.export_to.clone(), &service.namespace, default)
    }

    fn from_export(export: ExportTo, own: &str, default: ExportDefault) -> Self {
        match export {
            ExportTo::Default => default.visibility(own),
            ExportTo::Public => Self::Public,
            ExportTo::Hidden => Self::Hidden,
            ExportTo::Namespaces(ns) => Self::Namespaces(ns),
        }
    }

    /// Whether a proxy in `namespace` sees it.
    pub fn visible_in(&self, namespace: &str) -> bool {
        match self {
            Self::Public => true,
            Self::Namespaces(ns) => ns.contains(namespace),
            Self::Hidden => false,
        }
    }

    /// Private to `own` (`exportTo: ["."]`): only its own namespace sees it.
    pub fn is_private_to(&self, own: &str) -> bool {
        matches!(self, Self::Namespaces(ns) if ns.len() == 1 && ns.contains(own))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_to_like_istiod() {
        let v = |e: &[&str]| {
            let e: Vec<String> = e.iter().map(|s| s.to_string()).collect();
            Visibility::of_config(&e, "a", ExportDefault::Public)
        };
        let cases: [(&[&str], &str, bool); 9] = [
            (&[], "b", true),
            (&["*"], "b", true),
            (&["."], "a", true),
            (&["."], "b", false),
            (&["~"], "a", false),
            (&["b", "."], "b", true),
            (&["b", "."], "a", true),
            (&["b", "."], "c", false),
            (&["~", "*"], "c", true),
        ];
        for (export, ns, want) in cases {
            assert_eq!(v(export).visible_in(ns), want, "{export:?} in {ns}");
        }
        assert!(v(&["."]).is_private_to("a"));
    }

    #[test]
    fn mesh_defaults_apply_only_where_export_to_is_unset() {
        let list = |e: &[&str]| e.iter().map(|s| s.to_string()).collect::<Vec<String>>();
        // (MeshConfig list, object's exportTo, seen from "a" (its own), seen from "b")
        let cases: [(&[&str], &[&str], bool, bool); 8] = [
            (&[], &[], true, true),
            (&["*"], &[], true, true),
            (&["."], &[], true, false),
            (&["*", "."], &[], true, false),
            (&["~"], &[], false, false),
            (&["b"], &[], false, false),
            (&["."], &["*"], true, true),
            (&["~"], &["b"], false, true),
        ];
        for (mesh, export, own, other) in cases {
            let d = ExportDefault::of(&list(mesh));
            let v = Visibility::of_config(&list(export), "a", d);
            assert_eq!(
                (v.visible_in("a"), v.visible_in("b")),
                (own, other),
                "{mesh:?} {export:?}"
            );
        }
    }
}
