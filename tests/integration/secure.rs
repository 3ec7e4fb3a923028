//! The secure gRPC port end to end on loopback: a real TLS server with the mesh CA, the
//! authenticators and the CreateCertificate service; real TLS clients (tonic and tokio-rustls); service-
//! account tokens issued and reviewed by the Kubernetes API simulator.

use crate::common;

use std::{path::Path, sync::Arc, time::Duration};

use common::Sim;
use k8s_openapi::api::{
    authentication::v1::{TokenRequest, TokenRequestSpec},
    core::v1::ServiceAccount,
};
use kube::api::{Api, PostParams};
use kube_sim::ApiServerConfig;
use meshd::{
    app::secure,
    auth::{ClusterClients, Identity, PrimaryCluster},
    ca::{
        CaBundle, MeshCa, WorkloadCertPolicy,
        bundle::{CA_CERT, CA_KEY, ROOT_CERT},
        service::{IstioCertificateRequest, IstioCertificateResponse},
        source::watch_dir,
    },
    drain::Tasks,
    tls::{AcceptLimits, ServingCert},
};
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use serde_json::json;
use tonic::{
    Code, Request, Status,
    transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity as TlsIdentity},
};
use x509_parser::{extensions::GeneralName, prelude::FromDer};

const TD: &str = "cluster.local";

struct Mesh {
    addr: std::net::SocketAddr,
    ca: MeshCa,
    tls: ServingCert,
    ca_dir: tempfile::TempDir,
    api: Sim,
    tasks: Tasks,
}

fn write_ca(dir: &Path) -> CaBundle {
    let pem = CaBundle::generate_self_signed(TD).unwrap();
    std::fs::write(dir.join(CA_CERT), &pem.cert).unwrap();
    std::fs::write(dir.join(ROOT_CERT), &pem.root).unwrap();
    std::fs::write(dir.join(CA_KEY), &pem.key).unwrap();
    CaBundle::from_pem(&pem).unwrap()
}

async fn start() -> Mesh {
    let api = common::start_with(ApiServerConfig::new("primary")).await;
    for obj in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "sample"}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": "sample"}}),
    ] {
        api.server.store().apply(obj).unwrap();
    }
    let ca_dir = tempfile::tempdir().unwrap();
    write_ca(ca_dir.path());
    let tasks = Tasks::new();
    let ca = MeshCa::new(
        watch_dir(ca_dir.path(), &tasks, Duration::from_millis(50)).unwrap(),
        WorkloadCertPolicy::default(),
    );
    let tls = ServingCert::new(&ca, vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    tls.keep_fresh(&tasks, &ca);
    let clients: Arc<dyn ClusterClients> = Arc::new(PrimaryCluster::new("primary", api.client.clone()));
    let auth = secure::authenticator(TD, &[], Some((clients, "primary".into())), "istio-ca");
    let limits = AcceptLimits {
        handshake_timeout: Duration::from_secs(2),
        ..Default::default()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    secure::serve(&tasks, listener, &tls, secure::routes(&ca, &auth), limits).unwrap();
    Mesh {
        addr,
        ca,
        tls,
        ca_dir,
        api,
        tasks,
    }
}

impl Mesh {
    /// A TLS channel trusting the mesh root, optionally with a client certificate (chain, key PEM).
    async fn channel(
        &self,
        client_cert: Option<(String, String)>,
    ) -> Result<Channel, tonic::transport::Error> {
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(self.ca.roots_pem()))
            .domain_name("localhost");
        if let Some((chain, key)) = client_cert {
            tls = tls.identity(TlsIdentity::from_pem(chain, key));
        }
        Endpoint::from_shared(format!("https://{}", self.addr))?
            .tls_config(tls)?
            .connect_timeout(Duration::from_secs(5))
            .connect()
            .await
    }

    fn workload_cert(&self, ns: &str, sa: &str) -> (String, String) {
        let issued = self
            .ca
            .current()
            .issue_workload(&Identity::new(TD, ns, sa), Duration::from_secs(3600))
            .unwrap();
        (issued.chain_pem(), issued.key_pem())
    }

    async fn token(&self, audience: &str) -> String {
        let api: Api<ServiceAccount> = Api::namespaced(self.api.client.clone(), "sample");
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: vec![audience.into()],
                expiration_seconds: Some(3600),
                ..Default::default()
            },
            ..Default::default()
        };
        let issued = api
            .create_token_request("default", &PostParams::default(), &request)
            .await
            .unwrap();
        issued.status.unwrap().token
    }

    /// The chain the server presents to a new connection.
    async fn presented_chain(&self) -> Vec<CertificateDer<'static>> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(self.tls.chain().last().cloned());
        let config =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAny))
                .with_no_client_auth();
        let tcp = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap();
        tls.get_ref().1.peer_certificates().unwrap().to_vec()
    }
}

/// Records whatever the server presents (the rotation test compares chains, not trust).
#[derive(Debug)]
struct AcceptAny;

impl rustls::client::danger::ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

fn csr_for(uri: &str) -> String {
    let mut params = rcgen::CertificateParams::default();
    params.subject_alt_names = vec![rcgen::SanType::URI(uri.to_string().try_into().unwrap())];
    params
        .serialize_request(&rcgen::KeyPair::generate().unwrap())
        .unwrap()
        .pem()
        .unwrap()
}

async fn create_certificate(
    channel: Channel,
    csr: String,
    metadata: &[(&'static str, &str)],
) -> Result<IstioCertificateResponse, Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    let mut request = Request::new(IstioCertificateRequest {
        csr,
        validity_duration: 3600,
        metadata: None,
    });
    for (k, v) in metadata {
        request.metadata_mut().insert(*k, v.parse().unwrap());
    }
    let path =
        http::uri::PathAndQuery::from_static("/istio.v1.auth.IstioCertificateService/CreateCertificate");
    grpc.unary(request, path, tonic_prost::ProstCodec::default())
        .await
        .map(|r| r.into_inner())
}

const SAMPLE: &str = "spiffe://cluster.local/ns/sample/sa/default";

/// The issued leaf is signed by the mesh root and names exactly `uri`.
fn assert_issued_for(mesh: &Mesh, chain: &[String], uri: &str) {
    let root_pem = mesh.ca.roots_pem();
    assert_eq!(chain.last(), Some(&root_pem), "the chain ends with the root");
    let leaf = CertificateDer::from_pem_slice(chain[0].as_bytes()).unwrap();
    let root = CertificateDer::from_pem_slice(root_pem.as_bytes()).unwrap();
    let (_, leaf) = x509_parser::certificate::X509Certificate::from_der(&leaf).unwrap();
    let (_, root) = x509_parser::certificate::X509Certificate::from_der(&root).unwrap();
    leaf.verify_signature(Some(root.public_key()))
        .expect("leaf verifies to the root");
    let sans = leaf
        .subject_alternative_name()
        .unwrap()
        .unwrap()
        .value
        .general_names
        .clone();
    assert_eq!(sans, [GeneralName::URI(uri)]);
}

#[tokio::test]
async fn refuses_callers_without_a_valid_identity() {
    let mesh = start().await;

    // No certificate and no token: refused before any work.
    let anonymous = mesh.channel(None).await.unwrap();
    let err = create_certificate(anonymous.clone(), csr_for(SAMPLE), &[])
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");
    assert!(
        err.message()
            .starts_with("no client certificate and no bearer token"),
        "{err:?}"
    );

    // A token for a cluster meshd does not know.
    let token = format!("Bearer {}", mesh.token("istio-ca").await);
    let md = [("authorization", token.as_str()), ("clusterid", "nowhere")];
    let err = create_certificate(anonymous.clone(), csr_for(SAMPLE), &md)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");
    assert_eq!(
        err.message(),
        "token for unknown cluster \"nowhere\": meshd knows [\"primary\"]"
    );

    // A token for another audience: the API server refuses it for ours.
    let other = format!("Bearer {}", mesh.token("someone-else").await);
    let err = create_certificate(
        anonymous.clone(),
        csr_for(SAMPLE),
        &[("authorization", other.as_str())],
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");
    assert!(
        err.message().starts_with("token rejected by cluster \"primary\""),
        "{err:?}"
    );

    // A garbage token.
    let err = create_certificate(
        anonymous,
        csr_for(SAMPLE),
        &[("authorization", "Bearer not-a-jwt")],
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");
    assert!(
        err.message().starts_with("token rejected by cluster \"primary\""),
        "{err:?}"
    );

    // A certificate chained to another root: refused at the TLS layer or with Unauthenticated.
    let foreign = CaBundle::from_pem(&CaBundle::generate_self_signed(TD).unwrap()).unwrap();
    let issued = foreign
        .issue_workload(&Identity::new(TD, "sample", "default"), Duration::from_secs(3600))
        .unwrap();
    match mesh.channel(Some((issued.chain_pem(), issued.key_pem()))).await {
        Err(_) => {}
        Ok(channel) => {
            let err = create_certificate(channel, csr_for(SAMPLE), &[])
                .await
                .unwrap_err();
            assert!(
                matches!(
                    err.code(),
                    Code::Unauthenticated | Code::Unavailable | Code::Unknown
                ),
                "{err:?}"
            );
        }
    }
    mesh.tasks.drain(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn certificate_callers_get_only_their_own_identity() {
    let mesh = start().await;
    let channel = mesh
        .channel(Some(mesh.workload_cert("sample", "default")))
        .await
        .unwrap();

    let chain = create_certificate(channel.clone(), csr_for(SAMPLE), &[])
        .await
        .unwrap()
        .cert_chain;
    assert_issued_for(&mesh, &chain, SAMPLE);

    let err = create_certificate(channel, csr_for("spiffe://cluster.local/ns/sample/sa/admin"), &[])
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert!(
        err.message().contains("may only request its own identity"),
        "{err:?}"
    );
    mesh.tasks.drain(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn service_account_tokens_are_reviewed_by_the_named_cluster() {
    let mesh = start().await;
    let channel = mesh.channel(None).await.unwrap();
    let token = format!("Bearer {}", mesh.token("istio-ca").await);
    for md in [
        vec![("authorization", token.as_str()), ("clusterid", "primary")],
        // No clusterid: the primary (istiod's single-cluster default).
        vec![("authorization", token.as_str())],
    ] {
        let chain = create_certificate(channel.clone(), csr_for(SAMPLE), &md)
            .await
            .unwrap()
            .cert_chain;
        assert_issued_for(&mesh, &chain, SAMPLE);
    }
    let err = create_certificate(
        channel,
        csr_for("spiffe://cluster.local/ns/kube-system/sa/admin"),
        &[("authorization", token.as_str())],
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    mesh.tasks.drain(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn rotating_plugged_in_ca_files_changes_the_served_chain() {
    let mesh = start().await;
    let before = mesh.presented_chain().await;
    let old_client = mesh.workload_cert("sample", "default");
    let established = mesh.channel(Some(old_client.clone())).await.unwrap();

    let new_ca = write_ca(mesh.ca_dir.path());
    let new_root = new_ca.roots()[0].clone();
    let mut after = before.clone();
    for _ in 0..100 {
        after = mesh.presented_chain().await;
        if after != before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_ne!(after, before, "new connections get a new chain without a restart");
    let (_, leaf) = x509_parser::certificate::X509Certificate::from_der(&after[0]).unwrap();
    let (_, root) = x509_parser::certificate::X509Certificate::from_der(&new_root).unwrap();
    leaf.verify_signature(Some(root.public_key()))
        .expect("the new serving certificate chains to the new root");

    // New connections are verified against the new root: an old-root client certificate is refused...
    match mesh.channel(Some(old_client)).await {
        Err(_) => {}
        Ok(channel) => assert!(create_certificate(channel, csr_for(SAMPLE), &[]).await.is_err()),
    }
    // ...while a connection established before the rotation carries on.
    let chain = create_certificate(established, csr_for(SAMPLE), &[])
        .await
        .unwrap()
        .cert_chain;
    assert_issued_for(&mesh, &chain, SAMPLE);
    mesh.tasks.drain(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn handshake_abuse_does_not_stop_the_accept_loop() {
    use tokio::io::AsyncWriteExt;
    let mesh = start().await;
    // Garbage, an HTTP/1.1 request, and a client that never speaks.
    let mut junk = tokio::net::TcpStream::connect(mesh.addr).await.unwrap();
    junk.write_all(b"\x16\x03\x01\xff\xffgarbage").await.unwrap();
    let mut http = tokio::net::TcpStream::connect(mesh.addr).await.unwrap();
    http.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let _silent = tokio::net::TcpStream::connect(mesh.addr).await.unwrap();

    let channel = mesh
        .channel(Some(mesh.workload_cert("sample", "default")))
        .await
        .unwrap();
    let chain = create_certificate(channel, csr_for(SAMPLE), &[])
        .await
        .unwrap()
        .cert_chain;
    assert_issued_for(&mesh, &chain, SAMPLE);
    mesh.tasks.drain(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test]
async fn self_signed_root_is_created_once_and_shared() {
    use meshd::ca::source::{CA_SECRET_NAME, load_or_create_secret};
    let api = common::start_with(ApiServerConfig::new("primary")).await;
    api.server
        .store()
        .apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "istio-system"}}))
        .unwrap();
    let client = api.client.clone();
    // A non-leader never creates it.
    assert!(
        load_or_create_secret(client.clone(), "istio-system", TD, false)
            .await
            .unwrap()
            .is_none()
    );
    // Two replicas starting together converge on one root; a restart loads it.
    let (a, b) = tokio::join!(
        load_or_create_secret(client.clone(), "istio-system", TD, true),
        load_or_create_secret(client.clone(), "istio-system", TD, true),
    );
    let (a, b) = (a.unwrap().expect("created"), b.unwrap().expect("created or read"));
    assert_eq!(a.roots_pem(), b.roots_pem());
    let again = load_or_create_secret(client, "istio-system", TD, false)
        .await
        .unwrap()
        .expect("exists");
    assert_eq!(again.roots_pem(), a.roots_pem());
    let secret = api
        .server
        .store()
        .get("v1", "Secret", Some("istio-system"), CA_SECRET_NAME)
        .unwrap();
    assert_eq!(secret["type"], "istio.io/ca-root");
}
