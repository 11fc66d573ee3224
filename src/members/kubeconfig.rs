//! Which kubeconfig reaches the members, found as kubectl finds it (client-go's
//! `clientcmd.ClientConfigLoadingRules.Load`): `--kubeconfig FILE` (which must exist), else the
//! files `KUBECONFIG` lists (`:`-separated; empty entries and missing files skipped, a file
//! named twice read once, merged so that the first file to set a cluster, user or context wins
//! it whole and `current-context` comes from the first file that sets one), else
//! `~/.kube/config`. Each file's relative paths (certificate-authority, client certificate and
//! key, tokenFile, exec command) resolve against its own folder, as client-go's
//! `ResolveLocalPaths` does. Each file is read as kube's `Kubeconfig::read_from` reads it, but
//! with gitfleet's YAML reader ([`read_kubeconfig`]); kube's `Kubeconfig::merge` merges them.
//! What kube's `Kubeconfig::from_env` does differently (it fails on a missing file, where
//! kubectl skips it) is why the list is walked here.
//!
//! It only reads files: which context reaches which member is [`super::connect`]'s.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use kube::config::Kubeconfig;

use super::connect::MemberError;

/// Where the kubeconfig was found, in kubectl's order of precedence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeconfigSource {
    /// `--kubeconfig` (or `GITFLEET_KUBECONFIG`): this file alone, and it must exist.
    Flag(PathBuf),
    /// `KUBECONFIG`: these files, merged, first one first.
    Env(Vec<PathBuf>),
    /// `~/.kube/config`.
    Home(PathBuf),
}

/// A kubeconfig read from wherever it was found, with the name errors give it: the file, or
/// the files `KUBECONFIG` listed that exist, joined with `:`.
#[derive(Debug, Clone)]
pub struct Located {
    pub kubeconfig: Kubeconfig,
    pub name: PathBuf,
}

impl KubeconfigSource {
    /// kubectl's precedence from its inputs (passed in so that tests do not touch the process
    /// environment): the flag, else `KUBECONFIG` when it names at least one file, else
    /// `<home>/.kube/config`.
    pub fn find(
        flag: Option<&Path>,
        env: Option<&OsStr>,
        home: Option<&Path>,
    ) -> Result<Self, MemberError> {
        if let Some(path) = flag {
            return Ok(Self::Flag(path.to_path_buf()));
        }
        if let Some(value) = env {
            let mut files: Vec<PathBuf> = Vec::new();
            for p in std::env::split_paths(value) {
                // client-go's `deduplicate`: a file named twice is read once.
                if !p.as_os_str().is_empty() && !files.contains(&p) {
                    files.push(p);
                }
            }
            if !files.is_empty() {
                return Ok(Self::Env(files));
            }
        }
        match home {
            Some(home) => Ok(Self::Home(home.join(".kube").join("config"))),
            None => Err(MemberError::Kubeconfig {
                path: "~/.kube/config".into(),
                message: "no --kubeconfig, no KUBECONFIG, and no home folder to look in".into(),
            }),
        }
    }

    /// [`Self::find`] with this process's `KUBECONFIG` and home folder.
    pub fn from_process(flag: Option<&Path>) -> Result<Self, MemberError> {
        let env = std::env::var_os("KUBECONFIG");
        Self::find(flag, env.as_deref(), std::env::home_dir().as_deref())
    }

    /// Reads (and for `KUBECONFIG`, merges) the files.
    pub fn load(&self) -> Result<Located, MemberError> {
        match self {
            Self::Flag(path) => Ok(Located {
                kubeconfig: read_kubeconfig(path)?,
                name: path.clone(),
            }),
            Self::Home(path) => {
                if !path.exists() {
                    return Err(MemberError::Kubeconfig {
                        path: path.display().to_string(),
                        message: "no such file (give --kubeconfig, or set KUBECONFIG)".into(),
                    });
                }
                Ok(Located {
                    kubeconfig: read_kubeconfig(path)?,
                    name: path.clone(),
                })
            }
            Self::Env(files) => {
                let mut merged: Option<Kubeconfig> = None;
                let mut read = Vec::new();
                for path in files {
                    // kubectl skips a listed file that does not exist (its `missingList`).
                    if matches!(std::fs::metadata(path), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
                    {
                        continue;
                    }
                    let next = read_kubeconfig(path)?;
                    merged = Some(match merged {
                        None => next,
                        Some(m) => m.merge(next).map_err(|e| MemberError::Kubeconfig {
                            path: path.display().to_string(),
                            message: format!("cannot merge with the files before it: {e}"),
                        })?,
                    });
                    read.push(path.clone());
                }
                let Some(kubeconfig) = merged else {
                    // kubectl warns and goes on with an empty configuration, which reaches no
                    // member: say so at once instead of once per member.
                    return Err(MemberError::Kubeconfig {
                        path: join(files).display().to_string(),
                        message: "none of the files KUBECONFIG lists exists".into(),
                    });
                };
                Ok(Located {
                    kubeconfig,
                    name: join(&read),
                })
            }
        }
    }
}

fn join(files: &[PathBuf]) -> PathBuf {
    std::env::join_paths(files)
        .map(PathBuf::from)
        .unwrap_or_else(|_| files.first().cloned().unwrap_or_default())
}

/// Reads a kubeconfig file once; [`super::connect`] takes the parsed form so that a fleet of members
/// does not read and parse it per member.
///
/// Read as kube's `Kubeconfig::read_from` reads it (UTF-16 with a byte-order mark, several
/// documents merged, relative paths resolved against the file's folder), but with gitfleet's
/// YAML reader, as kubectl reads it (sigs.k8s.io/yaml): kube's reader refuses a document of
/// more than 250,000 nodes, about 10,000 members' contexts, whatever the file's size.
pub fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, MemberError> {
    let error = |message: String| MemberError::Kubeconfig {
        path: path.display().to_string(),
        message,
    };
    let bytes = std::fs::read(path).map_err(|e| error(e.to_string()))?;
    let text = text_of(&bytes).map_err(error)?;
    let documents: Vec<Kubeconfig> =
        crate::yaml::all_from_str(&text).map_err(|e| error(without_secrets(&e.to_string())))?;
    let dir = path.parent().unwrap_or(Path::new(""));
    documents
        .into_iter()
        .map(|c| with_absolute_paths(c, dir))
        .try_fold(Kubeconfig::default(), Kubeconfig::merge)
        .map_err(|e| error(format!("{e:#}")))
}

/// A kubeconfig's bytes as text: UTF-16 (little-endian) after its byte-order mark, as
/// Windows tools write it, else UTF-8.
fn text_of(bytes: &[u8]) -> Result<String, String> {
    match bytes {
        [0xFF, 0xFE, rest @ ..] => {
            let units: Vec<u16> = rest
                .chunks(2)
                .map(|c| u16::from_le_bytes([c[0], c.get(1).copied().unwrap_or(0)]))
                .collect();
            String::from_utf16(&units).map_err(|_| "not valid UTF-16".to_string())
        }
        _ => crate::yaml::text(bytes)
            .map(str::to_string)
            .map_err(|e| e.to_string()),
    }
}

/// `config` with its relative file references made absolute against `dir`, as client-go's
/// `ResolveLocalPaths` does: certificate authority, client certificate and key, token file,
/// and an exec command that names a path (a bare command is looked up on `PATH`).
fn with_absolute_paths(mut config: Kubeconfig, dir: &Path) -> Kubeconfig {
    let absolute = |file: &mut String| {
        if Path::new(file.as_str()).is_relative() {
            if let Some(joined) = dir.join(file.as_str()).to_str() {
                *file = joined.to_string();
            }
        }
    };
    for cluster in config
        .clusters
        .iter_mut()
        .filter_map(|n| n.cluster.as_mut())
    {
        if let Some(file) = cluster.certificate_authority.as_mut() {
            absolute(file);
        }
    }
    for user in config
        .auth_infos
        .iter_mut()
        .filter_map(|n| n.auth_info.as_mut())
    {
        let files = [
            &mut user.client_certificate,
            &mut user.client_key,
            &mut user.token_file,
        ];
        for file in files.into_iter().flatten() {
            absolute(file);
        }
        if let Some(command) = user.exec.as_mut().and_then(|e| e.command.as_mut()) {
            if command.contains(std::path::MAIN_SEPARATOR) {
                absolute(command);
            }
        }
    }
    config
}

/// A kubeconfig reading error fit to print: the YAML reader quotes the offending source lines
/// (tokens and keys included) after its first line, and serde quotes offending values; keep the
/// first line, which says where, and mask quoted values.
fn without_secrets(message: &str) -> String {
    let first = message.lines().next().unwrap_or_default();
    let mut out = String::with_capacity(first.len());
    let mut quoted = false;
    for c in first.chars() {
        if c == '"' {
            if quoted {
                out.push_str("…\"");
            } else {
                out.push('"');
            }
            quoted = !quoted;
        } else if !quoted {
            out.push(c);
        }
    }
    if quoted {
        out.push('…');
    }
    out
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_errors_never_carry_credentials() {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            (
                "syntax",
                "users:\n- name: u\n  user:\n    token: SECRET-1\n    password: [x\n",
            ),
            ("type", "users:\n- name: u\n  user: {token: [SECRET-2]}\n"),
            ("value", "users:\n- name: u\n  user: \"SECRET-3\"\n"),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            let Err(e) = read_kubeconfig(&path) else {
                panic!("{name}: read");
            };
            let shown = e.to_string();
            assert!(!shown.contains("SECRET"), "{name}: {shown}");
            assert!(shown.contains(&path.display().to_string()), "{shown}");
        }
        assert_eq!(
            without_secrets("invalid type: string \"tok\", expected a map\n  --> 9:1\n token: tok"),
            "invalid type: string \"…\", expected a map"
        );
    }

    /// kube's own reader refuses a document of more than 250,000 YAML nodes: a fleet of
    /// 10,000 members' contexts.
    #[test]
    fn a_kubeconfig_of_ten_thousand_members_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let entries: Vec<gitfleet_sim::KubeconfigEntry> = (0..10_001)
            .map(|i| gitfleet_sim::KubeconfigEntry {
                context: format!("m-{i:05}"),
                server: format!("http://127.0.0.1:{}", 10_000 + i),
                token: format!("token-{i}"),
            })
            .collect();
        let path = dir.path().join("kubeconfig");
        gitfleet_sim::kubeconfig::write_kubeconfig(&path, &entries).unwrap();
        let k = read_kubeconfig(&path).unwrap();
        assert_eq!(
            (k.clusters.len(), k.auth_infos.len(), k.contexts.len()),
            (10_001, 10_001, 10_001)
        );
        assert_eq!(k.current_context.as_deref(), Some("m-00000"));
    }

    /// Several documents merge (the first to name an entry wins it); a user's files and an
    /// exec command that names a path resolve against the file's folder; UTF-16 with a
    /// byte-order mark reads as UTF-8 does.
    #[test]
    fn a_kubeconfig_reads_as_kube_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let text = "\
apiVersion: v1
kind: Config
current-context: a
users:
- name: u
  user:
    client-certificate: certs/u.crt
    client-key: /abs/u.key
    tokenFile: token
- name: x
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: bin/login}
- name: bare
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: aws}
contexts:
- {name: a, context: {cluster: c, user: u}}
---
users:
- name: u
  user: {token: second}
contexts:
- {name: b, context: {cluster: c, user: u}}
";
        let path = dir.path().join("config");
        std::fs::write(&path, text).unwrap();
        let k = read_kubeconfig(&path).unwrap();
        let user = |name: &str| {
            k.auth_infos
                .iter()
                .find(|u| u.name == name)
                .and_then(|u| u.auth_info.clone())
                .unwrap()
        };
        let at = |file: &str| Some(dir.path().join(file).display().to_string());
        assert_eq!(user("u").client_certificate, at("certs/u.crt"));
        assert_eq!(user("u").client_key.as_deref(), Some("/abs/u.key"));
        assert_eq!(user("u").token_file, at("token"));
        assert!(user("u").token.is_none(), "the first document's user wins");
        assert_eq!(user("x").exec.unwrap().command, at("bin/login"));
        assert_eq!(user("bare").exec.unwrap().command.as_deref(), Some("aws"));
        let contexts: Vec<&str> = k.contexts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(contexts, ["a", "b"]);

        let utf16 = dir.path().join("utf16");
        let mut bytes = vec![0xFF, 0xFE];
        bytes.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
        std::fs::write(&utf16, bytes).unwrap();
        let again = read_kubeconfig(&utf16).unwrap();
        assert_eq!(again.contexts.len(), 2);
        assert_eq!(
            again.auth_infos[0].auth_info.as_ref().unwrap().token_file,
            at("token")
        );
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn kubeconfig(current: Option<&str>, contexts: &[(&str, &str)], server: &str) -> String {
        let mut s = String::from("apiVersion: v1\nkind: Config\n");
        if let Some(c) = current {
            s.push_str(&format!("current-context: {c}\n"));
        }
        s.push_str("clusters:\n");
        for (_, cluster) in contexts {
            s.push_str(&format!(
                "- name: {cluster}\n  cluster:\n    server: {server}\n    certificate-authority: ca-{cluster}.crt\n"
            ));
        }
        s.push_str("users:\n- name: u\n  user: {token: t}\ncontexts:\n");
        for (ctx, cluster) in contexts {
            s.push_str(&format!(
                "- name: {ctx}\n  context: {{cluster: {cluster}, user: u}}\n"
            ));
        }
        s
    }

    #[test]
    fn precedence_is_flag_then_kubeconfig_then_home() {
        let flag = Path::new("/f");
        let home = Path::new("/home/me");
        let env = OsStr::new("/a:/b::/a");
        assert_eq!(
            KubeconfigSource::find(Some(flag), Some(env), Some(home)).unwrap(),
            KubeconfigSource::Flag("/f".into())
        );
        assert_eq!(
            KubeconfigSource::find(None, Some(env), Some(home)).unwrap(),
            KubeconfigSource::Env(vec!["/a".into(), "/b".into()]),
            "empty entries skipped, a file named twice read once"
        );
        for empty in ["", ":", "::"] {
            assert_eq!(
                KubeconfigSource::find(None, Some(OsStr::new(empty)), Some(home)).unwrap(),
                KubeconfigSource::Home("/home/me/.kube/config".into()),
                "KUBECONFIG={empty:?} names no file"
            );
        }
        assert_eq!(
            KubeconfigSource::find(None, None, Some(home)).unwrap(),
            KubeconfigSource::Home("/home/me/.kube/config".into())
        );
        assert!(KubeconfigSource::find(None, None, None).is_err());
    }

    /// client-go's rules: the first file to set a map key wins it whole; current-context from
    /// the first file that sets one; missing files skipped; paths relative to each file.
    #[test]
    fn several_files_merge_as_kubectl_merges_them() {
        let dir = tempfile::tempdir().unwrap();
        let one = dir.path().join("one");
        let two = dir.path().join("two");
        std::fs::create_dir_all(&one).unwrap();
        std::fs::create_dir_all(&two).unwrap();
        let a = write(
            &one,
            "a",
            &kubeconfig(None, &[("east", "east")], "https://first"),
        );
        let b = write(
            &two,
            "b",
            &kubeconfig(
                Some("west"),
                &[("east", "east"), ("west", "west")],
                "https://second",
            ),
        );
        let c = write(&one, "c", &kubeconfig(Some("east"), &[], "https://third"));
        let missing = dir.path().join("missing");
        let located = KubeconfigSource::Env(vec![missing.clone(), a.clone(), b.clone(), c])
            .load()
            .unwrap();
        let k = &located.kubeconfig;
        let server = |name: &str| {
            k.clusters
                .iter()
                .find(|c| c.name == name)
                .and_then(|c| c.cluster.as_ref())
                .and_then(|c| c.server.clone())
        };
        assert_eq!(
            server("east").as_deref(),
            Some("https://first"),
            "first wins"
        );
        assert_eq!(server("west").as_deref(), Some("https://second"));
        assert_eq!(k.contexts.len(), 2);
        assert_eq!(
            k.current_context.as_deref(),
            Some("west"),
            "first that sets it"
        );
        let ca = |name: &str| {
            k.clusters
                .iter()
                .find(|c| c.name == name)
                .and_then(|c| c.cluster.as_ref())
                .and_then(|c| c.certificate_authority.clone())
                .unwrap()
        };
        assert_eq!(
            ca("east"),
            one.join("ca-east.crt").display().to_string(),
            "relative to its own file"
        );
        assert_eq!(ca("west"), two.join("ca-west.crt").display().to_string());
        assert!(
            !located.name.display().to_string().contains("missing"),
            "{}",
            located.name.display()
        );

        let e = KubeconfigSource::Env(vec![missing.clone()])
            .load()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("none of the files KUBECONFIG lists exists"),
            "{e}"
        );
        let e = KubeconfigSource::Flag(missing.clone())
            .load()
            .unwrap_err()
            .to_string();
        assert!(e.contains(&missing.display().to_string()), "{e}");
        let e = KubeconfigSource::Home(missing)
            .load()
            .unwrap_err()
            .to_string();
        assert!(e.contains("set KUBECONFIG"), "{e}");
        // A file that exists but cannot be read as a kubeconfig fails, naming it.
        let bad = write(dir.path(), "bad", "clusters: [x\n");
        let e = KubeconfigSource::Env(vec![a, bad.clone()])
            .load()
            .unwrap_err()
            .to_string();
        assert!(e.contains(&bad.display().to_string()), "{e}");
    }
}
