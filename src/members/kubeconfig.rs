//! Which kubeconfig reaches the members, found as kubectl finds it (client-go's
//! `clientcmd.ClientConfigLoadingRules.Load`): `--kubeconfig FILE` (which must exist), else the
//! files `KUBECONFIG` lists (`:`-separated; empty entries and missing files skipped, a file
//! named twice read once, merged so that the first file to set a cluster, user or context wins
//! it whole and `current-context` comes from the first file that sets one), else
//! `~/.kube/config`. Each file's relative paths (certificate-authority, client certificate and
//! key, tokenFile, exec command) resolve against its own folder, as client-go's
//! `ResolveLocalPaths` does. kube's `Kubeconfig::read_from` and `Kubeconfig::merge` do the
//! reading and the merging; what kube's `Kubeconfig::from_env` does differently (it fails on a
//! missing file, where kubectl skips it) is why the list is walked here.
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
                kubeconfig: super::connect::read_kubeconfig(path)?,
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
                    kubeconfig: super::connect::read_kubeconfig(path)?,
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
                    let next = super::connect::read_kubeconfig(path)?;
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

#[cfg(test)]
mod tests {
    use super::*;

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
