//! The ClusterIP allocator: a Service's `spec.clusterIP` is unique in the service range, validated when
//! asked for, and immutable once set.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};

use serde_json::{Value, json};

use super::core_kind;
use crate::error::Error;
use crate::store::Txn;

/// Defaulting and allocation the real server does on write: Service type, and a cluster IP that is
/// unique in the service range. An explicit IP must be valid, in range and free; once set it never
/// changes (an update that leaves it out keeps it, as kube-apiserver's service strategy does).
pub(super) fn allocate(txn: &Txn<'_>, obj: &mut Value, prev: Option<&Value>) -> Result<(), Error> {
    if !obj["spec"].is_object() && !obj["spec"].is_null() {
        return Ok(());
    }
    let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let key = (
        obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        name.clone(),
    );
    let spec = &mut obj["spec"];
    if spec["type"].is_null() {
        spec["type"] = json!("ClusterIP");
    }
    if spec["type"] == "ExternalName" {
        return Ok(());
    }
    let asked = spec["clusterIP"].as_str().filter(|s| !s.is_empty());
    let before = prev
        .and_then(|p| p["spec"]["clusterIP"].as_str())
        .filter(|s| !s.is_empty());
    let ip = match (asked, before) {
        (Some(a), Some(b)) if a != b => {
            return Err(Error::invalid(
                "Service",
                &name,
                "spec.clusterIPs[0]",
                format!("Invalid value: {a:?}: may not change once set"),
            ));
        }
        (_, Some(b)) => b.to_string(),
        (Some(HEADLESS), None) => HEADLESS.to_string(),
        (Some(a), None) => {
            let used = used_cluster_ips(txn, &key);
            check_cluster_ip(a, &used)
                .map_err(|detail| Error::invalid("Service", &name, "spec.clusterIPs", detail))?;
            a.to_string()
        }
        (None, None) => {
            let used = used_cluster_ips(txn, &key);
            allocate_cluster_ip(&used, txn.next_rv())
                .ok_or_else(|| {
                    Error::invalid(
                        "Service",
                        &name,
                        "spec.clusterIPs",
                        format!(
                            "Internal error: failed to allocate a serviceIP: range {SERVICE_RANGE} is full"
                        ),
                    )
                })?
                .to_string()
        }
    };
    spec["clusterIP"] = json!(ip);
    spec["clusterIPs"] = json!([ip]);
    Ok(())
}

/// kube-apiserver's default `--service-cluster-ip-range`.
const SERVICE_RANGE: &str = "10.96.0.0/12";
const SERVICE_BASE: u32 = u32::from_be_bytes([10, 96, 0, 0]);
const SERVICE_SIZE: u32 = 1 << 20;
const HEADLESS: &str = "None";

/// The cluster IPs of every Service but the one being written.
fn used_cluster_ips(txn: &Txn<'_>, except: &(String, String)) -> HashSet<IpAddr> {
    txn.objects(core_kind("Service"))
        .filter(|o| &o.key != except)
        .filter_map(|o| o.cluster_ip)
        .collect()
}

/// A usable address of the range (not its network or broadcast address).
fn in_service_range(ip: Ipv4Addr) -> bool {
    let n = u32::from(ip).wrapping_sub(SERVICE_BASE);
    n > 0 && n < SERVICE_SIZE - 1
}

/// Whether an explicitly requested cluster IP may be taken, in kube-apiserver's words.
fn check_cluster_ip(ip: &str, used: &HashSet<IpAddr>) -> Result<(), String> {
    let parsed: IpAddr = ip.parse().map_err(|_| {
        format!("Invalid value: {ip:?}: must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")
    })?;
    let in_range = matches!(parsed, IpAddr::V4(v4) if in_service_range(v4));
    if !in_range {
        return Err(format!(
            "Invalid value: []string{{{ip:?}}}: failed to allocate IP {ip}: the provided IP ({ip}) is not in \
             the valid range. The range of valid IPs is {SERVICE_RANGE}"
        ));
    }
    if used.contains(&parsed) {
        return Err(format!(
            "Invalid value: []string{{{ip:?}}}: failed to allocate IP {ip}: provided IP is already allocated"
        ));
    }
    Ok(())
}

/// A free address for a Service that asked for none: searched from a position in the upper half of the
/// range derived from `seed` (reproducible, where the real allocator picks at random), so dynamic
/// allocations stay clear of the low addresses manifests and tests pin, as kube-apiserver keeps a band
/// for static ones.
fn allocate_cluster_ip(used: &HashSet<IpAddr>, seed: u64) -> Option<Ipv4Addr> {
    // Index i stands for the address SERVICE_BASE + 1 + i: every usable one, network and broadcast excluded.
    let usable = SERVICE_SIZE - 2;
    let upper = SERVICE_SIZE / 2 - 1;
    let start = upper + (seed % u64::from(usable - upper)) as u32;
    (0..usable)
        .map(|i| Ipv4Addr::from(SERVICE_BASE + 1 + (start + i) % usable))
        .find(|ip| !used.contains(&IpAddr::V4(*ip)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(list: &[&str]) -> HashSet<IpAddr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn explicit_cluster_ips_must_be_valid_in_range_and_free() {
        let used = ips(&["10.96.0.10"]);
        let cases: [(&str, Option<&str>); 7] = [
            ("10.96.0.11", None),
            ("10.111.255.254", None),
            ("10.96.0.10", Some("provided IP is already allocated")),
            (
                "10.96.0.0",
                Some("not in the valid range. The range of valid IPs is 10.96.0.0/12"),
            ),
            ("10.111.255.255", Some("not in the valid range")),
            (
                "192.168.0.1",
                Some("failed to allocate IP 192.168.0.1: the provided IP (192.168.0.1)"),
            ),
            ("ten", Some("must be a valid IP address")),
        ];
        for (ip, want) in cases {
            match (check_cluster_ip(ip, &used), want) {
                (Ok(()), None) => {}
                (Err(e), Some(w)) => assert!(e.contains(w), "{ip}: {e}"),
                (got, want) => panic!("{ip}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn dynamic_cluster_ips_are_free_in_range_and_in_the_upper_half() {
        let mut used = HashSet::new();
        for seed in [0, 1, 5, 5, 5, u64::MAX] {
            let ip = allocate_cluster_ip(&used, seed).unwrap();
            assert!(in_service_range(ip), "{ip}");
            assert!(ip >= Ipv4Addr::new(10, 104, 0, 0), "{ip}");
            assert!(used.insert(IpAddr::V4(ip)), "{ip} handed out twice");
        }
    }
}
