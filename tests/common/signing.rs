//! Signing keys for the end-to-end tests, made as a user makes them: `ssh-keygen` and `gpg` in
//! a temporary home (never the user's own), and tags signed by the real `git tag -s` with git's
//! configuration given by `-c` options only (`gpg.format=ssh` or gpg).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::Repo;

/// A temporary home holding SSH keys, a GnuPG home and whatever trust files a test writes.
pub struct Keys {
    pub home: tempfile::TempDir,
}

/// Who signs a tag or commit: an SSH private key file, or an OpenPGP user id (through the
/// `gpg.program` given, when there is one).
#[derive(Clone, Copy)]
pub enum Signer<'a> {
    Ssh(&'a Path),
    Gpg(&'a str, Option<&'a Path>),
}

/// Runs `cmd`, failing the test with its stderr when it fails; returns its trimmed stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Writes an executable script (a `gpg.program` wrapper) through `sh`, so that this process
/// never holds the file open for writing: a child that another test thread forks meanwhile
/// inherits such a descriptor until it execs, and running the script then fails with "Text
/// file busy".
pub fn write_executable(path: &Path, script: &str) {
    use std::io::Write as _;
    let mut sh = Command::new("sh")
        .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("runs sh");
    sh.stdin
        .take()
        .expect("piped")
        .write_all(script.as_bytes())
        .unwrap();
    assert!(sh.wait().unwrap().success(), "cannot write {path:?}");
}

impl Default for Keys {
    fn default() -> Self {
        Self::new()
    }
}

impl Keys {
    pub fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        let gnupg = home.path().join("gnupg");
        std::fs::create_dir(&gnupg).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&gnupg, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        Keys { home }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.home.path().join(name)
    }

    pub fn write(&self, file: &str, text: &str) {
        std::fs::write(self.path(file), text).unwrap();
    }

    pub fn gpg(&self) -> Command {
        let mut c = Command::new("gpg");
        c.env("GNUPGHOME", self.path("gnupg"))
            .env("HOME", self.home.path())
            .args(["--batch", "--pinentry-mode", "loopback", "--passphrase", ""]);
        c
    }

    /// A new SSH key `name` (ed25519, no passphrase); returns its private key file.
    pub fn ssh_key(&self, name: &str) -> PathBuf {
        let key = self.path(name);
        run(Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
            .arg(&key));
        key
    }

    pub fn ssh_public(&self, key: &Path) -> String {
        std::fs::read_to_string(key.with_extension("pub"))
            .unwrap()
            .trim()
            .to_string()
    }

    /// `SHA256:…`, as `ssh-keygen -l` prints it.
    pub fn ssh_fingerprint(&self, key: &Path) -> String {
        let out = run(Command::new("ssh-keygen")
            .arg("-lf")
            .arg(key.with_extension("pub")));
        out.split_whitespace().nth(1).unwrap().to_string()
    }

    /// A new OpenPGP signing key for `uid`, made at `faked` time if given (gpg's
    /// `--faked-system-time`), expiring after `expire`; returns its fingerprint.
    pub fn gpg_key(&self, uid: &str, expire: &str, faked: Option<&str>) -> String {
        let mut c = self.gpg();
        if let Some(t) = faked {
            c.args(["--faked-system-time", t]);
        }
        run(c.args(["--quick-gen-key", uid, "ed25519", "sign", expire]));
        let out = run(self.gpg().args(["--with-colons", "--list-keys", uid]));
        out.lines()
            .find_map(|l| l.strip_prefix("fpr:::::::::"))
            .map(|f| f.trim_end_matches(':').to_string())
            .unwrap()
    }

    pub fn gpg_export(&self, uids: &[&str]) -> String {
        run(self.gpg().args(["--armor", "--export"]).args(uids))
    }

    /// git in `repo` as a user of this home who signs as `signer`.
    pub fn git_as(&self, repo: &Path, signer: Signer<'_>) -> Command {
        let mut c = Command::new("git");
        c.current_dir(repo)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", self.home.path())
            .env("GNUPGHOME", self.path("gnupg"))
            .env("GIT_AUTHOR_NAME", "Approver")
            .env("GIT_AUTHOR_EMAIL", "approver@example.com")
            .env("GIT_COMMITTER_NAME", "Approver")
            .env("GIT_COMMITTER_EMAIL", "approver@example.com");
        match signer {
            Signer::Ssh(key) => {
                c.args(["-c", "gpg.format=ssh", "-c"])
                    .arg(format!("user.signingkey={}", key.display()));
            }
            Signer::Gpg(uid, program) => {
                c.args(["-c", &format!("user.signingkey={uid}")]);
                if let Some(p) = program {
                    c.args(["-c", &format!("gpg.program={}", p.display())]);
                }
            }
        }
        c
    }

    /// `git tag -s [-f] gitfleet/approve/<request> <commit>` in `repo`; returns the tag
    /// object's id.
    pub fn sign_tag(&self, repo: &Repo, request: &str, commit: &str, signer: Signer<'_>) -> String {
        let tag = format!("gitfleet/approve/{request}");
        run(self.git_as(repo.path(), signer).args([
            "tag",
            "-s",
            "-f",
            "-m",
            &format!("Approve {request}"),
            &tag,
            commit,
        ]));
        repo.git(&["rev-parse", &format!("refs/tags/{tag}")])
    }
}
