//! Who may write a placement to a member. Two gitfleet processes pushing the same
//! placement to the same member at once (two `gitfleet apply` of different revisions, or an
//! `apply` beside the daemon) would interleave their writes and leave the member matching
//! neither. The placement's record ConfigMap on the member is the lock: a writer marks it with
//! its identity and an expiry before writing anything of the placement, and clears the mark with
//! its last record write, every write carrying the record's resourceVersion as a precondition.
//! Whoever loses the race, or finds the mark of a live writer, writes nothing of that placement
//! and says who holds it. Pure: the marks, and the decision whether one may be taken.

use crate::timestamp;
use serde_json::Value;
use std::time::{Duration, SystemTime};

/// The writer's identity (see [`Identity`]).
pub const HOLDER_ANNOTATION: &str = "gitfleet.io/writer";
/// The commit the writer is pushing (shown to whoever is refused).
pub const COMMIT_ANNOTATION: &str = "gitfleet.io/writer-commit";
/// RFC 3339; after it the mark is stale (its writer crashed or lost the member).
pub const UNTIL_ANNOTATION: &str = "gitfleet.io/writer-until";
/// The host and pid of the writer, to recognise a crashed writer on this host before expiry.
pub const PROCESS_ANNOTATION: &str = "gitfleet.io/writer-process";

/// A writer's identity. The daemon's is stable across its restarts (one live daemon per state
/// directory, ensured by the directory lock; or one leader of a Lease), so a daemon killed mid-push takes its own mark
/// back when it comes up again; `gitfleet apply`'s is the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub holder: String,
    pub process: Process,
}

/// Where a writer runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub host: String,
    pub pid: u32,
}

impl Process {
    pub fn current() -> Process {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "unknown-host".into());
        Process {
            host,
            pid: std::process::id(),
        }
    }

    fn mark(&self) -> String {
        format!("{}/{}", self.host, self.pid)
    }

    fn parse(text: &str) -> Option<Process> {
        let (host, pid) = text.rsplit_once('/')?;
        Some(Process {
            host: host.to_string(),
            pid: pid.parse().ok()?,
        })
    }
}

impl Identity {
    /// This process, for one-shot commands (`gitfleet apply`).
    pub fn process(command: &str) -> Identity {
        let process = Process::current();
        Identity {
            holder: format!("{command} {}", process.mark()),
            process,
        }
    }

    /// A daemon, stable across restarts of the same daemon (`name` says which: its state
    /// directory, or its Lease).
    pub fn daemon(name: &str) -> Identity {
        Identity {
            holder: format!("daemon {name}"),
            process: Process::current(),
        }
    }
}

/// A mark found on a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub holder: String,
    pub commit: String,
    pub until: SystemTime,
    pub process: Option<Process>,
}

impl Mark {
    pub fn new(who: &Identity, commit: &str, now: SystemTime, ttl: Duration) -> Mark {
        Mark {
            holder: who.holder.clone(),
            commit: commit.to_string(),
            until: now + ttl,
            process: Some(who.process.clone()),
        }
    }

    /// The annotations that carry the mark.
    pub fn annotations(&self) -> [(&'static str, String); 4] {
        [
            (HOLDER_ANNOTATION, self.holder.clone()),
            (COMMIT_ANNOTATION, self.commit.clone()),
            (UNTIL_ANNOTATION, self.until_text()),
            (
                PROCESS_ANNOTATION,
                self.process.as_ref().map(Process::mark).unwrap_or_default(),
            ),
        ]
    }

    /// Its expiry as RFC 3339, as the annotation carries it and messages show it.
    pub fn until_text(&self) -> String {
        timestamp::format_unix_seconds(unix_seconds(self.until))
    }

    /// The mark in a record's annotations, if any. A mark whose expiry cannot be read counts as
    /// expired: a damaged mark must not lock a placement out for ever.
    pub fn read(annotations: &Value) -> Option<Mark> {
        let text = |k: &str| annotations.get(k).and_then(Value::as_str);
        let holder = text(HOLDER_ANNOTATION)?.to_string();
        Some(Mark {
            holder,
            commit: text(COMMIT_ANNOTATION).unwrap_or_default().to_string(),
            until: text(UNTIL_ANNOTATION)
                .and_then(timestamp::parse_unix_seconds)
                .and_then(|s| u64::try_from(s).ok())
                .map_or(SystemTime::UNIX_EPOCH, |s| {
                    SystemTime::UNIX_EPOCH + Duration::from_secs(s)
                }),
            process: text(PROCESS_ANNOTATION).and_then(Process::parse),
        })
    }
}

fn unix_seconds(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Whether `me` may write a placement whose record carries `mark`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Nobody holds it, or `me` does (a restarted daemon), or the holder is gone.
    Free,
    /// A live writer holds it.
    Held(Mark),
}

/// Decides on a record's mark. `alive` says whether a pid on this host still runs.
pub fn claim(
    mark: Option<&Mark>,
    me: &Identity,
    now: SystemTime,
    alive: impl Fn(u32) -> bool,
) -> Claim {
    let Some(mark) = mark else {
        return Claim::Free;
    };
    if mark.holder == me.holder || mark.until <= now {
        return Claim::Free;
    }
    // A writer that crashed on this very host is known to be gone before its mark expires.
    if let Some(p) = &mark.process {
        if p.host == me.process.host && p.pid != me.process.pid && !alive(p.pid) {
            return Claim::Free;
        }
    }
    Claim::Held(mark.clone())
}

/// Whether a process of this host is running (Linux: `/proc/PID`; elsewhere assumed running, so
/// only the expiry frees its marks).
pub fn pid_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    } else {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn me() -> Identity {
        Identity {
            holder: "apply host-a/10".into(),
            process: Process {
                host: "host-a".into(),
                pid: 10,
            },
        }
    }

    fn other(host: &str, pid: u32) -> Identity {
        Identity {
            holder: format!("apply {host}/{pid}"),
            process: Process {
                host: host.into(),
                pid,
            },
        }
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
    }

    #[test]
    fn a_mark_round_trips_through_annotations() {
        let mark = Mark::new(&me(), "abc123", at(0), Duration::from_secs(300));
        let annotations: serde_json::Map<String, Value> = mark
            .annotations()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into()))
            .collect();
        assert_eq!(Mark::read(&Value::Object(annotations)), Some(mark));
        assert_eq!(Mark::read(&json!({})), None);
    }

    #[test]
    fn a_live_writers_mark_holds_until_it_expires() {
        let mark = Mark::new(&other("host-b", 7), "c", at(0), Duration::from_secs(60));
        let alive = |_| true;
        assert_eq!(
            claim(Some(&mark), &me(), at(59), alive),
            Claim::Held(mark.clone())
        );
        assert_eq!(claim(Some(&mark), &me(), at(60), alive), Claim::Free);
        assert_eq!(claim(None, &me(), at(0), alive), Claim::Free);
    }

    #[test]
    fn ones_own_mark_is_free_to_take_back() {
        let mark = Mark::new(&me(), "c", at(0), Duration::from_secs(60));
        assert_eq!(claim(Some(&mark), &me(), at(1), |_| true), Claim::Free);
    }

    #[test]
    fn a_crashed_writer_on_this_host_frees_its_mark_at_once() {
        let mark = Mark::new(&other("host-a", 7), "c", at(0), Duration::from_secs(60));
        assert_eq!(claim(Some(&mark), &me(), at(1), |_| false), Claim::Free);
        assert_eq!(
            claim(Some(&mark), &me(), at(1), |p| p == 7),
            Claim::Held(mark.clone())
        );
        // On another host its liveness cannot be known: only the expiry frees it.
        let far = Mark::new(&other("host-b", 7), "c", at(0), Duration::from_secs(60));
        assert_eq!(
            claim(Some(&far), &me(), at(1), |_| false),
            Claim::Held(far.clone())
        );
    }

    #[test]
    fn an_unreadable_expiry_counts_as_expired() {
        let mark = Mark::read(&json!({HOLDER_ANNOTATION: "x", UNTIL_ANNOTATION: "soon"})).unwrap();
        assert_eq!(claim(Some(&mark), &me(), at(0), |_| true), Claim::Free);
    }
}
