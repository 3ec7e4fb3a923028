//! What an analyzer reports: istioctl's message types (code, name, level), so users can search the
//! codes in Istio's documentation, and one message per finding, naming the object it is about.

use serde::{Deserialize, Serialize};

use crate::istio::ObjectRef;

/// A message's severity, istioctl's `diag.Level`, ordered from least to most severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Level {
    /// Worth knowing; nothing breaks.
    Info,
    /// Probably not what was meant.
    Warning,
    /// Traffic or policy does not work as written.
    Error,
}

impl Level {
    /// The level named `name` (case-insensitive, as istioctl's `--failure-threshold`).
    pub fn parse(name: &str) -> Option<Level> {
        [Level::Info, Level::Warning, Level::Error]
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(name))
    }

    /// `Info`, `Warning` or `Error`.
    pub fn name(self) -> &'static str {
        match self {
            Level::Info => "Info",
            Level::Warning => "Warning",
            Level::Error => "Error",
        }
    }
}

/// The istioctl message types meshd's analyzers report (Istio's `msg/messages.yaml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Code {
    /// IST0106: the object breaks a validation rule (meshd's, which are istiod's).
    SchemaValidationError,
    /// IST0101: a referenced host, subset, gateway or selected workload does not exist.
    ReferencedResourceNotFound,
    /// IST0109: two mesh-bound VirtualServices define the same host.
    ConflictingMeshGatewayVirtualServiceHosts,
    /// IST0110: two Sidecars select the same workload.
    ConflictingSidecarWorkloadSelectors,
    /// IST0111: two Sidecars in a namespace have no workload selector.
    MultipleSidecarsWithoutWorkloadSelectors,
    /// IST0112: a route to a multi-port service names no port.
    VirtualServiceDestinationPortSelectorRequired,
    /// IST0113: a DestinationRule disables mTLS towards workloads a STRICT PeerAuthentication covers.
    MtlsPolicyConflict,
    /// IST0127: a policy's selector matches no workload.
    NoMatchingWorkloadsFound,
    /// IST0128: SIMPLE/MUTUAL TLS without `caCertificates` for the whole rule.
    NoServerCertificateVerificationDestinationLevel,
    /// IST0129: SIMPLE/MUTUAL TLS without `caCertificates` for one port.
    NoServerCertificateVerificationPortLevel,
    /// IST0130: a route rule after a catch-all rule or a duplicate match is never used.
    VirtualServiceUnreachableRule,
    /// IST0131: a match repeats an earlier rule's match.
    VirtualServiceIneffectiveMatch,
    /// IST0132: a VirtualService bound to a gateway has none of the gateway's hosts.
    VirtualServiceHostNotFoundInGateway,
    /// IST0140: a gateway route without a subset to a host mesh routes split by subset.
    IngressRouteRulesNotAffected,
    /// IST0134: a TCP ServiceEntry port without addresses.
    ServiceEntryAddressesRequired,
    /// IST0173: a DestinationRule subset selects no endpoint.
    DestinationRuleSubsetNotSelectPods,
    /// IST0174: a DestinationRule's host is no service.
    UnknownDestinationRuleHost,
    /// IST0177: ServiceEntries seen in one namespace give a host and port different protocols.
    ConflictingServiceEntryProtocol,
}

impl Code {
    /// Istio's code, `IST0101`.
    pub fn code(self) -> &'static str {
        match self {
            Code::ReferencedResourceNotFound => "IST0101",
            Code::SchemaValidationError => "IST0106",
            Code::ConflictingMeshGatewayVirtualServiceHosts => "IST0109",
            Code::ConflictingSidecarWorkloadSelectors => "IST0110",
            Code::MultipleSidecarsWithoutWorkloadSelectors => "IST0111",
            Code::VirtualServiceDestinationPortSelectorRequired => "IST0112",
            Code::MtlsPolicyConflict => "IST0113",
            Code::NoMatchingWorkloadsFound => "IST0127",
            Code::NoServerCertificateVerificationDestinationLevel => "IST0128",
            Code::NoServerCertificateVerificationPortLevel => "IST0129",
            Code::VirtualServiceUnreachableRule => "IST0130",
            Code::VirtualServiceIneffectiveMatch => "IST0131",
            Code::VirtualServiceHostNotFoundInGateway => "IST0132",
            Code::ServiceEntryAddressesRequired => "IST0134",
            Code::IngressRouteRulesNotAffected => "IST0140",
            Code::DestinationRuleSubsetNotSelectPods => "IST0173",
            Code::UnknownDestinationRuleHost => "IST0174",
            Code::ConflictingServiceEntryProtocol => "IST0177",
        }
    }

    /// Istio's name for it, `ReferencedResourceNotFound`.
    pub fn name(self) -> &'static str {
        match self {
            Code::ReferencedResourceNotFound => "ReferencedResourceNotFound",
            Code::SchemaValidationError => "SchemaValidationError",
            Code::ConflictingMeshGatewayVirtualServiceHosts => "ConflictingMeshGatewayVirtualServiceHosts",
            Code::ConflictingSidecarWorkloadSelectors => "ConflictingSidecarWorkloadSelectors",
            Code::MultipleSidecarsWithoutWorkloadSelectors => "MultipleSidecarsWithoutWorkloadSelectors",
            Code::VirtualServiceDestinationPortSelectorRequired => {
                "VirtualServiceDestinationPortSelectorRequired"
            }
            Code::MtlsPolicyConflict => "MTLSPolicyConflict",
            Code::NoMatchingWorkloadsFound => "NoMatchingWorkloadsFound",
            Code::NoServerCertificateVerificationDestinationLevel => {
                "NoServerCertificateVerificationDestinationLevel"
            }
            Code::NoServerCertificateVerificationPortLevel => "NoServerCertificateVerificationPortLevel",
            Code::VirtualServiceUnreachableRule => "VirtualServiceUnreachableRule",
            Code::VirtualServiceIneffectiveMatch => "VirtualServiceIneffectiveMatch",
            Code::VirtualServiceHostNotFoundInGateway => "VirtualServiceHostNotFoundInGateway",
            Code::ServiceEntryAddressesRequired => "ServiceEntryAddressesRequired",
            Code::IngressRouteRulesNotAffected => "IngressRouteRulesNotAffected",
            Code::DestinationRuleSubsetNotSelectPods => "DestinationRuleSubsetNotSelectPods",
            Code::UnknownDestinationRuleHost => "UnknownDestinationRuleHost",
            Code::ConflictingServiceEntryProtocol => "ConflictingServiceEntryProtocol",
        }
    }

    /// Istio's level for it.
    pub fn level(self) -> Level {
        match self {
            Code::VirtualServiceIneffectiveMatch => Level::Info,
            Code::NoMatchingWorkloadsFound
            | Code::NoServerCertificateVerificationDestinationLevel
            | Code::NoServerCertificateVerificationPortLevel
            | Code::VirtualServiceUnreachableRule
            | Code::VirtualServiceHostNotFoundInGateway
            | Code::ServiceEntryAddressesRequired
            | Code::IngressRouteRulesNotAffected
            | Code::ConflictingServiceEntryProtocol
            | Code::UnknownDestinationRuleHost => Level::Warning,
            _ => Level::Error,
        }
    }
}

/// One finding, in istioctl's JSON shape (`code`, `level`, `message`, `origin`) plus the object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// `IST0101`.
    pub code: String,
    /// `ReferencedResourceNotFound`.
    pub name: String,
    /// The severity.
    pub level: Level,
    /// istioctl's `Kind namespace/name`.
    pub origin: String,
    /// The object the message is about.
    pub resource: ObjectRef,
    /// What is wrong, in istioctl's words plus, where it helps, which clusters were searched.
    pub message: String,
    /// Istio's page for the code.
    pub documentation_url: String,
}

impl Message {
    /// A message of type `code` about `resource`.
    pub fn new(code: Code, resource: &ObjectRef, message: String) -> Self {
        Self {
            code: code.code().into(),
            name: code.name().into(),
            level: code.level(),
            origin: format!("{} {}/{}", resource.kind, resource.namespace, resource.name),
            resource: resource.clone(),
            message,
            documentation_url: format!(
                "https://istio.io/latest/docs/reference/config/analysis/{}/",
                code.code().to_ascii_lowercase()
            ),
        }
    }
}
