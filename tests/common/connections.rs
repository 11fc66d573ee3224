//! What a process holds open: its established TCP connections to a server, found from
//! `/proc` (Linux), and the port of an API server named in a kubeconfig.

/// The daemon's established TCP connections to `port` on this machine: its socket inodes
/// (`/proc/<pid>/fd`) among the connections of the network namespace (`/proc/<pid>/net/tcp`
/// and `tcp6`) whose remote port is `port`.
pub fn connections_to(pid: u32, port: u16) -> usize {
    let inodes: std::collections::BTreeSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let remote = format!(":{port:04X}");
    ["tcp", "tcp6"]
        .iter()
        .filter_map(|t| std::fs::read_to_string(format!("/proc/{pid}/net/{t}")).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local, remote, state (01: established), ..., inode (the tenth field)
            f.len() > 9 && f[2].ends_with(&remote) && f[3] == "01" && inodes.contains(f[9])
        })
        .count()
}

/// The port of the API server behind `context` in `kubeconfig`.
pub fn server_port(kubeconfig: &std::path::Path, context: &str) -> u16 {
    let config = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let cluster = config
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .unwrap();
    let server = config
        .clusters
        .iter()
        .find(|c| c.name == cluster)
        .and_then(|c| c.cluster.as_ref()?.server.clone())
        .unwrap();
    let uri: http::Uri = server.parse().unwrap();
    uri.port_u16().unwrap_or(443)
}
