//! When a healthy member is probed next: about a heartbeat after its last answer, drawn toward a
//! slot of its own in the heartbeat period.
//!
//! A daemon that starts probes every member at once; probed again exactly a heartbeat after
//! each answer, they would stay together for as long as it runs, and every heartbeat a fleet's
//! worth of probes (ten thousand members' reads, and their owners' and the leader's work on
//! the answers) would fall in the same few seconds. KubeFleet's member agents each keep their
//! own timer, so a hub hears from its members evenly. Here each member has a slot in the period,
//! from a digest of its name, and its next probe comes up to a quarter heartbeat sooner than a
//! heartbeat, enough to reach the slot: members that start together are spread within four
//! heartbeats, and a member in its slot is probed once a heartbeat. A member is never probed
//! later than a heartbeat after its last answer.
//!
//! Pure: times are durations since an origin the caller keeps.

use std::time::Duration;

use sha2::{Digest as _, Sha256};

/// A member's place in the heartbeat period, as a fraction of 2^32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot(u32);

impl Slot {
    /// The slot of the member named `name`: the same in every process and build.
    pub fn of(name: &str) -> Slot {
        // A cryptographic digest: names that differ in a character or two (`m-1`, `m-2`) land
        // anywhere in the period; a simple multiplicative hash leaves them bunched.
        let digest = Sha256::digest(name.as_bytes());
        Slot(u32::from_le_bytes(
            digest[..4].try_into().expect("four bytes"),
        ))
    }

    /// Where the slot falls in a period of `heartbeat`.
    fn offset(self, heartbeat: Duration) -> u128 {
        (heartbeat.as_nanos() * u128::from(self.0)) >> 32
    }
}

/// When a member in `slot` that answered healthy at `answered` is probed next: a heartbeat
/// later, less how far that is past the slot, by at most a quarter heartbeat.
pub fn next_probe(answered: Duration, heartbeat: Duration, slot: Slot) -> Duration {
    let period = heartbeat.as_nanos();
    let later = answered + heartbeat;
    if period == 0 {
        return later;
    }
    let past_slot = (later.as_nanos() + period - slot.offset(heartbeat)) % period;
    let sooner = past_slot.min(period / 4);
    later - Duration::from_nanos(sooner as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    /// The probes of a member that answers `latency` after each starts, from a first answer at
    /// `first`: the times its probes start.
    fn starts(slot: Slot, first: Duration, latency: Duration, n: usize) -> Vec<Duration> {
        let mut answered = first;
        (0..n)
            .map(|_| {
                let start = next_probe(answered, MINUTE, slot);
                answered = start + latency;
                start
            })
            .collect()
    }

    #[test]
    fn a_member_in_its_slot_is_probed_once_a_heartbeat() {
        let slot = Slot::of("m-0042");
        let at = Duration::from_nanos(slot.offset(MINUTE) as u64) + 5 * MINUTE;
        assert_eq!(next_probe(at, MINUTE, slot), at + MINUTE);
        let latency = Duration::from_millis(300);
        let s = starts(slot, at + latency, latency, 4);
        for pair in s.windows(2) {
            assert_eq!(pair[1] - pair[0], MINUTE);
        }
    }

    #[test]
    fn a_probe_is_never_later_than_a_heartbeat_nor_sooner_than_three_quarters() {
        for i in 0..500 {
            let slot = Slot::of(&format!("m-{i}"));
            for at in [0, 1, 17, 59, 60, 61, 3599].map(Duration::from_secs) {
                let next = next_probe(at, MINUTE, slot);
                assert!(next <= at + MINUTE, "{i} at {at:?}: {next:?}");
                assert!(next >= at + MINUTE * 3 / 4, "{i} at {at:?}: {next:?}");
            }
        }
    }

    #[test]
    fn members_probed_together_are_in_their_slots_within_four_heartbeats() {
        let latency = Duration::from_millis(200);
        for i in 0..200 {
            let slot = Slot::of(&format!("m-{i}"));
            let s = starts(slot, Duration::from_secs(1), latency, 6);
            let in_slot = s[4].as_nanos() % MINUTE.as_nanos();
            assert_eq!(in_slot, slot.offset(MINUTE), "member {i}: {s:?}");
            assert_eq!(s[5] - s[4], MINUTE, "member {i}: {s:?}");
        }
    }

    #[test]
    fn slots_spread_a_fleet_over_the_period() {
        // 10,000 names in ten tenths of the period: each near a tenth of them.
        let mut tenths = [0u32; 10];
        for i in 0..10_000 {
            let offset = Slot::of(&format!("m-{i}")).offset(MINUTE);
            tenths[(offset * 10 / MINUTE.as_nanos()) as usize] += 1;
        }
        for (k, n) in tenths.iter().enumerate() {
            assert!(
                (850..=1150).contains(n),
                "tenth {k}: {n} of 10,000 ({tenths:?})"
            );
        }
    }

    #[test]
    fn a_heartbeat_of_zero_probes_at_every_answer() {
        let at = Duration::from_secs(7);
        assert_eq!(next_probe(at, Duration::ZERO, Slot::of("m1")), at);
    }
}
