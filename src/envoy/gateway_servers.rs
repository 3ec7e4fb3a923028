//! Which Gateways a router proxy gets, their servers merged as istiod merges them
//! (`model/gateway.go:mergeGateways`, `push_context.go:mergeGateways`): every Gateway whose `selector`
//! the proxy's labels include (in any namespace: istiod's `PILOT_SCOPE_GATEWAY_TO_NAMESPACE` is off by
//! default; no selector selects every gateway proxy), oldest first; each server's port translated to
//! the target port of the gateway's Service port of that number (else kept); one listener per port
//! and bind; plain-text HTTP servers of a port share the route configuration `http.<port>`, HTTPS
//! servers that terminate TLS get `https.<port>.<portName>.<gateway>.<namespace>` each; a TLS server
//! whose hosts repeat another's on the port is skipped, and so is a server whose protocol conflicts
//! with the port's first plain-text server. Pure: the listeners ([`super::gateway_listeners`]) and
//! routes ([`super::gateway_routes`]) read the result.

use std::collections::{BTreeMap, BTreeSet};

use super::{Mesh, Proxy, ProxyKind, service_targets};
use crate::{
    istio::{
        Kind, Spec,
        gateway::{Gateway, Server, ServerTlsMode},
    },
    model::Protocol,
};

/// One server of a Gateway, as the proxy serves it.
#[derive(Debug, Clone)]
pub struct Bound<'m> {
    /// The server as written.
    pub server: &'m Server,
    /// Its Gateway, `ns/name` (what VirtualServices bind to).
    pub gateway: String,
    /// The Gateway's namespace.
    pub namespace: &'m str,
    /// Its hosts, `./host` as `<ns>/host` and `*/host` as `host` (istiod's
    /// `sanitizeServerHostNamespace`).
    pub hosts: Vec<String>,
    /// The port the proxy listens on (the server's, translated to the Service's target port).
    pub port: u16,
    /// The server's protocol.
    pub protocol: Protocol,
    /// Its route configuration, for an HTTP server or an HTTPS one that terminates TLS.
    pub route: Option<String>,
    /// The SNI names its filter chain matches (TLS servers; sorted, no namespaces).
    pub sni_hosts: Vec<String>,
}

impl Bound<'_> {
    /// TLS on a non-HTTP port (istiod's `IsTLSServer`).
    pub fn is_tls(&self) -> bool {
        self.server.tls.is_some() && !self.protocol.is_http()
    }

    /// TLS passed through by SNI, not terminated.
    pub fn is_passthrough(&self) -> bool {
        self.server.tls.as_ref().is_some_and(|t| {
            matches!(
                t.mode,
                ServerTlsMode::Passthrough | ServerTlsMode::AutoPassthrough
            )
        })
    }

    /// HTTP, or HTTPS with TLS terminated here (istiod's `IsHTTPServer`).
    pub fn is_http(&self) -> bool {
        self.protocol.is_http()
            || (self.protocol == Protocol::Https && self.server.tls.is_some() && !self.is_passthrough())
    }

    /// The server's TLS mode, if it has TLS settings.
    pub fn tls_mode(&self) -> Option<ServerTlsMode> {
        self.server.tls.as_ref().map(|t| t.mode)
    }
}

/// The servers of one listener (a port and bind address).
#[derive(Debug, Clone)]
pub struct ListenerPort<'m> {
    /// The port.
    pub port: u16,
    /// The bind address (empty: every address).
    pub bind: String,
    /// The protocol of its first server: plain HTTP servers share one HTTP connection manager.
    pub protocol: Protocol,
    /// Its servers in merge order.
    pub servers: Vec<Bound<'m>>,
}

impl ListenerPort<'_> {
    /// The listener's name (`<bind>_<port>`, istiod's `getListenerName`).
    pub fn name(&self) -> String {
        let bind = if self.bind.is_empty() {
            "0.0.0.0"
        } else {
            &self.bind
        };
        format!("{bind}_{}", self.port)
    }
}

/// The Gateways a proxy gets, merged.
#[derive(Debug, Clone, Default)]
pub struct Merged<'m> {
    /// Listeners in the order their first server was merged.
    pub ports: Vec<ListenerPort<'m>>,
    /// Route configuration name → its servers.
    pub routes: BTreeMap<String, Vec<Bound<'m>>>,
    /// Servers left out, with why (istiod logs these and counts them in `pilot_total_rejected_configs`).
    pub skipped: Vec<(String, String)>,
}

impl<'m> Merged<'m> {
    /// The listener `name`.
    pub fn listener(&self, name: &str) -> Option<&ListenerPort<'m>> {
        self.ports.iter().find(|p| p.name() == name)
    }

    /// Every `credentialName` the servers refer to, with the modes that use them.
    pub fn credentials(&self) -> BTreeMap<&'m str, BTreeSet<CredentialUse>> {
        let mut out: BTreeMap<&str, BTreeSet<CredentialUse>> = BTreeMap::new();
        for s in self.ports.iter().flat_map(|p| &p.servers) {
            if let Some(t) = &s.server.tls
                && !t.credential_name.is_empty()
                && !s.is_passthrough()
            {
                let e = out.entry(t.credential_name.as_str()).or_default();
                e.insert(CredentialUse::Certificate);
                if t.mode == ServerTlsMode::Mutual || t.mode == ServerTlsMode::OptionalMutual {
                    e.insert(CredentialUse::ClientCa);
                }
            }
        }
        out
    }
}

/// What a server uses a credential for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CredentialUse {
    /// Its certificate and key (`kubernetes://<name>`).
    Certificate,
    /// The CA client certificates are checked against (`kubernetes://<name>-cacert`).
    ClientCa,
}

/// The Gateways that select `proxy`, oldest first (then by name and namespace): none unless it is a
/// router.
pub fn selecting<'m>(mesh: &'m dyn Mesh, proxy: &Proxy) -> Vec<(&'m str, &'m str, &'m Gateway)> {
    if proxy.kind != ProxyKind::Router {
        return Vec::new();
    }
    let mut out: Vec<(Option<&str>, &str, &str, &Gateway)> = mesh
        .traffic()
        .config
        .of_kind(Kind::Gateway)
        .filter_map(|c| match &c.spec {
            Spec::Gateway(g) => Some((c, &**g)),
            _ => None,
        })
        .filter(|(_, g)| g.selector.iter().all(|(k, v)| proxy.labels.get(k) == Some(v)))
        .map(|(c, g)| {
            (
                c.meta.creation_timestamp.as_deref(),
                &*c.meta.name,
                &*c.meta.namespace,
                g,
            )
        })
        .collect();
    out.sort_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
    out.into_iter().map(|(_, n, ns, g)| (ns, n, g)).collect()
}

/// Some Gateway selecting `proxy` has an AUTO_PASSTHROUGH server: it then gets the SNI-DNAT clusters
/// (istiod's `ContainsAutoPassthroughGateways`). Cheaper than [`merge`]: no port resolution.
pub fn auto_passthrough(mesh: &dyn Mesh, proxy: &Proxy) -> bool {
    selecting(mesh, proxy).iter().any(|(_, _, g)| {
        g.servers.iter().any(|s| {
            s.tls
                .as_ref()
                .is_some_and(|t| t.mode == ServerTlsMode::AutoPassthrough)
        })
    })
}

/// What a gateway's listeners and routes read from the proxy besides the snapshot: its kind,
/// namespace (which VirtualServices it sees), cluster, labels (which Gateways select it) and service
/// targets (how server ports translate).
pub fn view_key(mesh: &dyn Mesh, proxy: &Proxy) -> String {
    let mut key = format!(
        "router|{}|{}|",
        proxy.namespace.as_deref().unwrap_or(""),
        proxy.cluster_id.as_deref().unwrap_or("")
    );
    if proxy.is_east_west_gateway() {
        key.push_str("east-west|");
    }
    for (k, v) in &proxy.labels {
        key.push_str(&format!("{k}={v};"));
    }
    if !selecting(mesh, proxy).is_empty() {
        for t in service_targets::service_targets(mesh, proxy) {
            key.push_str(&format!("|{}:{}", t.port, t.target_port));
        }
    }
    key
}

/// The Gateways selecting `proxy`, merged (see the module doc).
pub fn merge<'m>(mesh: &'m dyn Mesh, proxy: &Proxy) -> Merged<'m> {
    let gateways = selecting(mesh, proxy);
    if gateways.is_empty() {
        return Merged::default();
    }
    let targets = service_targets::service_targets(mesh, proxy);
    let resolve_port = |n: u32| -> u16 {
        targets
            .iter()
            .find(|t| u32::from(t.port) == n)
            .map_or(u16::try_from(n).unwrap_or_default(), |t| t.target_port)
    };
    let mut m = MergeState::default();
    for (ns, name, gw) in gateways {
        let gateway = format!("{ns}/{name}");
        for s in &gw.servers {
            let Ok(number) = u16::try_from(s.port.number) else {
                m.out
                    .skipped
                    .push((gateway.clone(), format!("port {} out of range", s.port.number)));
                continue;
            };
            let port = resolve_port(u32::from(number));
            let protocol = Protocol::from_name(&s.port.protocol);
            let hosts = sanitize_hosts(&s.hosts, ns);
            let mut b = Bound {
                server: s,
                gateway: gateway.clone(),
                namespace: ns,
                sni_hosts: Vec::new(),
                hosts,
                port,
                protocol,
                route: None,
            };
            b.route = route_name(&b, number, name, ns);
            if s.tls.is_some() {
                b.sni_hosts = sni_hosts(&b.hosts);
            }
            m.add(b);
        }
    }
    m.out
}

#[derive(Default)]
struct MergeState<'m> {
    out: Merged<'m>,
    /// Port → the protocol and bind of its first plain-text server.
    plaintext: BTreeMap<u16, (Protocol, String)>,
    /// Port → TLS host → bind.
    tls_hosts: BTreeMap<u16, BTreeMap<String, String>>,
    /// Port → binds with a TLS server.
    tls_binds: BTreeMap<u16, BTreeSet<String>>,
}

impl<'m> MergeState<'m> {
    fn skip(&mut self, b: &Bound, why: String) {
        self.out.skipped.push((b.gateway.clone(), why));
    }

    /// istiod's rules for a server joining the ports merged so far.
    fn add(&mut self, b: Bound<'m>) {
        let port = b.port;
        let bind = b.server.bind.clone();
        if b.server.tls.is_some() {
            let known = self.tls_hosts.entry(port).or_default();
            let dup: Vec<&String> = b.hosts.iter().filter(|h| known.get(*h) == Some(&bind)).collect();
            if !dup.is_empty() {
                let why = format!("port {port}: hosts {dup:?} already served with TLS");
                self.skip(&b, why);
                return;
            }
            for h in &b.hosts {
                known.insert(h.clone(), bind.clone());
            }
        }
        let port_known = self.out.ports.iter().any(|p| p.port == port);
        if !port_known {
            if !b.is_tls() {
                self.plaintext.insert(port, (b.protocol, bind.clone()));
            } else {
                self.tls_binds.entry(port).or_default().insert(bind.clone());
            }
            if b.is_http()
                && let Some(r) = &b.route
            {
                self.out.routes.insert(r.clone(), vec![b.clone()]);
            }
            self.listener(port, &bind, b.protocol).servers.push(b);
            return;
        }
        if let Some((current, current_bind)) = self.plaintext.get(&port).cloned() {
            let mergeable = (current.is_http() || current == b.protocol) && b.protocol.is_http();
            if !mergeable && current_bind == bind {
                let why = format!("port {port}: {:?} conflicts with {current:?}", b.protocol);
                self.skip(&b, why);
                return;
            }
            let Some(route) = b.route.clone() else {
                if current_bind == bind {
                    self.skip(&b, format!("port {port}: a second non-HTTP server"));
                    return;
                }
                self.listener(port, &bind, b.protocol).servers.push(b);
                return;
            };
            self.out.routes.entry(route).or_default().push(b.clone());
            self.listener(port, &bind, b.protocol).servers.push(b);
            return;
        }
        if b.is_http() {
            let Some(route) = b.route.clone() else {
                self.skip(&b, format!("port {port}: no route name"));
                return;
            };
            if self.out.routes.contains_key(&route) {
                self.skip(&b, format!("port {port}: route {route} already served"));
                return;
            }
            self.out.routes.insert(route, vec![b.clone()]);
        }
        let new_bind = self.tls_binds.entry(port).or_default().insert(bind.clone());
        if b.server.tls.is_none() && !new_bind {
            self.skip(&b, format!("port {port}: a plain-text server among TLS servers"));
            return;
        }
        self.listener(port, &bind, b.protocol).servers.push(b);
    }

    fn listener(&mut self, port: u16, bind: &str, protocol: Protocol) -> &mut ListenerPort<'m> {
        let at = match self
            .out
            .ports
            .iter()
            .position(|p| p.port == port && p.bind == bind)
        {
            Some(i) => i,
            None => {
                self.out.ports.push(ListenerPort {
                    port,
                    bind: bind.to_owned(),
                    protocol,
                    servers: Vec::new(),
                });
                self.out.ports.len() - 1
            }
        };
        &mut self.out.ports[at]
    }
}

/// istiod's `sanitizeServerHostNamespace`.
fn sanitize_hosts(hosts: &[String], namespace: &str) -> Vec<String> {
    let mut out = Vec::with_capacity(hosts.len());
    for h in hosts {
        match h.split_once('/') {
            Some((".", host)) => out.push(format!("{namespace}/{host}")),
            Some(("*", "*")) => return vec!["*".to_owned()],
            Some(("*", host)) => out.push(host.to_owned()),
            _ => out.push(h.clone()),
        }
    }
    out
}

/// istiod's `GetSNIHostsForServer`: the hosts without namespaces, sorted, unique.
fn sni_hosts(hosts: &[String]) -> Vec<String> {
    let set: BTreeSet<&str> = hosts
        .iter()
        .map(|h| h.split_once('/').map_or(h.as_str(), |(_, h)| h))
        .collect();
    set.into_iter().map(str::to_owned).collect()
}

/// istiod's `gatewayRDSRouteName`: `http.<listener port>`, or for HTTPS terminated here
/// `https.<server port>.<port name>.<gateway>.<namespace>`, with `.<bind>` when bound.
fn route_name(b: &Bound, server_port: u16, gateway: &str, namespace: &str) -> Option<String> {
    let bind = if b.server.bind.is_empty() {
        String::new()
    } else {
        format!(".{}", b.server.bind)
    };
    if b.protocol.is_http() {
        return Some(format!("http.{}{bind}", b.port));
    }
    (b.protocol == Protocol::Https && !b.is_passthrough()).then(|| {
        format!(
            "https.{server_port}.{}.{gateway}.{namespace}{bind}",
            b.server.port.name
        )
    })
}

#[cfg(test)]
#[path = "gateway_servers_tests.rs"]
mod tests;
