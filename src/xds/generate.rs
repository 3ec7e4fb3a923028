//! Generation through the shared cache: which names a subscription means for a push, and for each the
//! cached resource or [`envoy`]'s build on a miss.
//!
//! Owns: putting the translation's pure [`Context::plan`] (the key) and [`Plan::build`] (the bytes)
//! behind [`ResourceCache`]. Does NOT: decide what a resource depends on or how it looks (`envoy`).

use std::{borrow::Cow, collections::BTreeSet, sync::Arc};

use super::{
    cache::{CacheKey, ResourceCache},
    subscription::Subscription,
};
use crate::envoy::{Context, Resource, ScopedMesh, XdsType};

/// The resources of `ty` that `sub` asks for, read through the proxy's Sidecar scope. With `only`,
/// just those names (an endpoint-only push regenerates the changed clusters). Names that do not exist,
/// or that the proxy's scope hides, are left out.
pub fn generate(
    ctx: &Context<'_>,
    cache: &ResourceCache,
    ty: XdsType,
    sub: &Subscription,
    only: Option<&BTreeSet<Arc<str>>>,
) -> Vec<Arc<Resource>> {
    let scoped = ScopedMesh::new(ctx.mesh, ctx.scope);
    let ctx = Context {
        mesh: &scoped,
        ..*ctx
    };
    let names: Cow<'_, BTreeSet<Arc<str>>> = match only {
        // An endpoint push names a few clusters: look those up, not the whole subscription.
        Some(only) if !sub.wildcard => {
            Cow::Owned(only.iter().filter(|n| sub.names.contains(*n)).cloned().collect())
        }
        // Already a set of names: no copy (EDS asks for a thousand at a time).
        None if !sub.wildcard => Cow::Borrowed(&*sub.names),
        _ => {
            let mut names = if sub.wildcard {
                ctx.all_names(ty)
            } else {
                BTreeSet::new()
            };
            names.extend(sub.names.iter().cloned());
            if let Some(only) = only {
                names.retain(|n| only.contains(n));
            }
            Cow::Owned(names)
        }
    };
    let base = ctx.view_key(ty);
    let version = ctx.mesh.version();
    names
        .iter()
        .filter_map(|name| {
            let plan = ctx.plan(ty, name, &base);
            let key = CacheKey {
                ty,
                name: name.clone(),
                view: plan.view.clone(),
            };
            cache.get_or_insert(key, version, || plan.build(&ctx, ty, name.clone()))
        })
        .collect()
}

#[cfg(test)]
#[path = "generate_tests.rs"]
mod properties;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::envoy::{AllEndpoints, NetworkView, ProxyKind, scope_of, static_mesh::proxy, tests::mesh};

    #[test]
    fn generation_is_shared_through_the_cache() {
        let m = mesh();
        let cache = ResourceCache::new(100, None);
        let view = NetworkView::default();
        let sub = Subscription {
            wildcard: true,
            names: Default::default(),
        };
        let gen_for = |ns: &str| {
            let p = proxy(ProxyKind::Grpc, ns);
            let ctx = Context {
                mesh: &m,
                proxy: &p,
                view: &view,
                endpoints: &AllEndpoints,
                scope: &scope_of(&m, &p),
            };
            generate(&ctx, &cache, XdsType::Cluster, &sub, None)
        };
        let (a, b) = (gen_for("default"), gen_for("other"));
        assert_eq!(a.len(), 2);
        assert!(
            a.iter().zip(&b).all(|(x, y)| Arc::ptr_eq(x, y)),
            "CDS does not depend on the namespace"
        );
        let names: Vec<_> = a.iter().map(|r| &*r.name).collect();
        assert_eq!(
            names,
            [
                "outbound|7070||echo.default.svc.cluster.local",
                "outbound|7070||echo.other.svc.cluster.local"
            ]
        );
    }

    /// istio-like bookinfo in `sample`, and the names a gRPC client watches.
    fn bookinfo() -> (crate::envoy::StaticMesh, Vec<Arc<str>>) {
        use crate::{
            envoy::static_mesh::{StaticMesh, endpoint, service},
            model::Protocol,
        };
        let mut m = StaticMesh::new(1);
        let mut names = Vec::new();
        for (i, name) in ["details", "reviews", "ratings"].into_iter().enumerate() {
            let s = service(name, "sample", &[("http", 9080, Protocol::Http)]);
            let ip = std::net::IpAddr::from([10, 0, 0, i as u8 + 1]);
            names.push(format!("outbound|9080||{name}.sample.svc.cluster.local").into());
            m = m.with(s, vec![endpoint(ip, &[("http", 9080)], "c1")]);
        }
        (m, names)
    }

    /// The names of `ty` a gRPC client in `ns` gets when it asks for `names`, through `cache`.
    fn asked(
        m: &crate::envoy::StaticMesh,
        cache: &ResourceCache,
        ns: &str,
        ty: XdsType,
        names: &[Arc<str>],
    ) -> Vec<String> {
        let p = proxy(ProxyKind::Grpc, ns);
        let view = NetworkView::default();
        let ctx = Context {
            mesh: m,
            proxy: &p,
            view: &view,
            endpoints: &AllEndpoints,
            scope: &scope_of(m, &p),
        };
        let sub = Subscription {
            wildcard: false,
            names: Arc::new(names.iter().cloned().collect()),
        };
        let got = generate(&ctx, cache, ty, &sub, None);
        got.iter()
            .map(|r| r.name.split('|').next_back().unwrap_or_default().to_owned())
            .collect()
    }

    /// issue 27: whichever proxy asked for a name first decided the answer for every other proxy,
    /// because a name's cache key did not say whether the asking proxy's scope could see it.
    #[test]
    fn one_proxys_scope_never_answers_for_another() {
        use crate::traffic::tests::config;
        let (m, names) = bookinfo();
        let sidecar = "egress: [{hosts: [./reviews.sample.svc.cluster.local]}]";
        let m = m.with_config([config("Sidecar", "sample", "default", "1", sidecar)]);
        for ty in [XdsType::Cluster, XdsType::Endpoint] {
            let cache = ResourceCache::new(100, None);
            // 1. A client without a Sidecar asks for details first.
            assert_eq!(
                asked(&m, &cache, "default", ty, &names[..1]),
                ["details.sample.svc.cluster.local"],
                "{ty}"
            );
            // 2. A client in `sample`, whose Sidecar imports only reviews, asks for all three.
            assert_eq!(
                asked(&m, &cache, "sample", ty, &names),
                ["reviews.sample.svc.cluster.local"],
                "{ty}: the Sidecar hides details and ratings"
            );
            // 3. A client without a Sidecar again: all three, whatever was cached as absent for `sample`.
            let mut all = asked(&m, &cache, "default", ty, &names);
            all.sort();
            assert_eq!(
                all,
                [
                    "details.sample.svc.cluster.local",
                    "ratings.sample.svc.cluster.local",
                    "reviews.sample.svc.cluster.local"
                ],
                "{ty}"
            );
        }
    }
}
