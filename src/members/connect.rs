//! One kube client per member, from a kubeconfig.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::ApiResource;

use crate::catalog::Catalog;

/// Annotation on a `MemberCluster` / `ManagedCluster` naming its kubeconfig context when that is
/// not the member's own name.
pub const CONTEXT_ANNOTATION: &str = "gitfleet.io/kubeconfig-context";

/// How long to wait for a member's TCP connection and for each response. A member that does
/// not answer in time is unreachable for this attempt; callers retry with backoff.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a watch's connection may stay silent. A live API server says nothing between
/// events but a bookmark about once a minute (k8s.io/apiserver's cacher), so [`READ_TIMEOUT`]
/// would break every quiet watch, and each break is a re-check of the member. Longer than the
/// server-side timeout a watch asks for (the server ends it first): only a dead connection
/// trips it.
pub const WATCH_READ_TIMEOUT: Duration = Duration::from_secs(330);

/// A member declared in the repository and the kubeconfig context that reaches it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct MemberTarget {
    pub name: String,
    pub context: String,
}

#[derive(Debug, thiserror::Error)]
pub enum MemberError {
    #[error("cannot read kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
    #[error("member {member}: kubeconfig {path} has no context {context:?}")]
    NoContext {
        member: String,
        path: String,
        context: String,
    },
    #[error("member {member}: kubeconfig context {context:?}: {message}")]
    Config {
        member: String,
        context: String,
        message: String,
    },
}

/// Every member the commit declares (KubeFleet `MemberCluster` and OCM `ManagedCluster`; a name
/// declared by both is one member), by name, with its context.
pub fn member_targets(cat: &Catalog) -> Vec<MemberTarget> {
    let mut out = std::collections::BTreeMap::new();
    let declared = cat
        .member_clusters
        .iter()
        .map(|e| (e.index, e.spec.metadata.name.as_str()))
        .chain(
            cat.managed_clusters
                .iter()
                .map(|e| (e.index, e.spec.metadata.name.as_str())),
        );
    for (index, name) in declared {
        let context = cat.objects[index]
            .value
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(CONTEXT_ANNOTATION))
            .and_then(|c| c.as_str())
            .map_or_else(|| name.to_string(), str::to_string);
        out.entry(name.to_string()).or_insert(context);
    }
    out.into_iter()
        .map(|(name, context)| MemberTarget { name, context })
        .collect()
}

/// A kube client for `target` through its context in `kubeconfig` (read from `path`, named in
/// errors). No request is made: an unreachable member fails at its first request, not here.
///
/// Clients are kept and shared: a client holds its member's connection pool, so the probes,
/// pushes and watches of a member reuse open connections instead of each building a TLS
/// configuration (the CA parsed again) and shaking hands anew, which at fleet scale would be
/// most of the daemon's idle CPU. A client is reused only for the very same context, cluster
/// and user entries (a kubeconfig that changes them, new credentials included, gets a new
/// client) and only on the runtime that made it (its background task lives there).
pub async fn connect(
    kubeconfig: &Kubeconfig,
    path: &Path,
    target: &MemberTarget,
) -> Result<kube::Client, MemberError> {
    Ok(connection(kubeconfig, path, target).await?.client)
}

/// [`connect`] for watches: a client of its own, kept likewise, whose connections may stay
/// silent for [`WATCH_READ_TIMEOUT`].
pub async fn connect_watching(
    kubeconfig: &Kubeconfig,
    path: &Path,
    target: &MemberTarget,
) -> Result<kube::Client, MemberError> {
    Ok(
        connection_with(kubeconfig, path, target, WATCH_READ_TIMEOUT)
            .await?
            .client,
    )
}

/// A member's client and the kinds discovery found it serving, kept together: see [`connect`]
/// and [`Kinds`].
#[derive(Clone)]
pub struct Connection {
    pub client: kube::Client,
    pub kinds: Arc<Kinds>,
}

/// How long a kind discovery found served is taken as served without asking again. Asking
/// cost each push one request per kind it delivers (with the whole group's resource list to
/// parse); kubectl keeps discovery too. A kind that went away meanwhile (a CRD deleted) fails
/// its requests until then, and the next push after it reports it as not served.
pub const KINDS_TTL: Duration = Duration::from_secs(60);

/// The kinds discovery found served on a member, by `(apiVersion, kind)`: the resource and
/// whether it is namespaced. Only kinds found are kept: one not served (yet) is asked for
/// again by the next push (a CRD may be getting established).
#[derive(Debug, Default)]
pub struct Kinds(Mutex<HashMap<KindKey, Found>>);

/// `(apiVersion, kind)`.
pub type KindKey = (String, String);

#[derive(Debug)]
struct Found {
    resource: ApiResource,
    namespaced: bool,
    at: Instant,
}

impl Kinds {
    /// The kind as found less than [`KINDS_TTL`] ago.
    pub fn get(&self, key: &KindKey) -> Option<(ApiResource, bool)> {
        let found = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let kind = found.get(key)?;
        (kind.at.elapsed() < KINDS_TTL).then(|| (kind.resource.clone(), kind.namespaced))
    }

    /// The kind's resource (plural) as last found, however long ago.
    pub fn plural(&self, key: &KindKey) -> Option<String> {
        let found = self.0.lock().unwrap_or_else(|e| e.into_inner());
        found.get(key).map(|kind| kind.resource.plural.clone())
    }

    pub fn put(&self, key: KindKey, resource: ApiResource, namespaced: bool) {
        let mut found = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let at = Instant::now();
        found.insert(
            key,
            Found {
                resource,
                namespaced,
                at,
            },
        );
    }
}

/// [`connect`], with the member's discovered kinds.
pub async fn connection(
    kubeconfig: &Kubeconfig,
    path: &Path,
    target: &MemberTarget,
) -> Result<Connection, MemberError> {
    connection_with(kubeconfig, path, target, READ_TIMEOUT).await
}

async fn connection_with(
    kubeconfig: &Kubeconfig,
    path: &Path,
    target: &MemberTarget,
    read_timeout: Duration,
) -> Result<Connection, MemberError> {
    let Some(own) = only_context(kubeconfig, &target.context) else {
        return Err(MemberError::NoContext {
            member: target.name.clone(),
            path: path.display().to_string(),
            context: target.context.clone(),
        });
    };
    let key = clients::key(&own, read_timeout);
    if let Some(connection) = clients::get(&key) {
        return Ok(connection);
    }
    let options = KubeConfigOptions {
        context: Some(target.context.clone()),
        ..KubeConfigOptions::default()
    };
    let config_error = |message: String| MemberError::Config {
        member: target.name.clone(),
        context: target.context.clone(),
        message,
    };
    let mut config = kube::Config::from_custom_kubeconfig(own, &options)
        .await
        .map_err(|e| config_error(format!("{e:#}")))?;
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(read_timeout);
    // Retries are ours (members::retry), bounded by a per-member budget; kube's own layer would
    // retry 429/503/504 up to 15 times on top of them.
    config.default_retry = false;
    // A plain-HTTP member is never reached over TLS, yet kube builds a TLS connector for every
    // client, and one with no CA of its own loads and parses every CA file of the system:
    // a real cost of a restart at fleet scale. An empty trust store spares it.
    if config.cluster_url.scheme_str() == Some("http") && config.root_cert.is_none() {
        config.root_cert = Some(Vec::new());
    }
    let client = crate::cluster_client::client(config).map_err(config_error)?;
    let connection = Connection {
        client,
        kinds: Arc::default(),
    };
    clients::put(key, &target.name, connection.clone());
    Ok(connection)
}

/// The members this runtime keeps clients for.
pub fn members_with_clients() -> std::collections::BTreeSet<String> {
    clients::members()
}

/// Stops keeping clients for the members `keep` refuses: a replica that no longer serves a
/// member should not hold its client and connections (about 20 KB a member at rest). Requests
/// and watches already running keep theirs until they end; the next [`connect`] makes a new one.
pub fn keep_clients_of(keep: impl Fn(&str) -> bool) {
    clients::retain(keep);
}

/// `kubeconfig` cut down to `context` and the cluster and user it names (what a client for it
/// is made of), or `None` when it has no such context.
fn only_context(kubeconfig: &Kubeconfig, context: &str) -> Option<Kubeconfig> {
    let named = kubeconfig.contexts.iter().find(|c| c.name == context)?;
    let (cluster, user) = match &named.context {
        Some(c) => (Some(c.cluster.as_str()), c.user.as_deref()),
        None => (None, None),
    };
    Some(Kubeconfig {
        preferences: kubeconfig.preferences.clone(),
        clusters: kubeconfig
            .clusters
            .iter()
            .filter(|c| Some(c.name.as_str()) == cluster)
            .cloned()
            .collect(),
        auth_infos: kubeconfig
            .auth_infos
            .iter()
            .filter(|u| Some(u.name.as_str()) == user)
            .cloned()
            .collect(),
        contexts: vec![named.clone()],
        current_context: Some(context.to_string()),
        extensions: None,
        kind: kubeconfig.kind.clone(),
        api_version: kubeconfig.api_version.clone(),
        ..Kubeconfig::default()
    })
}

/// The clients made so far, by runtime and by what they were made of.
mod clients {
    use sha2::Digest;
    use std::collections::{BTreeSet, HashMap};
    use std::sync::Mutex;
    use tokio::runtime::{Handle, Id};

    use super::Connection;

    /// The digest of what a client is made of (its kubeconfig entries).
    pub type Key = [u8; 32];

    /// How many runtimes' clients are kept. A client's background task dies with the runtime
    /// that made it, so each runtime has its own; the daemon and every command have one, tests
    /// one each, so the oldest are dropped.
    const RUNTIMES: usize = 8;

    /// One runtime's clients by key: the member each was made for, and the client.
    type Clients = HashMap<Key, (String, Connection)>;

    static CLIENTS: Mutex<Vec<(Id, Clients)>> = Mutex::new(Vec::new());

    /// A digest, so the cache keeps no second copy of the credentials; with the read timeout,
    /// which makes a watch's client another client.
    pub fn key(own: &kube::config::Kubeconfig, read_timeout: std::time::Duration) -> Key {
        let mut digest = sha2::Sha256::new();
        digest.update(serde_json::to_vec(own).expect("kubeconfigs serialise"));
        digest.update(read_timeout.as_millis().to_le_bytes());
        digest.finalize().into()
    }

    pub fn get(key: &Key) -> Option<Connection> {
        let runtime = Handle::try_current().ok()?.id();
        let cache = CLIENTS.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .iter()
            .find(|(id, _)| *id == runtime)
            .and_then(|(_, clients)| clients.get(key).map(|(_, c)| c.clone()))
    }

    /// The members this runtime holds clients for.
    pub fn members() -> BTreeSet<String> {
        let Ok(handle) = Handle::try_current() else {
            return BTreeSet::new();
        };
        let cache = CLIENTS.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .iter()
            .filter(|(id, _)| *id == handle.id())
            .flat_map(|(_, clients)| clients.values().map(|(m, _)| m.clone()))
            .collect()
    }

    /// Drops this runtime's clients of the members `keep` refuses (what their requests and
    /// watches hold lives on until they end).
    pub fn retain(keep: impl Fn(&str) -> bool) {
        let Ok(handle) = Handle::try_current() else {
            return;
        };
        let mut cache = CLIENTS.lock().unwrap_or_else(|e| e.into_inner());
        for (id, clients) in cache.iter_mut() {
            if *id == handle.id() {
                clients.retain(|_, (member, _)| keep(member));
            }
        }
    }

    pub fn put(key: Key, member: &str, client: Connection) {
        let Ok(handle) = Handle::try_current() else {
            return;
        };
        let runtime = handle.id();
        let mut cache = CLIENTS.lock().unwrap_or_else(|e| e.into_inner());
        match cache.iter_mut().find(|(id, _)| *id == runtime) {
            Some((_, clients)) => {
                clients.insert(key, (member.to_string(), client));
            }
            None => {
                if cache.len() == RUNTIMES {
                    cache.remove(0);
                }
                cache.push((
                    runtime,
                    HashMap::from([(key, (member.to_string(), client))]),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::catalog::SourceFile;

    fn catalog(yaml: &str) -> Catalog {
        let (cat, diags) = crate::analyze(&[SourceFile {
            path: "members.yaml".into(),
            content: yaml.as_bytes().to_vec(),
        }]);
        assert!(diags.is_empty(), "{diags:#?}");
        cat
    }

    #[test]
    fn context_is_the_member_name_unless_annotated() {
        let cat = catalog(
            r#"
apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata: {name: b, annotations: {gitfleet.io/kubeconfig-context: admin@b}}
spec: {identity: {name: agent, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}
---
apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata: {name: a}
spec: {identity: {name: agent, kind: ServiceAccount, namespace: fleet-system, apiGroup: ''}}
---
apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata: {name: c}
spec: {hubAcceptsClient: true}
"#,
        );
        let t = member_targets(&cat);
        let pairs: Vec<(&str, &str)> = t
            .iter()
            .map(|t| (t.name.as_str(), t.context.as_str()))
            .collect();
        assert_eq!(pairs, [("a", "a"), ("b", "admin@b"), ("c", "c")]);
    }

    /// A member's client is made once and shared; other credentials make another.
    #[tokio::test]
    async fn clients_are_kept_for_the_same_entries_only() {
        let text = |token: &str| {
            format!(
                "apiVersion: v1\nkind: Config\n\
                 clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:1'}}}}, \
                            {{name: other, cluster: {{server: 'https://127.0.0.1:2'}}}}]\n\
                 contexts: [{{name: a, context: {{cluster: c, user: u}}}}, \
                            {{name: b, context: {{cluster: other, user: u}}}}]\n\
                 users: [{{name: u, user: {{token: {token}}}}}]\n"
            )
        };
        let kc: Kubeconfig = crate::yaml::from_str(&text("one")).unwrap();
        let target = MemberTarget {
            name: "a".into(),
            context: "a".into(),
        };
        let own = only_context(&kc, "a").unwrap();
        assert_eq!(own.contexts.len(), 1);
        assert_eq!(own.clusters.len(), 1, "only the context's cluster");
        assert_eq!(own.clusters[0].name, "c");
        assert!(clients::get(&clients::key(&own, READ_TIMEOUT)).is_none());
        connect(&kc, Path::new("/tmp/kc"), &target).await.unwrap();
        assert!(
            clients::get(&clients::key(&own, READ_TIMEOUT)).is_some(),
            "kept"
        );
        // The watches' client is another, kept likewise.
        assert!(clients::get(&clients::key(&own, WATCH_READ_TIMEOUT)).is_none());
        connect_watching(&kc, Path::new("/tmp/kc"), &target)
            .await
            .unwrap();
        assert!(clients::get(&clients::key(&own, WATCH_READ_TIMEOUT)).is_some());
        // Another member's entries of the same file do not change this member's key.
        let mut more = kc.clone();
        more.clusters[1].cluster.as_mut().unwrap().server = Some("https://127.0.0.1:3".into());
        assert_eq!(
            clients::key(&only_context(&more, "a").unwrap(), READ_TIMEOUT),
            clients::key(&own, READ_TIMEOUT)
        );
        // New credentials are another client.
        let rotated: Kubeconfig = crate::yaml::from_str(&text("two")).unwrap();
        assert!(clients::get(&clients::key(
            &only_context(&rotated, "a").unwrap(),
            READ_TIMEOUT
        ))
        .is_none());
    }

    /// Clients of the members a replica no longer serves are dropped; the others are kept.
    #[tokio::test]
    async fn clients_are_dropped_for_the_members_not_kept() {
        let kc: Kubeconfig = crate::yaml::from_str(
            "apiVersion: v1\nkind: Config\n\
             clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}, \
                        {name: d, cluster: {server: 'https://127.0.0.1:2'}}]\n\
             contexts: [{name: a, context: {cluster: c, user: u}}, \
                        {name: b, context: {cluster: d, user: u}}]\n\
             users: [{name: u, user: {token: t}}]\n",
        )
        .unwrap();
        let target = |name: &str| MemberTarget {
            name: name.into(),
            context: name.into(),
        };
        for m in ["a", "b"] {
            connect(&kc, Path::new("/tmp/kc"), &target(m))
                .await
                .unwrap();
            connect_watching(&kc, Path::new("/tmp/kc"), &target(m))
                .await
                .unwrap();
        }
        assert_eq!(members_with_clients(), ["a", "b"].map(String::from).into());
        keep_clients_of(|m| m == "a");
        assert_eq!(members_with_clients(), ["a".to_string()].into());
        let key = |m: &str, timeout| clients::key(&only_context(&kc, m).unwrap(), timeout);
        assert!(clients::get(&key("a", READ_TIMEOUT)).is_some());
        assert!(clients::get(&key("a", WATCH_READ_TIMEOUT)).is_some());
        assert!(clients::get(&key("b", READ_TIMEOUT)).is_none());
        assert!(clients::get(&key("b", WATCH_READ_TIMEOUT)).is_none());
    }

    #[tokio::test]
    async fn a_missing_context_names_the_member_and_the_file() {
        let kc: Kubeconfig = crate::yaml::from_str(
            "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n",
        )
        .unwrap();
        let target = MemberTarget {
            name: "a".into(),
            context: "a".into(),
        };
        let Err(err) = connect(&kc, Path::new("/tmp/kc"), &target).await else {
            panic!("connected through a context that does not exist");
        };
        assert_eq!(
            err.to_string(),
            "member a: kubeconfig /tmp/kc has no context \"a\""
        );
    }
}
