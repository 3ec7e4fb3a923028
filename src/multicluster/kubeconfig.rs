//! Remote-cluster kubeconfigs are untrusted input: anyone who can write a labelled Secret in the system
//! namespace supplies one. Before kube-rs sees it, it is parsed, checked and rebuilt from an allow-list:
//! no `exec` plugin (it runs a command on meshd's host), no `auth-provider` but `oidc`, no field naming a
//! local file (token file, client certificate and key, CA path) unless the operator opts in with
//! `--insecure-kubeconfig-options`. Unknown fields are dropped by construction. istiod applies the same
//! rules (`NewUntrustedRestConfig`), except that it still reads `certificate-authority` files.

use std::collections::BTreeSet;

use clap::ValueEnum;
use kube::config::{
    AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};

/// Largest kubeconfig accepted (real ones are a few KiB).
pub const MAX_KUBECONFIG_BYTES: usize = 256 * 1024;

/// Kubeconfig features that are refused unless listed in `--insecure-kubeconfig-options`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum)]
pub enum InsecureOption {
    /// `exec` credential plugins.
    Exec,
    /// `auth-provider` other than `oidc` (gcp, azure, ...).
    AuthProvider,
    /// Fields naming local files: `tokenFile`, `client-certificate`, `client-key`, `certificate-authority`.
    FilePaths,
}

impl InsecureOption {
    fn flag(self) -> &'static str {
        match self {
            Self::Exec => "exec",
            Self::AuthProvider => "auth-provider",
            Self::FilePaths => "file-paths",
        }
    }
}

/// Why a kubeconfig was refused. Messages name the problem and never include credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeconfigError {
    /// Over [`MAX_KUBECONFIG_BYTES`].
    #[error("kubeconfig is {size} bytes, over the {MAX_KUBECONFIG_BYTES}-byte limit")]
    TooLarge {
        /// Its size.
        size: usize,
    },
    /// Not valid UTF-8.
    #[error("kubeconfig is not UTF-8 text")]
    NotText,
    /// Not a kubeconfig document.
    #[error("kubeconfig is not valid YAML{}: {reason}", at_line(*.line))]
    Invalid {
        /// 1-based line, when known.
        line: Option<usize>,
        /// What is wrong (quoted values elided).
        reason: String,
    },
    /// No `current-context`, and more or fewer than one context.
    #[error("kubeconfig has no current-context and {0} contexts: cannot tell which cluster to use")]
    NoContext(usize),
    /// The context, cluster or user it names is not defined.
    #[error("kubeconfig names {kind} {name:?}, which it does not define")]
    Missing {
        /// `context`, `cluster` or `user`.
        kind: &'static str,
        /// The missing name.
        name: String,
    },
    /// The cluster has no `server`.
    #[error("kubeconfig cluster {0:?} has no server address")]
    NoServer(String),
    /// A refused feature.
    #[error("kubeconfig {what} is not allowed (it {why}); allow with --insecure-kubeconfig-options={}", .option.flag())]
    Forbidden {
        /// The offending field, e.g. `user "admin": exec plugin`.
        what: String,
        /// The risk.
        why: &'static str,
        /// The option that would allow it.
        option: InsecureOption,
    },
    /// kube-rs refused the sanitised config (e.g. bad base64 certificate data).
    #[error("kubeconfig could not be loaded: {0}")]
    Load(String),
}

fn at_line(line: Option<usize>) -> String {
    line.map(|l| format!(" (line {l})")).unwrap_or_default()
}

/// Parses and checks `bytes`, returning a kubeconfig with only the current context, its cluster and its
/// user, each rebuilt from allowed fields.
pub fn sanitize(bytes: &[u8], allowed: &BTreeSet<InsecureOption>) -> Result<Kubeconfig, KubeconfigError> {
    if bytes.len() > MAX_KUBECONFIG_BYTES {
        return Err(KubeconfigError::TooLarge { size: bytes.len() });
    }
    let text = std::str::from_utf8(bytes).map_err(|_| KubeconfigError::NotText)?;
    let raw: Kubeconfig = serde_yaml::from_str(text).map_err(|e| KubeconfigError::Invalid {
        line: e.location().map(|l| l.line()),
        reason: elide_quoted(&e.to_string()),
    })?;

    let context = select_context(&raw)?;
    let ctx = raw
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.clone())
        .ok_or_else(|| missing("context", &context))?;
    let cluster = raw
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .and_then(|c| c.cluster.as_ref())
        .ok_or_else(|| missing("cluster", &ctx.cluster))?;
    let user_name = ctx.user.clone().unwrap_or_default();
    let user = match &ctx.user {
        Some(name) => raw
            .auth_infos
            .iter()
            .find(|u| &u.name == name)
            .and_then(|u| u.auth_info.as_ref())
            .ok_or_else(|| missing("user", name))?,
        None => &AuthInfo::default(),
    };

    Ok(Kubeconfig {
        clusters: vec![NamedCluster {
            name: ctx.cluster.clone(),
            cluster: Some(sanitize_cluster(&ctx.cluster, cluster, allowed)?),
            other: Default::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: user_name.clone(),
            auth_info: Some(sanitize_user(&user_name, user, allowed)?),
            other: Default::default(),
        }],
        contexts: vec![NamedContext {
            name: context.clone(),
            context: Some(Context {
                cluster: ctx.cluster.clone(),
                user: Some(user_name),
                namespace: ctx.namespace.clone(),
                extensions: None,
                other: Default::default(),
            }),
            other: Default::default(),
        }],
        current_context: Some(context),
        ..Kubeconfig::default()
    })
}

/// [`sanitize`], then the kube-rs client config.
pub async fn client_config(
    bytes: &[u8],
    allowed: &BTreeSet<InsecureOption>,
) -> Result<kube::Config, KubeconfigError> {
    let kubeconfig = sanitize(bytes, allowed)?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| KubeconfigError::Load(elide_quoted(&e.to_string())))
}

fn select_context(raw: &Kubeconfig) -> Result<String, KubeconfigError> {
    match (&raw.current_context, raw.contexts.as_slice()) {
        (Some(c), _) if !c.is_empty() => Ok(c.clone()),
        (_, [only]) => Ok(only.name.clone()),
        (_, all) => Err(KubeconfigError::NoContext(all.len())),
    }
}

fn missing(kind: &'static str, name: &str) -> KubeconfigError {
    KubeconfigError::Missing {
        kind,
        name: name.to_owned(),
    }
}

fn sanitize_cluster(
    name: &str,
    c: &Cluster,
    allowed: &BTreeSet<InsecureOption>,
) -> Result<Cluster, KubeconfigError> {
    let server = c
        .server
        .clone()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| KubeconfigError::NoServer(name.to_owned()))?;
    let what = format!("cluster {name:?}");
    check_file(&what, "certificate-authority", &c.certificate_authority, allowed)?;
    Ok(Cluster {
        server: Some(server),
        insecure_skip_tls_verify: c.insecure_skip_tls_verify,
        certificate_authority: c.certificate_authority.clone(),
        certificate_authority_data: c.certificate_authority_data.clone(),
        proxy_url: c.proxy_url.clone(),
        tls_server_name: c.tls_server_name.clone(),
        disable_compression: c.disable_compression,
        ..Cluster::default()
    })
}

fn sanitize_user(
    name: &str,
    u: &AuthInfo,
    allowed: &BTreeSet<InsecureOption>,
) -> Result<AuthInfo, KubeconfigError> {
    let what = format!("user {name:?}");
    if u.exec.is_some() && !allowed.contains(&InsecureOption::Exec) {
        return Err(KubeconfigError::Forbidden {
            what: format!("{what}: exec plugin"),
            why: "would run a command on meshd's host",
            option: InsecureOption::Exec,
        });
    }
    if let Some(p) = &u.auth_provider
        && p.name != "oidc"
        && !allowed.contains(&InsecureOption::AuthProvider)
    {
        return Err(KubeconfigError::Forbidden {
            what: format!("{what}: auth-provider {:?}", p.name),
            why: "would use meshd's host credentials or run a command",
            option: InsecureOption::AuthProvider,
        });
    }
    check_file(&what, "tokenFile", &u.token_file, allowed)?;
    check_file(&what, "client-certificate", &u.client_certificate, allowed)?;
    check_file(&what, "client-key", &u.client_key, allowed)?;
    Ok(AuthInfo {
        username: u.username.clone(),
        password: u.password.clone(),
        token: u.token.clone(),
        token_file: u.token_file.clone(),
        client_certificate: u.client_certificate.clone(),
        client_certificate_data: u.client_certificate_data.clone(),
        client_key: u.client_key.clone(),
        client_key_data: u.client_key_data.clone(),
        impersonate: u.impersonate.clone(),
        impersonate_groups: u.impersonate_groups.clone(),
        auth_provider: u.auth_provider.clone(),
        exec: u.exec.clone(),
        ..AuthInfo::default()
    })
}

fn check_file(
    what: &str,
    field: &str,
    value: &Option<String>,
    allowed: &BTreeSet<InsecureOption>,
) -> Result<(), KubeconfigError> {
    match value {
        Some(path) if !path.is_empty() && !allowed.contains(&InsecureOption::FilePaths) => {
            Err(KubeconfigError::Forbidden {
                what: format!("{what}: {field} path"),
                why: "would read a file on meshd's host",
                option: InsecureOption::FilePaths,
            })
        }
        _ => Ok(()),
    }
}

/// Parser messages quote offending values, which may be credentials: replace every quoted run.
fn elide_quoted(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut quoted = false;
    for ch in msg.chars() {
        if ch == '"' || ch == '`' {
            if !quoted {
                out.push_str("\"…\"");
            }
            quoted = !quoted;
        } else if !quoted {
            out.push(ch);
        }
    }
    out
}

#[cfg(test)]
mod tests {
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
}
