//! Which commit the daemon serves: the branch's head when it may be served, else the commit
//! served before when that one may still be, else nothing — and, under `--verify-commits`,
//! which commit counts as verified.
//!
//! A head may be served when it validates, obeys the rules of an update of the commit served
//! (a staged run's immutable fields, ...) and, under `--verify-commits`, its signature verifies
//! against the trusted signers. A head that may not be served is refused ([`Rejected`]), and
//! the commit served before goes on being served — rolled out, re-applied where members lost
//! or changed it, resynced — unless it may not be served either.
//!
//! Under `--verify-commits`, "the last verified commit" is the commit served whose signature
//! verified when it began to be served, recorded in the state ([`Verified`]): it survives
//! restarts, and it goes on being served (and healed) after its signer's key expires or leaves
//! the trust files, until a new head verifies. The commit served before counts only when it is
//! that recorded commit: one served while `--verify-commits` was off (or by a gitfleet that
//! did not record it) is not verified, so a daemon switched to `--verify-commits` under an
//! unsigned head serves nothing — applies, re-applies and removes nothing; what members run
//! stays as it is — and says so, until a signed head comes (an empty signed commit on top is
//! enough: the signature vouches for the whole tree).
//!
//! What is not done, and why: walking the history back to the newest signed commit. That
//! would roll the fleet back, maybe far, to manifests nobody chose now (and delete what was
//! added since); the head's author would not learn why. Serving nothing, loudly, is the safe
//! default: the fix is one signed commit.
//!
//! Pure: it must not know how signatures are verified nor how the choice is shown.

use serde::{Deserialize, Serialize};

use super::state::{Rejected, RolloutState};

/// A commit whose signature verified when it began to be served (`--verify-commits`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verified {
    pub commit: String,
    /// Who signed it, as the trust files name the signer.
    pub signer: String,
}

/// What is known of the head when the choice is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head<'a> {
    pub commit: &'a str,
    /// Why it may not be served as a commit (validation, the rules of an update of the commit
    /// served); empty: none.
    pub problems: Vec<String>,
    /// Under `--verify-commits`, its signature: who signed it, or why it does not count
    /// (`None`: not required, or not judged because [`signature_needed`] said so).
    pub signature: Option<Result<String, String>>,
}

/// The commit to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Serve {
    /// The head. `verified`: under `--verify-commits`, the record to keep of its signature.
    Head { verified: Option<Verified> },
    /// The head is refused; `commit`, served before, goes on.
    Before { commit: String, refused: Rejected },
    /// The head is refused and no commit may be served; `why` says so, for people.
    Nothing { refused: Rejected, why: String },
}

/// Whether the head's signature has to be judged: under `--verify-commits`, unless it is the
/// commit recorded as verified when it began to be served.
pub fn signature_needed(state: &RolloutState, head: &str, verify_commits: bool) -> bool {
    verify_commits && state.verified.as_ref().is_none_or(|v| v.commit != head)
}

/// The commit served before that may go on being served instead of a refused head, or why
/// there is none.
pub fn fallback(state: &RolloutState, verify_commits: bool) -> Result<&str, String> {
    let Some(serving) = state.serving.as_deref() else {
        return Err("no commit was served before".into());
    };
    if verify_commits && state.verified.as_ref().is_none_or(|v| v.commit != serving) {
        return Err(format!(
            "the commit served before, {}, was not verified when it began to be served \
             (--verify-commits was off then), so it is not served either: nothing is applied or \
             healed until a head signed by a trusted key comes (`git commit --allow-empty -S` on \
             top is enough)",
            short(serving)
        ));
    }
    Ok(serving)
}

/// The choice for `head` given the state: see the module's doc.
pub fn choose(head: Head<'_>, state: &RolloutState, verify_commits: bool) -> Serve {
    let recorded = state
        .verified
        .as_ref()
        .filter(|v| verify_commits && v.commit == head.commit);
    let mut errors = head.problems;
    let mut verified = recorded.cloned();
    if verify_commits && recorded.is_none() {
        match head.signature {
            Some(Ok(signer)) => {
                verified = Some(Verified {
                    commit: head.commit.to_string(),
                    signer,
                })
            }
            Some(Err(why)) => errors.push(why),
            None => errors.push("commit signature: not judged (--verify-commits)".into()),
        }
    }
    if errors.is_empty() {
        return Serve::Head { verified };
    }
    let refused = Rejected {
        commit: head.commit.to_string(),
        errors,
    };
    match fallback(state, verify_commits) {
        Ok(before) if before != head.commit => Serve::Before {
            commit: before.to_string(),
            refused,
        },
        Ok(_) => Serve::Nothing {
            refused,
            why: "the commit served is refused now, and no other may be served".into(),
        },
        Err(why) => Serve::Nothing { refused, why },
    }
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const C: &str = "cccccccccccccccccccccccccccccccccccccccc";

    fn state(serving: Option<&str>, verified: Option<&str>) -> RolloutState {
        RolloutState {
            serving: serving.map(String::from),
            verified: verified.map(|c| Verified {
                commit: c.into(),
                signer: "alice".into(),
            }),
            ..Default::default()
        }
    }

    fn head<'a>(
        commit: &'a str,
        problems: &[&str],
        signature: Option<Result<&str, &str>>,
    ) -> Head<'a> {
        Head {
            commit,
            problems: problems.iter().map(|p| p.to_string()).collect(),
            signature: signature.map(|s| s.map(String::from).map_err(String::from)),
        }
    }

    fn refused(commit: &str, errors: &[&str]) -> Rejected {
        Rejected {
            commit: commit.into(),
            errors: errors.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn without_verify_commits_a_refused_head_leaves_the_commit_served_before() {
        let s = state(Some(A), None);
        assert_eq!(
            choose(head(B, &[], None), &s, false),
            Serve::Head { verified: None }
        );
        assert_eq!(
            choose(head(B, &["a.yaml:1: bad"], None), &s, false),
            Serve::Before {
                commit: A.into(),
                refused: refused(B, &["a.yaml:1: bad"]),
            }
        );
        let Serve::Nothing { why, .. } = choose(head(B, &["bad"], None), &state(None, None), false)
        else {
            panic!("nothing was served before");
        };
        assert_eq!(why, "no commit was served before");
        assert!(matches!(
            choose(head(A, &["a new rule"], None), &s, false),
            Serve::Nothing { .. }
        ));
    }

    #[test]
    fn a_verified_head_is_served_and_recorded() {
        assert_eq!(
            choose(head(B, &[], Some(Ok("alice"))), &state(Some(A), None), true),
            Serve::Head {
                verified: Some(Verified {
                    commit: B.into(),
                    signer: "alice".into()
                })
            }
        );
        // An invalid commit is refused however it is signed.
        assert!(matches!(
            choose(
                head(B, &["bad"], Some(Ok("alice"))),
                &state(Some(A), Some(A)),
                true
            ),
            Serve::Before { .. }
        ));
    }

    /// The last verified commit goes on when the head is unsigned; a commit served while
    /// `--verify-commits` was off is not verified, so nothing is served.
    #[test]
    fn an_unsigned_head_leaves_the_last_verified_commit_or_nothing() {
        let unsigned = || head(B, &[], Some(Err("commit signature (Unsigned): not signed")));
        assert_eq!(
            choose(unsigned(), &state(Some(A), Some(A)), true),
            Serve::Before {
                commit: A.into(),
                refused: refused(B, &["commit signature (Unsigned): not signed"]),
            }
        );
        for s in [
            state(Some(A), None),
            state(Some(A), Some(C)),
            state(Some(B), None),
        ] {
            let Serve::Nothing { refused: r, why } = choose(unsigned(), &s, true) else {
                panic!("{s:?}: the commit served was not verified");
            };
            assert_eq!(r.commit, B);
            assert!(
                why.contains("was not verified") || why.contains("refused now"),
                "{why}"
            );
        }
        // Without --verify-commits the unverified commit served goes on.
        assert!(matches!(
            choose(head(B, &["bad"], None), &state(Some(A), None), false),
            Serve::Before { .. }
        ));
    }

    /// The commit recorded as verified stays verified: its signature is not judged again (a
    /// key that expired since, or left the trust files, does not stop it being served).
    #[test]
    fn the_recorded_commit_is_not_judged_again() {
        let s = state(Some(A), Some(A));
        assert!(!signature_needed(&s, A, true));
        assert!(signature_needed(&s, B, true));
        assert!(!signature_needed(&s, B, false));
        assert_eq!(
            choose(head(A, &[], None), &s, true),
            Serve::Head {
                verified: s.verified.clone()
            }
        );
        // A signature judged anyway is not needed.
        assert!(matches!(
            choose(head(A, &[], Some(Err("key expired"))), &s, true),
            Serve::Head { .. }
        ));
        assert_eq!(fallback(&s, true), Ok(A));
        assert!(fallback(&state(Some(A), None), true).is_err());
        assert_eq!(fallback(&state(Some(A), None), false), Ok(A));
    }
}
