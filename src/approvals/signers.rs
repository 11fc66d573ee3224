//! The SSH signers trusted to approve: a file in OpenSSH's allowed_signers format, as git's
//! `gpg.ssh.allowedSignersFile` and `ssh-keygen -Y verify -f` read it (ssh-keygen(1), "ALLOWED
//! SIGNERS"):
//!
//! ```text
//! # principals   [options]                                   keytype key [comment]
//! sre@example.com namespaces="git",valid-before="20270101Z" ssh-ed25519 AAAA… laptop
//! *@dev.example.com ssh-ed25519 AAAA…
//! ```
//!
//! Principals are a comma-separated pattern list (`*`, `?`, `!negation`). Options: `namespaces=`
//! (a pattern list the signature's namespace must match; git signs with `git`), `valid-after=`
//! and `valid-before=` (`YYYYMMDD[HHMM[SS]]`, read as UTC with or without the `Z` suffix —
//! OpenSSH reads a time without `Z` as local time; a daemon's clock zone is an accident, so UTC
//! it is). `cert-authority` is refused: SSH certificates are not verified here.
//!
//! Pure: text in, entries out (the file is read by [`super::Trust::load`]).

use super::pattern;
use super::TrustError;
use std::path::Path;

/// One line of the file.
#[derive(Debug, Clone)]
pub struct SignerEntry {
    /// 1-based line in the file, for messages.
    pub line: usize,
    /// The principals field as written (a pattern list).
    pub principals: String,
    pub key: ssh_key::PublicKey,
    /// `namespaces=`: the namespaces this key may sign in; `None` is any.
    pub namespaces: Option<String>,
    /// `valid-after=`, seconds since the Unix epoch.
    pub valid_after: Option<i64>,
    /// `valid-before=`, seconds since the Unix epoch.
    pub valid_before: Option<i64>,
}

impl SignerEntry {
    /// `SHA256:…`, as `ssh-keygen -l` prints it.
    pub fn fingerprint(&self) -> String {
        self.key.fingerprint(ssh_key::HashAlg::Sha256).to_string()
    }

    /// Why this line does not trust a signature made in `namespace` at `now`, if it does not.
    pub fn refuses(&self, namespace: &str, now: i64) -> Option<Refused> {
        if let Some(ns) = &self.namespaces {
            if !pattern::matches_list(ns, namespace) {
                return Some(Refused::Namespace(ns.clone()));
            }
        }
        if let Some(after) = self.valid_after.filter(|t| now < *t) {
            return Some(Refused::NotYetValid(after));
        }
        if let Some(before) = self.valid_before.filter(|t| now > *t) {
            return Some(Refused::Expired(before));
        }
        None
    }
}

/// Why a listed key does not vouch for a signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    Namespace(String),
    NotYetValid(i64),
    Expired(i64),
}

/// A parsed allowed_signers file.
#[derive(Debug, Clone, Default)]
pub struct AllowedSigners {
    pub entries: Vec<SignerEntry>,
}

impl AllowedSigners {
    /// Parses the file's text; `file` names it in errors. Every bad line is reported at once.
    pub fn parse(file: &Path, text: &str) -> Result<Self, TrustError> {
        let mut entries = Vec::new();
        let mut problems = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            match parse_line(i + 1, line) {
                Ok(e) => entries.push(e),
                Err(message) => problems.push(format!("{}:{}: {message}", file.display(), i + 1)),
            }
        }
        if problems.is_empty() {
            Ok(Self { entries })
        } else {
            Err(TrustError::Signers(problems.join("\n")))
        }
    }

    /// The lines that list `key`.
    pub fn lines_for<'a>(
        &'a self,
        key: &'a ssh_key::public::KeyData,
    ) -> impl Iterator<Item = &'a SignerEntry> + 'a {
        self.entries.iter().filter(move |e| e.key.key_data() == key)
    }
}

/// Splits off the next field: a run up to unquoted whitespace (quotes may hold spaces).
fn next_field(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    let mut quoted = false;
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => return (&s[..i], &s[i..]),
            _ => {}
        }
    }
    (s, "")
}

fn parse_line(line: usize, text: &str) -> Result<SignerEntry, String> {
    let (principals, rest) = next_field(text);
    let principals = principals.trim_matches('"').to_string();
    if rest.trim().is_empty() {
        return Err("a principals field and a public key are required".into());
    }
    // The key comes first unless the field is an option list: try the key as OpenSSH does.
    let (options, key) = match ssh_key::PublicKey::from_openssh(rest.trim()) {
        Ok(key) => (None, key),
        Err(_) => {
            let (options, key_text) = next_field(rest);
            let key = ssh_key::PublicKey::from_openssh(key_text.trim())
                .map_err(|e| format!("not a public key ({e}): {:?}", key_text.trim()))?;
            (Some(options), key)
        }
    };
    let mut entry = SignerEntry {
        line,
        principals,
        key,
        namespaces: None,
        valid_after: None,
        valid_before: None,
    };
    for option in split_options(options.unwrap_or_default()) {
        let (name, value) = match option.split_once('=') {
            Some((n, v)) => (
                n.to_ascii_lowercase(),
                Some(v.trim_matches('"').to_string()),
            ),
            None => (option.to_ascii_lowercase(), None),
        };
        match (name.as_str(), value) {
            ("namespaces", Some(v)) => entry.namespaces = Some(v),
            ("valid-after", Some(v)) => entry.valid_after = Some(parse_time(&v)?),
            ("valid-before", Some(v)) => entry.valid_before = Some(parse_time(&v)?),
            ("cert-authority", None) => {
                return Err(
                    "cert-authority is not supported (SSH certificates are not verified): list \
                     the signers' own keys"
                        .into(),
                )
            }
            (other, _) => return Err(format!("unknown or malformed option {other:?}")),
        }
    }
    Ok(entry)
}

/// Options are comma-separated; commas inside quotes belong to the value.
fn split_options(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out.into_iter().filter(|o| !o.is_empty()).collect()
}

/// `YYYYMMDD[HHMM[SS]][Z]` to seconds since the Unix epoch, as UTC.
pub fn parse_time(s: &str) -> Result<i64, String> {
    let bad = || format!("bad time {s:?}: expected YYYYMMDD[HHMM[SS]][Z]");
    let digits = s.strip_suffix(['Z', 'z']).unwrap_or(s);
    if !matches!(digits.len(), 8 | 12 | 14) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let num =
        |r: std::ops::Range<usize>| digits.get(r).map_or(0, |d| d.parse::<i64>().unwrap_or(0));
    let (y, m, d) = (num(0..4), num(4..6), num(6..8));
    let (hh, mm, ss) = (num(8..10), num(10..12), num(12..14));
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return Err(bad());
    }
    Ok(days_from_civil(y, m, d) * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILM+rvN+ot98qgEN796jTiQfZfG1KaT0PtFDJ/XFSqti";

    fn parse(text: &str) -> Result<AllowedSigners, TrustError> {
        AllowedSigners::parse(Path::new("signers"), text)
    }

    #[test]
    fn lines_with_and_without_options() {
        let s = parse(&format!(
            "# comment\n\nalice@example.com {KEY} laptop\n\
             \"sre@example.com,ops@example.com\" namespaces=\"git,file\",valid-after=\"20240101\",valid-before=\"202701020304Z\" {KEY}\n"
        ))
        .unwrap();
        assert_eq!(s.entries.len(), 2);
        let (a, b) = (&s.entries[0], &s.entries[1]);
        assert_eq!((a.line, a.principals.as_str()), (3, "alice@example.com"));
        assert_eq!(a.namespaces, None);
        assert_eq!(b.principals, "sre@example.com,ops@example.com");
        assert_eq!(b.namespaces.as_deref(), Some("git,file"));
        assert_eq!(b.valid_after, Some(1_704_067_200));
        assert_eq!(b.valid_before, Some(1_798_859_040));
        assert!(a.fingerprint().starts_with("SHA256:"));
    }

    #[test]
    fn validity_and_namespaces_refuse() {
        let s = parse(&format!(
            "a namespaces=\"file\" {KEY}\nb valid-after=\"20300101\" {KEY}\nc valid-before=\"20200101\" {KEY}\nd {KEY}\n"
        ))
        .unwrap();
        let now = 1_750_000_000;
        assert_eq!(
            s.entries[0].refuses("git", now),
            Some(Refused::Namespace("file".into()))
        );
        assert!(matches!(
            s.entries[1].refuses("git", now),
            Some(Refused::NotYetValid(_))
        ));
        assert!(matches!(
            s.entries[2].refuses("git", now),
            Some(Refused::Expired(_))
        ));
        assert_eq!(s.entries[3].refuses("git", now), None);
    }

    #[test]
    fn every_bad_line_is_named() {
        let e = parse(&format!(
            "ok {KEY}\nlonely\nx cert-authority {KEY}\ny valid-before=\"tomorrow\" {KEY}\nz ssh-ed25519 nope\n"
        ))
        .unwrap_err()
        .to_string();
        for want in [
            "signers:2: a principals field and a public key are required",
            "signers:3: cert-authority is not supported",
            "signers:4: bad time \"tomorrow\"",
            "signers:5: not a public key",
        ] {
            assert!(e.contains(want), "{want} missing from {e}");
        }
    }

    #[test]
    fn times() {
        assert_eq!(parse_time("19700101"), Ok(0));
        assert_eq!(parse_time("19700102Z"), Ok(86_400));
        assert_eq!(parse_time("20000301000001"), Ok(951_868_801));
        assert!(parse_time("2000013").is_err());
        assert!(parse_time("20001301").is_err());
    }
}
