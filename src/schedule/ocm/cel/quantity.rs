//! Kubernetes' quantity CEL library as OCM registers it (`library.Quantity()` in sdk-go's
//! `BaseEnvOpts`; k8s.io/apiserver pkg/cel/library/quantity.go): `quantity(string)`,
//! `isQuantity(string)`, `sign(Quantity)` (a global function in cel-go, so `q.sign()` does
//! not compile), and on a quantity `isGreaterThan`, `isLessThan`, `compareTo`,
//! `asApproximateFloat`, `asInteger`, `isInteger`, `add(Quantity|int)`, `sub(Quantity|int)`;
//! quantities compare equal by value (`quantity('200M') == quantity('0.2G')`).
//!
//! [`Quantity`] is k8s.io/apimachinery's `resource.Quantity` as far as these functions see it:
//! `ParseQuantity` (its grammar, error texts, rounding up to nano, the `Ei` cap) and the two
//! representations it keeps, an int64 with a decimal scale and an arbitrary-precision decimal
//! (`inf.Dec`), because `AsInt64` (`asInteger`, `isInteger`) succeeds only on the first:
//! `quantity('1.5Ki').asInteger()` is an error in Kubernetes although 1536 is whole.
//! One difference: an exponent beyond ±10000 (`1e99999`) is rejected here, as exact values that
//! large would take unbounded memory; Kubernetes accepts it.
//!
//! Pure: values in, values out.

use cel::extractors::This;
use cel::objects::Opaque;
use cel::{Context, DeclarationError, ExecutionError, FunctionContext, Value};
use num_bigint::{BigInt, Sign};
use std::cmp::Ordering;
use std::sync::Arc;

/// The largest decimal exponent gitfleet evaluates (module doc).
const MAX_EXPONENT: i64 = 10_000;

/// A `resource.Quantity`'s value, in the representation Kubernetes keeps it in (module doc).
#[derive(Debug, Clone)]
pub(super) enum Quantity {
    /// `int64Amount`: `value × 10^scale`.
    Int { value: i64, scale: i32 },
    /// `inf.Dec`: `unscaled × 10^-scale`.
    Dec { unscaled: BigInt, scale: i32 },
}

/// Why a string is not a quantity: resource.ParseQuantity's errors, with its texts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ParseError {
    #[error("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")]
    FormatWrong,
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    #[error("unable to parse quantity's suffix")]
    Suffix,
    #[error("quantity exponent beyond ±{MAX_EXPONENT} is not evaluated by gitfleet")]
    ExponentRange,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalExponent,
    DecimalSi,
    BinarySi,
}

/// The pieces `parseQuantityString` splits a quantity into.
struct Parts<'a> {
    positive: bool,
    value: &'a str,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

fn split(s: &str) -> Result<Parts<'_>, ParseError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos = 1;
        }
        Some(b'+') => pos = 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    let zero = |positive| Parts {
        positive,
        value: "0",
        num: "0",
        denom: "",
        suffix: "",
    };
    if pos >= end {
        return Ok(zero(positive));
    }
    let digits_end = |from: usize| (from..end).find(|&i| !b[i].is_ascii_digit()).unwrap_or(end);
    let i = digits_end(pos);
    let mut num = &s[pos..i];
    if i >= end {
        return Ok(Parts {
            positive,
            value: s,
            num,
            denom: "",
            suffix: "",
        });
    }
    pos = i;
    if num.is_empty() {
        num = "0";
    }
    let mut denom = "";
    if b[pos] == b'.' {
        pos += 1;
        let i = digits_end(pos);
        denom = &s[pos..i];
        if i >= end {
            return Ok(Parts {
                positive,
                value: s,
                num,
                denom,
                suffix: "",
            });
        }
        pos = i;
    }
    let value = &s[..pos];
    let suffix_start = pos;
    let letters_end = (pos..end)
        .find(|&i| !b"eEinumkKMGTP".contains(&b[i]))
        .unwrap_or(end);
    pos = letters_end;
    if pos < end && matches!(b[pos], b'-' | b'+') {
        pos += 1;
    }
    if digits_end(pos) < end {
        return Err(ParseError::FormatWrong);
    }
    Ok(Parts {
        positive,
        value,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

/// `suffixHandler.interpret`: base, exponent and format of a suffix.
fn interpret(suffix: &str) -> Option<(u32, i32, Format)> {
    let decimal = match suffix {
        "n" => Some(-9),
        "u" => Some(-6),
        "m" => Some(-3),
        "" => Some(0),
        "k" => Some(3),
        "M" => Some(6),
        "G" => Some(9),
        "T" => Some(12),
        "P" => Some(15),
        "E" => Some(18),
        _ => None,
    };
    if let Some(e) = decimal {
        return Some((10, e, Format::DecimalSi));
    }
    let binary = match suffix {
        "Ki" => Some(10),
        "Mi" => Some(20),
        "Gi" => Some(30),
        "Ti" => Some(40),
        "Pi" => Some(50),
        "Ei" => Some(60),
        _ => None,
    };
    if let Some(e) = binary {
        return Some((2, e, Format::BinarySi));
    }
    let rest = suffix
        .strip_prefix('e')
        .or_else(|| suffix.strip_prefix('E'))?;
    if rest.is_empty() {
        return None;
    }
    // strconv.ParseInt(.., 64) then int32(): Go truncates.
    let parsed: i64 = rest.parse().ok()?;
    Some((10, parsed as i32, Format::DecimalExponent))
}

fn pow10(n: u32) -> BigInt {
    BigInt::from(10u32).pow(n)
}

impl Quantity {
    /// `resource.ParseQuantity`.
    pub(super) fn parse(s: &str) -> Result<Quantity, ParseError> {
        if s.is_empty() {
            return Err(ParseError::FormatWrong);
        }
        if s == "0" {
            return Ok(Quantity::Int { value: 0, scale: 0 });
        }
        let p = split(s)?;
        let (base, exponent, format) = interpret(p.suffix).ok_or(ParseError::Suffix)?;
        if i64::from(exponent).abs() > MAX_EXPONENT {
            return Err(ParseError::ExponentRange);
        }
        if let Some(q) = fast_path(&p, exponent, format)? {
            return Ok(q);
        }
        // The inf.Dec path.
        let (unsigned, _) = p
            .value
            .strip_prefix(['+', '-'])
            .map_or((p.value, ()), |v| (v, ()));
        let (int, frac) = unsigned.split_once('.').unwrap_or((unsigned, ""));
        let digits = format!("{int}{frac}");
        let mut unscaled: BigInt = if digits.is_empty() {
            BigInt::default()
        } else {
            digits.parse().map_err(|_| ParseError::Numeric)?
        };
        let mut scale = i64::try_from(frac.len()).map_err(|_| ParseError::Numeric)?;
        if base == 10 {
            scale -= i64::from(exponent);
        } else {
            unscaled <<= exponent as usize;
        }
        // Round away from zero to nano ("if you want some resources, you should get some").
        if unscaled.sign() != Sign::NoSign {
            match scale.cmp(&9) {
                Ordering::Less => unscaled *= pow10((9 - scale) as u32),
                Ordering::Greater => {
                    let d = pow10((scale - 9) as u32);
                    let (q, r) = (&unscaled / &d, &unscaled % &d);
                    unscaled = if r.sign() == Sign::NoSign { q } else { q + 1 };
                }
                Ordering::Equal => {}
            }
            scale = 9;
        }
        let mut q = Quantity::Dec {
            unscaled,
            scale: scale as i32,
        };
        if format == Format::BinarySi {
            let max = Quantity::Int {
                value: i64::MAX,
                scale: 0,
            };
            if q.cmp(&max) == Ordering::Greater {
                q = Quantity::Dec {
                    unscaled: BigInt::from(i64::MAX),
                    scale: 0,
                };
            }
        }
        if !p.positive {
            q = q.neg();
        }
        Ok(q)
    }

    /// `value × 10^exp`, exactly.
    fn exact(&self) -> (BigInt, i64) {
        match self {
            Quantity::Int { value, scale } => (BigInt::from(*value), i64::from(*scale)),
            Quantity::Dec { unscaled, scale } => (unscaled.clone(), -i64::from(*scale)),
        }
    }

    fn to_dec(&self) -> (BigInt, i32) {
        match self {
            Quantity::Int { value, scale } => (BigInt::from(*value), -scale),
            Quantity::Dec { unscaled, scale } => (unscaled.clone(), *scale),
        }
    }

    fn neg(self) -> Quantity {
        match self {
            Quantity::Int { value, scale } => Quantity::Int {
                value: value.wrapping_neg(),
                scale,
            },
            Quantity::Dec { unscaled, scale } => Quantity::Dec {
                unscaled: -unscaled,
                scale,
            },
        }
    }

    /// `Quantity.Cmp`: by value, whatever the representation.
    pub(super) fn cmp(&self, other: &Quantity) -> Ordering {
        let ((a, ea), (b, eb)) = (self.exact(), other.exact());
        match ea.cmp(&eb) {
            Ordering::Greater => (a * pow10((ea - eb) as u32)).cmp(&b),
            Ordering::Less => a.cmp(&(b * pow10((eb - ea) as u32))),
            Ordering::Equal => a.cmp(&b),
        }
    }

    /// `Quantity.Sign`.
    pub(super) fn sign(&self) -> i64 {
        match self {
            Quantity::Int { value, .. } => value.signum(),
            Quantity::Dec { unscaled, .. } => match unscaled.sign() {
                Sign::Minus => -1,
                Sign::NoSign => 0,
                Sign::Plus => 1,
            },
        }
    }

    /// `Quantity.AsInt64`: only an int64 amount with a scale of zero or more converts.
    pub(super) fn as_int64(&self) -> Option<i64> {
        match self {
            Quantity::Int { value, scale } if *scale >= 0 => {
                (0..*scale).try_fold(*value, |v, _| v.checked_mul(10))
            }
            _ => None,
        }
    }

    /// `Quantity.AsApproximateFloat64`: the mantissa as a float times `math.Pow10(exponent)`.
    pub(super) fn as_approximate_float(&self) -> f64 {
        let (base, exponent) = match self {
            Quantity::Int { value, scale } => (*value as f64, i64::from(*scale)),
            Quantity::Dec { unscaled, scale } => (
                // Correctly rounded, as big.Float's Float64.
                unscaled.to_string().parse().unwrap_or(f64::NAN),
                -i64::from(*scale),
            ),
        };
        if exponent == 0 {
            return base;
        }
        // Go's math.Pow10: the float nearest 10^n, 0 below -323, +Inf above 308.
        let p = match exponent {
            n if n < -323 => 0.0,
            n if n > 308 => f64::INFINITY,
            n => format!("1e{n}").parse().unwrap_or(f64::NAN),
        };
        base * p
    }

    /// `Quantity.Add`: int64 arithmetic while it fits (`int64Amount.Add`), else decimal.
    pub(super) fn add(&self, y: &Quantity) -> Quantity {
        if let (
            Quantity::Int {
                value: a,
                scale: sa,
            },
            Quantity::Int {
                value: b,
                scale: sb,
            },
        ) = (self, y)
        {
            if let Some(q) = int_add(*a, *sa, *b, *sb) {
                return q;
            }
        }
        let ((a, sa), (b, sb)) = (self.to_dec(), y.to_dec());
        let scale = sa.max(sb);
        let align = |v: BigInt, s: i32| v * pow10((scale - s) as u32);
        Quantity::Dec {
            unscaled: align(a, sa) + align(b, sb),
            scale,
        }
    }

    /// `Quantity.Sub`.
    pub(super) fn sub(&self, y: &Quantity) -> Quantity {
        self.add(&y.clone().neg())
    }
}

/// The int64 fast path of `ParseQuantity`: `None` when the value needs a decimal.
fn fast_path(p: &Parts<'_>, exponent: i32, format: Format) -> Result<Option<Quantity>, ParseError> {
    const MAX_INT64_FACTORS: i32 = 18;
    let (num_len, denom_len) = (p.num.len() as i32, p.denom.len() as i32);
    let (mut scale, precision, mantissa) = match format {
        Format::DecimalExponent | Format::DecimalSi => {
            (exponent, MAX_INT64_FACTORS - (num_len + denom_len), 1i64)
        }
        Format::BinarySi if exponent >= 0 && p.denom.is_empty() => (
            0,
            15 - num_len - (exponent as f32 * 3.0 / 10.0) as i32 - 1,
            1i64 << exponent,
        ),
        Format::BinarySi => (0, -1, 1),
    };
    if precision < 0 {
        return Ok(None);
    }
    scale -= denom_len;
    if scale < -9 {
        return Ok(None);
    }
    let shifted = format!("{}{}", p.num, p.denom);
    let value: i64 = shifted.parse().map_err(|_| ParseError::Numeric)?;
    Ok(value.checked_mul(mantissa).map(|v| Quantity::Int {
        value: if p.positive { v } else { -v },
        scale,
    }))
}

/// `int64Amount.Add`: `None` on overflow.
fn int_add(a: i64, sa: i32, b: i64, sb: i32) -> Option<Quantity> {
    let int = |value, scale| Some(Quantity::Int { value, scale });
    if b == 0 {
        return int(a, sa);
    }
    if a == 0 {
        return int(b, sb);
    }
    let scaled = |v: i64, by: i32| (0..by).try_fold(v, |v, _| v.checked_mul(10));
    match sa.cmp(&sb) {
        Ordering::Equal => int(a.checked_add(b)?, sa),
        Ordering::Greater => int(scaled(a, sa - sb)?.checked_add(b)?, sb),
        Ordering::Less => int(a.checked_add(scaled(b, sb - sa)?)?, sa),
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Quantity {}

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

// ---------------------------------------------------------------------------------------------
// CEL functions
// ---------------------------------------------------------------------------------------------

pub(super) fn as_quantity(v: &Value) -> Option<&Quantity> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Quantity>(),
        _ => None,
    }
}

fn value(q: Quantity) -> Value {
    Value::Opaque(Arc::new(q))
}

/// `quantity(string)`.
pub(super) fn quantity(ftx: &FunctionContext, s: Arc<String>) -> Result<Value, ExecutionError> {
    Quantity::parse(&s).map(value).map_err(|e| ftx.error(e))
}

/// `isQuantity(string)`.
pub(super) fn is_quantity(s: Arc<String>) -> bool {
    Quantity::parse(&s).is_ok()
}

fn receiver<'a>(ftx: &FunctionContext, v: &'a Value) -> Result<&'a Quantity, ExecutionError> {
    as_quantity(v).ok_or_else(|| ftx.error("no such overload"))
}

/// `sign(Quantity)`.
pub(super) fn sign(ftx: &FunctionContext, q: Value) -> Result<i64, ExecutionError> {
    Ok(receiver(ftx, &q)?.sign())
}

/// `<Quantity>.asInteger()`.
pub(super) fn as_integer(ftx: &FunctionContext, q: &Value) -> Result<i64, ExecutionError> {
    receiver(ftx, q)?
        .as_int64()
        .ok_or_else(|| ftx.error("cannot convert value to integer"))
}

/// `<Quantity>.isInteger()`.
pub(super) fn is_integer(ftx: &FunctionContext, q: &Value) -> Result<bool, ExecutionError> {
    Ok(receiver(ftx, q)?.as_int64().is_some())
}

/// `<Quantity>.asApproximateFloat()`.
pub(super) fn as_approximate_float(
    ftx: &FunctionContext,
    q: &Value,
) -> Result<f64, ExecutionError> {
    Ok(receiver(ftx, q)?.as_approximate_float())
}

/// `<Quantity>.add(Quantity|int)` (`sub` when `negate`): an int is `NewQuantity(i, DecimalExponent)`.
pub(super) fn add(
    ftx: &FunctionContext,
    q: &Value,
    y: &Value,
    negate: bool,
) -> Result<Value, ExecutionError> {
    let q = receiver(ftx, q)?;
    let y = match y {
        Value::Int(i) => Quantity::Int {
            value: *i,
            scale: 0,
        },
        other => receiver(ftx, other)?.clone(),
    };
    Ok(value(if negate { q.sub(&y) } else { q.add(&y) }))
}

/// Registers the library's functions but the comparisons, which `isLessThan`, `isGreaterThan`
/// and `compareTo` share with semver (see [`super::library`]).
pub(super) fn register(c: &mut Context<'_, '_>) -> Result<(), DeclarationError> {
    c.add_function("quantity", quantity)?;
    c.add_function("isQuantity", is_quantity)?;
    c.add_function("sign", sign)?;
    c.add_function(
        "asInteger",
        |ftx: &FunctionContext, This(q): This<Value>| as_integer(ftx, &q),
    )?;
    c.add_function(
        "isInteger",
        |ftx: &FunctionContext, This(q): This<Value>| is_integer(ftx, &q),
    )?;
    c.add_function(
        "asApproximateFloat",
        |ftx: &FunctionContext, This(q): This<Value>| as_approximate_float(ftx, &q),
    )?;
    c.add_function(
        "add",
        |ftx: &FunctionContext, This(q): This<Value>, y: Value| add(ftx, &q, &y, false),
    )?;
    c.add_function(
        "sub",
        |ftx: &FunctionContext, This(q): This<Value>, y: Value| add(ftx, &q, &y, true),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    /// apimachinery resource.ParseQuantity as quantity_test.go (k8s.io/apiserver
    /// pkg/cel/library) relies on it: "parseInvalidSuffix" fails the grammar,
    /// "parseInvalidSuffixPassesRegex" the suffix.
    #[test]
    fn parse_errors_are_kubernetes_errors() {
        assert_eq!(
            Quantity::parse("10Mo").unwrap_err(),
            ParseError::FormatWrong
        );
        assert_eq!(Quantity::parse("10Mm").unwrap_err(), ParseError::Suffix);
        assert_eq!(Quantity::parse("200K").unwrap_err(), ParseError::Suffix);
        assert_eq!(
            Quantity::parse("Three").unwrap_err(),
            ParseError::FormatWrong
        );
        assert_eq!(
            Quantity::parse("1,3G").unwrap_err(),
            ParseError::FormatWrong
        );
        assert_eq!(Quantity::parse("").unwrap_err(), ParseError::FormatWrong);
        // quantity.go's doc calls 'Mi' an error, but ParseQuantity reads an empty number as
        // zero (cel-go with k8s.io/apiserver v0.37.2: `isQuantity("Mi")` is true).
        assert_eq!(q("Mi"), q("0"));
        assert_eq!(
            Quantity::parse("1e99999").unwrap_err(),
            ParseError::ExponentRange
        );
        for ok in [
            "1.3G", "1.3Gi", "10000k", "20", "20M", "20Mi", "1.G", "-5m", "+7", "1e3", "1E-3",
        ] {
            assert!(Quantity::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn values_compare_exactly() {
        assert_eq!(q("200M"), q("0.2G"));
        assert_eq!(q("2M"), q("0.002G"));
        assert_eq!(q("1Ki"), q("1024"));
        assert_eq!(q("1.5Ki"), q("1536"));
        assert_eq!(q("1e3"), q("1k"));
        assert_eq!(q("50M").cmp(&q("50Mi")), Ordering::Less);
        assert_eq!(q("-1").cmp(&q("0")), Ordering::Less);
        // Rounded up (away from zero) to nano.
        assert_eq!(q("0.0000000001"), q("1n"));
        assert_eq!(q("-0.0000000001"), q("-1n"));
        // Binary values are capped at 2^63-1.
        assert_eq!(q("100Ei"), q("9223372036854775807"));
        assert_ne!(q("100E"), q("9223372036854775807"));
    }

    /// quantity_test.go "as_integer", "as_integer_error", "is_integer", "arith_chain": what
    /// `AsInt64` gives depends on the representation.
    #[test]
    fn as_int64_follows_the_representation() {
        assert_eq!(q("50k").as_int64(), Some(50_000));
        assert_eq!(q("9999999999999999999999999999999999999G").as_int64(), None);
        assert_eq!(q("1000m").as_int64(), None);
        assert_eq!(q("1.5Ki").as_int64(), None);
        assert_eq!(
            q("50k").add(&q("20")).sub(&q("100k")).as_int64(),
            Some(-49_980)
        );
        assert_eq!(q("50.703k").as_approximate_float(), 50703.0);
        assert_eq!(q("-3").sign(), -1);
        assert_eq!(q("0").sign(), 0);
    }

    /// k8s.io/apiserver pkg/cel/library/quantity_test.go `TestQuantity`, case by case (its
    /// names), through gitfleet's CEL environment.
    #[test]
    fn quantity_test_go_cases() {
        use crate::schedule::ocm::cel::{run_cases, Want};
        let f = || Want::Value(Value::Bool(false));
        run_cases(&[
            (
                "parse",
                r#"quantity("12Mi")"#,
                Want::Value(value(q("12Mi"))),
            ),
            (
                "parseInvalidSuffix",
                r#"quantity("10Mo")"#,
                Want::EvalError("quantities must match the regular expression"),
            ),
            (
                "parseInvalidSuffixPassesRegex",
                r#"quantity("10Mm")"#,
                Want::EvalError("unable to parse quantity's suffix"),
            ),
            (
                "isQuantity",
                r#"isQuantity("20")"#,
                Want::Value(Value::Bool(true)),
            ),
            (
                "isQuantity_megabytes",
                r#"isQuantity("20M")"#,
                Want::Value(Value::Bool(true)),
            ),
            (
                "isQuantity_mebibytes",
                r#"isQuantity("20Mi")"#,
                Want::Value(Value::Bool(true)),
            ),
            ("isQuantity_invalidSuffix", r#"isQuantity("20Mo")"#, f()),
            ("isQuantity_passingRegex", r#"isQuantity("10Mm")"#, f()),
            (
                "isQuantity_noOverload",
                r#"isQuantity([1, 2, 3])"#,
                Want::CompileError("found no matching overload for 'isQuantity'"),
            ),
            (
                "equality_reflexivity",
                r#"quantity("200M") == quantity("200M")"#,
                Want::Value(Value::Bool(true)),
            ),
            (
                "equality_symmetry",
                r#"quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")"#,
                Want::Value(Value::Bool(true)),
            ),
            (
                "equality_transitivity",
                r#"quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M") && quantity("0.002G") == quantity("2000k")"#,
                Want::Value(Value::Bool(true)),
            ),
            ("inequality", r#"quantity("200M") == quantity("0.3G")"#, f()),
            (
                "quantity_less",
                r#"quantity("50M").isLessThan(quantity("50Mi"))"#,
                Want::Value(Value::Bool(true)),
            ),
            (
                "quantity_less_obvious",
                r#"quantity("50M").isLessThan(quantity("100M"))"#,
                Want::Value(Value::Bool(true)),
            ),
            (
                "quantity_less_false",
                r#"quantity("100M").isLessThan(quantity("50M"))"#,
                f(),
            ),
            (
                "quantity_greater",
                r#"quantity("50Mi").isGreaterThan(quantity("50M"))"#,
                Want::Value(Value::Bool(true)),
            ),
            (
                "quantity_greater_obvious",
                r#"quantity("150Mi").isGreaterThan(quantity("100Mi"))"#,
                Want::Value(Value::Bool(true)),
            ),
            (
                "quantity_greater_false",
                r#"quantity("50M").isGreaterThan(quantity("100M"))"#,
                f(),
            ),
            (
                "compare_equal",
                r#"quantity("200M").compareTo(quantity("0.2G"))"#,
                Want::Value(Value::Int(0)),
            ),
            (
                "compare_less",
                r#"quantity("50M").compareTo(quantity("50Mi"))"#,
                Want::Value(Value::Int(-1)),
            ),
            (
                "compare_greater",
                r#"quantity("50Mi").compareTo(quantity("50M"))"#,
                Want::Value(Value::Int(1)),
            ),
            (
                "add_quantity",
                r#"quantity("50k").add(quantity("20")) == quantity("50.02k")"#,
                Want::Value(Value::Bool(true)),
            ),
            (
                "add_int",
                r#"quantity("50k").add(20).isLessThan(quantity("50020"))"#,
                f(),
            ),
            (
                "sub_quantity",
                r#"quantity("50k").sub(quantity("20")) == quantity("49.98k")"#,
                Want::Value(Value::Bool(true)),
            ),
            (
                "sub_int",
                r#"quantity("50k").sub(20) == quantity("49980")"#,
                Want::Value(Value::Bool(true)),
            ),
            (
                "arith_chain_1",
                r#"quantity("50k").add(20).sub(quantity("100k")).asInteger()"#,
                Want::Value(Value::Int(-49980)),
            ),
            (
                "arith_chain",
                r#"quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger()"#,
                Want::Value(Value::Int(20)),
            ),
            (
                "as_integer",
                r#"quantity("50k").asInteger()"#,
                Want::Value(Value::Int(50000)),
            ),
            (
                "as_integer_error",
                r#"quantity("9999999999999999999999999999999999999G").asInteger()"#,
                Want::EvalError("cannot convert value to integer"),
            ),
            (
                "is_integer",
                r#"quantity("9999999999999999999999999999999999999G").isInteger()"#,
                f(),
            ),
            (
                "is_integer",
                r#"quantity("50").isInteger()"#,
                Want::Value(Value::Bool(true)),
            ),
            (
                "as_float",
                r#"quantity("50.703k").asApproximateFloat()"#,
                Want::Value(Value::Float(50703.0)),
            ),
            (
                "add_does_not_mutate_receiver",
                r#"[quantity("9999999999999999999999999999999999999")].all(x, x.add(quantity("1")).compareTo(x.add(quantity("2"))) == -1)"#,
                Want::Value(Value::Bool(true)),
            ),
        ]);
    }

    /// quantity.go's documented examples, and what cel-go's checker says of `sign` (a global
    /// function: `q.sign()` does not compile), checked with cel-go and k8s.io/apiserver
    /// v0.37.2 by hand.
    #[test]
    fn documented_examples_and_calls() {
        use crate::schedule::ocm::cel::{run_cases, Want};
        let t = || Want::Value(Value::Bool(true));
        run_cases(&[
            ("isQuantity 1.3G", "isQuantity('1.3G')", t()),
            ("isQuantity 1.3Gi", "isQuantity('1.3Gi')", t()),
            (
                "isQuantity 1,3G",
                "isQuantity('1,3G')",
                Want::Value(Value::Bool(false)),
            ),
            ("isQuantity 10000k", "isQuantity('10000k')", t()),
            (
                "isQuantity 200K",
                "isQuantity('200K')",
                Want::Value(Value::Bool(false)),
            ),
            (
                "isQuantity Three",
                "isQuantity('Three')",
                Want::Value(Value::Bool(false)),
            ),
            (
                "50000000G isInteger",
                "quantity('50000000G').isInteger()",
                t(),
            ),
            (
                "50k sub asApproximateFloat",
                "quantity('50k').sub(20000).asApproximateFloat() == 30000.0",
                t(),
            ),
            (
                "add chain",
                "quantity('50k').add(20).sub(quantity('100k')).sub(-50000) == quantity('20')",
                t(),
            ),
            (
                "compareTo 200M 0.2G",
                "quantity('200M').compareTo(quantity('0.2G')) == 0",
                t(),
            ),
            (
                "1.5Ki is no int64",
                "quantity('1.5Ki').isInteger()",
                Want::Value(Value::Bool(false)),
            ),
            (
                "sign",
                "sign(quantity('-3')) == -1 && sign(quantity('0')) == 0",
                t(),
            ),
            (
                "sign member",
                "quantity('-3').sign() == -1",
                Want::CompileError("found no matching overload for 'sign'"),
            ),
            (
                "add string",
                "quantity('50k').add('20k') == quantity('70k')",
                Want::CompileError("found no matching overload for 'add'"),
            ),
            (
                "quantity int",
                "quantity(1)",
                Want::CompileError("found no matching overload for 'quantity'"),
            ),
            (
                "compare semver",
                "quantity('1').isLessThan(semver('1.0.0'))",
                Want::CompileError("found no matching overload for 'isLessThan'"),
            ),
        ]);
    }
}
