//! Leader election through a `coordination.k8s.io/v1` Lease (`--state kubernetes`), with
//! client-go's `leaderelection` semantics (the ones kube-controller-manager, kube-scheduler and
//! controller-runtime managers use):
//!
//! - every `--retry-period` each replica reads the Lease; the holder renews it (`renewTime`),
//!   a replica that is not the holder takes it only once the record has not changed for the
//!   record's `leaseDurationSeconds`, measured on its own clock from when it saw the record
//!   change (never by comparing clocks of different machines);
//! - every write is a replace with the resourceVersion read, so two replicas taking the Lease
//!   at once cannot both win;
//! - a leader that has not renewed for `--renew-deadline` (shorter than the lease duration)
//!   stops leading — before any other replica may take the Lease. As kube-controller-manager
//!   does in its `OnStoppedLeading`, the daemon then exits (the pod restarts as a follower):
//!   nothing it had in flight survives it.
//!
//! On a clean shutdown the leader releases the Lease (holder cleared, duration 1 s), as
//! client-go's `ReleaseOnCancel`, so a rolling upgrade does not wait out a lease duration.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// `--lease-name`, `--lease-duration`, `--renew-deadline`, `--retry-period`, `--identity`.
#[derive(Debug, Clone)]
pub struct Election {
    pub lease_name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Election {
    /// client-go's checks: the lease must outlast the renew deadline, and the renew deadline
    /// must leave room for retries (client-go: more than 1.2 retry periods).
    pub fn check(&self) -> Result<(), String> {
        if self.lease_duration <= self.renew_deadline {
            return Err(format!(
                "--lease-duration ({:?}) must be longer than --renew-deadline ({:?}): a leader \
                 must stop before another replica may take the lease",
                self.lease_duration, self.renew_deadline
            ));
        }
        if self.renew_deadline.as_secs_f64() <= 1.2 * self.retry_period.as_secs_f64() {
            return Err(format!(
                "--renew-deadline ({:?}) must be longer than 1.2 x --retry-period ({:?})",
                self.renew_deadline, self.retry_period
            ));
        }
        if self.identity.is_empty() {
            return Err("--identity must not be empty".into());
        }
        Ok(())
    }
}

/// Who leads, as this replica knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// The Lease was not read yet.
    Unknown,
    /// Another replica leads (`None`: the Lease is free or expired, and this one has not
    /// taken it yet).
    Follower {
        leader: Option<String>,
    },
    Leader,
    /// Led, and could not renew in time: must stop acting.
    Lost,
}

/// The election's state as published to the rest of the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub role: Role,
    /// When this replica last renewed the Lease (leading only).
    pub renewed: Option<Instant>,
}

/// The daemon's view of the election: whether it may act now.
#[derive(Debug, Clone)]
pub struct Leadership {
    pub seen: watch::Receiver<Seen>,
    pub renew_deadline: Duration,
}

impl Leadership {
    /// Leading, and renewed within the renew deadline: a replica that was paused past it
    /// does not act before its election loop has even run again.
    pub fn leading(&self) -> bool {
        let seen = self.seen.borrow();
        seen.role == Role::Leader
            && seen
                .renewed
                .is_some_and(|at| Instant::now() < at + self.renew_deadline)
    }
}

/// A reconcile stopped because this replica does not lead any more.
#[derive(Debug, thiserror::Error)]
#[error("this replica does not hold the leader lease any more: it stops acting")]
pub struct NotLeading;

/// What a replica does with the Lease it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// It holds it: write a renewal.
    Renew,
    /// Free or expired: write it with this replica as the holder.
    Take,
    /// Another replica holds it and it has not expired.
    Follow(String),
}

/// The record a replica last saw change, and when (its own clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub resource_version: String,
    pub at: Instant,
}

/// Client-go's `tryAcquireOrRenew` decision, without I/O: `lease` as read, the record seen
/// before (updated when this one differs), `now`.
pub fn decide(me: &str, lease: &Lease, observed: &mut Option<Observed>, now: Instant) -> Decision {
    let rv = lease.metadata.resource_version.clone().unwrap_or_default();
    if observed.as_ref().is_none_or(|o| o.resource_version != rv) {
        *observed = Some(Observed {
            resource_version: rv,
            at: now,
        });
    }
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.unwrap_or_default();
    if holder == me {
        return Decision::Renew;
    }
    let duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64);
    let seen = observed.as_ref().expect("set above").at;
    if !holder.is_empty() && now < seen + duration {
        return Decision::Follow(holder);
    }
    Decision::Take
}

/// When `lease`, as `observed`, expires on this replica's clock unless it changes first: only a
/// Lease another replica holds, and only by an observation of the record read.
pub fn expiry(me: &str, lease: &Lease, observed: &Observed) -> Option<Instant> {
    let spec = lease.spec.as_ref()?;
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder.is_empty() || holder == me {
        return None;
    }
    if lease.metadata.resource_version.as_ref() != Some(&observed.resource_version) {
        return None;
    }
    let secs = spec.lease_duration_seconds.unwrap_or(0).max(0) as u64;
    Some(observed.at + Duration::from_secs(secs))
}

/// The least time between two reads of Leases when one starts early, at a Lease's expiry.
const MIN_ATTEMPT_GAP: Duration = Duration::from_millis(100);

/// When the next read of Leases starts, for one that started at `started`: a retry period
/// later, or at `expiry` (a Lease another replica holds runs out) if that is sooner, but never
/// within a moment of this one, so that a Lease expiring as it is read is not read in a loop.
pub fn next_attempt(started: Instant, retry_period: Duration, expiry: Option<Instant>) -> Instant {
    let tick = started + retry_period;
    expiry.map_or(tick, |at| at.max(started + MIN_ATTEMPT_GAP).min(tick))
}

fn now_micro() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

/// Runs the election until `stop` is cancelled (then releases the Lease if held) or the
/// leadership is lost (then returns at once). Publishes the role on `role`.
pub async fn run(
    api: Api<Lease>,
    election: Election,
    role: watch::Sender<Seen>,
    stop: CancellationToken,
) {
    let lost = |role: &watch::Sender<Seen>| {
        role.send_replace(Seen {
            role: Role::Lost,
            renewed: None,
        })
    };
    let mut observed: Option<Observed> = None;
    let mut renewed: Option<Instant> = None;
    loop {
        let started = Instant::now();
        // A leader's attempt may take no longer than what is left of its renew deadline.
        let budget = match renewed {
            Some(at) => (at + election.renew_deadline).saturating_duration_since(started),
            None => election.retry_period.max(Duration::from_secs(1)),
        };
        let attempt = tokio::time::timeout(budget, attempt(&api, &election, &mut observed));
        let outcome = tokio::select! {
            () = stop.cancelled() => break,
            r = attempt => r,
        };
        // A follower tries again when the leader's Lease expires, if sooner: a dead leader is
        // replaced one lease duration after its last renewal was seen.
        let expires = outcome.as_ref().ok().and_then(|r| r.as_ref().ok()?.1);
        let next = next_attempt(started, election.retry_period, expires);
        match outcome.map(|r| r.map(|(leader, _)| leader)) {
            Ok(Ok(Some(leader))) if leader == election.identity => {
                if renewed.is_none() {
                    tracing::info!(identity = %election.identity, lease = %election.lease_name, "took the lease: leading");
                }
                renewed = Some(Instant::now());
                role.send_replace(Seen {
                    role: Role::Leader,
                    renewed,
                });
            }
            Ok(Ok(leader)) => {
                if renewed.is_some() {
                    tracing::error!(leader = ?leader, "another replica holds the lease");
                    lost(&role);
                    return;
                }
                role.send_if_modified(|seen| {
                    let new = Role::Follower {
                        leader: leader.clone(),
                    };
                    let changed = seen.role != new;
                    if changed {
                        tracing::info!(leader = ?leader, "following");
                    }
                    seen.role = new;
                    changed
                });
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot read or write the lease"),
            Err(_) => tracing::warn!("the lease's API server did not answer in time"),
        }
        if let Some(at) = renewed {
            if Instant::now() >= at + election.renew_deadline {
                tracing::error!(
                    identity = %election.identity,
                    renew_deadline = ?election.renew_deadline,
                    "could not renew the lease within the renew deadline: stopping leading"
                );
                lost(&role);
                return;
            }
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep_until(next) => {}
        }
    }
    if renewed.is_some() {
        release(&api, &election).await;
    }
}

/// One read and (when due) one write of the Lease; who holds it afterwards, and when the Lease
/// another replica holds expires unless renewed.
async fn attempt(
    api: &Api<Lease>,
    election: &Election,
    observed: &mut Option<Observed>,
) -> Result<(Option<String>, Option<Instant>), kube::Error> {
    let duration_secs = election.lease_duration.as_secs().max(1) as i32;
    let Some(lease) = api.get_opt(&election.lease_name).await? else {
        let new = Lease {
            metadata: ObjectMeta {
                name: Some(election.lease_name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(election.identity.clone()),
                lease_duration_seconds: Some(duration_secs),
                acquire_time: Some(now_micro()),
                renew_time: Some(now_micro()),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        return match api.create(&Default::default(), &new).await {
            Ok(_) => Ok((Some(election.identity.clone()), None)),
            // Another replica created it first: it leads.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok((None, None)),
            Err(e) => Err(e),
        };
    };
    let decision = decide(&election.identity, &lease, observed, Instant::now());
    let mut spec = lease.spec.clone().unwrap_or_default();
    match decision {
        Decision::Follow(holder) => {
            let expires = observed
                .as_ref()
                .and_then(|o| expiry(&election.identity, &lease, o));
            return Ok((Some(holder), expires));
        }
        Decision::Renew => {
            spec.renew_time = Some(now_micro());
            spec.lease_duration_seconds = Some(duration_secs);
        }
        Decision::Take => {
            spec.holder_identity = Some(election.identity.clone());
            spec.acquire_time = Some(now_micro());
            spec.renew_time = Some(now_micro());
            spec.lease_duration_seconds = Some(duration_secs);
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
    }
    let updated = Lease {
        metadata: lease.metadata.clone(),
        spec: Some(spec),
    };
    // The resourceVersion read travels with the replace: a 409 means another replica wrote.
    match api
        .replace(&election.lease_name, &Default::default(), &updated)
        .await
    {
        Ok(written) => {
            *observed = Some(Observed {
                resource_version: written.metadata.resource_version.unwrap_or_default(),
                at: Instant::now(),
            });
            Ok((Some(election.identity.clone()), None))
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok((None, None)),
        Err(e) => Err(e),
    }
}

/// Gives the Lease up (holder cleared, duration 1 s), so another replica takes over at once.
async fn release(api: &Api<Lease>, election: &Election) {
    let result = async {
        let Some(lease) = api.get_opt(&election.lease_name).await? else {
            return Ok(());
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(election.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now_micro());
        let updated = Lease {
            metadata: lease.metadata,
            spec: Some(spec),
        };
        api.replace(&election.lease_name, &Default::default(), &updated)
            .await
            .map(|_| ())
    };
    match tokio::time::timeout(election.retry_period, result).await {
        Ok(Ok(())) => tracing::info!("released the lease"),
        Ok(Err(e)) => tracing::warn!(error = %e, "cannot release the lease"),
        Err(_) => tracing::warn!("cannot release the lease: no answer"),
    }
}

/// A Lease as read: `name`, its resourceVersion, holder and duration (for tests of what
/// replicas decide on it).
#[cfg(test)]
pub(crate) fn read_lease(name: &str, rv: &str, holder: Option<&str>, secs: i32) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.into()),
            resource_version: Some(rv.into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: Some(secs),
            ..LeaseSpec::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(rv: &str, holder: Option<&str>, secs: i32) -> Lease {
        read_lease("gitfleet", rv, holder, secs)
    }

    #[test]
    fn a_held_lease_is_taken_only_after_it_stopped_changing_for_its_duration() {
        let t0 = Instant::now();
        let mut seen = None;
        let held = lease("1", Some("a"), 4);
        assert_eq!(
            decide("b", &held, &mut seen, t0),
            Decision::Follow("a".into())
        );
        // Unchanged 3 s later: still a's (the duration counts from when b saw it change).
        let t1 = t0 + Duration::from_secs(3);
        assert_eq!(
            decide("b", &held, &mut seen, t1),
            Decision::Follow("a".into())
        );
        // a renewed (new resourceVersion): counted again from now.
        let renewed = lease("2", Some("a"), 4);
        let t2 = t0 + Duration::from_secs(5);
        assert_eq!(
            decide("b", &renewed, &mut seen, t2),
            Decision::Follow("a".into())
        );
        let t3 = t2 + Duration::from_secs(4);
        assert_eq!(decide("b", &renewed, &mut seen, t3), Decision::Take);
        // Its own lease is renewed; a released (no holder) one taken at once.
        assert_eq!(decide("a", &renewed, &mut None, t0), Decision::Renew);
        assert_eq!(
            decide("b", &lease("3", None, 1), &mut seen, t3),
            Decision::Take
        );
    }

    #[test]
    fn a_held_lease_expires_one_duration_after_it_was_seen_to_change() {
        let t0 = Instant::now();
        let mut seen = None;
        let held = lease("1", Some("a"), 4);
        decide("b", &held, &mut seen, t0);
        let seen = seen.unwrap();
        let expires = expiry("b", &held, &seen).unwrap();
        assert_eq!(expires, t0 + Duration::from_secs(4));
        // At that moment the rules take it, not a moment before.
        let just_before = expires - Duration::from_millis(1);
        assert_ne!(
            decide("b", &held, &mut Some(seen.clone()), just_before),
            Decision::Take
        );
        assert_eq!(
            decide("b", &held, &mut Some(seen.clone()), expires),
            Decision::Take
        );
        // Never for its holder, a free Lease, or a record read since the observation.
        assert_eq!(expiry("a", &held, &seen), None);
        assert_eq!(expiry("b", &lease("1", None, 1), &seen), None);
        assert_eq!(expiry("b", &lease("2", Some("a"), 4), &seen), None);
    }

    #[test]
    fn the_next_attempt_is_at_a_retry_period_or_a_sooner_expiry() {
        let t0 = Instant::now();
        let retry = Duration::from_secs(2);
        assert_eq!(next_attempt(t0, retry, None), t0 + retry);
        let soon = t0 + Duration::from_millis(700);
        assert_eq!(next_attempt(t0, retry, Some(soon)), soon);
        assert_eq!(next_attempt(t0, retry, Some(t0 + retry * 3)), t0 + retry);
        // An expiry at once (or past) waits a moment, not a loop of reads.
        assert_eq!(next_attempt(t0, retry, Some(t0)), t0 + MIN_ATTEMPT_GAP);
    }

    #[test]
    fn the_deadlines_must_nest_as_client_go_requires() {
        let e = |d, r, p| Election {
            lease_name: "l".into(),
            identity: "me".into(),
            lease_duration: Duration::from_secs(d),
            renew_deadline: Duration::from_secs(r),
            retry_period: Duration::from_secs(p),
        };
        e(15, 10, 2).check().unwrap();
        e(4, 3, 1).check().unwrap();
        assert!(e(10, 10, 2)
            .check()
            .unwrap_err()
            .contains("--lease-duration"));
        assert!(e(15, 2, 2)
            .check()
            .unwrap_err()
            .contains("--renew-deadline"));
    }
}
