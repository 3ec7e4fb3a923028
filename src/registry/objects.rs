//! The Kubernetes objects the registry watches, decoded into only the fields it reads. serde skips the
//! rest without allocating: a real cluster's pods carry managedFields, annotations, container specs
//! and status that meshd never reads, and with discovery selectors every object of every namespace is
//! listed and decoded before an undiscovered one is dropped, so what a decode allocates is what the
//! allocator keeps (docs/benchmarks.md, "Discovery selectors"). Names and nesting follow the
//! Kubernetes API (as k8s-openapi's types do), so the conversions read as on the full objects; a
//! required list or string that is absent or `null` is empty, as k8s-openapi decodes it.

use std::{borrow::Cow, collections::BTreeMap};

use k8s_openapi::{
    api::{core::v1 as core, discovery::v1 as discovery},
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time},
};
use serde::{Deserialize, Deserializer, de::IgnoredAny};

/// A Pod: its labels, owners, service account, node, container ports, phase, IP and conditions.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Pod {
    /// Without annotations.
    #[serde(default, deserialize_with = "meta")]
    pub metadata: ObjectMeta,
    pub spec: Option<PodSpec>,
    pub status: Option<PodStatus>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    pub service_account_name: Option<String>,
    pub node_name: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub containers: Vec<Container>,
}

/// A container: only its ports (named ports are ServiceEntry targets).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Container {
    pub ports: Option<Vec<core::ContainerPort>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct PodStatus {
    pub phase: Option<String>,
    #[serde(rename = "podIP")]
    pub pod_ip: Option<String>,
    pub conditions: Option<Vec<PodCondition>>,
}

/// A pod condition without its times and messages.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PodCondition {
    #[serde(rename = "type", default, deserialize_with = "nullable")]
    pub type_: String,
    #[serde(default, deserialize_with = "nullable")]
    pub status: String,
}

/// A Service: its metadata with annotations, spec and status (both small, read nearly whole).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Service {
    #[serde(default, deserialize_with = "annotated_meta")]
    pub metadata: ObjectMeta,
    pub spec: Option<core::ServiceSpec>,
    pub status: Option<core::ServiceStatus>,
}

/// An EndpointSlice: its labels, address type, ports and endpoints.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSlice {
    /// Without annotations.
    #[serde(default, deserialize_with = "meta")]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "nullable")]
    pub address_type: String,
    #[serde(default, deserialize_with = "nullable")]
    pub endpoints: Vec<Endpoint>,
    pub ports: Option<Vec<discovery::EndpointPort>>,
}

/// A slice's endpoint without its hostname, zone and hints.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    #[serde(default, deserialize_with = "nullable")]
    pub addresses: Vec<String>,
    pub conditions: Option<discovery::EndpointConditions>,
    pub node_name: Option<String>,
    pub target_ref: Option<TargetRef>,
}

/// What an endpoint's `targetRef` names: a pod's name, or something else.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct TargetRef {
    pub kind: Option<String>,
    pub name: Option<String>,
}

/// What the registry and kube's watcher (the resource version it resumes from) read of an object's
/// metadata; managedFields, finalizers, uid and the rest are skipped.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta<A> {
    name: Option<String>,
    namespace: Option<String>,
    generate_name: Option<String>,
    resource_version: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<A>,
    owner_references: Option<Vec<OwnerReference>>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
}

/// Annotations kept ([`BTreeMap`]) or skipped ([`IgnoredAny`]).
trait Annotations {
    fn kept(self) -> Option<BTreeMap<String, String>>;
}

impl Annotations for BTreeMap<String, String> {
    fn kept(self) -> Option<BTreeMap<String, String>> {
        Some(self)
    }
}

impl Annotations for IgnoredAny {
    fn kept(self) -> Option<BTreeMap<String, String>> {
        None
    }
}

impl<A: Annotations> Meta<A> {
    fn into_object_meta(self) -> ObjectMeta {
        ObjectMeta {
            name: self.name,
            namespace: self.namespace,
            generate_name: self.generate_name,
            resource_version: self.resource_version,
            labels: self.labels,
            annotations: self.annotations.and_then(Annotations::kept),
            owner_references: self.owner_references,
            creation_timestamp: self.creation_timestamp,
            deletion_timestamp: self.deletion_timestamp,
            ..ObjectMeta::default()
        }
    }
}

fn meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    Ok(Option::<Meta<IgnoredAny>>::deserialize(d)?
        .map(Meta::into_object_meta)
        .unwrap_or_default())
}

fn annotated_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    Ok(Option::<Meta<BTreeMap<String, String>>>::deserialize(d)?
        .map(Meta::into_object_meta)
        .unwrap_or_default())
}

/// A required field: absent or `null` is its empty value.
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Each slim kind is served at its full kind's URL.
macro_rules! resource {
    ($slim:ty, $full:ty) => {
        impl kube::Resource for $slim {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;

            fn kind(dt: &()) -> Cow<'_, str> {
                <$full as kube::Resource>::kind(dt)
            }
            fn group(dt: &()) -> Cow<'_, str> {
                <$full as kube::Resource>::group(dt)
            }
            fn version(dt: &()) -> Cow<'_, str> {
                <$full as kube::Resource>::version(dt)
            }
            fn plural(dt: &()) -> Cow<'_, str> {
                <$full as kube::Resource>::plural(dt)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

resource!(Pod, core::Pod);
resource!(Service, core::Service);
resource!(EndpointSlice, discovery::EndpointSlice);

#[cfg(test)]
#[path = "objects_tests.rs"]
mod tests;
