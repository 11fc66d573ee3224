//! Probing members one by one (`gitfleet run`), so that a slow member's probe does not hold up
//! the reconcile, and each no more often than it reports.
//!
//! A member is probed again once its last answer is as old as its heartbeat period
//! ([`Member::heartbeat`]: `MemberCluster.spec.heartbeatPeriodSeconds`, or a `ManagedCluster`'s
//! `leaseDurationSeconds`, 60 s by default), as KubeFleet's member agent reports its properties
//! every heartbeat; a member whose last answer was unhealthy is probed again after
//! [`RETRY_UNHEALTHY`]. Probes fall due between reconciles too ([`Probes::next_due`],
//! [`Probes::start_due`]): an idle daemon probes each member once a period and looks again only
//! when an answer changes what is known.
//!
//! Each reconcile starts the probes that are due, and waits for their answers at most
//! [`PROBE_WAIT`]; a member whose probe is not back by then (or is still running, or not due)
//! counts with its last answer. A member that never answered is unhealthy. Only the first
//! reconcile after the start waits for every first answer (each probe ends by itself within
//! `--member-timeout`), so that a daemon that just started does not hold back work for members
//! that merely answer slower than the short wait.
//!
//! An answer that comes after the wait is recorded when the loop receives it ([`Probes::answered`]);
//! one that changes what is known of the member asks for a look.
//!
//! A push is a probe too: one that could not reach or read a member marks it unhealthy at once
//! and makes its probe due now ([`Probes::push_failed`]), so that a member that went down, or
//! answers errors or garbage, is not shown healthy until its next heartbeat; the probe's answer
//! brings it back.
//!
//! It must not know how a member is probed (the [`Deliverer`] does) nor what the inventory
//! is used for.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::time::Instant;

use super::Deliverer;
use crate::fast_hash::{HashMap, HashSet};
use crate::members::inventory::Member;
use crate::schedule::{Inventory, InventoryCluster};

/// How long a reconcile waits for the probes it started before it goes on with the last
/// answers of the members that are slower.
pub const PROBE_WAIT: Duration = Duration::from_millis(200);

/// How soon a member whose last answer was unhealthy is probed again.
pub const RETRY_UNHEALTHY: Duration = Duration::from_secs(5);

/// Probes falling due sooner than this after the last start of due probes wait for the next
/// ([`Probes::next_start`]): each start looks at every member, and in a large fleet probes
/// fall due many times a second. A probe is at most this late.
pub const PROBES_GAP: Duration = Duration::from_millis(250);

/// One member's answer (or why there is none).
pub type Answer = Arc<InventoryCluster>;

/// A member's last answer, and when it came.
struct Last {
    answer: Answer,
    at: Instant,
    /// Unix seconds: what the rollout state remembers of a healthy answer.
    unix: u64,
}

/// The members' last answers and the probes running.
pub struct Probes<D: Deliverer + 'static> {
    deliverer: Arc<D>,
    // Hashed: every start of due probes looks each member up in all three.
    last: HashMap<String, Last>,
    running: HashSet<String>,
    /// Members to probe at once (a push failed on them), whatever their last answer.
    asked: HashSet<String>,
    /// The members of the last reconcile: those probed when probes fall due between reconciles.
    members: Arc<[Member]>,
    /// Each of `members` by name, with its heartbeat period.
    heartbeats: std::collections::HashMap<String, Duration>,
    /// The inventory of `members` from their last answers, while no answer changed it: the
    /// daemon looks many times between probes, and this is what it schedules with.
    built: Option<Arc<Inventory>>,
    answers: UnboundedSender<Answer>,
    received: UnboundedReceiver<Answer>,
    /// The first round waits for every answer.
    first: bool,
    /// [`Probes::next_due`] as last computed, until anything it depends on changes: the
    /// daemon asks before every event it waits for, and a large fleet's members make that a
    /// scan of thousands of lookups.
    next_due: Option<Option<Instant>>,
    /// When [`Probes::start_due`] last ran.
    started: Option<Instant>,
}

impl<D: Deliverer + 'static> Probes<D> {
    /// Probes through `deliverer`.
    pub fn new(deliverer: Arc<D>) -> Probes<D> {
        let (answers, received) = unbounded_channel();
        Probes {
            deliverer,
            last: HashMap::default(),
            running: HashSet::default(),
            asked: HashSet::default(),
            members: Arc::new([]),
            heartbeats: Default::default(),
            built: None,
            answers,
            received,
            first: true,
            next_due: None,
            started: None,
        }
    }

    /// The next answer that came after its round's wait (for the loop, which records it with
    /// [`Probes::answered`]).
    pub async fn late_answer(&mut self) -> Answer {
        match self.received.recv().await {
            Some(a) => a,
            // Never: the sender lives in `self`.
            None => std::future::pending().await,
        }
    }

    /// When `m` is to be probed next: at once when it never answered; a heartbeat after a
    /// healthy answer, [`RETRY_UNHEALTHY`] after another. `None` while its probe runs.
    fn due_at(&self, m: &Member, now: Instant) -> Option<Instant> {
        self.due_of(&m.target.name, m.heartbeat, now)
    }

    fn due_of(&self, name: &str, heartbeat: Duration, now: Instant) -> Option<Instant> {
        if self.running.contains(name) {
            return None;
        }
        if self.asked.contains(name) {
            return Some(now);
        }
        Some(match self.last.get(name) {
            None => now,
            Some(l) if l.answer.healthy => l.at + heartbeat,
            Some(l) => l.at + RETRY_UNHEALTHY,
        })
    }

    /// Keeps [`Probes::next_due`] exact after `name`'s probe fell due sooner than it was (an
    /// answer to a probe that ran, a push that failed, an ask): the earliest can only be
    /// that one's or what it was. Answers stream in by the thousand in a large fleet, and
    /// each would otherwise make the next look for the earliest scan every member.
    fn due_sooner(&mut self, name: &str) {
        let Some(earliest) = self.next_due else {
            return;
        };
        let Some(heartbeat) = self.heartbeats.get(name).copied() else {
            // Not a member of the last reconcile: it is not probed between reconciles.
            return;
        };
        if let Some(at) = self.due_of(name, heartbeat, Instant::now()) {
            self.next_due = Some(Some(earliest.map_or(at, |e| e.min(at))));
        }
    }

    /// When the next probe of the last reconcile's members falls due (`None`: none before a
    /// probe running now answers, or no reconcile yet). A probe due at once may be given as
    /// due at the moment this was first asked: a time passed, so just as due.
    pub fn next_due(&mut self) -> Option<Instant> {
        if let Some(due) = self.next_due {
            return due;
        }
        let due = self.scan_next_due(Instant::now());
        self.next_due = Some(due);
        due
    }

    /// When the loop should next start the due probes: when the next falls due, but not sooner
    /// than [`PROBES_GAP`] after the last start.
    pub fn next_start(&mut self) -> Option<Instant> {
        let due = self.next_due()?;
        Some(self.started.map_or(due, |s| due.max(s + PROBES_GAP)))
    }

    fn scan_next_due(&self, now: Instant) -> Option<Instant> {
        self.members
            .iter()
            .filter_map(|m| self.due_at(m, now))
            .min()
    }

    /// Starts the probes that are due; the names of the members probed.
    ///
    /// One pass finds them and when the first of the others falls due (those started now run,
    /// and fall due again only when they answer): in a large fleet probes fall due many times
    /// a second, and each start scanned every member twice.
    pub fn start_due(&mut self) -> BTreeSet<String> {
        let now = Instant::now();
        self.started = Some(now);
        let mut due: Vec<Member> = Vec::new();
        let mut next: Option<Instant> = None;
        for m in self.members.iter() {
            match self.due_at(m, now) {
                Some(at) if at <= now => due.push(m.clone()),
                Some(at) => next = Some(next.map_or(at, |n| n.min(at))),
                None => {}
            }
        }
        let mut started = BTreeSet::new();
        self.next_due = Some(next);
        for m in due {
            let name = m.target.name.clone();
            self.asked.remove(&name);
            self.running.insert(name.clone());
            started.insert(name);
            let (deliverer, tx) = (self.deliverer.clone(), self.answers.clone());
            tokio::spawn(async move {
                let name = m.target.name.clone();
                let answer = match deliverer.probe(std::slice::from_ref(&m)).await {
                    Ok(inv) => inv.clusters.into_iter().find(|c| c.name == name),
                    Err(e) => Some(Arc::new(unhealthy(&name, format!("{e:#}")))),
                }
                .unwrap_or_else(|| Arc::new(unhealthy(&name, "the probe reported nothing".into())));
                let _ = tx.send(answer);
            });
        }
        started
    }

    /// The inventory of `members`: the probes that are due are started, and their answers
    /// awaited at most [`PROBE_WAIT`] (on the first round: until all are in).
    /// The same answers give the same `Arc` back.
    pub async fn inventory(&mut self, members: &Arc<[Member]>) -> Arc<Inventory> {
        if !Arc::ptr_eq(&self.members, members) {
            if *self.members != **members {
                self.built = None;
            }
            self.members = members.clone();
            self.heartbeats = members
                .iter()
                .map(|m| (m.target.name.clone(), m.heartbeat))
                .collect();
            self.next_due = None;
        }
        let mut awaited = self.start_due();
        let first = self.first;
        let wait = async move {
            if first {
                std::future::pending::<()>().await
            } else {
                tokio::time::sleep_until(Instant::now() + PROBE_WAIT).await
            }
        };
        tokio::pin!(wait);
        while !awaited.is_empty() {
            tokio::select! {
                answer = self.received.recv() => match answer {
                    Some(a) => {
                        awaited.remove(&a.name);
                        self.answered(a);
                    }
                    None => break,
                },
                () = &mut wait => break,
            }
        }
        self.first = false;
        if let Some(built) = &self.built {
            return built.clone();
        }
        let clusters = members
            .iter()
            .map(|m| {
                let name = &m.target.name;
                self.last
                    .get(name)
                    .map(|l| l.answer.clone())
                    .unwrap_or_else(|| {
                        let why = format!("no answer yet (waited {PROBE_WAIT:?})");
                        Arc::new(unhealthy(name, why))
                    })
            })
            .collect();
        let built = Arc::new(Inventory { clusters });
        self.built = Some(built.clone());
        built
    }

    /// When `member`'s last answer came, in Unix seconds.
    pub fn answered_at(&self, member: &str) -> Option<u64> {
        self.last.get(member).map(|l| l.unix)
    }

    /// Records an answer; whether it changes what is known of the member (then the rollout
    /// should look again).
    pub fn answered(&mut self, answer: Answer) -> bool {
        let ran = self.running.remove(&answer.name);
        let changed = self.last.get(&answer.name).map(|l| &l.answer) != Some(&answer);
        if changed {
            self.built = None;
        }
        let last = Last {
            answer,
            at: Instant::now(),
            unix: crate::timestamp::now_unix(),
        };
        let name = last.answer.name.clone();
        self.last.insert(name.clone(), last);
        if ran {
            self.due_sooner(&name);
        } else {
            // An answer no probe waited for pushes its member's time back.
            self.next_due = None;
        }
        changed
    }
}

impl<D: Deliverer + 'static> Probes<D> {
    /// Makes `member`'s probe due now (a push to it runs long).
    pub fn ask(&mut self, member: &str) {
        self.asked.insert(member.to_string());
        self.due_sooner(member);
    }

    /// A push could not reach or read `member`: it is unhealthy from now on (what the push found
    /// stands for its answer) and probed at once; whether that changes what is known.
    pub fn push_failed(&mut self, member: &str, error: &str) -> bool {
        self.asked.insert(member.to_string());
        let mut answer = unhealthy(member, format!("push failed: {error}"));
        // Its properties stay as last probed: only its health is news.
        if let Some(last) = self.last.get(member) {
            answer.properties = last.answer.properties.clone();
            answer.add_on_scores = last.answer.add_on_scores.clone();
            answer.namespaces = last.answer.namespaces.clone();
        }
        // An answer of a probe running now is newer than the push's failure only if it came
        // later: it will, and is recorded then.
        let changed = self.last.get(member).is_none_or(|l| l.answer.healthy);
        if changed {
            self.built = None;
            let last = Last {
                answer: Arc::new(answer),
                at: Instant::now(),
                unix: crate::timestamp::now_unix(),
            };
            self.last.insert(member.to_string(), last);
        }
        self.due_sooner(member);
        changed
    }
}

fn unhealthy(name: &str, error: String) -> InventoryCluster {
    InventoryCluster {
        name: name.to_string(),
        healthy: false,
        error: Some(error),
        properties: BTreeMap::new(),
        add_on_scores: BTreeMap::new(),
        namespaces: None,
        namespace_collection_degraded: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::members::MemberTarget;
    use crate::rollout::Work;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    /// Members that answer their probe after the delay they are given.
    #[derive(Default)]
    struct Answers {
        delay: Mutex<BTreeMap<String, Duration>>,
        down: Mutex<BTreeSet<String>>,
        probes: AtomicUsize,
    }

    impl Deliverer for Answers {
        async fn probe(&self, members: &[Member]) -> anyhow::Result<Inventory> {
            assert_eq!(members.len(), 1, "one member per probe");
            self.probes.fetch_add(1, Ordering::SeqCst);
            let name = members[0].target.name.clone();
            let delay = self.delay.lock().unwrap().get(&name).copied();
            if let Some(d) = delay {
                tokio::time::sleep(d).await;
            }
            let healthy = !self.down.lock().unwrap().contains(&name);
            let mut c = unhealthy(&name, "connection refused".into());
            if healthy {
                c.healthy = true;
                c.error = None;
                c.properties.insert("probed".into(), "yes".into());
            }
            Ok(Inventory {
                clusters: vec![Arc::new(c)],
            })
        }

        async fn deliver(
            &self,
            _: Vec<Work>,
            _: &str,
            _: &BTreeMap<String, String>,
        ) -> crate::daemon::Delivery {
            unreachable!("probes do not push")
        }
    }

    /// Members probed at every round (a heartbeat of zero).
    fn members() -> Arc<[Member]> {
        members_every(Duration::ZERO)
    }

    fn members_every(heartbeat: Duration) -> Arc<[Member]> {
        ["m1", "m2", "m3"]
            .map(|m| Member {
                target: MemberTarget {
                    name: m.into(),
                    context: m.into(),
                },
                declared: BTreeMap::new(),
                heartbeat,
            })
            .into()
    }

    fn health(inv: &Inventory) -> Vec<(String, bool)> {
        inv.clusters
            .iter()
            .map(|c| (c.name.clone(), c.healthy))
            .collect()
    }

    fn pairs(list: [(&str, bool); 3]) -> Vec<(String, bool)> {
        list.map(|(n, h)| (n.to_string(), h)).to_vec()
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_round_waits_for_every_answer_later_ones_use_the_last_answer_of_a_slow_member(
    ) {
        let fleet = Arc::new(Answers::default());
        fleet
            .delay
            .lock()
            .unwrap()
            .insert("m1".into(), Duration::from_secs(3));
        let mut probes = Probes::new(fleet.clone());
        let t0 = Instant::now();
        let inv = probes.inventory(&members()).await;
        assert_eq!(
            t0.elapsed(),
            Duration::from_secs(3),
            "the first round waits"
        );
        assert_eq!(
            health(&inv),
            pairs([("m1", true), ("m2", true), ("m3", true)])
        );

        // m1 is as slow again: the round goes on after the short wait with m1's last answer.
        let t1 = Instant::now();
        let inv = probes.inventory(&members()).await;
        assert_eq!(t1.elapsed(), PROBE_WAIT);
        assert_eq!(
            health(&inv),
            pairs([("m1", true), ("m2", true), ("m3", true)])
        );
        assert_eq!(inv.clusters[0].properties["probed"], "yes");
        // Its probe still runs: the next round does not start another, nor wait for it.
        let t2 = Instant::now();
        probes.inventory(&members()).await;
        assert_eq!(t2.elapsed(), Duration::ZERO);
        assert_eq!(fleet.probes.load(Ordering::SeqCst), 3 + 3 + 2);

        // Its late answer arrives on the loop's receiver; the same as before: no look needed.
        let late = probes.late_answer().await;
        assert_eq!(late.name, "m1");
        assert!(!probes.answered(late));
    }

    /// A healthy member is probed once per heartbeat period however often the daemon
    /// looks, an unhealthy one again after [`RETRY_UNHEALTHY`]; probes fall due between looks.
    #[tokio::test(start_paused = true)]
    async fn due_probes_start_no_sooner_than_the_gap_after_the_last_start() {
        let fleet = Arc::new(Answers::default());
        let members = members_every(Duration::from_secs(60));
        let mut probes = Probes::new(fleet.clone());
        assert_eq!(probes.next_start(), None, "no reconcile yet");
        probes.inventory(&members).await;
        let started = Instant::now();
        // A push failed: m1 is due at once, but waits for the gap after the last start.
        assert!(probes.push_failed("m1", "down"));
        assert_eq!(probes.next_due(), Some(started));
        assert_eq!(probes.next_start(), Some(started + PROBES_GAP));
        // Past the gap, due at once.
        tokio::time::advance(PROBES_GAP * 2).await;
        assert!(probes.next_start().is_some_and(|at| at <= Instant::now()));
        assert_eq!(probes.start_due(), BTreeSet::from(["m1".to_string()]));
    }

    #[tokio::test(start_paused = true)]
    async fn members_are_probed_once_per_heartbeat_and_unhealthy_ones_sooner() {
        let fleet = Arc::new(Answers::default());
        fleet.down.lock().unwrap().insert("m3".into());
        let heartbeat = Duration::from_secs(60);
        let members = members_every(heartbeat);
        let mut probes = Probes::new(fleet.clone());
        let t0 = Instant::now();
        probes.inventory(&members).await;
        assert_eq!(fleet.probes.load(Ordering::SeqCst), 3);
        // Looks in between use the last answers and probe nothing, without waiting.
        tokio::time::advance(Duration::from_secs(1)).await;
        let t1 = Instant::now();
        let inv = probes.inventory(&members).await;
        assert_eq!(t1.elapsed(), Duration::ZERO);
        assert_eq!(fleet.probes.load(Ordering::SeqCst), 3);
        assert_eq!(
            health(&inv),
            pairs([("m1", true), ("m2", true), ("m3", false)])
        );
        // The unhealthy member falls due first; it is back, and its answer is news.
        assert_eq!(probes.next_due(), Some(t0 + RETRY_UNHEALTHY));
        fleet.down.lock().unwrap().clear();
        tokio::time::sleep_until(t0 + RETRY_UNHEALTHY).await;
        assert_eq!(probes.start_due(), BTreeSet::from(["m3".to_string()]));
        assert_eq!(
            probes.next_due(),
            Some(t0 + heartbeat),
            "m3 runs: m1's is next"
        );
        let late = probes.late_answer().await;
        assert!(probes.answered(late));
        // The healthy ones after a heartbeat, m3 a heartbeat after its answer.
        assert_eq!(probes.next_due(), Some(t0 + heartbeat));
        tokio::time::sleep_until(t0 + heartbeat).await;
        assert_eq!(
            probes.start_due(),
            BTreeSet::from(["m1".to_string(), "m2".to_string()])
        );
        assert_eq!(probes.next_due(), Some(t0 + RETRY_UNHEALTHY + heartbeat));
        for _ in 0..2 {
            let late = probes.late_answer().await;
            assert!(!probes.answered(late), "the same answer: no look needed");
        }
        assert_eq!(fleet.probes.load(Ordering::SeqCst), 6);
        // A member asked for (a push to it runs long) is due at once, however recent its answer.
        assert_eq!(probes.next_due(), Some(t0 + RETRY_UNHEALTHY + heartbeat));
        probes.ask("m1");
        assert_eq!(probes.next_due(), Some(Instant::now()));
    }

    /// The earliest due time is kept as answers, asks and failed pushes come, not scanned
    /// for each: it must stay what a scan of every member says.
    #[tokio::test(start_paused = true)]
    async fn the_next_due_probe_kept_up_to_date_is_the_one_a_scan_finds() {
        let fleet = Arc::new(Answers::default());
        let members: Arc<[Member]> = (1..=6)
            .map(|i| Member {
                target: MemberTarget {
                    name: format!("m{i}"),
                    context: format!("m{i}"),
                },
                declared: BTreeMap::new(),
                heartbeat: Duration::from_secs(10 * i),
            })
            .collect();
        fleet
            .delay
            .lock()
            .unwrap()
            .insert("m4".into(), Duration::from_secs(7));
        fleet.down.lock().unwrap().insert("m2".into());
        let mut probes = Probes::new(fleet.clone());
        let check = |probes: &mut Probes<Answers>, when: &str| {
            let now = Instant::now();
            let (kept, scanned) = (probes.next_due(), probes.scan_next_due(now));
            // Due at once is due at once, whenever it was first asked.
            let due_now = |d: Option<Instant>| d.is_some_and(|d| d <= now);
            assert!(
                kept == scanned || (due_now(kept) && due_now(scanned)),
                "{when}: kept {kept:?}, a scan finds {scanned:?}"
            );
        };
        probes.inventory(&members).await;
        check(&mut probes, "after the first round");
        for step in 0..40u64 {
            tokio::time::advance(Duration::from_secs(3)).await;
            match step % 5 {
                0 => {
                    probes.start_due();
                }
                1 => probes.ask(&format!("m{}", step % 6 + 1)),
                2 => {
                    probes.push_failed(&format!("m{}", step % 6 + 1), "refused");
                }
                _ => {}
            }
            check(&mut probes, &format!("step {step}"));
            while let Ok(a) = probes.received.try_recv() {
                probes.answered(a);
                check(&mut probes, &format!("an answer at step {step}"));
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_member_that_never_answered_is_unhealthy_and_its_first_answer_asks_for_a_look() {
        let fleet = Arc::new(Answers::default());
        let mut probes = Probes::new(fleet.clone());
        probes.inventory(&members()).await;
        fleet.down.lock().unwrap().insert("m2".into());
        let inv = probes.inventory(&members()).await;
        assert_eq!(
            health(&inv),
            pairs([("m1", true), ("m2", false), ("m3", true)])
        );
        assert_eq!(inv.clusters[1].error.as_deref(), Some("connection refused"));

        // A new member that does not answer within the wait is unhealthy until it does.
        let mut more = members().to_vec();
        more.push(Member {
            target: MemberTarget {
                name: "m4".into(),
                context: "m4".into(),
            },
            declared: BTreeMap::new(),
            heartbeat: Duration::from_secs(60),
        });
        fleet
            .delay
            .lock()
            .unwrap()
            .insert("m4".into(), Duration::from_secs(1));
        let inv = probes.inventory(&more.into()).await;
        let m4 = &inv.clusters[3];
        assert!(!m4.healthy);
        assert!(m4.error.as_deref().unwrap().starts_with("no answer yet"));
        let late = probes.late_answer().await;
        assert!(
            probes.answered(late),
            "m4's first answer changes what is known"
        );
    }
}
