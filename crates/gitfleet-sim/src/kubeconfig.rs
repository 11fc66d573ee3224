//! The kubeconfig that reaches the simulated members: one cluster, user and context per member,
//! each named like the member's context (the member name unless the fleet file says otherwise).

use std::io::Write;
use std::path::Path;

use serde_json::json;

/// What a kubeconfig needs to know about one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeconfigEntry {
    pub context: String,
    pub server: String,
    pub token: String,
}

/// The kubeconfig YAML; the first entry is the current context.
pub fn kubeconfig_yaml(entries: &[KubeconfigEntry]) -> String {
    let clusters: Vec<_> = entries
        .iter()
        .map(|e| json!({"name": e.context, "cluster": {"server": e.server}}))
        .collect();
    let users: Vec<_> = entries
        .iter()
        .map(|e| json!({"name": e.context, "user": {"token": e.token}}))
        .collect();
    let contexts: Vec<_> = entries
        .iter()
        .map(|e| json!({"name": e.context, "context": {"cluster": e.context, "user": e.context, "namespace": "default"}}))
        .collect();
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": clusters,
        "users": users,
        "contexts": contexts,
        "current-context": entries.first().map(|e| e.context.clone()).unwrap_or_default(),
    });
    let mut out =
        String::from("# Written by `gitfleet sim`: simulated members on loopback (plain HTTP).\n");
    out.push_str(&gitfleet_kube_text::yaml::to_string(&doc).expect("a kubeconfig serialises"));
    out
}

/// Writes the kubeconfig atomically, readable only by its owner.
pub fn write_kubeconfig(path: &Path, entries: &[KubeconfigEntry]) -> std::io::Result<()> {
    write_private(path, kubeconfig_yaml(entries).as_bytes())
}

/// Writes a file of credentials atomically, readable only by its owner.
pub fn write_private(path: &Path, content: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(content)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_context_per_member_named_like_it() {
        let entries = vec![
            KubeconfigEntry {
                context: "a".into(),
                server: "http://127.0.0.1:1".into(),
                token: "t1".into(),
            },
            KubeconfigEntry {
                context: "b".into(),
                server: "http://127.0.0.1:2".into(),
                token: "t2".into(),
            },
        ];
        let doc: serde_json::Value =
            gitfleet_kube_text::yaml::from_str(&kubeconfig_yaml(&entries)).unwrap();
        assert_eq!(doc["current-context"], "a");
        assert_eq!(doc["contexts"][1]["name"], "b");
        assert_eq!(doc["contexts"][1]["context"]["cluster"], "b");
        assert_eq!(
            doc["clusters"][1]["cluster"]["server"],
            "http://127.0.0.1:2"
        );
        assert_eq!(doc["users"][1]["user"]["token"], "t2");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        write_kubeconfig(&path, &entries).unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().contains("t2"));
    }
}
