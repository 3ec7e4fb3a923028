//! A real Kubernetes API server in place of the simulators (`meshctl bench --kubeconfig`): the world's
//! manifests and its churn written over HTTPS, so a control plane that cannot run on kube-sim (istiod,
//! see docs/benchmarks.md "meshd vs istiod, one machine") is measured on the same source as meshd.
//!
//! Owns: turning the world's objects into server-side applies, pod status writes (no kubelet sets
//! `podIP` on a bare API server) and deletes. Does NOT: start the API server (the caller's), create
//! remote clusters (one cluster only), or wait for the control plane.

use std::path::Path;

use kube::{
    Client,
    api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use serde_json::{Value, json};
use tokio::task::JoinSet;

use super::world::Write;

/// Field manager of every apply.
const MANAGER: &str = "meshctl-bench";
/// Writes in flight while loading the world.
const CONCURRENCY: usize = 16;

/// A real API server's admin client.
#[derive(Clone)]
pub(super) struct RealCluster {
    client: Client,
}

impl RealCluster {
    /// A client from the kubeconfig file's current context.
    pub(super) async fn connect(kubeconfig: &Path) -> anyhow::Result<Self> {
        let kubeconfig = Kubeconfig::read_from(kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Ok(Self {
            client: Client::try_from(config)?,
        })
    }

    /// Writes `objects` in dependency order: namespaces, then everything that is neither a pod nor an
    /// EndpointSlice, then pods (and their status), then slices, so a control plane that drops slice
    /// endpoints whose pod it has not seen (istiod queues them) sees the pod first.
    pub(super) async fn load(&self, objects: Vec<(String, Value)>) -> anyhow::Result<()> {
        let rank = |o: &Value| match o["kind"].as_str() {
            Some("Namespace") => 0,
            Some("Pod") => 2,
            Some("EndpointSlice") => 3,
            _ => 1,
        };
        for stage in 0..4 {
            let batch: Vec<Value> = objects
                .iter()
                .filter(|(_, o)| rank(o) == stage)
                .map(|(_, o)| o.clone())
                .collect();
            let mut set = JoinSet::new();
            for object in batch {
                if set.len() >= CONCURRENCY
                    && let Some(done) = set.join_next().await
                {
                    done??;
                }
                let me = self.clone();
                set.spawn(async move { me.apply(object).await });
            }
            while let Some(done) = set.join_next().await {
                done??;
            }
        }
        Ok(())
    }

    /// One churn step's writes, in order.
    pub(super) async fn write(&self, writes: Vec<Write>) -> anyhow::Result<()> {
        for w in writes {
            match w {
                Write::Apply(object) => self.apply(object).await?,
                Write::DeletePod { namespace, name } => {
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(self.client.clone(), &namespace, &resource("v1", "Pod"));
                    api.delete(&name, &DeleteParams::default()).await?;
                }
            }
        }
        Ok(())
    }

    /// Server-side apply of `object`; a pod's `status` (ignored by the apply) is then patched in.
    async fn apply(&self, mut object: Value) -> anyhow::Result<()> {
        let (api_version, kind) = (
            object["apiVersion"].as_str().unwrap_or_default().to_owned(),
            object["kind"].as_str().unwrap_or_default().to_owned(),
        );
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let ar = resource(&api_version, &kind);
        let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
            None => Api::all_with(self.client.clone(), &ar),
        };
        let status = object.as_object_mut().and_then(|o| o.remove("status"));
        api.patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&object),
        )
        .await?;
        if let (Some(mut status), "Pod") = (status, kind.as_str()) {
            if let Some(ip) = status["podIP"].as_str().map(str::to_owned) {
                status["podIPs"] = json!([{ "ip": ip }]);
                status["conditions"] = json!([{"type": "Ready", "status": "True"}]);
            }
            api.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await?;
        }
        Ok(())
    }
}

/// The API resource of `apiVersion`/`kind` (plural by kube's rule, right for every kind the world writes).
fn resource(api_version: &str, kind: &str) -> ApiResource {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind))
}
