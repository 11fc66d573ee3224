//! Kubernetes JSONPath (client-go `util/jsonpath`), the dialect OCM's work agent reads feedback
//! paths in: the path is parsed as the template `{PATH}` and evaluated with
//! `AllowMissingKeys(true)`. The parser follows client-go's parser.go step by step (fields with
//! `\` escapes, `..`, `*`, `[i]`, `[start:end:step]`, `[*]`, unions `[a,b]`, `['key']`, filters
//! `[?(@.a == "x")]` and `[?(@.a)]`, quoted texts, numbers, `true`/`false`); evaluation follows
//! jsonpath.go: a missing key is no result, a null is skipped where Go's `template.Indirect`
//! skips it, an index out of bounds or an index on what is not a list is an error, filters
//! compare as Go's `text/template` (`==` between an int and a float is an error).
//!
//! What gitfleet refuses that client-go would parse (a feedback path is one expression): text
//! around the expression or a second one (`}` / `{` in the path), the `range`/`end` keywords
//! and any other bare identifier (client-go fails on it at evaluation: `unrecognized
//! identifier`), and a filter operator that is not one of `==`, `!=`, `<`, `>`, `<=`, `>=`
//! (an evaluation error there too).
//!
//! Where it differs from Go: a map's values are visited in the object's key order (`*`, `..`),
//! where Go's order is random; error texts print values as JSON, not Go's `%v`.
//!
//! Pure: a path and a JSON value in, the values found out.

use serde_json::Value;
use std::fmt;
use std::sync::LazyLock;

/// A parsed path.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    nodes: Vec<Node>,
}

/// A path that does not parse, with client-go's words where it has them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(String);

/// A path that failed on a value (what client-go's `FindResults` returns as an error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EvalError(String);

#[derive(Debug, Clone, PartialEq)]
enum Node {
    List(Vec<Node>),
    Text(String),
    Field(String),
    Array([Param; 3]),
    Filter {
        left: Vec<Node>,
        right: Vec<Node>,
        op: Op,
    },
    Int(i64),
    Float(f64),
    Bool(bool),
    Wildcard,
    Recursive,
    Union(Vec<Vec<Node>>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Param {
    value: i64,
    known: bool,
    derived: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Exists,
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
}

/// One value a path found: a part of the object, or what the path itself wrote (a quoted text
/// or a number), or a byte of a string (`*` over a string, as Go indexes strings by byte).
#[derive(Debug, Clone, PartialEq)]
pub enum Found<'a> {
    Json(&'a Value),
    Text(String),
    /// A number written in the path: Go's `int`, not the `int64` of decoded JSON.
    Int(i64),
    Float(f64),
    Bool(bool),
    Byte(u8),
}

impl Found<'_> {
    /// Go's `template.Indirect`: a JSON null is a nil interface.
    fn is_nil(&self) -> bool {
        matches!(self, Found::Json(Value::Null))
    }

    /// The Go type name of the value, as `reflect.TypeOf` prints it for an unstructured object.
    pub fn go_type(&self) -> &'static str {
        match self {
            Found::Json(Value::Null) => "<nil>",
            Found::Json(Value::Bool(_)) | Found::Bool(_) => "bool",
            Found::Json(Value::Number(n)) if n.is_i64() => "int64",
            Found::Json(Value::Number(_)) | Found::Float(_) => "float64",
            Found::Json(Value::String(_)) | Found::Text(_) => "string",
            Found::Json(Value::Array(_)) => "[]interface {}",
            Found::Json(Value::Object(_)) => "map[string]interface {}",
            Found::Int(_) => "int",
            Found::Byte(_) => "uint8",
        }
    }

    /// The value as JSON (for a raw feedback value).
    pub fn to_json(&self) -> Value {
        match self {
            Found::Json(v) => (*v).clone(),
            Found::Text(s) => Value::String(s.clone()),
            Found::Int(i) => Value::from(*i),
            Found::Float(f) => Value::from(*f),
            Found::Bool(b) => Value::Bool(*b),
            Found::Byte(b) => Value::from(*b),
        }
    }
}

impl fmt::Display for Found<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::Json(v) => write!(f, "{v}"),
            Found::Text(s) => f.write_str(s),
            Found::Int(i) => write!(f, "{i}"),
            Found::Float(x) => write!(f, "{x}"),
            Found::Bool(b) => write!(f, "{b}"),
            Found::Byte(b) => write!(f, "{b}"),
        }
    }
}

impl JsonPath {
    /// Parses `path` as the work agent does (`{path}`), keeping only what a feedback path can
    /// be: one expression.
    pub fn parse(path: &str) -> Result<JsonPath, ParseError> {
        let root = Parser::parse(&format!("{{{path}}}"))?;
        match root.as_slice() {
            [Node::List(nodes)] => Ok(JsonPath {
                nodes: nodes.clone(),
            }),
            _ => Err(ParseError(
                "a feedback path is one JSONPath expression, without `{` or `}` around or between expressions".into(),
            )),
        }
    }

    /// Every value the path finds in `data`, in order (client-go's `FindResults(...)[0]`).
    pub fn find<'a>(&self, data: &'a Value) -> Result<Vec<Found<'a>>, EvalError> {
        eval_list(vec![Found::Json(data)], &self.nodes)
    }
}

// ---------------------------------------------------------------------------------------------
// parsing (client-go parser.go)
// ---------------------------------------------------------------------------------------------

static DICT_KEY: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"^'([^']*)'$").expect("valid"));
static SLICE: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"^(-?[0-9]*)(:-?[0-9]*)?(:-?[0-9]*)?$").expect("valid"));
static FILTER: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"^([^!<>=]+)([!<>=]+)(.+?)$").expect("valid"));

struct Parser<'s> {
    input: &'s str,
    pos: usize,
    start: usize,
    width: usize,
    /// The top-level list and the action being parsed (by index into `root`).
    root: Vec<Node>,
}

/// `None` at the end of the input (Go's `eof`).
type Rune = Option<char>;

fn err<T>(message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError(message.into()))
}

impl<'s> Parser<'s> {
    fn parse(text: &'s str) -> Result<Vec<Node>, ParseError> {
        let mut p = Parser {
            input: text,
            pos: 0,
            start: 0,
            width: 0,
            root: Vec::new(),
        };
        p.parse_text()?;
        Ok(p.root)
    }

    /// `parseAction`: `{text}` parsed, its first action's nodes.
    fn action(text: &str) -> Result<Vec<Node>, ParseError> {
        let root = Parser::parse(&format!("{{{text}}}"))?;
        match root.into_iter().next() {
            Some(Node::List(nodes)) => Ok(nodes),
            _ => err(format!("invalid expression {text:?}")),
        }
    }

    fn consume_text(&mut self) -> &'s str {
        let value = &self.input[self.start..self.pos];
        self.start = self.pos;
        value
    }

    fn next(&mut self) -> Rune {
        match self.input[self.pos..].chars().next() {
            None => {
                self.width = 0;
                None
            }
            Some(c) => {
                self.width = c.len_utf8();
                self.pos += self.width;
                Some(c)
            }
        }
    }

    fn peek(&mut self) -> Rune {
        let r = self.next();
        self.backup();
        r
    }

    fn backup(&mut self) {
        self.pos -= self.width;
    }

    /// The byte before the rune just read (Go's `p.input[p.pos-2]` for a one-byte rune).
    fn escaped(&self) -> bool {
        self.pos >= 2 && self.input.as_bytes()[self.pos - 2] == b'\\'
    }

    fn parse_text(&mut self) -> Result<(), ParseError> {
        loop {
            if self.input[self.pos..].starts_with('{') {
                if self.pos > self.start {
                    let t = self.consume_text().to_string();
                    self.root.push(Node::Text(t));
                }
                return self.parse_left_delim();
            }
            if self.next().is_none() {
                break;
            }
        }
        if self.pos > self.start {
            let t = self.consume_text().to_string();
            self.root.push(Node::Text(t));
        }
        Ok(())
    }

    fn parse_left_delim(&mut self) -> Result<(), ParseError> {
        self.pos += 1;
        self.consume_text();
        // `parse_right_delim` puts the action in the root.
        self.parse_inside_action(&mut Vec::new())
    }

    fn parse_inside_action(&mut self, cur: &mut Vec<Node>) -> Result<(), ParseError> {
        loop {
            let rest = &self.input[self.pos..];
            if rest.starts_with('}') {
                return self.parse_right_delim(cur);
            }
            if rest.starts_with("[?(") {
                self.parse_filter(cur)?;
                continue;
            }
            if rest.starts_with("..") {
                self.parse_recursive(cur)?;
                continue;
            }
            match self.next() {
                None | Some('\r' | '\n') => return err("unclosed action"),
                Some(' ') => {
                    self.consume_text();
                }
                Some('@' | '$') => {
                    self.consume_text();
                }
                Some('[') => self.parse_array(cur)?,
                Some(q @ ('"' | '\'')) => self.parse_quote(cur, q)?,
                Some('.') => self.parse_field(cur),
                Some(c) if c == '+' || c == '-' || c.is_ascii_digit() => {
                    self.backup();
                    self.parse_number(cur)?;
                }
                Some(c) if is_alphanumeric(c) => {
                    self.backup();
                    self.parse_identifier(cur)?;
                }
                Some(c) => {
                    return err(format!(
                        "unrecognized character in action: U+{:04X} {c:?}",
                        c as u32
                    ))
                }
            }
        }
    }

    fn parse_right_delim(&mut self, cur: &mut Vec<Node>) -> Result<(), ParseError> {
        self.pos += 1;
        self.consume_text();
        self.root.push(Node::List(std::mem::take(cur)));
        self.parse_text()
    }

    fn parse_identifier(&mut self, cur: &mut Vec<Node>) -> Result<(), ParseError> {
        loop {
            let r = self.next();
            if is_terminator(r) {
                self.backup();
                break;
            }
        }
        let value = self.consume_text();
        match value {
            "true" => cur.push(Node::Bool(true)),
            "false" => cur.push(Node::Bool(false)),
            // client-go evaluates `range`/`end` and fails on any other identifier.
            other => return err(format!("unrecognized identifier {other}")),
        }
        Ok(())
    }

    fn parse_recursive(&mut self, cur: &mut Vec<Node>) -> Result<(), ParseError> {
        if matches!(cur.last(), Some(Node::Recursive)) {
            return err("invalid multiple recursive descent");
        }
        self.pos += 2;
        self.consume_text();
        cur.push(Node::Recursive);
        if self.peek().is_some_and(is_alphanumeric) {
            self.parse_field(cur);
        }
        Ok(())
    }

    fn parse_number(&mut self, cur: &mut Vec<Node>) -> Result<(), ParseError> {
        if matches!(self.peek(), Some('+' | '-')) {
            self.next();
        }
        loop {
            match self.next() {
                Some(c) if c == '.' || c.is_ascii_digit() => {}
                _ => {
                    self.backup();
                    break;
                }
            }
        }
        let value = self.consume_text();
        if let Ok(i) = value.parse::<i64>() {
            cur.push(Node::Int(i));
        } else if let Some(f) = parse_go_float(value) {
            cur.push(Node::Float(f));
        } else {
            return err(format!("cannot parse number {value}"));
        }
        Ok(())
    }

    fn parse_array(&mut self, cur: &mut Vec<Node>) -> Result<(), ParseError> {
        loop {
            match self.next() {
                None | Some('\n') => return err("unterminated array"),
                Some(']') => break,
                _ => {}
            }
        }
        let text = self.consume_text();
        let mut text = &text[1..text.len() - 1];
        if text == "*" {
            text = ":";
        }
        let parts: Vec<&str> = text.split(',').collect();
        if parts.len() > 1 {
            let union = parts
                .iter()
                .map(|s| Parser::action(&format!("[{}]", s.trim_matches(' '))))
                .collect::<Result<Vec<_>, _>>()?;
            cur.push(Node::Union(union));
            return Ok(());
        }
        if let Some(key) = DICT_KEY.captures(text) {
            cur.extend(Parser::action(&format!(".{}", &key[1]))?);
            return Ok(());
        }
        let Some(caps) = SLICE.captures(text) else {
            return err(format!("invalid array index {text}"));
        };
        let mut params = [Param::default(); 3];
        for i in 0..3 {
            let raw = caps.get(i + 1).map_or("", |m| m.as_str());
            if raw.is_empty() {
                if i == 1 {
                    params[1] = Param {
                        value: params[0].value + 1,
                        known: true,
                        derived: true,
                    };
                }
                continue;
            }
            let raw = if i > 0 { &raw[1..] } else { raw };
            if i > 0 && raw.is_empty() {
                continue;
            }
            let value = raw
                .parse::<i64>()
                .map_err(|_| ParseError(format!("array index {raw} is not a number")))?;
            params[i] = Param {
                value,
                known: true,
                derived: false,
            };
        }
        cur.push(Node::Array(params));
        Ok(())
    }

    fn parse_filter(&mut self, cur: &mut Vec<Node>) -> Result<(), ParseError> {
        self.pos += 3;
        self.consume_text();
        let (mut begin, mut end) = (false, false);
        let mut pair = '\0';
        loop {
            match self.next() {
                None | Some('\n') => return err("unterminated filter"),
                Some(q @ ('"' | '\'')) => {
                    if !begin {
                        begin = true;
                        pair = q;
                        continue;
                    }
                    if !self.escaped() && q == pair {
                        end = true;
                    }
                }
                Some(')') if begin == end => break,
                _ => {}
            }
        }
        if self.next() != Some(']') {
            return err("unclosed array expect ]");
        }
        let text = self.consume_text();
        let text = &text[..text.len() - 2];
        match FILTER.captures(text) {
            None => cur.push(Node::Filter {
                left: Parser::action(text)?,
                right: Vec::new(),
                op: Op::Exists,
            }),
            Some(c) => {
                let op = match &c[2] {
                    "==" => Op::Eq,
                    "!=" => Op::Ne,
                    "<" => Op::Lt,
                    ">" => Op::Gt,
                    "<=" => Op::Le,
                    ">=" => Op::Ge,
                    other => return err(format!("unrecognized filter operator {other}")),
                };
                cur.push(Node::Filter {
                    left: Parser::action(&c[1])?,
                    right: Parser::action(&c[3])?,
                    op,
                });
            }
        }
        Ok(())
    }

    fn parse_quote(&mut self, cur: &mut Vec<Node>, end: char) -> Result<(), ParseError> {
        loop {
            match self.next() {
                None | Some('\n') => return err("unterminated quoted string"),
                Some(c) if c == end && !self.escaped() => break,
                _ => {}
            }
        }
        let value = self.consume_text();
        let s = unquote(value)
            .ok_or_else(|| ParseError(format!("unquote string {value} error invalid syntax")))?;
        cur.push(Node::Text(s));
        Ok(())
    }

    fn parse_field(&mut self, cur: &mut Vec<Node>) {
        self.consume_text();
        while self.advance() {}
        let value = self.consume_text();
        if value == "*" {
            cur.push(Node::Wildcard);
        } else {
            cur.push(Node::Field(value.replace('\\', "")));
        }
    }

    fn advance(&mut self) -> bool {
        let r = self.next();
        if r == Some('\\') {
            self.next();
        } else if is_terminator(r) {
            self.backup();
            return false;
        }
        true
    }
}

fn is_terminator(r: Rune) -> bool {
    match r {
        None => true,
        Some(c) => matches!(
            c,
            ' ' | '\t' | '\r' | '\n' | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}'
        ),
    }
}

fn is_alphanumeric(c: char) -> bool {
    c == '_' || c.is_alphabetic() || c.is_numeric()
}

/// Go's `strconv.ParseFloat` for what `parseNumber` reads (digits, dots, a sign).
fn parse_go_float(s: &str) -> Option<f64> {
    let digits = s.trim_start_matches(['+', '-']);
    if digits.is_empty() || digits == "." || digits.matches('.').count() > 1 {
        return None;
    }
    s.parse().ok()
}

/// client-go's `UnquoteExtend`: Go's `strconv.Unquote` for `"..."` and `'...'` alike.
fn unquote(s: &str) -> Option<String> {
    let quote = s.chars().next()?;
    if s.len() < 2 || !s.ends_with(quote) || !matches!(quote, '"' | '\'') {
        return None;
    }
    let body = &s[1..s.len() - 1];
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c == quote {
            return None;
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = chars.next()?;
        let hex = |chars: &mut std::str::Chars, n: usize| -> Option<u32> {
            let h: String = chars.by_ref().take(n).collect();
            (h.len() == n).then_some(())?;
            u32::from_str_radix(&h, 16).ok()
        };
        match e {
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            '\\' => out.push('\\'),
            '\'' | '"' if e == quote => out.push(e),
            'x' => out.push(char::from_u32(hex(&mut chars, 2)?)?),
            'u' => out.push(char::from_u32(hex(&mut chars, 4)?)?),
            'U' => out.push(char::from_u32(hex(&mut chars, 8)?)?),
            '0'..='7' => {
                let rest: String = chars.by_ref().take(2).collect();
                let v = u32::from_str_radix(&format!("{e}{rest}"), 8).ok()?;
                (rest.len() == 2 && v <= 255).then_some(())?;
                out.push(char::from_u32(v)?);
            }
            _ => return None,
        }
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------------
// evaluation (client-go jsonpath.go, with AllowMissingKeys)
// ---------------------------------------------------------------------------------------------

fn eval_err<T>(message: impl Into<String>) -> Result<T, EvalError> {
    Err(EvalError(message.into()))
}

fn eval_list<'a>(mut cur: Vec<Found<'a>>, nodes: &[Node]) -> Result<Vec<Found<'a>>, EvalError> {
    for n in nodes {
        cur = walk(cur, n)?;
    }
    Ok(cur)
}

fn walk<'a>(input: Vec<Found<'a>>, node: &Node) -> Result<Vec<Found<'a>>, EvalError> {
    match node {
        Node::List(nodes) => eval_list(input, nodes),
        Node::Text(t) => Ok(vec![Found::Text(t.clone())]),
        Node::Int(i) => Ok(input.iter().map(|_| Found::Int(*i)).collect()),
        Node::Float(f) => Ok(input.iter().map(|_| Found::Float(*f)).collect()),
        Node::Bool(b) => Ok(input.iter().map(|_| Found::Bool(*b)).collect()),
        Node::Field(name) => Ok(input
            .into_iter()
            .filter_map(|v| match v {
                Found::Json(Value::Object(m)) => m.get(name).map(Found::Json),
                _ => None,
            })
            .collect()),
        Node::Array(params) => eval_array(input, params),
        Node::Filter { left, right, op } => eval_filter(input, left, right, *op),
        Node::Wildcard => Ok(input
            .iter()
            .filter(|v| !v.is_nil())
            .flat_map(|v| children(v))
            .collect()),
        Node::Recursive => Ok(recursive(input)),
        Node::Union(lists) => {
            let mut out = Vec::new();
            for l in lists {
                out.extend(eval_list(input.clone(), l)?);
            }
            Ok(out)
        }
    }
}

/// The children `*` and `..` visit: a map's values, a list's items, a string's bytes.
fn children<'a>(v: &Found<'a>) -> Vec<Found<'a>> {
    match v {
        Found::Json(Value::Object(m)) => m.values().map(Found::Json).collect(),
        Found::Json(Value::Array(a)) => a.iter().map(Found::Json).collect(),
        Found::Json(Value::String(s)) => s.bytes().map(Found::Byte).collect(),
        Found::Text(s) => s.bytes().map(Found::Byte).collect(),
        _ => Vec::new(),
    }
}

/// `evalRecursive`: every value with children, then its descendants with children.
fn recursive(input: Vec<Found<'_>>) -> Vec<Found<'_>> {
    let mut out = Vec::new();
    for v in input {
        if v.is_nil() {
            continue;
        }
        let children = children(&v);
        if !children.is_empty() {
            out.push(v);
            out.extend(recursive(children));
        }
    }
    out
}

fn eval_array<'a>(input: Vec<Found<'a>>, params: &[Param; 3]) -> Result<Vec<Found<'a>>, EvalError> {
    let mut result = Vec::new();
    for v in input {
        if v.is_nil() {
            continue;
        }
        let Found::Json(Value::Array(items)) = v else {
            return eval_err(format!("{} is not array or slice", v.go_type()));
        };
        let len = items.len() as i64;
        let [mut p0, mut p1, p2] = *params;
        if !p0.known {
            p0.value = 0;
        }
        if p0.value < 0 {
            p0.value += len;
        }
        if !p1.known {
            p1.value = len;
        }
        if p1.value < 0 || (p1.value == 0 && p1.derived) {
            p1.value += len;
        }
        if p1.value == p0.value {
            // Zero elements asked: what was found so far is the result (client-go returns here).
            return Ok(result);
        }
        if p0.value >= len || p0.value < 0 {
            return eval_err(format!(
                "array index out of bounds: index {}, length {len}",
                p0.value
            ));
        }
        if p1.value > len || p1.value < 0 {
            return eval_err(format!(
                "array index out of bounds: index {}, length {len}",
                p1.value - 1
            ));
        }
        if p0.value > p1.value {
            return eval_err(format!(
                "starting index {} is greater than ending index {}",
                p0.value, p1.value
            ));
        }
        let step = if p2.known {
            if p2.value <= 0 {
                return eval_err("step must be > 0");
            }
            p2.value as usize
        } else {
            1
        };
        result.extend(
            items[p0.value as usize..p1.value as usize]
                .iter()
                .step_by(step)
                .map(Found::Json),
        );
    }
    Ok(result)
}

fn eval_filter<'a>(
    input: Vec<Found<'a>>,
    left: &[Node],
    right: &[Node],
    op: Op,
) -> Result<Vec<Found<'a>>, EvalError> {
    let mut results = Vec::new();
    for v in input {
        let Found::Json(Value::Array(items)) = v else {
            return eval_err(format!("{v} is not array or slice and cannot be filtered"));
        };
        for item in items {
            let lefts = eval_list(vec![Found::Json(item)], left);
            if op == Op::Exists {
                if lefts.as_ref().is_ok_and(|l| !l.is_empty()) {
                    results.push(Found::Json(item));
                }
                continue;
            }
            let lefts = lefts?;
            let l = match lefts.as_slice() {
                [] => continue,
                [one] => one.clone(),
                _ => return eval_err("can only compare one element at a time"),
            };
            let rights = eval_list(vec![Found::Json(item)], right)?;
            let r = match rights.as_slice() {
                [] => continue,
                [one] => one.clone(),
                _ => return eval_err("can only compare one element at a time"),
            };
            if compare(&l, &r, op)? {
                results.push(Found::Json(item));
            }
        }
    }
    Ok(results)
}

/// A value as Go's `text/template` comparisons see it.
#[derive(Debug, Clone, PartialEq, PartialOrd)]
enum Basic {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    String(String),
}

fn basic(v: &Found) -> Result<Basic, EvalError> {
    Ok(match v {
        Found::Json(Value::Bool(b)) | Found::Bool(b) => Basic::Bool(*b),
        Found::Json(Value::Number(n)) => match n.as_i64() {
            Some(i) => Basic::Int(i),
            // What does not fit an int64 decodes as a float64 in an unstructured object.
            None => Basic::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Found::Int(i) => Basic::Int(*i),
        Found::Float(f) => Basic::Float(*f),
        Found::Byte(b) => Basic::Uint(u64::from(*b)),
        Found::Json(Value::String(s)) => Basic::String(s.clone()),
        Found::Text(s) => Basic::String(s.clone()),
        _ => return eval_err("invalid type for comparison"),
    })
}

fn compare(l: &Found, r: &Found, op: Op) -> Result<bool, EvalError> {
    let (a, b) = (basic(l)?, basic(r)?);
    let equal = || -> Result<bool, EvalError> {
        match (&a, &b) {
            (Basic::Int(x), Basic::Uint(y)) | (Basic::Uint(y), Basic::Int(x)) => {
                Ok(*x >= 0 && *x as u64 == *y)
            }
            _ if std::mem::discriminant(&a) != std::mem::discriminant(&b) => {
                eval_err("incompatible types for comparison")
            }
            _ => Ok(a == b),
        }
    };
    let less = || -> Result<bool, EvalError> {
        match (&a, &b) {
            (Basic::Int(x), Basic::Uint(y)) => Ok(*x < 0 || (*x as u64) < *y),
            (Basic::Uint(x), Basic::Int(y)) => Ok(*y >= 0 && *x < *y as u64),
            _ if std::mem::discriminant(&a) != std::mem::discriminant(&b) => {
                eval_err("incompatible types for comparison")
            }
            (Basic::Bool(_), _) => eval_err("invalid type for comparison"),
            _ => Ok(a < b),
        }
    };
    match op {
        Op::Exists => Ok(true),
        Op::Eq => equal(),
        Op::Ne => equal().map(|e| !e),
        Op::Lt => less(),
        // As Go: `<=` is `<` or `==`; `>` is not `<=`; `>=` is not `<`.
        Op::Le => Ok(less()? || equal()?),
        Op::Gt => Ok(!(less()? || equal()?)),
        Op::Ge => less().map(|l| !l),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn find(path: &str, data: &Value) -> Result<Vec<Value>, String> {
        let p = JsonPath::parse(path).map_err(|e| format!("parse: {e}"))?;
        p.find(data)
            .map(|v| v.iter().map(Found::to_json).collect())
            .map_err(|e| e.to_string())
    }

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "test",
                "labels": {"app.kubernetes.io/name": "web", "tier": "front"}},
            "status": {"readyReplicas": 1, "replicas": 2, "ratio": 0.5, "gone": null,
                "conditions": [{"type": "Available", "status": "True", "n": 1},
                               {"type": "Progressing", "status": "False", "n": 2}]}
        })
    }

    /// Paths as OCM's tests and documents write them (ocm
    /// pkg/work/spoke/statusfeedback/reader_test.go, TestStatusReader) and the rest of the
    /// syntax, with what client-go's jsonpath.go finds (read from its code).
    #[test]
    fn paths_find_what_client_go_finds() {
        let d = deployment();
        for (path, want) in [
            (".status.readyReplicas", json!([1])),
            // A trailing space, as reader_test.go's "deployment jsonpaths" writes it.
            (
                ".status.conditions[?(@.type==\"Available\")].status ",
                json!(["True"]),
            ),
            (
                ".status.conditions[?(@.type=='Progressing')].status",
                json!(["False"]),
            ),
            ("$.status.replicas", json!([2])),
            (
                ".status.conditions[*].type",
                json!(["Available", "Progressing"]),
            ),
            (".status.conditions[0].type", json!(["Available"])),
            (".status.conditions[-1].type", json!(["Progressing"])),
            (".status.conditions[0:1].type", json!(["Available"])),
            (".status.conditions[::2].type", json!(["Available"])),
            (
                ".status.conditions[?(@.n > 1)].type",
                json!(["Progressing"]),
            ),
            (".status.conditions[?(@.n >= 1)].n", json!([1, 2])),
            (".status.conditions[?(@.n != 1)].n", json!([2])),
            (".status.conditions[?(@.missing)].n", json!([])),
            (".status.conditions[?(@.n)].n", json!([1, 2])),
            (".status['replicas','readyReplicas']", json!([2, 1])),
            (
                ".metadata.labels.app\\.kubernetes\\.io/name",
                json!(["web"]),
            ),
            (".metadata.labels['tier']", json!(["front"])),
            ("..readyReplicas", json!([1])),
            (".status.missing", json!([])),
            (".missing.deeper[0]", json!([])),
            (".status.gone", json!([null])),
            (".status.gone.deeper", json!([])),
            (".status.conditions[1:1]", json!([])),
        ] {
            assert_eq!(
                find(path, &d),
                Ok(want.as_array().unwrap().clone()),
                "{path}"
            );
        }
    }

    /// client-go's errors, with AllowMissingKeys: only what cannot be missing fails.
    #[test]
    fn what_fails_fails_as_in_client_go() {
        let d = deployment();
        for (path, want) in [
            (
                ".status.conditions[5]",
                "array index out of bounds: index 5, length 2",
            ),
            (".status.replicas[0]", "int64 is not array or slice"),
            (
                ".status.conditions[?(@.n == 1.0)].n",
                "incompatible types for comparison",
            ),
            (
                ".status.conditions[?(@.type < true)].n",
                "incompatible types for comparison",
            ),
            (".status.conditions[0:2:0]", "step must be > 0"),
            (
                ".status.conditions[*][?(@.n)]",
                "is not array or slice and cannot be filtered",
            ),
        ] {
            let got = find(path, &d).unwrap_err();
            assert!(got.contains(want), "{path}: {got}");
        }
        for (path, want) in [
            (".status.conditions[", "unterminated array"),
            (".status.conditions[?(@.n == 1]", "unterminated filter"),
            (".status.conditions[x]", "invalid array index x"),
            ("status.replicas", "unrecognized identifier status"),
            (".status}{.spec", "one JSONPath expression"),
            ("range .items[*]", "unrecognized identifier range"),
            ("{.a}", "unrecognized character in action"),
            (".a[?(@.b =! 1)]", "unrecognized filter operator =!"),
            (".a \"x", "unterminated quoted string"),
            (".a\n", "unclosed action"),
            ("....a", "invalid multiple recursive descent"),
            (".a #", "unrecognized character in action"),
        ] {
            let got = find(path, &d).unwrap_err();
            assert!(
                got.starts_with("parse: ") && got.contains(want),
                "{path}: {got}"
            );
        }
    }

    #[test]
    fn literals_and_quotes_are_values_of_their_own() {
        let d = deployment();
        assert_eq!(find("\"a\\tb\"", &d), Ok(vec![json!("a\tb")]));
        assert_eq!(find("'it'", &d), Ok(vec![json!("it")]));
        let p = JsonPath::parse("1").unwrap();
        assert_eq!(p.find(&d).unwrap(), vec![Found::Int(1)]);
        assert_eq!(Found::Int(1).go_type(), "int");
        let p = JsonPath::parse(".metadata.name.*").unwrap();
        assert_eq!(p.find(&d).unwrap()[0], Found::Byte(b't'));
    }
}
