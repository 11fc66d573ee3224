//! The daemon raises its own open-files limit: started with a soft limit of 256 (as a host's
//! default of 1,024 would be for a thousand members), it runs with the soft limit at the hard
//! limit. One test in its own binary: it lowers this process's soft limit, which every test
//! of a shared binary would inherit.

mod common;

use common::daemon::OneMember;
use rustix::process::{getrlimit, setrlimit, Resource};

/// The soft and hard "Max open files" of a process, from `/proc/<pid>/limits`.
fn open_files_of(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("a Max open files line");
    let mut fields = line["Max open files".len()..].split_whitespace();
    (
        fields.next().unwrap().to_string(),
        fields.next().unwrap().to_string(),
    )
}

#[test]
fn the_daemon_raises_its_soft_open_files_limit_to_the_hard_limit() {
    let mut limit = getrlimit(Resource::Nofile);
    if limit.maximum.is_some_and(|m| m <= 256) {
        panic!("this host's hard open-files limit ({limit:?}) leaves nothing to raise");
    }
    limit.current = Some(256);
    setrlimit(Resource::Nofile, limit).expect("lowering the soft limit");

    let fleet = OneMember::start();
    let daemon = &fleet.daemon;
    // Started, with the limit it was given (the daemon's children inherit ours).
    let (soft, hard) = open_files_of(daemon.child.id());
    assert_eq!(
        soft, hard,
        "the daemon runs with its soft limit at the hard limit"
    );
    assert_ne!(soft, "256");
}
