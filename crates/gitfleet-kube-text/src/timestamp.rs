//! RFC 3339 timestamps as Kubernetes writes and reads `metav1.Time`
//! (`2024-05-01T12:00:00Z`, `2024-05-01T14:00:00.5+02:00`): the one place that reads and writes
//! them. The calendar is jiff's; this module only holds it to RFC 3339's profile, since jiff's
//! parser also takes the wider Temporal/ISO 8601 forms (a space for `T`, `+0200`, `[zone]`
//! annotations) that Go's `time.RFC3339` layout refuses.

use jiff::Timestamp;

/// Parses `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` (a `t`/`z` in lower case too); `None` when the
/// text is not of that form or not a real instant (2023-02-29, 25:00).
pub fn parse(s: &str) -> Option<Timestamp> {
    if !rfc3339_shape(s) {
        return None;
    }
    s.parse().ok()
}

/// Seconds since the Unix epoch of an RFC 3339 text (see [`parse`]).
pub fn parse_unix_seconds(s: &str) -> Option<i64> {
    parse(s).map(|t| t.as_second())
}

/// Formats an instant in UTC as `YYYY-MM-DDTHH:MM:SS[.frac]Z`, sub-second digits only when
/// present (as Go's `time.RFC3339Nano`).
pub fn format(t: Timestamp) -> String {
    t.to_string()
}

/// Formats `secs` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`; instants out of jiff's range
/// (beyond years -9999..=9999) are clamped to it.
pub fn format_unix_seconds(secs: i64) -> String {
    let t = Timestamp::from_second(secs).unwrap_or(if secs < 0 {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    });
    format(t)
}

/// Formats `nanos` since the Unix epoch (see [`format`]); clamped like
/// [`format_unix_seconds`].
pub fn format_unix_nanos(nanos: i128) -> String {
    let t = Timestamp::from_nanosecond(nanos).unwrap_or(if nanos < 0 {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    });
    format(t)
}

/// The separators RFC 3339 fixes (date `-`, `T`, time `:`, and a `Z` or `±HH:MM` offset), which
/// jiff's parser leaves optional or accepts alternatives for. Digits and ranges are jiff's.
fn rfc3339_shape(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return false;
    }
    match b[19..] {
        [b'Z' | b'z'] | [b'.', ..] | [b'+' | b'-', ..] => {}
        _ => return false,
    }
    let offset_ok = matches!(b[b.len() - 1], b'Z' | b'z')
        || (b.len() >= 25 && matches!(b[b.len() - 6], b'+' | b'-') && b[b.len() - 3] == b':');
    // A fraction is `.` and at least one digit, up to the offset.
    let fraction_ok = match b[19] {
        b'.' => {
            let end = if matches!(b[b.len() - 1], b'Z' | b'z') {
                b.len() - 1
            } else {
                b.len().saturating_sub(6)
            };
            end > 20 && b[20..end].iter().all(u8::is_ascii_digit)
        }
        _ => true,
    };
    offset_ok && fraction_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rfc3339_only() {
        let cases: &[(&str, Option<i64>)] = &[
            ("1970-01-01T00:00:00Z", Some(0)),
            ("2026-01-01T00:00:00Z", Some(1_767_225_600)),
            ("2026-01-01T01:00:00+01:00", Some(1_767_225_600)),
            ("2025-12-31T19:00:00-05:00", Some(1_767_225_600)),
            ("2024-02-29T12:00:00.5Z", Some(1_709_208_000)),
            ("2024-01-02T03:04:05.123+02:00", Some(1_704_157_445)),
            ("2026-01-15t00:00:00z", Some(1_768_435_200)),
            ("2023-02-29T00:00:00Z", None),
            ("2026-13-01T00:00:00Z", None),
            ("2026-01-01T25:00:00Z", None),
            ("2026-01-01 00:00:00Z", None),
            ("2026-01-01T00:00:00", None),
            ("2026-01-01T00:00:00.Z", None),
            ("2026-01-01T00:00:00+0100", None),
            ("2026-01-01T00:00:00+01", None),
            ("2026-01-01T00:00:00Z[UTC]", None),
            ("20260101T000000Z", None),
            ("yesterday", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_unix_seconds(text), *want, "{text}");
        }
        assert_eq!(
            parse("2024-02-29T12:00:00.5Z").map(|t| t.subsec_nanosecond()),
            Some(500_000_000)
        );
    }

    #[test]
    fn writes_utc_with_fraction_only_when_present() {
        assert_eq!(format_unix_seconds(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_unix_seconds(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_unix_seconds(-1), "1969-12-31T23:59:59Z");
        assert_eq!(
            format_unix_nanos(1_709_208_000_000_000_000 + 500_000_000),
            "2024-02-29T12:00:00.5Z"
        );
        assert_eq!(
            format_unix_nanos(1_767_225_900_000_000_000),
            "2026-01-01T00:05:00Z"
        );
    }
}
