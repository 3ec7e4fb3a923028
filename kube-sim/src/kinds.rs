//! The kind table: every resource the simulator serves is one entry here, and nothing else is kind-specific.

use super::crd::Custom;
use super::fields::{self, Fields};
use super::table::{self, Printer};

/// How the server handles writes to a kind: most are stored; reviews are computed and never stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handling {
    Stored,
    TokenReview,
    SelfSubjectReview,
    /// SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview.
    AccessReview,
    SelfSubjectRulesReview,
}

/// Which name syntax the real API server enforces for a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameRule {
    /// RFC 1123 subdomain (most kinds).
    Subdomain,
    /// RFC 1123 label (namespaces, services).
    Label,
    /// Anything usable as a URL path segment (RBAC names such as `system:controller:x`).
    PathSegment,
}

/// A subresource other than `status`, served by its own handler.
#[derive(Debug)]
pub(crate) struct SubResource {
    pub(crate) name: &'static str,
    pub(crate) group: &'static str,
    pub(crate) version: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) verbs: &'static [&'static str],
}

#[derive(Debug)]
pub(crate) struct Kind {
    pub(crate) group: &'static str,
    pub(crate) version: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) plural: &'static str,
    pub(crate) singular: &'static str,
    pub(crate) short_names: &'static [&'static str],
    pub(crate) namespaced: bool,
    pub(crate) verbs: &'static [&'static str],
    /// Has a `/status` subresource: the main resource ignores status writes and vice versa.
    pub(crate) status: bool,
    pub(crate) names: NameRule,
    pub(crate) categories: &'static [&'static str],
    /// How `kubectl get` shows it (the server-side Table columns).
    pub(crate) printer: &'static Printer,
    /// The field labels `fieldSelector` accepts.
    pub(crate) fields: &'static Fields,
    pub(crate) subresources: &'static [SubResource],
    pub(crate) handling: Handling,
    /// An immediate delete answers with the object instead of a `Status` (the registry's `ReturnDeletedObject`).
    pub(crate) returns_deleted: bool,
    /// Set for a served version of a CustomResourceDefinition (see crd/); `None` for the built-in kinds.
    pub(crate) custom: Option<&'static Custom>,
}

pub(crate) const CRUD: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
/// Namespaces are deleted one by one through their lifecycle: no deletecollection.
const NAMESPACE_VERBS: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];
const CREATE_ONLY: &[&str] = &["create"];
const ALL: &[&str] = &["all"];

/// Defaults for a stored, namespaced, CRUD kind in the core group; entries override what differs.
const BASE: Kind = Kind {
    group: "",
    version: "v1",
    kind: "",
    plural: "",
    singular: "",
    short_names: &[],
    namespaced: true,
    verbs: CRUD,
    status: false,
    names: NameRule::Subdomain,
    categories: &[],
    printer: &table::DEFAULT,
    fields: &fields::META,
    subresources: &[],
    handling: Handling::Stored,
    returns_deleted: false,
    custom: None,
};

const TOKEN_REQUEST: SubResource = SubResource {
    name: "token",
    group: "authentication.k8s.io",
    version: "v1",
    kind: "TokenRequest",
    verbs: CREATE_ONLY,
};

/// `/scale` (autoscaling/v1 Scale) of the replicated workloads, served by scale.rs.
const SCALE: SubResource = SubResource {
    name: "scale",
    group: "autoscaling",
    version: "v1",
    kind: "Scale",
    verbs: &["get", "patch", "update"],
};

pub(crate) static KINDS: &[Kind] = &[
    Kind {
        kind: "Namespace",
        plural: "namespaces",
        singular: "namespace",
        short_names: &["ns"],
        namespaced: false,
        status: true,
        names: NameRule::Label,
        returns_deleted: true,
        printer: &table::NAMESPACE,
        fields: &fields::NAMESPACE,
        verbs: NAMESPACE_VERBS,
        ..BASE
    },
    Kind {
        kind: "Service",
        plural: "services",
        singular: "service",
        short_names: &["svc"],
        status: true,
        names: NameRule::Label,
        categories: ALL,
        returns_deleted: true,
        printer: &table::SERVICE,
        fields: &fields::SERVICE,
        ..BASE
    },
    Kind {
        kind: "Pod",
        plural: "pods",
        singular: "pod",
        short_names: &["po"],
        status: true,
        categories: ALL,
        returns_deleted: true,
        printer: &table::POD,
        fields: &fields::POD,
        ..BASE
    },
    Kind {
        kind: "Node",
        plural: "nodes",
        singular: "node",
        short_names: &["no"],
        namespaced: false,
        status: true,
        printer: &table::NODE,
        fields: &fields::NODE,
        ..BASE
    },
    Kind {
        kind: "Secret",
        plural: "secrets",
        singular: "secret",
        printer: &table::SECRET,
        fields: &fields::SECRET,
        ..BASE
    },
    Kind {
        kind: "ConfigMap",
        plural: "configmaps",
        singular: "configmap",
        short_names: &["cm"],
        printer: &table::CONFIG_MAP,
        ..BASE
    },
    Kind {
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        short_names: &["sa"],
        subresources: &[TOKEN_REQUEST],
        returns_deleted: true,
        printer: &table::SERVICE_ACCOUNT,
        ..BASE
    },
    Kind {
        kind: "Endpoints",
        plural: "endpoints",
        singular: "endpoints",
        short_names: &["ep"],
        printer: &table::ENDPOINTS,
        ..BASE
    },
    Kind {
        kind: "Event",
        plural: "events",
        singular: "event",
        short_names: &["ev"],
        printer: &table::EVENT,
        fields: &fields::EVENT,
        ..BASE
    },
    Kind {
        group: "discovery.k8s.io",
        kind: "EndpointSlice",
        plural: "endpointslices",
        singular: "endpointslice",
        printer: &table::ENDPOINT_SLICE,
        ..BASE
    },
    Kind {
        group: "authentication.k8s.io",
        kind: "TokenReview",
        plural: "tokenreviews",
        singular: "tokenreview",
        namespaced: false,
        verbs: CREATE_ONLY,
        handling: Handling::TokenReview,
        ..BASE
    },
    Kind {
        group: "authentication.k8s.io",
        kind: "SelfSubjectReview",
        plural: "selfsubjectreviews",
        singular: "selfsubjectreview",
        namespaced: false,
        verbs: CREATE_ONLY,
        handling: Handling::SelfSubjectReview,
        ..BASE
    },
    Kind {
        group: "coordination.k8s.io",
        kind: "Lease",
        plural: "leases",
        singular: "lease",
        printer: &table::LEASE,
        ..BASE
    },
    Kind {
        group: "rbac.authorization.k8s.io",
        kind: "ClusterRole",
        plural: "clusterroles",
        singular: "clusterrole",
        namespaced: false,
        names: NameRule::PathSegment,
        printer: &table::CLUSTER_ROLE,
        ..BASE
    },
    Kind {
        group: "rbac.authorization.k8s.io",
        kind: "ClusterRoleBinding",
        plural: "clusterrolebindings",
        singular: "clusterrolebinding",
        namespaced: false,
        names: NameRule::PathSegment,
        printer: &table::ROLE_BINDING,
        ..BASE
    },
    Kind {
        group: "rbac.authorization.k8s.io",
        kind: "Role",
        plural: "roles",
        singular: "role",
        names: NameRule::PathSegment,
        printer: &table::CLUSTER_ROLE,
        ..BASE
    },
    Kind {
        group: "rbac.authorization.k8s.io",
        kind: "RoleBinding",
        plural: "rolebindings",
        singular: "rolebinding",
        names: NameRule::PathSegment,
        printer: &table::ROLE_BINDING,
        ..BASE
    },
    // Workload kinds: Deployments and ReplicaSets are run by controllers/ (pods, rollouts, `/scale`); the
    // others are stored only, so installers such as the meshd Helm chart can be applied.
    Kind {
        group: "apps",
        kind: "Deployment",
        plural: "deployments",
        singular: "deployment",
        short_names: &["deploy"],
        status: true,
        categories: &["all"],
        printer: &table::DEPLOYMENT,
        subresources: &[SCALE],
        ..BASE
    },
    Kind {
        group: "apps",
        kind: "ReplicaSet",
        plural: "replicasets",
        singular: "replicaset",
        short_names: &["rs"],
        status: true,
        categories: &["all"],
        printer: &table::REPLICAS,
        fields: &fields::REPLICAS,
        subresources: &[SCALE],
        ..BASE
    },
    Kind {
        group: "policy",
        kind: "PodDisruptionBudget",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        short_names: &["pdb"],
        status: true,
        printer: &table::POD_DISRUPTION_BUDGET,
        ..BASE
    },
    Kind {
        group: "autoscaling",
        version: "v2",
        kind: "HorizontalPodAutoscaler",
        plural: "horizontalpodautoscalers",
        singular: "horizontalpodautoscaler",
        short_names: &["hpa"],
        status: true,
        categories: &["all"],
        printer: &table::HORIZONTAL_POD_AUTOSCALER,
        ..BASE
    },
    // Stored only, so that `kubectl apply --prune` finds every kind on its default allow-list.
    Kind {
        kind: "PersistentVolumeClaim",
        plural: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        short_names: &["pvc"],
        status: true,
        printer: &table::PERSISTENT_VOLUME_CLAIM,
        ..BASE
    },
    Kind {
        kind: "PersistentVolume",
        plural: "persistentvolumes",
        singular: "persistentvolume",
        short_names: &["pv"],
        namespaced: false,
        status: true,
        printer: &table::PERSISTENT_VOLUME,
        fields: &fields::PERSISTENT_VOLUME,
        ..BASE
    },
    Kind {
        kind: "ReplicationController",
        plural: "replicationcontrollers",
        singular: "replicationcontroller",
        short_names: &["rc"],
        status: true,
        categories: ALL,
        printer: &table::REPLICAS,
        fields: &fields::REPLICAS,
        ..BASE
    },
    Kind {
        group: "batch",
        kind: "Job",
        plural: "jobs",
        singular: "job",
        status: true,
        categories: ALL,
        printer: &table::JOB,
        fields: &fields::JOB,
        ..BASE
    },
    Kind {
        group: "batch",
        kind: "CronJob",
        plural: "cronjobs",
        singular: "cronjob",
        short_names: &["cj"],
        status: true,
        categories: ALL,
        printer: &table::CRON_JOB,
        ..BASE
    },
    Kind {
        group: "networking.k8s.io",
        kind: "Ingress",
        plural: "ingresses",
        singular: "ingress",
        short_names: &["ing"],
        status: true,
        printer: &table::INGRESS,
        ..BASE
    },
    Kind {
        group: "apiextensions.k8s.io",
        kind: "CustomResourceDefinition",
        plural: "customresourcedefinitions",
        singular: "customresourcedefinition",
        short_names: &["crd", "crds"],
        namespaced: false,
        status: true,
        categories: &["api-extensions"],
        returns_deleted: true,
        printer: &table::CUSTOM_RESOURCE_DEFINITION,
        ..BASE
    },
    Kind {
        group: "apps",
        kind: "DaemonSet",
        plural: "daemonsets",
        singular: "daemonset",
        short_names: &["ds"],
        status: true,
        categories: ALL,
        printer: &table::DAEMON_SET,
        ..BASE
    },
    Kind {
        group: "apps",
        kind: "StatefulSet",
        plural: "statefulsets",
        singular: "statefulset",
        short_names: &["sts"],
        status: true,
        categories: ALL,
        printer: &table::STATEFUL_SET,
        ..BASE
    },
    // authorization.k8s.io reviews: computed from RBAC, never stored.
    Kind {
        group: "authorization.k8s.io",
        kind: "SelfSubjectAccessReview",
        plural: "selfsubjectaccessreviews",
        singular: "selfsubjectaccessreview",
        namespaced: false,
        verbs: CREATE_ONLY,
        handling: Handling::AccessReview,
        ..BASE
    },
    Kind {
        group: "authorization.k8s.io",
        kind: "SubjectAccessReview",
        plural: "subjectaccessreviews",
        singular: "subjectaccessreview",
        namespaced: false,
        verbs: CREATE_ONLY,
        handling: Handling::AccessReview,
        ..BASE
    },
    Kind {
        group: "authorization.k8s.io",
        kind: "LocalSubjectAccessReview",
        plural: "localsubjectaccessreviews",
        singular: "localsubjectaccessreview",
        verbs: CREATE_ONLY,
        handling: Handling::AccessReview,
        ..BASE
    },
    Kind {
        group: "authorization.k8s.io",
        kind: "SelfSubjectRulesReview",
        plural: "selfsubjectrulesreviews",
        singular: "selfsubjectrulesreview",
        namespaced: false,
        verbs: CREATE_ONLY,
        handling: Handling::SelfSubjectRulesReview,
        ..BASE
    },
];

/// Index of a kind in [`KINDS`], or past them the table of a custom resource (shared by its versions);
/// the store keeps one table per id.
pub(crate) type KindId = usize;

impl Kind {
    pub(crate) fn id(&'static self) -> KindId {
        if let Some(custom) = self.custom {
            return custom.table;
        }
        KINDS
            .iter()
            .position(|k| std::ptr::eq(k, self))
            .unwrap_or_default()
    }

    pub(crate) fn api_version(&self) -> String {
        group_version(self.group, self.version)
    }

    /// `configmaps` or `leases.coordination.k8s.io`, as the real server names resources in messages.
    pub(crate) fn qualified_plural(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub(crate) fn supports(&self, verb: &str) -> bool {
        self.verbs.contains(&verb)
    }
}

pub(crate) fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

pub(crate) fn by_id(id: KindId) -> &'static Kind {
    &KINDS[id]
}

/// The kind served at `/api(s)/{group}/{version}/{plural}`.
pub(crate) fn by_resource(group: &str, version: &str, plural: &str) -> Option<&'static Kind> {
    KINDS
        .iter()
        .find(|k| k.group == group && k.version == version && k.plural == plural)
}

/// The kind named by an object's `apiVersion` and `kind`.
pub(crate) fn by_type(api_version: &str, kind: &str) -> Option<&'static Kind> {
    KINDS
        .iter()
        .find(|k| k.kind == kind && k.api_version() == api_version)
}

/// The distinct (group, version) pairs, in table order, core first.
pub(crate) fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for k in KINDS {
        if !out.contains(&(k.group, k.version)) {
            out.push((k.group, k.version));
        }
    }
    out
}

pub(crate) fn in_group_version(group: &str, version: &str) -> impl Iterator<Item = &'static Kind> {
    KINDS
        .iter()
        .filter(move |k| k.group == group && k.version == version)
}
