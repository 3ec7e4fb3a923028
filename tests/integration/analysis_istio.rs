//! istioctl's analyzer test table (`testGrid` in istio/istio's
//! `pkg/config/analysis/analyzers/analyzers_test.go`) for every analyzer meshd implements, on Istio's
//! own inputs read in place from `../shared/istio-testdata/pkg/config/analysis/analyzers/testdata/`.
//! The inputs hold Kubernetes objects too; meshd's file loader (`meshd::analysis::files`, which
//! `meshctl analyze -f` uses) turns Services, Pods and Nodes into the analyzers' registry (one
//! cluster, as istioctl sees one) and decodes the Istio objects as istioctl reads files. Each case
//! compares the messages (code and object) as a multiset, as Istio's `ConsistOf`. Without the folder
//! (CI without `shared/`) the test says so and passes.

use std::path::{Path, PathBuf};

use meshd::analysis::{Analyzer, Input, files};

/// One row of Istio's table: its name, inputs, optional mesh config, the analyzer and the expected
/// `(code, "Kind [namespace/]name")` messages.
struct Case {
    name: &'static str,
    files: &'static [&'static str],
    mesh_config: Option<&'static str>,
    analyzer: Analyzer,
    expected: &'static [(&'static str, &'static str)],
}

/// Where meshd's answer differs from Istio's row on purpose: (case, `-` for a message of Istio's meshd
/// does not give, `+` for one meshd adds, code, object, why). Asserted exactly and printed.
const DIFFERENCES: &[(&str, char, &str, &str, &str)] = &[
    (
        "sidecarDefaultSelector",
        '-',
        "IST0167",
        "Sidecar ns-ambient/namespace-scoped",
        "IneffectivePolicy (ambient mode): meshd serves sidecars and proxyless gRPC only",
    ),
    (
        "sidecarDefaultSelector",
        '-',
        "IST0167",
        "Sidecar ns-ambient/pod-scoped",
        "IneffectivePolicy (ambient mode): meshd serves sidecars and proxyless gRPC only",
    ),
    (
        "ServiceEntry Addresses Allocated",
        '+',
        "IST0134",
        "ServiceEntry default/address-allocated",
        "the addresses are in `status` (istiod's allocation controller); meshd neither allocates nor \
         reads them, so its proxies get no address for the port",
    ),
];

const CASES: &[Case] = &[
    Case {
        name: "sidecarDefaultSelector",
        files: &["sidecar-default-selector.yaml"],
        mesh_config: None,
        analyzer: Analyzer::SidecarSelectors,
        expected: &[
            ("IST0111", "Sidecar ns2/has-conflict-2"),
            ("IST0111", "Sidecar ns2/has-conflict-1"),
            ("IST0167", "Sidecar ns-ambient/namespace-scoped"),
            ("IST0167", "Sidecar ns-ambient/pod-scoped"),
        ],
    },
    Case {
        name: "sidecarSelector",
        files: &["sidecar-selector.yaml"],
        mesh_config: None,
        analyzer: Analyzer::SidecarSelectors,
        expected: &[
            ("IST0101", "Sidecar default/maps-to-nonexistent"),
            ("IST0101", "Sidecar other/maps-to-different-ns"),
            ("IST0110", "Sidecar default/dupe-1"),
            ("IST0110", "Sidecar default/dupe-2"),
            ("IST0110", "Sidecar default/overlap-1"),
            ("IST0110", "Sidecar default/overlap-2"),
        ],
    },
    Case {
        name: "virtualServiceConflictingMeshGatewayHosts",
        files: &["virtualservice_conflictingmeshgatewayhosts.yaml"],
        mesh_config: None,
        analyzer: Analyzer::ConflictingMeshGatewayHosts,
        expected: &[
            ("IST0109", "VirtualService team3/ratings"),
            ("IST0109", "VirtualService team4/ratings"),
            ("IST0109", "VirtualService foo/ratings"),
            ("IST0109", "VirtualService bar/ratings"),
            ("IST0109", "VirtualService foo/productpage"),
            ("IST0109", "VirtualService foo/bogus-productpage"),
            ("IST0109", "VirtualService team2/ratings"),
        ],
    },
    Case {
        name: "virtualServiceConflictingMeshGatewayHostsWithExportTo",
        files: &["virtualservice_conflictingmeshgatewayhosts_with_exportto.yaml"],
        mesh_config: None,
        analyzer: Analyzer::ConflictingMeshGatewayHosts,
        expected: &[
            ("IST0109", "VirtualService foo/productpage"),
            ("IST0109", "VirtualService bar/productpage"),
            ("IST0109", "VirtualService foo/productpage-c"),
            ("IST0109", "VirtualService bar/productpage-c"),
            ("IST0109", "VirtualService foo/productpage-d"),
            ("IST0109", "VirtualService bar/productpage-d"),
        ],
    },
    Case {
        name: "virtualServiceDestinationHosts",
        files: &["virtualservice_destinationhosts.yaml"],
        mesh_config: None,
        analyzer: Analyzer::VirtualServiceDestinationHosts,
        expected: &[
            ("IST0101", "VirtualService default/reviews-bogushost"),
            ("IST0101", "VirtualService default/reviews-bogushost"),
            ("IST0101", "VirtualService default/reviews-bookinfo-other"),
            ("IST0101", "VirtualService default/reviews-mirror-bogushost"),
            ("IST0101", "VirtualService default/reviews-bogusport"),
            ("IST0112", "VirtualService default/reviews-2port-missing"),
            ("IST0101", "VirtualService istio-system/cross-namespace-details"),
            ("IST0101", "VirtualService hello/hello-export-to-bogus"),
        ],
    },
    Case {
        name: "virtualServiceDestinationRules",
        files: &["virtualservice_destinationrules.yaml"],
        mesh_config: None,
        analyzer: Analyzer::VirtualServiceDestinationRules,
        expected: &[
            ("IST0101", "VirtualService default/reviews-bogussubset"),
            ("IST0101", "VirtualService default/reviews-mirror-bogussubset"),
        ],
    },
    Case {
        name: "virtualServiceGateways",
        files: &["virtualservice_gateways.yaml"],
        mesh_config: None,
        analyzer: Analyzer::VirtualServiceGateways,
        expected: &[
            ("IST0101", "VirtualService httpbin-bogus"),
            ("IST0132", "VirtualService default/cross-test"),
            ("IST0132", "VirtualService httpbin-bogus"),
            ("IST0132", "VirtualService httpbin"),
        ],
    },
    Case {
        name: "destinationrule with no cacert, simple at destinationlevel",
        files: &["destinationrule-simple-destination.yaml"],
        mesh_config: None,
        analyzer: Analyzer::DestinationRuleCaCertificates,
        expected: &[("IST0128", "DestinationRule db-tls")],
    },
    Case {
        name: "destinationrule with no cacert, mutual at destinationlevel",
        files: &["destinationrule-mutual-destination.yaml"],
        mesh_config: None,
        analyzer: Analyzer::DestinationRuleCaCertificates,
        expected: &[("IST0128", "DestinationRule db-mtls")],
    },
    Case {
        name: "destinationrule with no cacert, simple at portlevel",
        files: &["destinationrule-simple-port.yaml"],
        mesh_config: None,
        analyzer: Analyzer::DestinationRuleCaCertificates,
        expected: &[("IST0129", "DestinationRule db-tls")],
    },
    Case {
        name: "destinationrule with credentialname, simple at destinationlevel, no workloadSelector",
        files: &["destinationrule-simple-destination-credentialname.yaml"],
        mesh_config: None,
        analyzer: Analyzer::DestinationRuleCaCertificates,
        expected: &[("IST0128", "DestinationRule db-tls")],
    },
    Case {
        name: "destinationrule with credentialname, simple at destinationlevel, workloadSelector",
        files: &["destinationrule-simple-destination-credentialname-selector.yaml"],
        mesh_config: None,
        analyzer: Analyzer::DestinationRuleCaCertificates,
        expected: &[],
    },
    Case {
        name: "destinationrule with credentialname, simple at portlevel, no workloadSelector",
        files: &["destinationrule-simple-port-credentialname.yaml"],
        mesh_config: None,
        analyzer: Analyzer::DestinationRuleCaCertificates,
        expected: &[("IST0129", "DestinationRule db-tls")],
    },
    Case {
        name: "destinationrule with credentialname, simple at portlevel, workloadSelector",
        files: &["destinationrule-simple-port-credentialname-selector.yaml"],
        mesh_config: None,
        analyzer: Analyzer::DestinationRuleCaCertificates,
        expected: &[],
    },
    Case {
        name: "destinationrule with no cacert, mutual at portlevel",
        files: &["destinationrule-mutual-port.yaml"],
        mesh_config: None,
        analyzer: Analyzer::DestinationRuleCaCertificates,
        expected: &[("IST0129", "DestinationRule db-mtls")],
    },
    Case {
        name: "destinationrule with no cacert, mutual at destinationlevel and simple at port level",
        files: &["destinationrule-compound-simple-mutual.yaml"],
        mesh_config: None,
        analyzer: Analyzer::DestinationRuleCaCertificates,
        expected: &[
            ("IST0128", "DestinationRule db-mtls"),
            ("IST0129", "DestinationRule db-mtls"),
        ],
    },
    Case {
        name: "destinationrule with no cacert, simple at destinationlevel and mutual at port level",
        files: &["destinationrule-compound-mutual-simple.yaml"],
        mesh_config: None,
        analyzer: Analyzer::DestinationRuleCaCertificates,
        expected: &[
            ("IST0129", "DestinationRule db-mtls"),
            ("IST0128", "DestinationRule db-mtls"),
        ],
    },
    Case {
        name: "destinationrule with both cacerts",
        files: &["destinationrule-with-ca.yaml"],
        mesh_config: None,
        analyzer: Analyzer::DestinationRuleCaCertificates,
        expected: &[],
    },
    Case {
        name: "dupmatches",
        files: &[
            "virtualservice_dupmatches.yaml",
            "virtualservice_overlappingmatches.yaml",
        ],
        mesh_config: None,
        analyzer: Analyzer::UnreachableRules,
        expected: &[
            ("IST0130", "VirtualService duplicate-match"),
            ("IST0130", "VirtualService foo/sample-foo-cluster01"),
            ("IST0131", "VirtualService almost-duplicate-match"),
            ("IST0131", "VirtualService duplicate-match"),
            ("IST0130", "VirtualService duplicate-tcp-match"),
            ("IST0130", "VirtualService duplicate-empty-tcp"),
            ("IST0131", "VirtualService almost-duplicate-tcp-match"),
            ("IST0131", "VirtualService duplicate-tcp-match"),
            ("IST0130", "VirtualService none/tls-routing"),
            ("IST0131", "VirtualService none/tls-routing-almostmatch"),
            ("IST0131", "VirtualService none/tls-routing"),
            ("IST0131", "VirtualService non-method-get"),
            ("IST0131", "VirtualService overlapping-in-single-match"),
            ("IST0131", "VirtualService overlapping-in-two-matches"),
            (
                "IST0131",
                "VirtualService overlapping-mathes-with-different-methods",
            ),
        ],
    },
    Case {
        name: "host defined in virtualservice not found in the gateway",
        files: &["virtualservice_host_not_found_gateway.yaml"],
        mesh_config: None,
        analyzer: Analyzer::VirtualServiceGateways,
        expected: &[
            ("IST0132", "VirtualService default/testing-service-02-test-01"),
            ("IST0132", "VirtualService default/testing-service-02-test-02"),
            ("IST0132", "VirtualService default/testing-service-02-test-03"),
            ("IST0132", "VirtualService default/testing-service-03-test-04"),
        ],
    },
    Case {
        name: "host defined in virtualservice not found in the gateway(beta version)",
        files: &["virtualservice_host_not_found_gateway_beta.yaml"],
        mesh_config: None,
        analyzer: Analyzer::VirtualServiceGateways,
        expected: &[
            ("IST0132", "VirtualService default/testing-service-02-test-01"),
            ("IST0132", "VirtualService default/testing-service-02-test-02"),
            ("IST0132", "VirtualService default/testing-service-02-test-03"),
            ("IST0132", "VirtualService default/testing-service-03-test-04"),
        ],
    },
    Case {
        name: "host defined in virtualservice not found in the gateway with ns",
        files: &["virtualservice_host_not_found_gateway_with_ns_prefix.yaml"],
        mesh_config: None,
        analyzer: Analyzer::VirtualServiceGateways,
        expected: &[("IST0132", "VirtualService default/testing-service-01-test-01")],
    },
    Case {
        name: "host defined in virtualservice not found in the gateway with ns(beta version)",
        files: &["virtualservice_host_not_found_gateway_with_ns_prefix_beta.yaml"],
        mesh_config: None,
        analyzer: Analyzer::VirtualServiceGateways,
        expected: &[("IST0132", "VirtualService default/testing-service-01-test-01")],
    },
    Case {
        name: "missing Addresses and Protocol in Service Entry",
        files: &["serviceentry-missing-addresses-protocol.yaml"],
        mesh_config: None,
        analyzer: Analyzer::ServiceEntryAddresses,
        expected: &[
            ("IST0134", "ServiceEntry default/service-entry-test-03"),
            ("IST0134", "ServiceEntry default/service-entry-test-04"),
            ("IST0134", "ServiceEntry default/service-entry-test-07"),
        ],
    },
    Case {
        name: "missing Addresses and Protocol in Service Entry with ISTIO_META_DNS_AUTO_ALLOCATE enabled",
        files: &["serviceentry-missing-addresses-protocol.yaml"],
        mesh_config: Some("serviceentry-missing-addresses-protocol-mesh-cfg.yaml"),
        analyzer: Analyzer::ServiceEntryAddresses,
        expected: &[],
    },
    Case {
        name: "Route Rule no effect on Ingress",
        files: &["virtualservice_route_rule_no_effects_ingress.yaml"],
        mesh_config: None,
        analyzer: Analyzer::VirtualServiceDestinationHosts,
        expected: &[("IST0140", "VirtualService default/testing-service-01-test-01")],
    },
    Case {
        name: "ServiceEntry Addresses Required Lowercase Protocol",
        files: &["serviceentry-address-required-lowercase.yaml"],
        mesh_config: None,
        analyzer: Analyzer::ServiceEntryAddresses,
        expected: &[("IST0134", "ServiceEntry address-missing-lowercase")],
    },
    Case {
        name: "ServiceEntry Addresses Required Uppercase Protocol",
        files: &["serviceentry-address-required-uppercase.yaml"],
        mesh_config: None,
        analyzer: Analyzer::ServiceEntryAddresses,
        expected: &[("IST0134", "ServiceEntry address-missing-uppercase")],
    },
    Case {
        name: "DestinationRuleWithFakeHost",
        files: &["destinationrule-with-fake-host.yaml"],
        mesh_config: None,
        analyzer: Analyzer::DestinationRuleSubsets,
        expected: &[("IST0174", "DestinationRule default/fake-host")],
    },
    Case {
        name: "DestinationRuleSubsetsNotSelectPods",
        files: &["destinationrule-subsets-not-select-pods.yaml"],
        mesh_config: None,
        analyzer: Analyzer::DestinationRuleSubsets,
        expected: &[("IST0173", "DestinationRule default/subsets-not-select-pods")],
    },
    Case {
        name: "DestinationRuleSubsetsWithTopologyLabels",
        files: &["destinationrule-subsets-with-topology-labels.yaml"],
        mesh_config: None,
        analyzer: Analyzer::DestinationRuleSubsets,
        expected: &[],
    },
    Case {
        name: "DestinationRuleEmptyTopologyLabels",
        files: &["destinationrule-empty-topology-labels.yaml"],
        mesh_config: None,
        analyzer: Analyzer::DestinationRuleSubsets,
        expected: &[("IST0173", "DestinationRule default/empty-topology-labels")],
    },
    // The three ConflictingServiceEntryProtocol rows: their inputs are in the snapshot, the stored
    // testGrid predates them; expectations as the files' comments state them.
    Case {
        name: "ConflictingServiceEntryProtocol (from the file's comments)",
        files: &["serviceentry-conflicting-protocol.yaml"],
        mesh_config: None,
        analyzer: Analyzer::ServiceEntryProtocols,
        expected: &[
            ("IST0177", "ServiceEntry default/se-https"),
            ("IST0177", "ServiceEntry default/se-http"),
        ],
    },
    Case {
        name: "ConflictingServiceEntryProtocol, exportTo apart (from the file's comments)",
        files: &["serviceentry-conflicting-exportto.yaml"],
        mesh_config: None,
        analyzer: Analyzer::ServiceEntryProtocols,
        expected: &[],
    },
    Case {
        name: "ConflictingServiceEntryProtocol, same protocol (from the file's comments)",
        files: &["serviceentry-no-conflict-protocol.yaml"],
        mesh_config: None,
        analyzer: Analyzer::ServiceEntryProtocols,
        expected: &[],
    },
    Case {
        name: "ServiceEntry Addresses Allocated",
        files: &["serviceentry-address-allocated.yaml"],
        mesh_config: Some("serviceentry-address-allocated-mesh-cfg.yaml"),
        analyzer: Analyzer::ServiceEntryAddresses,
        expected: &[],
    },
];

fn testdata() -> Option<PathBuf> {
    let dir = std::env::var_os("ISTIO_TESTDATA").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/istio-testdata"),
        PathBuf::from,
    );
    let dir = dir.join("pkg/config/analysis/analyzers/testdata");
    dir.is_dir().then_some(dir)
}

/// The analyzers' input from `files` (and an optional mesh config file), through meshd's file loader
/// (`meshctl analyze -f`): the IST0106 messages of objects meshd rejects are returned beside it.
fn load(dir: &Path, files: &[&str], mesh_config: Option<&str>) -> (Input, Vec<String>) {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect("read input");
    let texts: Vec<(String, String)> = files.iter().map(|f| ((*f).to_owned(), read(f))).collect();
    let mesh = mesh_config.map(read);
    let loaded = files::load(&texts, mesh.as_deref()).expect("Istio's inputs are YAML");
    let invalid = loaded
        .invalid
        .into_iter()
        .map(|m| format!("{}: {}", m.origin, m.message))
        .collect();
    (loaded.input, invalid)
}

/// Istio's origin without a namespace is an object of the default namespace.
fn normalize(origin: &str) -> String {
    match origin.split_once(' ') {
        Some((kind, name)) if !name.contains('/') => format!("{kind} default/{name}"),
        _ => origin.to_owned(),
    }
}

#[test]
fn istioctl_analyzer_table() {
    let Some(dir) = testdata() else {
        println!("skipped: ../shared/istio-testdata is absent (set ISTIO_TESTDATA to Istio's checkout)");
        return;
    };
    let mut failures = Vec::new();
    let mut rows = 0;
    for case in CASES {
        let (input, rejected) = load(&dir, case.files, case.mesh_config);
        let mut got: Vec<(String, String)> = case
            .analyzer
            .run(&input)
            .into_iter()
            .map(|m| (m.code, m.origin))
            .collect();
        let mut want: Vec<(String, String)> = case
            .expected
            .iter()
            .map(|(c, o)| ((*c).to_owned(), normalize(o)))
            .collect();
        for (_, sign, code, origin, _) in DIFFERENCES.iter().filter(|d| d.0 == case.name) {
            let m = ((*code).to_owned(), (*origin).to_owned());
            match sign {
                '-' => want.retain(|w| *w != m),
                _ => want.push(m),
            }
        }
        got.sort();
        want.sort();
        rows += want.len();
        if got != want {
            let extra: Vec<_> = got.iter().filter(|g| !want.contains(g)).collect();
            let missing: Vec<_> = want.iter().filter(|w| !got.contains(w)).collect();
            failures.push(format!(
                "{} ({}): {} reported, {} expected\n  not expected: {extra:?}\n  missing: {missing:?}\n  \
                 rejected by meshd's validation: {rejected:?}",
                case.name,
                case.analyzer.name(),
                got.len(),
                want.len()
            ));
        }
    }
    println!(
        "istioctl analyzer table: {} cases, {rows} messages expected (Istio's, adjusted by the {} \
         differences below), {} cases failing",
        CASES.len(),
        DIFFERENCES.len(),
        failures.len()
    );
    for (case, sign, code, origin, why) in DIFFERENCES {
        println!("  {case}: {sign}{code} {origin}: {why}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
