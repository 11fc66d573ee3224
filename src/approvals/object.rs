//! Signed git objects as git signs them, and reading them with gix.
//!
//! A signed tag (`git tag -s`) carries its signature at the end of the message: the signed
//! payload is the tag object up to the last line that starts an armored signature block
//! (`-----BEGIN PGP SIGNATURE-----`, `-----BEGIN SSH SIGNATURE-----`, …) — git's
//! `parse_signed_buffer` (Documentation/technical/signature-format.txt). A signed commit
//! (`git commit -S`) carries it in the `gpgsig` header: the payload is the commit object
//! without that header and its continuation lines.
//!
//! [`split_tag`] and [`split_commit`] are pure; [`read_approval_tags`] and
//! [`read_commit_signature`] read the repository.

use std::path::Path;

/// The armored blocks git recognises as a signature's start, and their format.
const SIGNATURE_STARTS: &[(&str, SignatureFormat)] = &[
    ("-----BEGIN PGP SIGNATURE-----", SignatureFormat::OpenPgp),
    ("-----BEGIN PGP MESSAGE-----", SignatureFormat::OpenPgp),
    ("-----BEGIN SSH SIGNATURE-----", SignatureFormat::Ssh),
    ("-----BEGIN SIGNED MESSAGE-----", SignatureFormat::X509),
];

/// Which kind of signature a block is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureFormat {
    OpenPgp,
    Ssh,
    /// gpgsm's; recognised so that it is reported as unsupported rather than as unsigned.
    X509,
}

/// What was signed and the signature over it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub payload: Vec<u8>,
    pub signature: Vec<u8>,
    pub format: SignatureFormat,
}

fn format_of(line: &[u8]) -> Option<SignatureFormat> {
    SIGNATURE_STARTS
        .iter()
        .find(|(start, _)| line.starts_with(start.as_bytes()))
        .map(|(_, f)| *f)
}

/// A tag object split into payload and signature (`None`: unsigned).
pub fn split_tag(data: &[u8]) -> Option<Signed> {
    let mut at = None;
    let mut offset = 0;
    for line in data.split_inclusive(|b| *b == b'\n') {
        if let Some(f) = format_of(line) {
            at = Some((offset, f));
        }
        offset += line.len();
    }
    let (at, format) = at?;
    Some(Signed {
        payload: data[..at].to_vec(),
        signature: data[at..].to_vec(),
        format,
    })
}

/// A commit object split into payload (without any `gpgsig*` header) and the `gpgsig`
/// signature (`None`: unsigned).
pub fn split_commit(data: &[u8]) -> Option<Signed> {
    let mut payload = Vec::with_capacity(data.len());
    let mut signature = Vec::new();
    let (mut in_signature, mut in_other) = (false, false);
    let mut lines = data.split_inclusive(|b| *b == b'\n');
    while let Some(line) = lines.next() {
        if line == b"\n" {
            // The end of the headers: the message follows as is.
            payload.extend_from_slice(line);
            for rest in lines.by_ref() {
                payload.extend_from_slice(rest);
            }
            break;
        }
        let continuation = line.first() == Some(&b' ');
        if continuation && in_signature {
            signature.extend_from_slice(&line[1..]);
        } else if let Some(sig) = line.strip_prefix(b"gpgsig ") {
            signature.extend_from_slice(sig);
            (in_signature, in_other) = (true, false);
        } else if line.starts_with(b"gpgsig") {
            // A signature for another hash algorithm (`gpgsig-sha256`): not signed over.
            (in_signature, in_other) = (false, true);
        } else if continuation && in_other {
        } else {
            (in_signature, in_other) = (false, false);
            payload.extend_from_slice(line);
        }
    }
    if signature.is_empty() {
        return None;
    }
    let format = format_of(&signature).unwrap_or(SignatureFormat::OpenPgp);
    Some(Signed {
        payload,
        signature,
        format,
    })
}

/// The headers of a tag object that matter here.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TagHeaders {
    /// `object`: what the tag points at.
    pub object: String,
    /// `type`: the kind of that object.
    pub kind: String,
    /// `tag`: the name the tag was made with (signed over).
    pub name: String,
    /// `tagger`, as written.
    pub tagger: Option<String>,
}

/// Reads the header lines of a tag object (up to the first empty line).
pub fn tag_headers(data: &[u8]) -> TagHeaders {
    let mut h = TagHeaders::default();
    for line in data.split(|b| *b == b'\n') {
        if line.is_empty() {
            break;
        }
        let line = String::from_utf8_lossy(line);
        let (key, value) = line.split_once(' ').unwrap_or((&line, ""));
        match key {
            "object" => h.object = value.to_string(),
            "type" => h.kind = value.to_string(),
            "tag" => h.name = value.to_string(),
            "tagger" => h.tagger = Some(value.to_string()),
            _ => {}
        }
    }
    h
}

/// One `refs/tags/gitfleet/approve/**` ref as found in the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalTag {
    /// The tag's name without `refs/tags/` (`gitfleet/approve/<request>`).
    pub name: String,
    pub kind: TagKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagKind {
    /// The ref points straight at `target` (no tag object, nothing signed).
    Lightweight { target: String },
    /// An annotated tag object.
    Annotated {
        /// The tag object's id.
        id: String,
        headers: TagHeaders,
        /// The raw tag object, signature included.
        data: Vec<u8>,
    },
    /// The ref could not be read.
    Unreadable(String),
    /// A ref whose name git would not accept (`//`, `..`, ...): written into `packed-refs` by
    /// hand or by another tool. It names no request; the other tags are read all the same.
    Malformed(String),
}

/// Errors reading the repository.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot open git repository {path}: {message}")]
    Open { path: String, message: String },
    #[error("{path}: cannot list the approval tags: {message}")]
    Refs { path: String, message: String },
    #[error("{path}: cannot read {what}: {message}")]
    Object {
        path: String,
        what: String,
        message: String,
    },
}

fn open(repo: &Path) -> Result<gix::Repository, ReadError> {
    gix::open(repo).map_err(|e| ReadError::Open {
        path: repo.display().to_string(),
        message: e.to_string(),
    })
}

/// Every tag under `refs/tags/gitfleet/approve/`, sorted by name.
pub fn read_approval_tags(repo: &Path) -> Result<Vec<ApprovalTag>, ReadError> {
    let r = open(repo)?;
    let refs_err = |message: String| ReadError::Refs {
        path: repo.display().to_string(),
        message,
    };
    let platform = r.references().map_err(|e| refs_err(e.to_string()))?;
    let prefix = format!("refs/tags/{}", crate::rollout::approval::TAG_PREFIX);
    let iter = platform
        .prefixed(prefix.as_str())
        .map_err(|e| refs_err(e.to_string()))?;
    let mut tags = Vec::new();
    for reference in iter {
        let reference = match reference {
            Ok(r) => r,
            // One bad line must not hide every other tag: gix reads on past it (git skips a
            // name with `..` with a warning, and stops at one with `//`).
            Err(e) => {
                tags.push(malformed(&e));
                continue;
            }
        };
        let full = reference.name().as_bstr().to_string();
        let name = full.strip_prefix("refs/tags/").unwrap_or(&full).to_string();
        let kind = match reference.target().try_id() {
            None => TagKind::Unreadable("a symbolic ref".into()),
            Some(id) => match r.find_object(id) {
                Err(e) => TagKind::Unreadable(e.to_string()),
                Ok(obj) if obj.kind == gix::object::Kind::Tag => TagKind::Annotated {
                    id: id.to_string(),
                    headers: tag_headers(&obj.data),
                    data: obj.data.clone(),
                },
                Ok(_) => TagKind::Lightweight {
                    target: id.to_string(),
                },
            },
        };
        tags.push(ApprovalTag { name, kind });
    }
    tags.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(tags)
}

/// The entry of a ref gix refused to read: named by the line it could not parse when it knows
/// it (a packed-refs line: `<id> <name>`), else by the error.
fn malformed(e: &gix::error::Error) -> ApprovalTag {
    let metadata = e.metadata_merged();
    let line = match metadata.get("input") {
        Some(gix::error::MetadataValue::Bytes(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        Some(gix::error::MetadataValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    let full = line
        .as_deref()
        .and_then(|l| l.split_once(' '))
        .map(|(_, name)| name.trim().to_string());
    let name = match &full {
        Some(full) => full.strip_prefix("refs/tags/").unwrap_or(full).to_string(),
        None => format!("{}(unreadable ref)", crate::rollout::approval::TAG_PREFIX),
    };
    let why = match (&line, metadata.get("line")) {
        (Some(line), Some(n)) => {
            format!(
                "packed-refs line {n} ({line:?}) names no valid ref; git would not write it: {e}"
            )
        }
        (Some(line), None) => format!("{line:?} names no valid ref: {e}"),
        _ => format!(
            "a ref under refs/tags/{} cannot be read: {e}",
            crate::rollout::approval::TAG_PREFIX
        ),
    };
    ApprovalTag {
        name,
        kind: TagKind::Malformed(why),
    }
}

/// One tag by name (`gitfleet/approve/…` or `refs/tags/…`), as [`read_approval_tags`] reads it.
pub fn read_tag(repo: &Path, name: &str) -> Result<ApprovalTag, ReadError> {
    let short = name.strip_prefix("refs/tags/").unwrap_or(name);
    read_approval_tags(repo)?
        .into_iter()
        .find(|t| t.name == short)
        .ok_or_else(|| ReadError::Object {
            path: repo.display().to_string(),
            what: format!("tag {short}"),
            message: format!(
                "no such tag under refs/tags/{}",
                crate::rollout::approval::TAG_PREFIX
            ),
        })
}

/// The commit `rev` resolves to (full id) and its signature split off (`None`: unsigned).
pub fn read_commit_signature(
    repo: &Path,
    rev: &str,
) -> Result<(String, Option<Signed>), ReadError> {
    let r = open(repo)?;
    let err = |message: String| ReadError::Object {
        path: repo.display().to_string(),
        what: format!("commit {rev}"),
        message,
    };
    let id = r
        .rev_parse_single(rev)
        .map_err(|e| err(e.to_string()))?
        .object()
        .map_err(|e| err(e.to_string()))?
        .peel_to_kind(gix::object::Kind::Commit)
        .map_err(|e| err(e.to_string()))?
        .id;
    let obj = r.find_object(id).map_err(|e| err(e.to_string()))?;
    Ok((id.to_string(), split_commit(&obj.data)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAG: &str = "object 0123456789012345678901234567890123456789\ntype commit\ntag gitfleet/approve/r-before-s\ntagger A <a@x> 1700000000 +0000\n\nApprove\n-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n";

    #[test]
    fn a_tag_splits_at_the_last_signature_start() {
        let s = split_tag(TAG.as_bytes()).unwrap();
        assert!(String::from_utf8_lossy(&s.payload).ends_with("\nApprove\n"));
        assert!(s.signature.starts_with(b"-----BEGIN SSH SIGNATURE-----\n"));
        assert_eq!(s.format, SignatureFormat::Ssh);
        // A quoted block inside the message is not the signature: the last one is.
        let twice = TAG.replace(
            "Approve\n",
            "Approve\n-----BEGIN PGP SIGNATURE-----\nquoted\n",
        );
        let s = split_tag(twice.as_bytes()).unwrap();
        assert!(String::from_utf8_lossy(&s.payload).contains("quoted"));
        assert_eq!(s.format, SignatureFormat::Ssh);
        assert_eq!(split_tag(b"object x\ntype commit\n\nno signature\n"), None);
        let h = tag_headers(TAG.as_bytes());
        assert_eq!(h.name, "gitfleet/approve/r-before-s");
        assert_eq!(h.kind, "commit");
        assert_eq!(h.object.len(), 40);
        assert_eq!(h.tagger.as_deref(), Some("A <a@x> 1700000000 +0000"));
    }

    /// A repository whose packed-refs holds lines git itself would never write (a name with
    /// `//` or `..`), beside good approval tags, packed and loose.
    fn repo_with_malformed_packed_refs() -> tempfile::TempDir {
        use crate::follow::tests::git;
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        git(repo, &["init", "-q", "-b", "main"]);
        git(repo, &["commit", "-q", "--allow-empty", "-m", "one"]);
        git(
            repo,
            &["tag", "-a", "-m", "Approve", "gitfleet/approve/r-before-a"],
        );
        git(repo, &["tag", "gitfleet/approve/r-before-b"]);
        git(repo, &["pack-refs", "--all"]);
        git(
            repo,
            &["tag", "-a", "-m", "Approve", "gitfleet/approve/r-before-c"],
        );
        let head = git(repo, &["rev-parse", "HEAD"]);
        let packed = repo.join(".git/packed-refs");
        let text = std::fs::read_to_string(&packed).unwrap();
        // Where git would have sorted them: packed-refs says it is sorted.
        let first = text.find(" refs/tags/gitfleet/approve/r-before-a").unwrap();
        let first = text[..first].rfind('\n').map_or(0, |nl| nl + 1);
        let bad = format!(
            "{head} refs/tags/gitfleet/approve//double-slash\n{head} refs/tags/gitfleet/approve/dot..dot\n"
        );
        std::fs::write(
            &packed,
            format!("{}{bad}{}", &text[..first], &text[first..]),
        )
        .unwrap();
        dir
    }

    #[test]
    fn a_malformed_approval_ref_is_reported_and_the_others_are_still_read() {
        let dir = repo_with_malformed_packed_refs();
        let tags = read_approval_tags(dir.path()).unwrap();
        let names: Vec<&str> = tags.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "gitfleet/approve//double-slash",
                "gitfleet/approve/dot..dot",
                "gitfleet/approve/r-before-a",
                "gitfleet/approve/r-before-b",
                "gitfleet/approve/r-before-c",
            ]
        );
        for bad in &tags[..2] {
            let TagKind::Malformed(why) = &bad.kind else {
                panic!("{} is not reported as malformed: {:?}", bad.name, bad.kind);
            };
            assert!(why.contains("packed-refs"), "{why}");
        }
        assert!(matches!(tags[2].kind, TagKind::Annotated { .. }));
        assert!(matches!(tags[3].kind, TagKind::Lightweight { .. }));
        assert!(matches!(tags[4].kind, TagKind::Annotated { .. }));
        let one = read_tag(dir.path(), "gitfleet/approve/r-before-a").unwrap();
        assert!(matches!(one.kind, TagKind::Annotated { .. }));
    }

    #[test]
    fn a_commit_loses_its_gpgsig_headers_from_the_payload() {
        let commit = "tree t\nparent p\nauthor A <a@x> 1 +0000\ncommitter A <a@x> 1 +0000\ngpgsig -----BEGIN SSH SIGNATURE-----\n AAAA\n -----END SSH SIGNATURE-----\ngpgsig-sha256 -----BEGIN PGP SIGNATURE-----\n BBBB\n -----END PGP SIGNATURE-----\n\nmessage\n gpgsig in the message stays\n";
        let s = split_commit(commit.as_bytes()).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&s.payload),
            "tree t\nparent p\nauthor A <a@x> 1 +0000\ncommitter A <a@x> 1 +0000\n\nmessage\n gpgsig in the message stays\n"
        );
        assert_eq!(
            String::from_utf8_lossy(&s.signature),
            "-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n"
        );
        assert_eq!(s.format, SignatureFormat::Ssh);
        assert_eq!(split_commit(b"tree t\n\nunsigned\n"), None);
    }
}
