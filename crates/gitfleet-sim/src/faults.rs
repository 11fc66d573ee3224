//! Fault injection for one member: added latency, a share of requests answered with an error
//! (500, 502, 503, 504, or 429 with Retry-After), garbage (every request answered 200 with a
//! body that is not JSON) and down (the port refuses connections). The
//! random choices come from a seeded generator, so a run with the same seed and the same
//! requests injects the same errors.

use super::fleet_file::Faults;

/// A member's current faults and its random stream.
#[derive(Debug, Clone)]
pub struct FaultState {
    pub faults: Faults,
    rng: SplitMix64,
    /// Requests answered with an injected error so far.
    pub injected: u64,
}

impl FaultState {
    pub fn new(faults: Faults, seed: u64) -> FaultState {
        FaultState {
            faults,
            rng: SplitMix64(seed),
            injected: 0,
        }
    }

    /// Decides whether the next request fails, and with which code.
    pub fn roll(&mut self) -> Option<u16> {
        let rate = self.faults.error_rate;
        if rate <= 0.0 || self.faults.error_codes.is_empty() {
            return None;
        }
        let hit = rate >= 1.0 || self.rng.next_f64() < rate;
        if !hit {
            return None;
        }
        let codes = &self.faults.error_codes;
        let i = if codes.len() == 1 {
            0
        } else {
            (self.rng.next_u64() % codes.len() as u64) as usize
        };
        self.injected += 1;
        Some(codes[i])
    }
}

/// A small, fast, seedable generator (Steele, Lea and Flood's SplitMix64).
#[derive(Debug, Clone)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn faults(rate: f64, codes: &[u16]) -> Faults {
        Faults {
            error_rate: rate,
            error_codes: codes.to_vec(),
            ..Faults::default()
        }
    }

    #[test]
    fn no_rate_no_errors_full_rate_always() {
        let mut none = FaultState::new(faults(0.0, &[500]), 1);
        assert!((0..100).all(|_| none.roll().is_none()));
        let mut all = FaultState::new(faults(1.0, &[429]), 1);
        assert!((0..100).all(|_| all.roll() == Some(429)));
        assert_eq!(all.injected, 100);
    }

    #[test]
    fn the_same_seed_gives_the_same_sequence() {
        let run = |seed| {
            let mut f = FaultState::new(faults(0.3, &[500, 503, 429]), seed);
            (0..200).map(|_| f.roll()).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        let hits = run(7).iter().filter(|r| r.is_some()).count();
        assert!((30..90).contains(&hits), "about 30% of 200, got {hits}");
    }
}
