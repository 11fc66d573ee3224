//! Wall-clock timestamps in the RFC 3339 form Kubernetes writes (`2024-05-01T12:00:00Z`).
//! The simulator is an edge tool, so it may read the clock; nothing else here does.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Now, as Kubernetes writes `metav1.Time`.
pub fn now_rfc3339() -> String {
    rfc3339(unix_now())
}

/// `secs` since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub fn rfc3339(secs: i64) -> String {
    gitfleet_kube_text::timestamp::format_unix_seconds(secs)
}

/// Parses an RFC 3339 time back to seconds since the epoch.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    gitfleet_kube_text::timestamp::parse_unix_seconds(s)
}

/// A short age as kubectl prints it: `45s`, `3m`, `2h`, `5d`.
pub fn age(created: &str, now: i64) -> String {
    let Some(t) = parse_rfc3339(created) else {
        return "<unknown>".into();
    };
    let s = (now - t).max(0);
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_round_trip() {
        for (secs, text) in [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_714_564_800, "2024-05-01T12:00:00Z"),
        ] {
            assert_eq!(rfc3339(secs), text);
            assert_eq!(parse_rfc3339(text), Some(secs));
        }
    }

    #[test]
    fn ages_read_like_kubectl() {
        let t = "2024-05-01T12:00:00Z";
        let base = parse_rfc3339(t).unwrap();
        assert_eq!(age(t, base + 5), "5s");
        assert_eq!(age(t, base + 600), "10m");
        assert_eq!(age(t, base + 3 * 86_400), "3d");
    }
}
