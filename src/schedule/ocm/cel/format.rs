//! Kubernetes' format CEL library as OCM registers it (`library.Format()` in sdk-go's
//! `BaseEnvOpts`; k8s.io/apiserver pkg/cel/library/format.go): `format.named(string)` (an
//! optional format), `format.<name>()` for each named format, and
//! `<Format>.validate(string)`: `optional.none()` when the string is valid, else the optional
//! list of Kubernetes' error messages.
//!
//! The checks and their texts are k8s.io/apimachinery's (`IsDNS1123Label`,
//! `IsDNS1123Subdomain`, `IsDNS1035Label`, `IsQualifiedName`, `IsValidLabelValue`, the `Prefix`
//! variants' `maskTrailingDash`), `url.ParseRequestURI` for `uri` ([`super::url`]), and
//! kube-openapi's strfmt for `uuid`, `byte` (base64), `date` and `datetime`.
//!
//! Pure: values in, values out.

use super::url::GoUrl;
use cel::extractors::This;
use cel::objects::{Opaque, OptionalValue};
use cel::{Context, DeclarationError, ExecutionError, FunctionContext, Value};
use regex::Regex;
use std::sync::{Arc, LazyLock};

/// A `kubernetes.NamedFormat`, by its `format.<name>()` name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Format(&'static str);

impl Opaque for Format {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.NamedFormat"
    }
}

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("the format patterns are valid")
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";

static DNS1123_LABEL: LazyLock<Regex> = LazyLock::new(|| regex(&format!("^{DNS1123_LABEL_FMT}$")));
static DNS1123_SUBDOMAIN: LazyLock<Regex> =
    LazyLock::new(|| regex(&format!("^{DNS1123_SUBDOMAIN_FMT}$")));
static DNS1035_LABEL: LazyLock<Regex> = LazyLock::new(|| regex(&format!("^{DNS1035_LABEL_FMT}$")));
static LABEL_KEY: LazyLock<Regex> = LazyLock::new(|| regex(&format!("^{LABEL_KEY_FMT}$")));
static LABEL_VALUE: LazyLock<Regex> = LazyLock::new(|| regex(&format!("^{LABEL_VALUE_FMT}$")));
static UUID: LazyLock<Regex> = LazyLock::new(|| {
    regex("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static BASE64: LazyLock<Regex> = LazyLock::new(|| {
    regex("^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")
});
static DATE_TIME: LazyLock<Regex> = LazyLock::new(|| {
    regex("^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
});

/// apimachinery's `RegexError`.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let e: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{msg} (e.g. {}regex used for validation is '{fmt}')",
        e.join(" or ")
    )
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

fn dns1123_label(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !DNS1123_LABEL.is_match(v) {
        if DNS1123_SUBDOMAIN.is_match(v) {
            errs.push("must not contain dots".into());
        } else {
            errs.push(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

fn dns1123_subdomain(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !DNS1123_SUBDOMAIN.is_match(v) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

fn dns1035_label(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !DNS1035_LABEL.is_match(v) {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

const LABEL_KEY_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// `IsQualifiedName` (`content.IsLabelKey`).
fn qualified_name(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = v.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".into());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !LABEL_KEY.is_match(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_MSG,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

fn label_value(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !LABEL_VALUE.is_match(v) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `maskTrailingDash`: a trailing dash allowed for a generated name's prefix (it replaces the
/// last two characters by `a`, as Kubernetes does).
fn mask_trailing_dash(name: &str) -> String {
    if name.len() > 1 && name.ends_with('-') {
        let cut = name.len() - 2;
        if name.is_char_boundary(cut) {
            return format!("{}a", &name[..cut]);
        }
    }
    name.to_string()
}

/// Go's `time.Parse("2006-01-02", s)`.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        b[r.clone()]
            .iter()
            .all(u8::is_ascii_digit)
            .then(|| s[r].parse().ok())?
    };
    let (Some(y), Some(m), Some(d)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// strfmt's `IsDateTime`.
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    let Some(m) = DATE_TIME.captures(parts[1]) else {
        return false;
    };
    &m[1] <= "23" && &m[2] <= "59" && &m[3] <= "59"
}

impl Format {
    fn named(name: &str) -> Option<Format> {
        super::check::FORMAT_NAMES
            .iter()
            .find(|n| **n == name)
            .map(|n| Format(n))
    }

    /// The format's errors for `s`; empty when it is valid.
    pub(super) fn validate(&self, s: &str) -> Vec<String> {
        let one = |ok: bool, msg: &str| if ok { vec![] } else { vec![msg.to_string()] };
        match self.0 {
            "dns1123Label" => dns1123_label(s),
            "dns1123Subdomain" => dns1123_subdomain(s),
            "dns1035Label" => dns1035_label(s),
            "qualifiedName" => qualified_name(s),
            "dns1123LabelPrefix" => dns1123_label(&mask_trailing_dash(s)),
            "dns1123SubdomainPrefix" => dns1123_subdomain(&mask_trailing_dash(s)),
            "dns1035LabelPrefix" => dns1035_label(&mask_trailing_dash(s)),
            "labelValue" => label_value(s),
            "uri" => GoUrl::request_uri_error(s).into_iter().collect(),
            "uuid" => one(UUID.is_match(s), "does not match the UUID format"),
            "byte" => one(BASE64.is_match(s), "invalid base64"),
            "date" => one(is_date(s), "invalid date"),
            "datetime" => one(is_date_time(s), "invalid datetime"),
            _ => vec![],
        }
    }
}

/// Registers `format.named`, the `format.<name>()` constructors and `validate`.
pub(super) fn register(c: &mut Context<'_, '_>) -> Result<(), DeclarationError> {
    c.add_function("format.named", |name: Arc<String>| {
        Value::Opaque(Arc::new(match Format::named(&name) {
            Some(f) => OptionalValue::of(Value::Opaque(Arc::new(f))),
            None => OptionalValue::none(),
        }))
    })?;
    for name in super::check::FORMAT_NAMES.iter().copied() {
        c.add_function(&format!("format.{name}"), move || {
            Value::Opaque(Arc::new(Format(name)))
        })?;
    }
    c.add_function(
        "validate",
        |ftx: &FunctionContext, This(f): This<Value>, s: Arc<String>| {
            let format = match &f {
                Value::Opaque(o) => o.downcast_ref::<Format>(),
                _ => None,
            }
            .ok_or_else(|| ftx.error("no such overload"))?;
            let errs = format.validate(&s);
            let optional = if errs.is_empty() {
                OptionalValue::none()
            } else {
                OptionalValue::of(Value::List(Arc::new(
                    errs.into_iter().map(Value::from).collect(),
                )))
            };
            Ok::<Value, ExecutionError>(Value::Opaque(Arc::new(optional)))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errs(format: &str, s: &str) -> Vec<String> {
        Format::named(format).unwrap().validate(s)
    }

    /// k8s.io/apiserver pkg/cel/library/format_test.go `TestFormat`, case by case.
    #[test]
    fn validate_as_format_test() {
        for (format, ok) in [
            ("dns1123Label", "my-label-name"),
            ("dns1123Subdomain", "apiextensions.k8s.io"),
            ("qualifiedName", "apiextensions.k8s.io/v1beta1"),
            ("dns1123LabelPrefix", "my-label-prefix-"),
            ("dns1123SubdomainPrefix", "mysubdomain.prefix.-"),
            ("dns1035LabelPrefix", "my-label-prefix-"),
            ("uri", "http://example.com"),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000"),
            ("byte", "aGVsbG8="),
            ("date", "2021-01-01"),
            ("datetime", "2021-01-01T00:00:00Z"),
            ("dns1123Subdomain", "example.com"),
            ("dns1035Label", "my-label-name"),
            ("qualifiedName", "my.name"),
            ("date", "2020-01-01"),
            ("datetime", "2020-01-01T00:00:00Z"),
            ("labelValue", "my-cool-label-Value"),
        ] {
            assert_eq!(errs(format, ok), Vec::<String>::new(), "{format} {ok}");
        }
        let label = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
        let subdomain = r"a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        let dns1035 = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
        for (format, bad, want) in [
            ("dns1123Label", "contains a space", label),
            ("dns1123Subdomain", "contains a space", subdomain),
            ("dns1035Label", "contains a space", dns1035),
            ("qualifiedName", "contains a space", "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
            ("dns1123LabelPrefix", "contains a space-", label),
            ("dns1123SubdomainPrefix", "contains a space-", subdomain),
            ("dns1035LabelPrefix", "contains a space-", dns1035),
            ("byte", "aGVsbG8", "invalid base64"),
            ("date", "2020-01-32", "invalid date"),
            ("datetime", "2020-01-32T00:00:00Z", "invalid datetime"),
            ("labelValue", "my-cool-label-Value!!\n\n!!!", "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
        ] {
            assert_eq!(errs(format, bad), vec![want.to_string()], "{format} {bad:?}");
        }
        // "unknown_format".
        assert!(Format::named("unknown").is_none());
    }

    /// apimachinery's IsDNS1123Label: a valid subdomain that is no label "must not contain
    /// dots"; lengths are checked first.
    #[test]
    fn label_errors_name_the_problem() {
        assert_eq!(
            errs("dns1123Label", "a.b"),
            vec!["must not contain dots".to_string()]
        );
        assert_eq!(
            errs("dns1123Label", &"a".repeat(64))[0],
            "must be no more than 63 characters"
        );
        assert!(errs("date", "2021-02-29").len() == 1 && errs("date", "2024-02-29").is_empty());
        assert!(errs("uri", "../relative").len() == 1);
    }

    /// format_test.go `TestFormat` through the CEL environment: `validate`'s optional,
    /// `format.named`, and the comparisons of every constant with every other.
    #[test]
    fn format_test_go_cases() {
        use crate::schedule::ocm::cel::{run_cases, Want};
        let t = || Want::Value(Value::Bool(true));
        run_cases(&[
            (
                "example_usage_dns1123Label",
                r#"format.dns1123Label().validate("my-label-name") == optional.none()"#,
                t(),
            ),
            (
                "byte_failure",
                r#"format.byte().validate("aGVsbG8") == optional.of(["invalid base64"])"#,
                t(),
            ),
            (
                "date_failure",
                r#"format.date().validate("2020-01-32").value() == ["invalid date"]"#,
                t(),
            ),
            (
                "unknown_format",
                r#"format.named("unknown").hasValue()"#,
                Want::Value(Value::Bool(false)),
            ),
            (
                "not a format",
                r#"format.unknown()"#,
                Want::CompileError("undeclared reference to 'format.unknown'"),
            ),
            (
                "format with an argument",
                r#"format.uuid(1)"#,
                Want::CompileError("found no matching overload for 'format.uuid'"),
            ),
            (
                "validate a number",
                r#"format.uuid().validate(1)"#,
                Want::CompileError("found no matching overload for 'validate'"),
            ),
        ]);
        for lhs in crate::schedule::ocm::cel::check::FORMAT_NAMES {
            let named = format!(
                r#"format.named("{lhs}").hasValue() && format.named("{lhs}").value() == format.{lhs}()"#
            );
            assert_eq!(
                crate::schedule::ocm::cel::eval(&named),
                Ok(Value::Bool(true)),
                "{named}"
            );
            for rhs in crate::schedule::ocm::cel::check::FORMAT_NAMES {
                let expr = format!("format.{lhs}() == format.{rhs}()");
                let want = Ok(Value::Bool(lhs == rhs));
                assert_eq!(crate::schedule::ocm::cel::eval(&expr), want, "{expr}");
            }
        }
    }
}
