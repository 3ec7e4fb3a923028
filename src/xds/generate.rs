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
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{
        envoy::{
            AllEndpoints, NetworkView, ProxyKind, scope_of,
            static_mesh::{StaticMesh, endpoint, proxy, service},
        },
        model::Protocol,
    };

    fn mesh() -> StaticMesh {
        let eps = vec![endpoint("10.0.0.1".parse().unwrap(), &[("grpc", 80)], "c1")];
        StaticMesh::new(1)
            .with(
                service("echo", "default", &[("grpc", 7070, Protocol::Grpc)]),
                eps.clone(),
            )
            .with(service("echo", "other", &[("grpc", 7070, Protocol::Grpc)]), eps)
    }

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
}
