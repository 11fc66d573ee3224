//! Kubernetes' list CEL library as OCM registers it (`library.Lists()` in sdk-go's
//! `BaseEnvOpts`; k8s.io/apiserver pkg/cel/library/lists.go): on a list, `isSorted()`,
//! `sum()`, `min()`, `max()`, `indexOf(x)` and `lastIndexOf(x)`.
//!
//! Elements compare as cel-go's `Compare` does (ints, uints and doubles with each other;
//! strings, bools, bytes with their own kind); a list of anything else is an evaluation error.
//! cel-go picks `sum`'s overload from the list's static type, so the sum of an empty list of
//! doubles is `0.0` there; cel-rust has no static types, so an empty list sums to `0` here,
//! which compares equal to `0.0`.
//!
//! Pure: values in, values out.

use cel::common::types::{CelInt, DYN_TYPE, LIST_TYPE};
use cel::common::value::CowVal;
use cel::extractors::This;
use cel::{Context, DeclarationError, Env, ExecutionError, FunctionContext, Value};
use std::cmp::Ordering;

/// cel-go's `Compare` between two comparable values; `None` when they do not compare.
fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    use Value::{Bool, Bytes, Float, Int, String, UInt};
    match (a, b) {
        (Int(x), Int(y)) => Some(x.cmp(y)),
        (UInt(x), UInt(y)) => Some(x.cmp(y)),
        (Float(x), Float(y)) => x.partial_cmp(y),
        (Int(x), UInt(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        (UInt(x), Int(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        (Int(x), Float(y)) => (*x as f64).partial_cmp(y),
        (Float(x), Int(y)) => x.partial_cmp(&(*y as f64)),
        (UInt(x), Float(y)) => (*x as f64).partial_cmp(y),
        (Float(x), UInt(y)) => x.partial_cmp(&(*y as f64)),
        (String(x), String(y)) => Some(x.cmp(y)),
        (Bool(x), Bool(y)) => Some(x.cmp(y)),
        (Bytes(x), Bytes(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

fn list<'a>(ftx: &FunctionContext, this: &'a Value) -> Result<&'a [Value], ExecutionError> {
    match this {
        Value::List(l) => Ok(l),
        _ => Err(ftx.error("no such overload")),
    }
}

/// A value cel-go can `Compare` (a `traits.Comparer`).
fn comparable(v: &Value) -> bool {
    matches!(
        v,
        Value::Int(_)
            | Value::UInt(_)
            | Value::Float(_)
            | Value::String(_)
            | Value::Bool(_)
            | Value::Bytes(_)
    )
}

/// `<list>.isSorted()`: false only where an element compares greater than the next; two
/// elements that do not compare with each other (`['a', 1]`) are an error value in cel-go,
/// which is not "greater", so they do not unsort the list.
pub(super) fn is_sorted(ftx: &FunctionContext, this: &Value) -> Result<bool, ExecutionError> {
    let items = list(ftx, this)?;
    if !items.iter().all(comparable) {
        return Err(ftx.error("no such overload"));
    }
    Ok(!items
        .windows(2)
        .any(|pair| compare(&pair[0], &pair[1]) == Some(Ordering::Greater)))
}

/// `<list>.sum()`: ints and uints overflow as errors, as in cel-go.
pub(super) fn sum(ftx: &FunctionContext, this: &Value) -> Result<Value, ExecutionError> {
    let items = list(ftx, this)?;
    let Some((first, rest)) = items.split_first() else {
        return Ok(Value::Int(0));
    };
    rest.iter()
        .try_fold(first.clone(), |acc, next| match (&acc, next) {
            (Value::Int(a), Value::Int(b)) => a
                .checked_add(*b)
                .map(Value::Int)
                .ok_or_else(|| ftx.error("integer overflow")),
            (Value::UInt(a), Value::UInt(b)) => a
                .checked_add(*b)
                .map(Value::UInt)
                .ok_or_else(|| ftx.error("unsigned integer overflow")),
            (Value::Float(a), Value::Float(b)) => Ok(Value::Float(a + b)),
            _ => Err(ftx.error("no such overload")),
        })
        .and_then(|v| match v {
            Value::Int(_) | Value::UInt(_) | Value::Float(_) => Ok(v),
            _ => Err(ftx.error("no such overload")),
        })
}

/// `<list>.min()` and `<list>.max()`, by function name: the first of equal elements; as in
/// `isSorted`, elements that do not compare with the best so far do not replace it.
pub(super) fn extreme(ftx: &FunctionContext, this: &Value) -> Result<Value, ExecutionError> {
    let items = list(ftx, this)?;
    if !items.iter().all(comparable) {
        return Err(ftx.error("no such overload"));
    }
    let replace_when = if ftx.name == "min" {
        Ordering::Greater
    } else {
        Ordering::Less
    };
    let mut best: Option<&Value> = None;
    for next in items {
        best = Some(match best {
            Some(b) if compare(b, next) != Some(replace_when) => b,
            _ => next,
        });
    }
    best.cloned()
        .ok_or_else(|| ftx.error(format!("{} called on empty list", ftx.name)))
}

/// Registers `isSorted`, `sum`, `min` and `max` on an evaluation context.
pub(super) fn register(c: &mut Context<'_, '_>) -> Result<(), DeclarationError> {
    c.add_function("isSorted", |ftx: &FunctionContext, This(v): This<Value>| {
        is_sorted(ftx, &v)
    })?;
    c.add_function("sum", |ftx: &FunctionContext, This(v): This<Value>| {
        sum(ftx, &v)
    })?;
    for name in ["min", "max"] {
        c.add_function(name, |ftx: &FunctionContext, This(v): This<Value>| {
            extreme(ftx, &v)
        })?;
    }
    Ok(())
}

/// `indexOf` and `lastIndexOf` on lists: overloads beside the strings extension's, so declared
/// on the environment.
pub(super) fn declare(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload(
        "indexOf",
        "list_a_index_of_int",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_a_last_index_of_int",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )
}

fn position<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    last: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let name = if last { "lastIndexOf" } else { "indexOf" };
    let [items, item] = args.as_slice() else {
        return Err(ExecutionError::function_error(name, "no such overload"));
    };
    let (Value::List(items), item) = (
        Value::try_from(items.as_ref())?,
        Value::try_from(item.as_ref())?,
    ) else {
        return Err(ExecutionError::function_error(name, "no such overload"));
    };
    let found = if last {
        items.iter().rposition(|x| *x == item)
    } else {
        items.iter().position(|x| *x == item)
    };
    Ok(CowVal::owned(CelInt::from(found.map_or(-1, |i| i as i64))))
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, false)
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::ocm::cel::{run_cases, Want};

    /// lists.go's documented examples (k8s.io/apiserver pkg/cel/library has no lists test of
    /// its own), and the edges checked with cel-go and k8s.io/apiserver v0.37.2 by hand.
    #[test]
    fn documented_examples() {
        let t = || Want::Value(Value::Bool(true));
        let f = || Want::Value(Value::Bool(false));
        run_cases(&[
            ("isSorted ints", "[1, 2, 3].isSorted()", t()),
            ("isSorted strings", "['a', 'b', 'b', 'c'].isSorted()", t()),
            ("isSorted doubles", "[2.0, 1.0].isSorted()", f()),
            ("isSorted one", "[1].isSorted()", t()),
            ("isSorted empty", "[].isSorted()", t()),
            ("isSorted mixed numbers", "[1, 2.0].isSorted()", t()),
            ("isSorted bools", "[true, false].isSorted()", f()),
            ("sum ints", "[1, 3].sum()", Want::Value(Value::Int(4))),
            (
                "sum doubles",
                "[1.0, 3.0].sum()",
                Want::Value(Value::Float(4.0)),
            ),
            ("sum uints", "[1u, 2u].sum()", Want::Value(Value::UInt(3))),
            ("sum empty", "[].sum()", Want::Value(Value::Int(0))),
            (
                "sum overflow",
                "[9223372036854775807, 1].sum()",
                Want::EvalError("integer overflow"),
            ),
            ("min", "[1, 3].min()", Want::Value(Value::Int(1))),
            ("max", "[1, 3].max()", Want::Value(Value::Int(3))),
            (
                "min empty",
                "[].min()",
                Want::EvalError("min called on empty list"),
            ),
            ("min one", "[1].min()", Want::Value(Value::Int(1))),
            (
                "min strings",
                "['b', 'a'].min()",
                Want::Value(Value::from("a")),
            ),
            (
                "max mixed numbers",
                "[1, 2.0].max()",
                Want::Value(Value::Float(2.0)),
            ),
            (
                "indexOf",
                "[1, 2, 2, 3].indexOf(2)",
                Want::Value(Value::Int(1)),
            ),
            (
                "lastIndexOf",
                "['a', 'b', 'b', 'c'].lastIndexOf('b')",
                Want::Value(Value::Int(2)),
            ),
            (
                "indexOf missing",
                "[1.0].indexOf(1.1)",
                Want::Value(Value::Int(-1)),
            ),
            (
                "indexOf empty",
                "[].indexOf('string')",
                Want::Value(Value::Int(-1)),
            ),
            // The strings extension's overloads of the same names still answer.
            (
                "string indexOf",
                "'abcb'.indexOf('b') == 1 && 'abcb'.lastIndexOf('b') == 3",
                t(),
            ),
            (
                "isSorted of a string",
                "'abc'.isSorted()",
                Want::CompileError("found no matching overload for 'isSorted'"),
            ),
            (
                "sum with an argument",
                "[1].sum(1)",
                Want::CompileError("found no matching overload for 'sum'"),
            ),
            (
                "isSorted of lists",
                "[[1], [2]].isSorted()",
                Want::CompileError("found no matching overload for 'isSorted'"),
            ),
            (
                "isSorted of nulls",
                "[null].isSorted()",
                Want::EvalError("no such overload"),
            ),
            (
                "isSorted of a list and an int",
                "[[1], 1].isSorted()",
                Want::EvalError("no such overload"),
            ),
            ("isSorted of strings and ints", "['a', 1].isSorted()", t()),
            ("min of strings and ints", "[1, 'a'].min() == 1", t()),
            (
                "sum of strings",
                "['a'].sum()",
                Want::CompileError("found no matching overload for 'sum'"),
            ),
            (
                "sum of ints and doubles",
                "[1, 1.5].sum()",
                Want::EvalError("no such overload"),
            ),
            (
                "sum of mixed",
                "[1, 'a'].sum()",
                Want::EvalError("no such overload"),
            ),
            ("indexOf of lists", "[[1], [2]].indexOf([2]) == 1", t()),
            ("the list of a cluster", "['b', 'a', 'c'].max() == 'c'", t()),
        ]);
    }
}
