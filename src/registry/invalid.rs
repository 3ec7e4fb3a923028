//! Addresses that do not parse. The conversions leave them out of what they build and return them
//! beside it; the registry task reports each object's once (a warning naming it, and
//! `meshd_registry_invalid_addresses_total`), not again on every resync.

use std::{
    collections::{HashMap, HashSet},
    net::IpAddr,
};

use super::endpoints::ObjectName;

/// An address field value that is not an IP address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidAddress {
    /// Where in the object, e.g. `spec.clusterIPs`.
    pub field: &'static str,
    /// What it held.
    pub value: String,
}

/// `value` of `field` as an IP address; otherwise `None`, and the value is added to `invalid`.
pub(super) fn parse_ip(
    field: &'static str,
    value: &str,
    invalid: &mut Vec<InvalidAddress>,
) -> Option<IpAddr> {
    let ip = value.parse().ok();
    if ip.is_none() {
        invalid.push(InvalidAddress {
            field,
            value: value.to_owned(),
        });
    }
    ip
}

/// What each object of one kind was last reported for, so a resync that converts it again unchanged
/// reports nothing. Holds only objects that have invalid addresses.
#[derive(Debug, Default)]
pub(super) struct Reported(HashMap<ObjectName, Vec<InvalidAddress>>);

impl Reported {
    /// `name` now converts with `invalid`: returns what to report (all of it when it differs from the
    /// last report, else nothing).
    pub(super) fn update(&mut self, name: ObjectName, invalid: Vec<InvalidAddress>) -> &[InvalidAddress] {
        if invalid.is_empty() {
            self.0.remove(&name);
            return &[];
        }
        if self.0.get(&name) == Some(&invalid) {
            return &[];
        }
        self.0.entry(name).insert_entry(invalid).into_mut()
    }

    /// `name` was deleted.
    pub(super) fn forget(&mut self, name: &ObjectName) {
        self.0.remove(name);
    }

    /// A relist of `scope` (a namespace, or every one) ended: forgets the objects there it did not list
    /// (`namespace/name` in `seen`).
    pub(super) fn retain_listed(&mut self, seen: &HashSet<String>, scope: Option<&str>) {
        self.0.retain(|n, _| {
            !super::in_scope(scope, &n.namespace) || seen.contains(&format!("{}/{}", n.namespace, n.name))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str) -> ObjectName {
        ObjectName {
            namespace: "ns".into(),
            name: n.into(),
        }
    }

    fn bad(value: &str) -> Vec<InvalidAddress> {
        vec![InvalidAddress {
            field: "spec.clusterIP",
            value: value.into(),
        }]
    }

    #[test]
    fn parse_ip_keeps_addresses_and_collects_the_rest() {
        for (value, want) in [
            ("10.0.0.1", Some("10.0.0.1")),
            ("fd00::1", Some("fd00::1")),
            ("10.0.0.300", None),
            ("", None),
            ("10.0.0.1/32", None),
            ("lb.example.com", None),
        ] {
            let mut invalid = Vec::new();
            let ip = parse_ip("spec.clusterIP", value, &mut invalid);
            assert_eq!(ip, want.map(|s| s.parse().unwrap()), "{value:?}");
            let want_invalid = if want.is_some() { Vec::new() } else { bad(value) };
            assert_eq!(invalid, want_invalid, "{value:?}");
        }
    }

    enum Step {
        /// The object converts with this invalid value, or with none.
        Convert(&'static str, Option<&'static str>),
        Delete(&'static str),
        /// A relist of a namespace (or of every one) that listed only these.
        Relist(Option<&'static str>, &'static [&'static str]),
    }

    #[test]
    fn each_object_is_reported_once_until_it_changes() {
        use Step::*;
        let mut r = Reported::default();
        for (what, step, want) in [
            ("first seen", Convert("a", Some("x")), &["x"][..]),
            ("resync, unchanged", Convert("a", Some("x")), &[]),
            ("another object", Convert("b", Some("x")), &["x"]),
            ("value changed", Convert("a", Some("y")), &["y"]),
            ("fixed", Convert("a", None), &[]),
            ("broken again", Convert("a", Some("y")), &["y"]),
            ("deleted", Delete("a"), &[]),
            ("back", Convert("a", Some("y")), &["y"]),
            ("relist without it", Relist(None, &["ns/b"]), &[]),
            ("back after the relist", Convert("a", Some("y")), &["y"]),
            ("listed by the relist", Convert("b", Some("x")), &[]),
            ("another namespace's relist", Relist(Some("other"), &[]), &[]),
            ("still reported", Convert("a", Some("y")), &[]),
            ("its own namespace's relist", Relist(Some("ns"), &["ns/b"]), &[]),
            ("back after it", Convert("a", Some("y")), &["y"]),
        ] {
            let reported: Vec<&str> = match step {
                Convert(n, value) => r
                    .update(name(n), value.map(bad).unwrap_or_default())
                    .iter()
                    .map(|i| i.value.as_str())
                    .collect(),
                Delete(n) => {
                    r.forget(&name(n));
                    Vec::new()
                }
                Relist(scope, listed) => {
                    r.retain_listed(&listed.iter().map(|s| s.to_string()).collect(), scope);
                    Vec::new()
                }
            };
            assert_eq!(reported, want, "{what}");
        }
    }
}
