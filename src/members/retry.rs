//! Retrying member requests: which errors are worth another attempt, and when to make it.
//!
//! The error says which ([`Classify`], implemented by the push path's typed error): transport
//! failures (refused, reset, timed out), 5xx and 429 are retryable; every other 4xx
//! (400, 403, 404, 409, 422, ...) is permanent: the same request would get the same answer. The
//! schedule is deterministic (no jitter): 200 ms doubling to a 5 s cap, or the server's
//! `Retry-After` (`details.retryAfterSeconds`) when it gives one, within a per-member time budget.
//!
//! kube's own retry layer (`Config::default_retry`) is switched off in [`super::connect`], so
//! requests are never retried twice over.

use std::future::Future;
use std::time::Duration;
// tokio's clock, so that tests with paused time see the budget run out.
use tokio::time::Instant;

/// First delay between attempts.
pub const FIRST_DELAY: Duration = Duration::from_millis(200);
/// Longest delay between attempts.
pub const MAX_DELAY: Duration = Duration::from_secs(5);

/// What to do after a failed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Try again; with the server's requested delay if it named one.
    Retryable { retry_after: Option<Duration> },
    /// Never retry: the answer would not change.
    Permanent,
}

/// An error that knows whether asking again may help (the push path's
/// [`crate::push::Error`]: 429, 5xx and transport failures yes, every other 4xx no).
pub trait Classify {
    fn classify(&self) -> Retry;
}

/// Classifies an HTTP status code (with the server's `Retry-After` in seconds, if any).
pub fn classify_status(code: u16, retry_after_seconds: Option<u32>) -> Retry {
    match code {
        429 | 500..=599 => Retry::Retryable {
            retry_after: retry_after_seconds.map(|s| Duration::from_secs(u64::from(s))),
        },
        // A Status without a code is a body that is not a Status: treat it as transient.
        0 => Retry::Retryable { retry_after: None },
        _ => Retry::Permanent,
    }
}

/// The delay before attempt `attempt + 1` (attempt 0 is the first retry): 200 ms, 400 ms, 800 ms,
/// ... capped at 5 s. The server's `Retry-After` wins when given (also capped).
pub fn delay(attempt: u32, retry_after: Option<Duration>) -> Duration {
    if let Some(d) = retry_after {
        return d.min(MAX_DELAY);
    }
    let factor = 1u32.checked_shl(attempt.min(16)).unwrap_or(u32::MAX);
    FIRST_DELAY.saturating_mul(factor).min(MAX_DELAY)
}

/// A member's retry budget: retries stop once the next delay would end past the deadline.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    pub deadline: Instant,
}

impl Budget {
    pub fn starting_now(total: Duration) -> Budget {
        Budget {
            deadline: Instant::now() + total,
        }
    }

    /// Whether waiting `delay` from `now` stays within the budget.
    pub fn allows(&self, now: Instant, delay: Duration) -> bool {
        now + delay <= self.deadline
    }
}

/// Runs `op` until it succeeds, fails permanently, or the budget runs out; returns the last error
/// and how many attempts were made.
pub async fn with_retry<T, E, F, Fut>(budget: Budget, mut op: F) -> Result<T, (E, u32)>
where
    E: Classify,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut attempt = 0u32;
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) => {
                let Retry::Retryable { retry_after } = e.classify() else {
                    return Err((e, attempt + 1));
                };
                let wait = delay(attempt, retry_after);
                if !budget.allows(Instant::now(), wait) {
                    return Err((e, attempt + 1));
                }
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer with an HTTP status code (and `Retry-After` seconds, 0 for none).
    #[derive(Debug)]
    struct Answer(u16, u32);

    impl Classify for Answer {
        fn classify(&self) -> Retry {
            classify_status(self.0, Some(self.1).filter(|s| *s > 0))
        }
    }

    fn api(code: u16, retry_after: u32) -> Answer {
        Answer(code, retry_after)
    }

    #[test]
    fn status_codes_are_classified() {
        let retryable = [429, 500, 502, 503, 504];
        let permanent = [400, 401, 403, 404, 409, 410, 422];
        for code in retryable {
            assert!(
                matches!(api(code, 0).classify(), Retry::Retryable { .. }),
                "{code}"
            );
        }
        for code in permanent {
            assert_eq!(api(code, 0).classify(), Retry::Permanent, "{code}");
        }
    }

    #[test]
    fn retry_after_is_honoured() {
        assert_eq!(
            api(429, 2).classify(),
            Retry::Retryable {
                retry_after: Some(Duration::from_secs(2))
            }
        );
        assert_eq!(
            delay(0, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(delay(0, Some(Duration::from_secs(60))), MAX_DELAY);
    }

    #[test]
    fn schedule_doubles_to_a_cap() {
        let ms: Vec<u128> = (0..8).map(|a| delay(a, None).as_millis()).collect();
        assert_eq!(ms, [200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
        assert_eq!(delay(100, None), MAX_DELAY);
    }

    #[test]
    fn budget_bounds_the_wait() {
        let now = Instant::now();
        let b = Budget {
            deadline: now + Duration::from_secs(1),
        };
        assert!(b.allows(now, Duration::from_millis(800)));
        assert!(!b.allows(now, Duration::from_millis(1200)));
    }

    #[tokio::test(start_paused = true)]
    async fn with_retry_stops_on_permanent_and_retries_transient() {
        let budget = Budget::starting_now(Duration::from_secs(30));
        let mut calls = 0;
        let r: Result<(), _> = with_retry(budget, || {
            calls += 1;
            async { Err(api(409, 0)) }
        })
        .await;
        assert_eq!(r.unwrap_err().1, 1);
        assert_eq!(calls, 1);

        let mut calls = 0;
        let r = with_retry(budget, || {
            calls += 1;
            let n = calls;
            async move {
                if n < 3 {
                    Err(api(503, 0))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(r.unwrap(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn with_retry_gives_up_when_the_budget_is_spent() {
        let budget = Budget::starting_now(Duration::from_secs(1));
        let r: Result<(), _> = with_retry(budget, || async { Err(api(503, 0)) }).await;
        // 200 + 400 ms fit in one second, 800 ms more does not.
        assert_eq!(r.unwrap_err().1, 3);
    }
}
