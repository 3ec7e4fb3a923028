//! Untrusted kubeconfigs: each bad one is refused with a message naming the problem.

use std::collections::BTreeSet;

use super::*;

/// A valid kubeconfig with `user` spliced into the user entry and `cluster` into the cluster entry.
fn kubeconfig(cluster: &str, user: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Config
current-context: c2
contexts:
- name: c2
  context: {{cluster: c2, user: reader}}
clusters:
- name: c2
  cluster:
    server: https://10.0.0.2:6443
    certificate-authority-data: Zm9v
{cluster}
users:
- name: reader
  user:
{user}
"#
    )
}

const TOKEN: &str = "    token: s3cr3t-token";

#[test]
fn bad_kubeconfigs_are_refused_with_their_reason() {
    let cases: &[(&str, String, &str)] = &[
        (
            "exec plugin",
            kubeconfig(
                "",
                "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, 'curl evil']}",
            ),
            "kubeconfig user \"reader\": exec plugin is not allowed (it would run a command on meshd's host); allow with --insecure-kubeconfig-options=exec",
        ),
        (
            "gcp auth-provider",
            kubeconfig("", "    auth-provider: {name: gcp}"),
            "kubeconfig user \"reader\": auth-provider \"gcp\" is not allowed (it would use meshd's host credentials or run a command); allow with --insecure-kubeconfig-options=auth-provider",
        ),
        (
            "token file",
            kubeconfig(
                "",
                "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token",
            ),
            "kubeconfig user \"reader\": tokenFile path is not allowed (it would read a file on meshd's host); allow with --insecure-kubeconfig-options=file-paths",
        ),
        (
            "client key path",
            kubeconfig("", "    client-key: /etc/ssl/private/key.pem"),
            "kubeconfig user \"reader\": client-key path is not allowed (it would read a file on meshd's host); allow with --insecure-kubeconfig-options=file-paths",
        ),
        (
            "client certificate path",
            kubeconfig("", "    client-certificate: /etc/cert.pem"),
            "kubeconfig user \"reader\": client-certificate path is not allowed (it would read a file on meshd's host); allow with --insecure-kubeconfig-options=file-paths",
        ),
        (
            "CA path",
            kubeconfig("    certificate-authority: /etc/ca.pem", TOKEN),
            "kubeconfig cluster \"c2\": certificate-authority path is not allowed (it would read a file on meshd's host); allow with --insecure-kubeconfig-options=file-paths",
        ),
        (
            "invalid YAML",
            "clusters: [\n  - name: \"s3cr3t\n".to_owned(),
            "kubeconfig is not valid YAML",
        ),
        (
            "wrong shape, value not echoed",
            "clusters: \"s3cr3t-token\"\n".to_owned(),
            "kubeconfig is not valid YAML (line 1): clusters: invalid type: string \"…\", expected a sequence",
        ),
        (
            "no server",
            kubeconfig("", TOKEN).replace("server: https://10.0.0.2:6443", "server: ''"),
            "kubeconfig cluster \"c2\" has no server address",
        ),
        (
            "dangling context",
            kubeconfig("", TOKEN).replace("current-context: c2", "current-context: nope"),
            "kubeconfig names context \"nope\", which it does not define",
        ),
        (
            "no context at all",
            "clusters: []\n".to_owned(),
            "kubeconfig has no current-context and 0 contexts: cannot tell which cluster to use",
        ),
        (
            "too large",
            "#".repeat(MAX_KUBECONFIG_BYTES + 1),
            "kubeconfig is 262145 bytes, over the 262144-byte limit",
        ),
        (
            "binary",
            String::from_utf8_lossy(&[0xff]).into_owned(),
            "kubeconfig is not valid YAML",
        ),
    ];
    for (name, yaml, want) in cases {
        let err = sanitize(yaml.as_bytes(), &BTreeSet::new())
            .expect_err(name)
            .to_string();
        assert!(err.starts_with(want), "{name}:\n got: {err}\nwant: {want}");
        assert!(!err.contains("s3cr3t"), "{name}: leaked a credential: {err}");
    }
}

#[test]
fn good_kubeconfig_keeps_only_allowed_fields() {
    let yaml = kubeconfig("    future-field: x", &format!("{TOKEN}\n    some-new-auth: y"))
        + "- name: unused\n  user: {exec: {command: /bin/sh}}\n";
    let k = sanitize(yaml.as_bytes(), &BTreeSet::new()).expect("valid");
    assert_eq!(k.current_context.as_deref(), Some("c2"));
    assert_eq!(k.auth_infos.len(), 1, "only the current user is kept");
    let cluster = k.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.server.as_deref(), Some("https://10.0.0.2:6443"));
    assert!(cluster.other.is_empty(), "unknown cluster fields dropped");
    assert!(
        k.auth_infos[0].auth_info.as_ref().unwrap().other.is_empty(),
        "unknown user fields dropped"
    );
}

#[test]
fn oidc_is_always_allowed_and_options_opt_in() {
    let oidc = kubeconfig("", "    auth-provider: {name: oidc, config: {id-token: t}}");
    assert!(sanitize(oidc.as_bytes(), &BTreeSet::new()).is_ok());
    let exec = kubeconfig(
        "",
        "    exec: {apiVersion: client.authentication.k8s.io/v1, command: aws}",
    );
    assert!(sanitize(exec.as_bytes(), &BTreeSet::from([InsecureOption::Exec])).is_ok());
    let file = kubeconfig("", "    tokenFile: /t");
    assert!(sanitize(file.as_bytes(), &BTreeSet::from([InsecureOption::FilePaths])).is_ok());
}
