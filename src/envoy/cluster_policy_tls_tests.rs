//! TLS per client: the modes each client is sent, and the sockets rendered as istiod renders them.

use super::*;

#[test]
fn tls_modes_per_client() {
    let ids: BTreeSet<Arc<str>> = ["spiffe://cluster.local/ns/d/sa/r".into()].into();
    let ctx = |auto_mtls| TlsContext {
        identities: &ids,
        sni: "outbound_.80_.v1_.r.d.svc.cluster.local",
        auto_mtls,
        rule_has_selector: false,
    };
    let id = vec!["spiffe://cluster.local/ns/d/sa/r".to_owned()];
    let sni = "outbound_.80_.v1_.r.d.svc.cluster.local".to_owned();
    let istio = policy("tls: {mode: ISTIO_MUTUAL}").tls;
    let custom =
        policy("tls: {mode: ISTIO_MUTUAL, sni: s.example, subjectAltNames: [spiffe://x/ns/y/sa/z]}").tls;
    let cases = [
        // No rule TLS: Envoy auto-mTLS unless the mesh or PeerAuthentication turns it off; gRPC plaintext.
        (
            None,
            Client::Sidecar,
            true,
            UpstreamTls::Auto {
                sans: id.clone(),
                sni: sni.clone(),
            },
        ),
        (
            None,
            Client::Router,
            true,
            UpstreamTls::Auto {
                sans: id.clone(),
                sni: sni.clone(),
            },
        ),
        (None, Client::Sidecar, false, UpstreamTls::None),
        (None, Client::Grpc, true, UpstreamTls::None),
        // ISTIO_MUTUAL overrides both, to every endpoint; gRPC sends no SNI (istiod's gRPC generator).
        (
            istio.clone(),
            Client::Sidecar,
            false,
            UpstreamTls::IstioMutual {
                sans: id.clone(),
                sni: sni.clone(),
            },
        ),
        (
            istio.clone(),
            Client::Grpc,
            false,
            UpstreamTls::IstioMutual {
                sans: id.clone(),
                sni: String::new(),
            },
        ),
        (
            custom.clone(),
            Client::Sidecar,
            true,
            UpstreamTls::IstioMutual {
                sans: vec!["spiffe://x/ns/y/sa/z".to_owned()],
                sni: "s.example".to_owned(),
            },
        ),
    ];
    for (tls, client, auto, want) in cases {
        let (got, _) = upstream_tls(tls.as_ref(), client, &ctx(auto));
        assert_eq!(got, want, "{tls:?} {client:?} auto={auto}");
    }
}

#[test]
fn tls_sockets_render_as_istiod() {
    // gRPC ISTIO_MUTUAL: provider instances, SANs, no SNI.
    let (grpc, _, _) = build("tls: {mode: ISTIO_MUTUAL}", Client::Grpc);
    let ctx = &grpc["transportSocket"]["typedConfig"];
    assert_eq!(grpc["transportSocket"]["name"], "envoy.transport_sockets.tls");
    assert!(ctx.get("sni").is_none(), "{ctx}");
    assert_eq!(
        ctx["commonTlsContext"]["tlsCertificateProviderInstance"]["instanceName"],
        "default"
    );
    assert_eq!(
        ctx["commonTlsContext"]["validationContext"]["caCertificateProviderInstance"]["certificateName"],
        "ROOTCA"
    );
    // Sidecar ISTIO_MUTUAL: one plain socket (every endpoint), SDS secrets, the cluster's SNI.
    let (sidecar, _, _) = build("tls: {mode: ISTIO_MUTUAL}", Client::Sidecar);
    assert!(sidecar.get("transportSocketMatches").is_none());
    let ctx = &sidecar["transportSocket"]["typedConfig"];
    assert_eq!(ctx["sni"], "outbound_.80_._.r.d.svc.cluster.local");
    assert_eq!(
        ctx["commonTlsContext"]["tlsCertificateSdsSecretConfigs"][0]["name"],
        "default"
    );
    assert_eq!(
        ctx["commonTlsContext"]["tlsParams"]["tlsMinimumProtocolVersion"],
        "TLSv1_2"
    );
    // SIMPLE from files: the agent's file SDS, system roots by default, auto SNI and SAN checks.
    let (simple, notes, _) = build("tls: {mode: SIMPLE}", Client::Sidecar);
    assert_eq!(notes, vec![a("tls.mode")]);
    let ctx = &simple["transportSocket"]["typedConfig"]["commonTlsContext"];
    assert!(ctx.get("tlsCertificateSdsSecretConfigs").is_none());
    assert_eq!(
        ctx["combinedValidationContext"]["validationContextSdsSecretConfig"]["name"],
        "file-root:system"
    );
    let opts =
        &simple["typedExtensionProtocolOptions"]["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
    assert_eq!(
        opts["upstreamHttpProtocolOptions"],
        json!({"autoSni": true, "autoSanValidation": true})
    );
    assert_eq!(opts["explicitHttpConfig"], json!({"httpProtocolOptions": {}}));
    // MUTUAL with files: the client certificate too; a given SNI turns auto SNI off.
    let (mutual, _, _) = build(
        "tls: {mode: MUTUAL, clientCertificate: /c.pem, privateKey: /k.pem, caCertificates: /ca.pem, sni: db.example}",
        Client::Router,
    );
    let tls = &mutual["transportSocket"]["typedConfig"];
    assert_eq!(tls["sni"], "db.example");
    assert_eq!(
        tls["commonTlsContext"]["tlsCertificateSdsSecretConfigs"][0]["name"],
        "file-cert:/c.pem~/k.pem"
    );
    assert!(mutual.get("typedExtensionProtocolOptions").is_none(), "{mutual}");
}
