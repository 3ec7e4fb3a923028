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

impl Visibility {
    /// A rule's `exportTo` written in namespace `own`; `default` applies when it is empty (MeshConfig's
    /// `defaultDestinationRuleExportTo` / `defaultVirtualServiceExportTo`, `*` unless set).
    pub fn of_config(export_to: &[String], own: &str, default: &Visibility) -> Self {
        Self::from_export(
            ExportTo::parse(export_to.iter().map(String::as_str), own),
            default,
        )
    }

    /// A service's `exportTo` (or `networking.istio.io/exportTo` annotation).
    pub fn of_service(service: &Service, default: &Visibility) -> Self {
        Self::from_export(service.export_to.clone(), default)
    }

    fn from_export(export: ExportTo, default: &Visibility) -> Self {
        match export {
            ExportTo::Default => default.clone(),
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
            Visibility::of_config(&e, "a", &Visibility::Public)
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
        let private_default = Visibility::Namespaces(["a".into()].into());
        assert!(!Visibility::of_config(&[], "a", &private_default).visible_in("b"));
    }
}
