//! The daemon's open-files limit. A daemon holds a connection per member, its status API's
//! clients (up to the server's connection cap) and its state files at once: 1,000 members and
//! a full connection cap pass the soft limit of 1,024 that many hosts still give a process. As
//! Go's runtime does for every Go server (since Go 1.19), the soft limit is raised to the hard
//! limit at start; an administrator's lower hard limit is respected.

use rustix::process::{getrlimit, setrlimit, Resource};

/// What the limit was and what it is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raised {
    pub before: Option<u64>,
    pub now: Option<u64>,
}

/// Raises the soft open-files limit to the hard limit. `None` stands for unlimited.
pub fn raise() -> std::io::Result<Raised> {
    let mut limit = getrlimit(Resource::Nofile);
    let before = limit.current;
    if limit.current == limit.maximum {
        return Ok(Raised {
            before,
            now: before,
        });
    }
    limit.current = limit.maximum;
    setrlimit(Resource::Nofile, limit)?;
    Ok(Raised {
        before,
        now: getrlimit(Resource::Nofile).current,
    })
}

/// Raises the limit and says so in the log; a failure is a warning (the daemon still runs, with
/// fewer connections possible). `connection_cap` is the status API's.
pub fn raise_and_log(connection_cap: usize) {
    match raise() {
        Ok(r) => {
            tracing::debug!(before = ?r.before, now = ?r.now, "open-files limit");
            // Room for the status API's clients and about a thousand members.
            let wanted = (connection_cap + 1_024) as u64;
            if r.now.is_some_and(|n| n < wanted) {
                tracing::warn!(limit = ?r.now, wanted, "the open-files limit leaves room for fewer than a thousand members beside a full status API: raise the hard limit (ulimit -Hn, systemd's LimitNOFILE=)");
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot raise the open-files limit"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_limit() {
        let before = getrlimit(Resource::Nofile);
        let r = raise().expect("raising within the hard limit is always allowed");
        let after = getrlimit(Resource::Nofile);
        assert_eq!(after.current, before.maximum);
        assert_eq!(
            after.maximum, before.maximum,
            "the hard limit is not touched"
        );
        assert_eq!(r.now, after.current);
        // Raised already: a second call changes nothing.
        assert_eq!(
            raise().unwrap(),
            Raised {
                before: r.now,
                now: r.now
            }
        );
    }
}
