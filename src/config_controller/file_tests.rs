use super::*;

const FILE: &str = "# Istio objects\n\
apiVersion: networking.istio.io/v1\n\
kind: DestinationRule\n\
metadata:\n  name: reviews\n  namespace: bookinfo\n\
spec:\n  host: reviews\n  subsets:\n  - name: v1\n    labels: {version: v1}\n  - labels: {version: v2}\n\
---\n\
apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n\
---\n\
apiVersion: networking.istio.io/v1beta1\nkind: ServiceEntry\nmetadata: {name: api}\n\
spec:\n  hosts: [api.example.com]\n  ports: [{number: 443, name: https, protocol: HTTPS}]\n  resolution: DNS\n";

#[test]
fn documents_objects_and_positions() {
    let (docs, skipped) = parse_file("/cfg/a.yaml", FILE).expect("parses");
    assert_eq!(skipped, ["document 1: v1 ConfigMap is not a kind meshd reads"]);
    assert_eq!(docs.len(), 2);
    let dr = &docs[0];
    assert_eq!(
        dr.object,
        ObjectRef::new(Kind::DestinationRule, "bookinfo", "reviews")
    );
    let Parsed::Rejected { field, reason } = &dr.parsed else {
        panic!("a subset without a name")
    };
    assert_eq!(field, "spec.subsets[1].name");
    assert!(
        reason.ends_with("(file /cfg/a.yaml document 0 line 12)"),
        "the second subset's line: {reason}"
    );
    let se = &docs[1];
    assert_eq!(
        se.object,
        ObjectRef::new(Kind::ServiceEntry, DEFAULT_NAMESPACE, "api")
    );
    assert!(matches!(se.parsed, Parsed::Valid(..)));
    assert_eq!(
        se.meta.source,
        Source::File {
            path: "/cfg/a.yaml".into(),
            index: 2
        }
    );
}

#[test]
fn a_broken_file_names_document_and_line() {
    let text = "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: a}\nspec: {}\n---\nkind: [unclosed\n";
    let e = parse_file("/cfg/b.yaml", text).unwrap_err();
    assert_eq!((e.document, e.line), (Some(1), Some(7)), "{e}");
    assert!(
        e.to_string().starts_with("file /cfg/b.yaml document 1 line 7: "),
        "{e}"
    );
    let e = parse_file(
        "/cfg/c.yaml",
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {namespace: x}\n",
    )
    .unwrap_err();
    assert_eq!(e.message, "metadata.name is required");
}

#[test]
fn locate_follows_keys_and_list_items() {
    let doc = "spec:\n  host: r\n  subsets:\n  - name: a\n  - name: b\n    labels:\n      v: x\n  trafficPolicy:\n    tls: {}\n";
    assert_eq!(locate(doc, "spec.host"), Some(2));
    assert_eq!(locate(doc, "spec.subsets[1].name"), Some(5));
    assert_eq!(locate(doc, "spec.subsets[1].labels.v"), Some(7));
    assert_eq!(locate(doc, "spec.trafficPolicy.tls"), Some(9));
    assert_eq!(
        locate(doc, "spec.subsets[0].labels"),
        Some(4),
        "the deepest segment found"
    );
    assert_eq!(locate(doc, "status"), None);
}

fn drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Event>) -> Vec<Event> {
    std::iter::from_fn(|| rx.try_recv().ok()).collect()
}

#[test]
fn a_bad_file_keeps_its_last_good_objects_and_removed_files_drop_theirs() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut state = DirState::default();
    let good = |p: &str, t: &str| (PathBuf::from(p), Ok::<_, String>(t.to_owned()));
    let sidecar = "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: s, namespace: a}\nspec: {egress: [{hosts: ['./*']}]}\n";
    state.apply(vec![good("/d/a.yaml", sidecar), good("/d/b.yaml", FILE)], &tx);
    let applied = |evs: &[Event]| -> Vec<String> {
        evs.iter()
            .filter_map(|e| match e {
                Event::Apply { object, .. } => Some(object.to_string()),
                _ => None,
            })
            .collect()
    };
    let first = drain(&mut rx);
    assert_eq!(applied(&first).len(), 3);

    // a.yaml breaks: its Sidecar is still sent (last good), and the file is reported.
    state.apply(vec![good("/d/a.yaml", "kind: [\n"), good("/d/b.yaml", FILE)], &tx);
    let second = drain(&mut rx);
    assert!(applied(&second).contains(&"Sidecar a/s".to_owned()));
    assert!(
        second
            .iter()
            .any(|e| matches!(e, Event::State { name, state: Some(s) }
        if name == "file /d/a.yaml" && s.error.as_deref().is_some_and(|m| m.contains("document 0 line"))))
    );

    // Fixed and b.yaml deleted: the report is withdrawn, b's objects are no longer listed.
    state.apply(vec![good("/d/a.yaml", sidecar)], &tx);
    let third = drain(&mut rx);
    assert!(
        third
            .iter()
            .any(|e| matches!(e, Event::State { name, state: None } if name == "file /d/a.yaml"))
    );
    let Some(Event::Retain { listed, .. }) = third.last() else {
        panic!("ends with the list")
    };
    assert_eq!(listed.len(), 1);
}

#[test]
fn the_same_object_twice_in_the_directory_rejects_the_second() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut state = DirState::default();
    let sidecar = "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: s, namespace: a}\nspec: {egress: [{hosts: ['./*']}]}\n";
    state.apply(
        vec![
            (PathBuf::from("/d/1.yaml"), Ok(sidecar.to_owned())),
            (PathBuf::from("/d/2.yaml"), Ok(sidecar.to_owned())),
        ],
        &tx,
    );
    let rejected: Vec<String> = drain(&mut rx)
        .into_iter()
        .filter_map(|e| match e {
            Event::Apply {
                parsed: Parsed::Rejected { reason, .. },
                ..
            } => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(rejected.len(), 1);
    assert!(
        rejected[0].contains("duplicate of file /d/1.yaml document 0"),
        "{rejected:?}"
    );
}

#[test]
fn a_list_contributes_its_items_and_flow_scalars_read_as_kubectl_reads_them() {
    let text = "apiVersion: v1\nkind: List\nitems:\n\
- apiVersion: networking.istio.io/v1\n  kind: ServiceEntry\n  metadata: {name: a}\n  spec:\n    hosts: [a.example.com]\n    addresses: [1.2.3.4, 001:db8::]\n    ports: [{number: 80, name: http, protocol: HTTP}]\n\
- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: c}\n\
- apiVersion: networking.istio.io/v1\n  kind: Sidecar\n  metadata: {name: s}\n  spec:\n    egress: [{hosts: [bad]}]\n";
    let (docs, skipped) = parse_file("/cfg/l.yaml", text).expect("parses");
    assert_eq!(
        skipped,
        ["document 0 items[1]: v1 ConfigMap is not a kind meshd reads"]
    );
    let Parsed::Valid(se, _) = &docs[0].parsed else {
        panic!("{:?}", docs[0].parsed)
    };
    let istio::Spec::ServiceEntry(se) = &se.spec else {
        panic!("a ServiceEntry")
    };
    assert_eq!(se.addresses, ["1.2.3.4", "001:db8::"]);
    let Parsed::Rejected { field, reason } = &docs[1].parsed else {
        panic!("an egress host without a namespace")
    };
    assert_eq!(field, "spec.egress[0].hosts[0]");
    assert!(
        reason.ends_with("(file /cfg/l.yaml document 0 items[2] line 18)"),
        "the item's line: {reason}"
    );
    let e = parse_file(
        "/cfg/m.yaml",
        "apiVersion: v1\nkind: List\nitems:\n- {metadata: {name: x}}\n",
    )
    .unwrap_err();
    assert_eq!(e.message, "items[0].kind is required");
}
