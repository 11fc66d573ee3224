//! Scalars as Kubernetes reads them: the YAML 1.1 resolution of go-yaml v2 (under
//! sigs.k8s.io/yaml, which kubectl, client-go and the API server use), then that library's
//! conversion to JSON and apimachinery's reading of JSON numbers.
//!
//! Written from go-yaml v2's `resolve.go` and `decode.go`, sigs.k8s.io/yaml's `yaml.go` and Go's
//! `strconv`, and checked against kubectl (`tests/yaml_kubectl.rs`). What it does, in short:
//! - `y Y yes Yes YES on On ON true True TRUE` are true, `n N no No NO off Off OFF false False
//!   FALSE` false, `~ null Null NULL` and the empty scalar null; other spellings (`yEs`) are strings;
//! - integers as Go's `strconv.ParseInt(s, 0, 64)` reads them after every `_` is removed: `0755`
//!   is octal (493), `0o17`, `0x1F`, `0b101` and signs too; beyond `int64`, `uint64`; beyond that
//!   a float;
//! - floats of the form `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`, and `.inf`,
//!   `-.inf`, `.nan` in three cases each; a float that overflows stays a string (`1e400`);
//! - no base-60 (`1:30` is a string), and timestamps stay the strings they are written as;
//! - explicit tags `!!str !!int !!float !!bool !!null !!timestamp !!binary` are honoured (a value
//!   that does not fit is an error, as in go-yaml); any other tag is ignored;
//! - JSON: a float with an integral value in the `int64` range becomes an integer (`1.0`, `1e3`),
//!   integers beyond `int64` become floats, infinity and NaN are errors (JSON cannot carry them);
//! - non-string map keys become strings: integers in decimal (`0x10` → `"16"`), floats as Go's
//!   `FormatFloat(f, 'g', -1, 32)` (`1e6` → `"1e+06"`), booleans `"true"`/`"false"`; a null or
//!   `uint64` key is an error.

use serde_json::{Number, Value};

/// A scalar as go-yaml v2 resolves it into an `interface{}`, before JSON.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
}

const CORE: &str = "tag:yaml.org,2002:";

/// The YAML 1.1 spellings go-yaml v2 looks up by exact text.
fn lookup(text: &str) -> Option<Scalar> {
    Some(match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            Scalar::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            Scalar::Bool(false)
        }
        "" | "~" | "null" | "Null" | "NULL" => Scalar::Null,
        ".nan" | ".NaN" | ".NAN" => Scalar::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => Scalar::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => Scalar::Float(f64::NEG_INFINITY),
        _ => return None,
    })
}

/// What a plain scalar without a tag reads as: go-yaml's `resolve("", text)`. Its timestamp step
/// is left out: into an `interface{}` a timestamp is its text, and no text that looks like one
/// (`YYYY-`…) could have been read as a number.
pub(super) fn plain(text: &str) -> Scalar {
    let first = text.as_bytes().first().copied();
    match first {
        None => Scalar::Null,
        Some(b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~') => {
            lookup(text).unwrap_or_else(|| Scalar::Str(text.to_string()))
        }
        Some(b'.') => lookup(text)
            .or_else(|| dot_float(text).map(Scalar::Float))
            .unwrap_or_else(|| Scalar::Str(text.to_string())),
        Some(b'0'..=b'9' | b'+' | b'-') => lookup(text)
            .or_else(|| number(text))
            .unwrap_or_else(|| Scalar::Str(text.to_string())),
        Some(_) => Scalar::Str(text.to_string()),
    }
}

/// A number in go-yaml v2's order: signed integer, unsigned integer, float, then its own binary
/// forms (`0b-1`, which Go's base prefix does not allow).
fn number(text: &str) -> Option<Scalar> {
    let plain: String = text.chars().filter(|&c| c != '_').collect();
    if let Some(i) = parse_int(&plain) {
        return Some(Scalar::Int(i));
    }
    if let Some(u) = parse_uint(&plain) {
        return Some(Scalar::Uint(u));
    }
    if is_yaml_style_float(&plain) {
        if let Some(f) = finite_float(&plain) {
            return Some(Scalar::Float(f));
        }
    }
    if let Some(digits) = plain.strip_prefix("0b") {
        let (neg, digits) = sign(digits);
        if let Ok(u) = u64::from_str_radix(digits, 2) {
            if let Some(i) = signed(neg, u) {
                return Some(Scalar::Int(i));
            }
            if !neg {
                return Some(Scalar::Uint(u));
            }
        }
    } else if let Some(digits) = plain.strip_prefix("-0b") {
        if let Ok(u) = u64::from_str_radix(digits, 2) {
            return signed(true, u).map(Scalar::Int);
        }
    }
    None
}

/// Splits a leading sign off: (negative, rest).
fn sign(s: &str) -> (bool, &str) {
    match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    }
}

/// `u` with a sign, when it fits in `int64`.
fn signed(neg: bool, u: u64) -> Option<i64> {
    if neg {
        if u <= i64::MAX as u64 + 1 {
            Some((u as i64).wrapping_neg())
        } else {
            None
        }
    } else {
        i64::try_from(u).ok()
    }
}

/// Go's `strconv.ParseInt(s, 0, 64)` on a text without underscores.
fn parse_int(s: &str) -> Option<i64> {
    let (neg, rest) = sign(s);
    signed(neg, parse_uint(rest)?)
}

/// Go's `strconv.ParseUint(s, 0, 64)` on a text without underscores: base prefixes `0b`, `0o`,
/// `0x` (either case), a leading `0` for octal, no sign.
fn parse_uint(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let (radix, digits) = match b {
        [] => return None,
        [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'b') => (2, &s[2..]),
        [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'o') => (8, &s[2..]),
        [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'x') => (16, &s[2..]),
        [b'0', ..] => (8, &s[1..]),
        _ => (10, s),
    };
    if digits.is_empty() {
        // "0" alone; "0x" and the like are too short for a prefix and fail as octal.
        return (radix == 8 && s == "0").then_some(0);
    }
    if !digits.bytes().all(|c| (c as char).is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// go-yaml v2's `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_style_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'-' | b'+')) {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Go's `strconv.ParseFloat` on a decimal text: an overflow is an error there.
fn finite_float(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// Go's `strconv.ParseFloat` on a text starting with `.` (go-yaml hands it over untouched):
/// digits, an optional exponent, underscores only between digits.
fn dot_float(text: &str) -> Option<f64> {
    if !underscores_between_digits(text) {
        return None;
    }
    let plain: String = text.chars().filter(|&c| c != '_').collect();
    let rest = plain.strip_prefix('.')?;
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    if mantissa.is_empty() || !mantissa.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if let Some(e) = exponent {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        if e.is_empty() || !e.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
    }
    finite_float(&plain)
}

/// Go's `underscoreOK` for a decimal text: every `_` sits between two digits.
fn underscores_between_digits(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter().enumerate().all(|(i, &c)| {
        c != b'_'
            || (i > 0 && b[i - 1].is_ascii_digit() && b.get(i + 1).is_some_and(u8::is_ascii_digit))
    })
}

/// go-yaml v2's timestamp formats, which Go's `time.Parse` accepts: `2006-1-2`,
/// `2006-1-2 15:4:5.999999999`, `2006-1-2T15:4:5.999999999Z07:00` (and a lower-case `t`).
/// Only `!!timestamp` asks: whether the text fits; the value stays the text.
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 8 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    // Date: YYYY-M(M)-D(D), in range.
    let mut i = 5;
    let Some(month) = small_number(b, &mut i, 1, 2) else {
        return false;
    };
    if b.get(i) != Some(&b'-') {
        return false;
    }
    i += 1;
    let Some(day) = small_number(b, &mut i, 1, 2) else {
        return false;
    };
    let year: u32 = s[..4].parse().unwrap_or(0);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return false;
    }
    if i == b.len() {
        return true;
    }
    let zoned = match b[i] {
        b'T' | b't' => true,
        b' ' => false,
        _ => return false,
    };
    i += 1;
    // Time: H(H):M(M):S(S)[.fraction]
    let Some(hour) = small_number(b, &mut i, 1, 2) else {
        return false;
    };
    if b.get(i) != Some(&b':') {
        return false;
    }
    i += 1;
    let Some(minute) = small_number(b, &mut i, 1, 2) else {
        return false;
    };
    if b.get(i) != Some(&b':') {
        return false;
    }
    i += 1;
    let Some(second) = small_number(b, &mut i, 1, 2) else {
        return false;
    };
    if hour > 23 || minute > 59 || second > 59 {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        // Go takes any number of fraction digits.
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    if !zoned {
        return i == b.len();
    }
    // Zone: Z or ±hh:mm.
    match &b[i..] {
        [b'Z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => {
            [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit())
                && (h1 - b'0') * 10 + (h2 - b'0') <= 24
                && (m1 - b'0') * 10 + (m2 - b'0') <= 59
        }
        _ => false,
    }
}

/// `min..=max` ASCII digits at `i`, as a number.
fn small_number(b: &[u8], i: &mut usize, min: usize, max: usize) -> Option<u32> {
    let start = *i;
    while *i < b.len() && *i - start < max && b[*i].is_ascii_digit() {
        *i += 1;
    }
    let len = *i - start;
    if len < min {
        return None;
    }
    std::str::from_utf8(&b[start..*i]).ok()?.parse().ok()
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// A scalar with an explicit tag (its full form, `tag:yaml.org,2002:int`), as go-yaml v2 reads
/// it into an `interface{}`: the core tags are checked, `!!binary` decoded, others ignored.
pub(super) fn tagged(tag: &str, text: &str) -> Result<Scalar, String> {
    let Some(short) = tag.strip_prefix(CORE) else {
        return Ok(Scalar::Str(text.to_string()));
    };
    match short {
        "str" => Ok(Scalar::Str(text.to_string())),
        "binary" => binary(text),
        "bool" | "int" | "float" | "null" | "timestamp" => {
            let resolved = plain(text);
            let got = match &resolved {
                Scalar::Null => "null",
                Scalar::Bool(_) => "bool",
                Scalar::Int(_) | Scalar::Uint(_) => "int",
                Scalar::Float(_) => "float",
                Scalar::Str(_) if short == "timestamp" && is_timestamp(text) => "timestamp",
                Scalar::Str(_) if text == "<<" => "merge",
                Scalar::Str(_) => "str",
            };
            match (short, resolved) {
                (want, r) if want == got => Ok(r),
                ("float", Scalar::Int(i)) => Ok(Scalar::Float(i as f64)),
                ("float", Scalar::Uint(u)) => Ok(Scalar::Float(u as f64)),
                _ => Err(format!(
                    "cannot read `{text}` as !!{short}: YAML reads it as !!{got}"
                )),
            }
        }
        // !!map, !!seq, !!set and unknown core tags on a scalar: go-yaml keeps the text.
        _ => Ok(Scalar::Str(text.to_string())),
    }
}

/// `!!binary`: base64 as Go's `StdEncoding` reads it (line breaks ignored); the bytes become a
/// string, invalid UTF-8 replaced as Go's JSON encoder does.
fn binary(text: &str) -> Result<Scalar, String> {
    use base64::Engine;
    let compact: String = text.chars().filter(|c| !matches!(c, '\n' | '\r')).collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|_| "!!binary value contains invalid base64 data".to_string())?;
    Ok(Scalar::Str(String::from_utf8_lossy(&bytes).into_owned()))
}

/// The JSON value kubectl sends for a scalar: sigs.k8s.io/yaml's `json.Marshal`, then
/// apimachinery's reading of numbers (an integer literal that fits `int64` is an integer, any
/// other number a float).
/// The error names what JSON cannot carry ("infinity", "NaN").
pub(super) fn to_json(s: Scalar) -> Result<Value, &'static str> {
    Ok(match s {
        Scalar::Null => Value::Null,
        Scalar::Bool(b) => Value::Bool(b),
        Scalar::Int(i) => Value::from(i),
        // Only integers beyond int64 resolve as uint64.
        Scalar::Uint(u) => float(u as f64)?,
        Scalar::Float(f) => float(f)?,
        Scalar::Str(s) => Value::String(s),
    })
}

fn float(f: f64) -> Result<Value, &'static str> {
    if f.is_nan() {
        return Err("NaN");
    }
    if f.is_infinite() {
        return Err("infinity");
    }
    // Go's JSON writes a float below 1e21 as its shortest digits padded with zeros
    // (`-9223372036854776000` for -2^63), and apimachinery reads that back as an integer when
    // it fits int64. Rust's `Display` writes the same digits.
    if f.fract() == 0.0 && f.abs() < 1e21 {
        if let Ok(i) = f.to_string().parse::<i64>() {
            return Ok(Value::from(i));
        }
    }
    Ok(Number::from_f64(f).map_or(Value::Null, Value::Number))
}

/// A map key as sigs.k8s.io/yaml turns it into a JSON object key.
pub(super) fn to_key(s: Scalar) -> Result<String, String> {
    match s {
        Scalar::Str(s) => Ok(s),
        Scalar::Int(i) => Ok(i.to_string()),
        Scalar::Bool(b) => Ok(b.to_string()),
        Scalar::Float(f) => Ok(float_text(f)),
        Scalar::Null => Err("a null map key cannot be a JSON object key".into()),
        Scalar::Uint(u) => Err(format!(
            "the map key {u} is beyond int64 and cannot be a JSON object key"
        )),
    }
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 32)` with go-yaml's names for the infinities and NaN.
pub(super) fn float_text(f: f64) -> String {
    let f = f as f32;
    if f.is_nan() {
        return ".nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf" } else { "-.inf" }.into();
    }
    let neg = f.is_sign_negative();
    let sign = if neg { "-" } else { "" };
    if f == 0.0 {
        return format!("{sign}0");
    }
    // Shortest digits that read back as the same f32, and the decimal exponent.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let nd = digits.len() as i32;
    // %e when the exponent is below -4 or at least 6 (the shortest form's rule), else %f.
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let frac = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{frac}e{esign}{:02}", exp.abs());
    }
    let point = exp + 1; // digits before the decimal point
    if point <= 0 {
        let zeros = "0".repeat((-point) as usize);
        format!("{sign}0.{zeros}{digits}")
    } else if point >= nd {
        let zeros = "0".repeat((point - nd) as usize);
        format!("{sign}{digits}{zeros}")
    } else {
        let (int, frac) = digits.split_at(point as usize);
        format!("{sign}{int}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Scalar::*;

    #[test]
    fn plain_scalars_resolve_as_go_yaml_v2() {
        let s = |t: &str| Str(t.to_string());
        let cases: &[(&str, Scalar)] = &[
            ("yes", Bool(true)),
            ("Yes", Bool(true)),
            ("yEs", s("yEs")),
            ("y", Bool(true)),
            ("N", Bool(false)),
            ("On", Bool(true)),
            ("oN", s("oN")),
            ("OFF", Bool(false)),
            ("tRue", s("tRue")),
            ("~", Null),
            ("", Null),
            ("nULL", s("nULL")),
            ("0755", Int(493)),
            ("0o17", Int(15)),
            ("0O17", Int(15)),
            ("0x1F", Int(31)),
            ("+0x1F", Int(31)),
            ("-0o17", Int(-15)),
            ("0b101", Int(5)),
            ("0b-1", Int(-1)),
            ("-0b101", Int(-5)),
            ("1_000", Int(1000)),
            ("_1", s("_1")),
            ("1_", Int(1)),
            ("0x_1F", Int(31)),
            ("09", Float(9.0)),
            ("0o8", s("0o8")),
            ("0x", s("0x")),
            ("0", Int(0)),
            ("-0", Int(0)),
            ("1:30", s("1:30")),
            ("1e3", Float(1000.0)),
            ("1.", Float(1.0)),
            (".5", Float(0.5)),
            (".1_0", Float(0.1)),
            ("._1", s("._1")),
            (".e3", s(".e3")),
            ("1e400", s("1e400")),
            ("1e3.5", s("1e3.5")),
            ("9223372036854775807", Int(i64::MAX)),
            ("9223372036854775808", Uint(9223372036854775808)),
            ("-9223372036854775808", Int(i64::MIN)),
            ("-9223372036854775809", Float(-9223372036854775809.0)),
            ("99999999999999999999", Float(1e20)),
            (".inf", Float(f64::INFINITY)),
            ("-.Inf", Float(f64::NEG_INFINITY)),
            ("2001-12-14", s("2001-12-14")),
            (
                "2001-12-14t21:59:43.10-05:00",
                s("2001-12-14t21:59:43.10-05:00"),
            ),
            ("<<", s("<<")),
            ("=", s("=")),
            ("+-", s("+-")),
        ];
        for (text, want) in cases {
            assert_eq!(&plain(text), want, "{text:?}");
        }
        assert!(matches!(plain(".NaN"), Float(f) if f.is_nan()));
    }

    #[test]
    fn tags_are_checked_as_go_yaml_does() {
        assert_eq!(
            tagged("tag:yaml.org,2002:str", "yes"),
            Ok(Str("yes".into()))
        );
        assert_eq!(tagged("tag:yaml.org,2002:int", "12"), Ok(Int(12)));
        assert_eq!(tagged("tag:yaml.org,2002:float", "1"), Ok(Float(1.0)));
        assert_eq!(tagged("tag:yaml.org,2002:bool", "yes"), Ok(Bool(true)));
        assert_eq!(
            tagged("tag:yaml.org,2002:binary", "aGVsbG8="),
            Ok(Str("hello".into()))
        );
        assert_eq!(tagged("!", "12"), Ok(Str("12".into())));
        assert_eq!(tagged("!custom", "12"), Ok(Str("12".into())));
        assert_eq!(
            tagged("tag:yaml.org,2002:timestamp", "2001-12-14"),
            Ok(Str("2001-12-14".into()))
        );
        for (tag, text) in [
            ("int", "abc"),
            ("float", "yes"),
            ("bool", "1"),
            ("null", "5"),
            ("timestamp", "abc"),
            ("binary", "!!!"),
        ] {
            assert!(
                tagged(&format!("{CORE}{tag}"), text).is_err(),
                "{tag} {text}"
            );
        }
    }

    #[test]
    fn json_numbers_as_kubectl_sends_them() {
        assert_eq!(to_json(Float(1.0)), Ok(Value::from(1)));
        assert_eq!(to_json(Float(-0.0)), Ok(Value::from(0)));
        assert_eq!(to_json(Float(0.5)), Ok(serde_json::json!(0.5)));
        assert_eq!(to_json(Float(1e21)), Ok(serde_json::json!(1e21)));
        // Shortest digits, padded: beyond int64 for -2^63, a different integer for 2^62.
        assert_eq!(
            to_json(Float(-9223372036854775808.0)),
            Ok(serde_json::json!(-9223372036854775808.0))
        );
        assert_eq!(
            to_json(Float(4611686018427387904.0)),
            Ok(serde_json::json!(4611686018427388000i64))
        );
        assert_eq!(
            to_json(Uint(12345678901234567890)),
            Ok(serde_json::json!(12345678901234567890u64 as f64))
        );
        assert!(to_json(Float(f64::INFINITY)).is_err());
        assert!(to_json(Float(f64::NAN)).is_err());
    }

    #[test]
    fn keys_as_sigs_yaml_writes_them() {
        let cases = [
            (Float(1.5), "1.5"),
            (Float(1000.0), "1000"),
            (Float(1e6), "1e+06"),
            (Float(0.00001), "1e-05"),
            (Float(0.0001), "0.0001"),
            (Float(123456789.0), "1.2345679e+08"),
            (Float(16777217.0), "1.6777216e+07"),
            (Float(0.30000000000000004), "0.3"),
            (Float(1.0), "1"),
            (Float(-2.5), "-2.5"),
            (Float(f64::INFINITY), ".inf"),
            (Float(1e39), ".inf"),
            (Int(493), "493"),
            (Bool(true), "true"),
        ];
        for (k, want) in cases {
            assert_eq!(to_key(k.clone()).as_deref(), Ok(want), "{k:?}");
        }
        assert!(to_key(Null).is_err());
        assert!(to_key(Uint(u64::MAX)).is_err());
    }
}
