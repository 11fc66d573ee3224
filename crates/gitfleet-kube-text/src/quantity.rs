//! Kubernetes resource quantities (`100m`, `4Gi`, `1.5`, `2e3`) as used by property selectors,
//! sorters and live cluster properties.

use std::fmt;

/// A parsed quantity, held as an `f64` of base units (cores, bytes, plain numbers).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Quantity(pub f64);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a valid quantity: {reason}")]
pub struct QuantityError {
    pub input: String,
    pub reason: &'static str,
}

impl Quantity {
    pub fn parse(input: &str) -> Result<Self, QuantityError> {
        let err = |reason| QuantityError {
            input: input.to_string(),
            reason,
        };
        let s = input.trim();
        if s.is_empty() {
            return Err(err("empty"));
        }
        // The numeric part ends where the suffix starts; an exponent (`e3`/`E3`) counts as suffix
        // only when followed by an optional sign and digits.
        let bytes = s.as_bytes();
        let mut end = 0;
        if matches!(bytes[0], b'+' | b'-') {
            end = 1;
        }
        while end < bytes.len() && (bytes[end].is_ascii_digit() || bytes[end] == b'.') {
            end += 1;
        }
        let (number, suffix) = s.split_at(end);
        if number.is_empty() || number == "+" || number == "-" || number.matches('.').count() > 1 {
            return Err(err("it must start with a number"));
        }
        let base: f64 = number.parse().map_err(|_| err("bad number"))?;
        let multiplier = match suffix {
            "" => 1.0,
            "n" => 1e-9,
            "u" => 1e-6,
            "m" => 1e-3,
            "k" => 1e3,
            "M" => 1e6,
            "G" => 1e9,
            "T" => 1e12,
            "P" => 1e15,
            "E" => 1e18,
            "Ki" => 1024f64,
            "Mi" => 1024f64.powi(2),
            "Gi" => 1024f64.powi(3),
            "Ti" => 1024f64.powi(4),
            "Pi" => 1024f64.powi(5),
            "Ei" => 1024f64.powi(6),
            s if s.starts_with(['e', 'E']) => {
                let exp: i32 = s[1..].parse().map_err(|_| err("bad exponent"))?;
                10f64.powi(exp)
            }
            _ => return Err(err("unknown suffix")),
        };
        Ok(Quantity(base * multiplier))
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kubernetes_forms() {
        let cases = [
            ("100m", 0.1),
            ("4", 4.0),
            ("1.5", 1.5),
            ("2k", 2000.0),
            ("1Ki", 1024.0),
            ("4Gi", 4.0 * 1024.0 * 1024.0 * 1024.0),
            ("2e3", 2000.0),
            ("-1", -1.0),
        ];
        for (s, want) in cases {
            assert_eq!(Quantity::parse(s).unwrap().0, want, "{s}");
        }
    }

    #[test]
    fn rejects_garbage() {
        for s in ["", "abc", "1x", "1..2", "-", "e3"] {
            assert!(Quantity::parse(s).is_err(), "{s}");
        }
    }
}
