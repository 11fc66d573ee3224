//! RFC 3339 timestamps as the OCM scheduler needs them: a taint's `timeAdded` read into
//! nanoseconds since the Unix epoch, and instants written back for reasons. Pure arithmetic on
//! the proleptic Gregorian calendar; no clock.

const NANOS: i128 = 1_000_000_000;

/// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` → nanoseconds since the epoch; `None` when malformed.
pub(super) fn parse_rfc3339_nanos(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let d = b.get(r)?;
        if d.is_empty() || !d.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(d.iter().fold(0i64, |n, c| n * 10 + i64::from(c - b'0')))
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=days_in_month(year, month)).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &s[19..];
    let mut frac: i128 = 0;
    if let Some(f) = rest.strip_prefix('.') {
        let n = f.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        // Nanosecond precision; further digits are dropped.
        let digits = &f.as_bytes()[..n.min(9)];
        frac = digits
            .iter()
            .fold(0i128, |x, c| x * 10 + i128::from(c - b'0'));
        frac *= 10i128.pow(9 - digits.len() as u32);
        rest = &f[n..];
    }
    let offset_seconds: i64 = match rest.as_bytes() {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), ..] if rest.len() == 6 && rest.as_bytes()[3] == b':' => {
            let oh = num(s.len() - 5..s.len() - 3)?;
            let om = num(s.len() - 2..s.len())?;
            if oh > 23 || om > 59 {
                return None;
            }
            let o = oh * 3600 + om * 60;
            if *sign == b'-' {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset_seconds;
    Some(i128::from(secs) * NANOS + frac)
}

/// Nanoseconds since the epoch → `YYYY-MM-DDTHH:MM:SSZ` (sub-second digits only when present).
pub(super) fn format_rfc3339_nanos(nanos: i128) -> String {
    let secs = nanos.div_euclid(NANOS);
    let frac = nanos.rem_euclid(NANOS);
    let secs = i64::try_from(secs).unwrap_or(if secs < 0 { i64::MIN / 2 } else { i64::MAX / 2 });
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let mut out = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        tod / 3600,
        tod % 3600 / 60,
        tod % 60
    );
    if frac != 0 {
        let digits = format!("{frac:09}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
    out.push('Z');
    out
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a civil date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_through_unix_time() {
        let cases: &[(&str, Option<i128>)] = &[
            ("1970-01-01T00:00:00Z", Some(0)),
            ("2026-01-01T00:00:00Z", Some(1_767_225_600 * NANOS)),
            ("2026-01-01T01:00:00+01:00", Some(1_767_225_600 * NANOS)),
            ("2025-12-31T19:00:00-05:00", Some(1_767_225_600 * NANOS)),
            (
                "2024-02-29T12:00:00.5Z",
                Some(1_709_208_000 * NANOS + 500_000_000),
            ),
            ("2026-01-15t00:00:00z", Some(1_768_435_200 * NANOS)),
            ("2023-02-29T00:00:00Z", None),
            ("2026-13-01T00:00:00Z", None),
            ("2026-01-01 00:00:00Z", None),
            ("2026-01-01T00:00:00", None),
            ("2026-01-01T00:00:00.Z", None),
            ("2026-01-01T00:00:00+0100", None),
            ("yesterday", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_rfc3339_nanos(text), *want, "{text}");
        }
        assert_eq!(
            format_rfc3339_nanos(1_767_225_900 * NANOS),
            "2026-01-01T00:05:00Z"
        );
        assert_eq!(
            format_rfc3339_nanos(1_709_208_000 * NANOS + 500_000_000),
            "2024-02-29T12:00:00.5Z"
        );
        assert_eq!(format_rfc3339_nanos(-NANOS), "1969-12-31T23:59:59Z");
    }
}
