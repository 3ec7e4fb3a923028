//! The `default/kubernetes` Service every cluster has, and the EndpointSlice kube-apiserver keeps for it
//! (named `kubernetes`, labelled only with the service name: the apiserver's own reconciler, not the
//! EndpointSlice controller, manages it). The simulator advertises itself as 127.0.0.1 on the secure
//! port 6443 so the objects are the same in every run, whatever port it really listens on.

use serde_json::{Value, json};

const CLUSTER_IP: &str = "10.96.0.1";
const ADVERTISE_ADDRESS: &str = "127.0.0.1";
const SECURE_PORT: u16 = 6443;

pub(crate) fn objects() -> [Value; 2] {
    [
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {
                "type": "ClusterIP", "clusterIP": CLUSTER_IP, "clusterIPs": [CLUSTER_IP],
                "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                "internalTrafficPolicy": "Cluster", "sessionAffinity": "None",
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": SECURE_PORT}],
            },
        }),
        json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ADVERTISE_ADDRESS], "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": SECURE_PORT, "protocol": "TCP"}],
        }),
    ]
}
