//! The kind table: every resource the simulator serves is one entry here, and nothing else is kind-specific.

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
    /// Extra Table columns between NAME and AGE: (header, JSON pointer into the object).
    pub(crate) columns: &'static [(&'static str, &'static str)],
    pub(crate) subresources: &'static [SubResource],
    pub(crate) handling: Handling,
}

const CRUD: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
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
    columns: &[],
    subresources: &[],
    handling: Handling::Stored,
};

const TOKEN_REQUEST: SubResource = SubResource {
    name: "token",
    group: "authentication.k8s.io",
    version: "v1",
    kind: "TokenRequest",
    verbs: CREATE_ONLY,
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
        columns: &[("Status", "/status/phase")],
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
        columns: &[("Type", "/spec/type"), ("Cluster-IP", "/spec/clusterIP")],
        ..BASE
    },
    Kind {
        kind: "Pod",
        plural: "pods",
        singular: "pod",
        short_names: &["po"],
        status: true,
        categories: ALL,
        columns: &[
            ("Status", "/status/phase"),
            ("IP", "/status/podIP"),
            ("Node", "/spec/nodeName"),
        ],
        ..BASE
    },
    Kind {
        kind: "Node",
        plural: "nodes",
        singular: "node",
        short_names: &["no"],
        namespaced: false,
        status: true,
        ..BASE
    },
    Kind {
        kind: "Secret",
        plural: "secrets",
        singular: "secret",
        columns: &[("Type", "/type")],
        ..BASE
    },
    Kind {
        kind: "ConfigMap",
        plural: "configmaps",
        singular: "configmap",
        short_names: &["cm"],
        ..BASE
    },
    Kind {
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        short_names: &["sa"],
        subresources: &[TOKEN_REQUEST],
        ..BASE
    },
    Kind {
        kind: "Endpoints",
        plural: "endpoints",
        singular: "endpoints",
        short_names: &["ep"],
        ..BASE
    },
    Kind {
        kind: "Event",
        plural: "events",
        singular: "event",
        short_names: &["ev"],
        columns: &[("Type", "/type"), ("Reason", "/reason"), ("Message", "/message")],
        ..BASE
    },
    Kind {
        group: "discovery.k8s.io",
        kind: "EndpointSlice",
        plural: "endpointslices",
        singular: "endpointslice",
        columns: &[("AddressType", "/addressType")],
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
        columns: &[("Holder", "/spec/holderIdentity")],
        ..BASE
    },
    Kind {
        group: "rbac.authorization.k8s.io",
        kind: "ClusterRole",
        plural: "clusterroles",
        singular: "clusterrole",
        namespaced: false,
        names: NameRule::PathSegment,
        ..BASE
    },
    Kind {
        group: "rbac.authorization.k8s.io",
        kind: "ClusterRoleBinding",
        plural: "clusterrolebindings",
        singular: "clusterrolebinding",
        namespaced: false,
        names: NameRule::PathSegment,
        columns: &[("Role", "/roleRef/name")],
        ..BASE
    },
    Kind {
        group: "rbac.authorization.k8s.io",
        kind: "Role",
        plural: "roles",
        singular: "role",
        names: NameRule::PathSegment,
        ..BASE
    },
    Kind {
        group: "rbac.authorization.k8s.io",
        kind: "RoleBinding",
        plural: "rolebindings",
        singular: "rolebinding",
        names: NameRule::PathSegment,
        columns: &[("Role", "/roleRef/name")],
        ..BASE
    },
    // Workload kinds, stored only (no controllers act on them), so installers such as the meshd Helm
    // chart can be applied to a simulated cluster.
    Kind {
        group: "apps",
        kind: "Deployment",
        plural: "deployments",
        singular: "deployment",
        short_names: &["deploy"],
        status: true,
        categories: &["all"],
        ..BASE
    },
    Kind {
        group: "policy",
        kind: "PodDisruptionBudget",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        short_names: &["pdb"],
        status: true,
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

/// Index of a kind in [`KINDS`]; the store keeps one table per index.
pub(crate) type KindId = usize;

impl Kind {
    pub(crate) fn id(&'static self) -> KindId {
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
