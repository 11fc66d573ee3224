//! Multi-document YAML and JSON files → raw documents with their origin (file, document, line).

use crate::model::Origin;
use serde_json::Value;

/// One document of a file, parsed, with the text it came from (kept to locate fields by line).
#[derive(Debug, Clone)]
pub struct Document {
    pub origin: Origin,
    pub text: String,
    pub value: Value,
    /// Field path of the object inside the document: `items[3]` for an item of a `List`.
    pub path_prefix: String,
}

/// A document that failed to parse.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub origin: Origin,
    pub message: String,
}

/// Splits a YAML stream into `(first line (1-based), text)` per document. A document starts after
/// a `---` line (whose remainder belongs to it) and ends at the next `---` or a `...` line.
fn split_yaml(text: &str) -> Vec<(usize, String)> {
    let mut docs = Vec::new();
    let mut current = String::new();
    let mut start = 1;
    let mut in_doc = true;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let is_marker = line == "---" || line.starts_with("--- ") || line.starts_with("---\t");
        if is_marker {
            if in_doc {
                docs.push((start, std::mem::take(&mut current)));
            }
            in_doc = true;
            start = n;
            current.push_str(line[3..].trim_start());
            current.push('\n');
        } else if line == "..." || line.starts_with("... ") {
            if in_doc {
                docs.push((start, std::mem::take(&mut current)));
            }
            in_doc = false;
        } else {
            if !in_doc {
                in_doc = true;
                start = n;
            }
            current.push_str(line);
            current.push('\n');
        }
    }
    if in_doc {
        docs.push((start, current));
    }
    docs
}

/// serde_yaml places a duplicate key at its mapping; point at the second occurrence of the key
/// instead (0-based line within the document).
fn duplicate_key_line(message: &str, doc: &str) -> Option<usize> {
    let key = message
        .split("duplicate entry with key \"")
        .nth(1)?
        .split('"')
        .next()?;
    doc.lines()
        .enumerate()
        .filter(|(_, l)| {
            let t = l.trim_start().trim_start_matches("- ");
            t.starts_with(&format!("{key}:")) || t.starts_with(&format!("\"{key}\":"))
        })
        .nth(1)
        .map(|(i, _)| i)
}

/// True when a document holds nothing but comments and blank lines.
fn is_blank(text: &str) -> bool {
    text.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#')
    })
}

/// The first line of the document that carries content (so `file:line` points at it, not at `---`).
fn first_content_line(start: usize, text: &str) -> usize {
    text.lines()
        .position(|l| {
            let t = l.trim();
            !t.is_empty() && !t.starts_with('#')
        })
        .map(|i| start + i)
        .unwrap_or(start)
}

/// YAML to JSON as Kubernetes' YAML reader does: non-string keys become strings, tags are dropped.
/// (Going through `serde_yaml::Value` also makes duplicate keys an error, as in kubectl.)
fn yaml_to_json(v: serde_yaml::Value) -> Value {
    use serde_yaml::Value as Y;
    match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                n.as_f64()
                    .and_then(serde_json::Number::from_f64)
                    .map_or(Value::Null, Value::Number)
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(yaml_to_json).collect()),
        Y::Mapping(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let key = match yaml_to_json(k) {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    (key, yaml_to_json(v))
                })
                .collect(),
        ),
        Y::Tagged(t) => yaml_to_json(t.value),
    }
}

/// Parses a file into its non-empty documents. JSON files hold one document; YAML files a stream.
pub fn parse_file(path: &str, bytes: &[u8]) -> (Vec<Document>, Vec<ParseError>) {
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t.strip_prefix('\u{feff}').unwrap_or(t),
        Err(e) => {
            errors.push(ParseError {
                origin: Origin {
                    file: path.into(),
                    document: 0,
                    line: 1,
                },
                message: format!("file is not valid UTF-8: {e}"),
            });
            return (docs, errors);
        }
    };
    if path.ends_with(".json") {
        let origin = Origin {
            file: path.into(),
            document: 0,
            line: first_content_line(1, text),
        };
        match serde_json::from_str::<Value>(text) {
            Ok(value) => docs.push(Document {
                origin,
                text: text.to_string(),
                value,
                path_prefix: String::new(),
            }),
            Err(e) => errors.push(ParseError {
                origin: Origin {
                    line: e.line().max(1),
                    ..origin
                },
                message: format!("invalid JSON: {e}"),
            }),
        }
        return (docs, errors);
    }
    for (index, (start, doc)) in split_yaml(text).into_iter().enumerate() {
        if is_blank(&doc) {
            continue;
        }
        let origin = Origin {
            file: path.into(),
            document: index,
            line: first_content_line(start, &doc),
        };
        match serde_yaml::from_str::<serde_yaml::Value>(&doc).map(yaml_to_json) {
            Ok(Value::Null) => {}
            Ok(value) => docs.push(Document {
                origin,
                text: doc,
                value,
                path_prefix: String::new(),
            }),
            Err(e) => {
                let line = duplicate_key_line(&e.to_string(), &doc)
                    .map(|l| start + l)
                    .or_else(|| e.location().map(|l| start + l.line() - 1))
                    .unwrap_or(origin.line);
                let message = match e.location() {
                    // serde_yaml repeats the position in the message; the line is in front already.
                    Some(_) => e
                        .to_string()
                        .split(" at line ")
                        .next()
                        .unwrap_or_default()
                        .to_string(),
                    None => e.to_string(),
                };
                errors.push(ParseError {
                    origin: Origin { line, ..origin },
                    message: format!("invalid YAML: {message}"),
                });
            }
        }
    }
    (docs, errors)
}

/// The line (1-based, in the file) where a field path such as `spec.policy.numberOfClusters` or
/// `spec.resourceSelectors[1].name` is written in a document, best effort: block-style YAML is
/// located exactly; where it cannot be found the nearest enclosing field found, or the document's
/// first line, is returned.
pub fn locate(doc: &Document, field: &str) -> usize {
    let field = if doc.path_prefix.is_empty() {
        field.to_string()
    } else {
        format!("{}.{field}", doc.path_prefix)
    };
    let field = field.as_str();
    let lines: Vec<&str> = doc.text.lines().collect();
    let offset = doc.origin.line - first_content_line(0, &doc.text);
    let mut ctx = Context::Root;
    let mut found = doc.origin.line;
    let tokens = tokens(field);
    let mut t = 0;
    while t < tokens.len() {
        // Map keys may contain dots (`data.cm.yaml` is the key `cm.yaml` of `data`): try the
        // shortest key first, then longer ones joined from the following parts.
        let hit = match &tokens[t] {
            Token::Index(i) => find_item(&lines, ctx, *i).map(|c| (c, 1)),
            Token::Key(_) => (t..tokens.len())
                .map_while(|end| {
                    let parts: Option<Vec<&str>> = tokens[t..=end]
                        .iter()
                        .map(|tok| match tok {
                            Token::Key(k) => Some(*k),
                            Token::Index(_) => None,
                        })
                        .collect();
                    parts.map(|p| (p.join("."), end - t + 1))
                })
                .find_map(|(key, used)| find_key(&lines, ctx, &key).map(|c| (c, used))),
        };
        match hit {
            Some((next, used)) => {
                ctx = next;
                found = next.line().map_or(found, |l| l + offset);
                t += used;
            }
            None => break,
        }
    }
    found
}

/// Where the search stands: at the top, below a key (line, indent of the key), or inside a
/// sequence item (line of its dash, indent of the dash).
#[derive(Clone, Copy)]
enum Context {
    Root,
    Key(usize, usize),
    Item(usize, usize),
}

impl Context {
    fn line(self) -> Option<usize> {
        match self {
            Context::Root => None,
            Context::Key(l, _) | Context::Item(l, _) => Some(l),
        }
    }
}

enum Token<'a> {
    Key(&'a str),
    Index(usize),
}

fn tokens(field: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    for part in field.split('.').filter(|p| !p.is_empty()) {
        let (key, rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
        if !key.is_empty() {
            out.push(Token::Key(key));
        }
        for idx in rest.split('[') {
            if let Ok(i) = idx.trim_end_matches(']').parse() {
                out.push(Token::Index(i));
            }
        }
    }
    out
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

fn is_content(line: &str) -> bool {
    let t = line.trim_start();
    !t.is_empty() && !t.starts_with('#')
}

/// The lines that belong to the node of `ctx`: `(index, line)` after its own line, until the
/// indentation says the node has ended.
fn children<'a>(lines: &'a [&'a str], ctx: Context) -> impl Iterator<Item = (usize, &'a str)> + 'a {
    let (from, limit, dash_ok) = match ctx {
        Context::Root => (0, None, false),
        Context::Key(l, k) => (l + 1, Some(k), true),
        Context::Item(l, d) => (l + 1, Some(d), false),
    };
    lines
        .iter()
        .enumerate()
        .skip(from)
        .filter(|(_, l)| is_content(l))
        .take_while(move |(_, l)| {
            let indent = indent_of(l);
            match limit {
                None => true,
                // A sequence may sit at its key's own indentation.
                Some(k) => {
                    indent > k || (dash_ok && indent == k && l.trim_start().starts_with('-'))
                }
            }
        })
        .map(|(i, l)| (i, *l))
}

/// `key:` written as a mapping key in a line; returns the indentation of the key itself.
fn key_at(line: &str, key: &str) -> Option<usize> {
    let trimmed = line.trim_start();
    let mut body = trimmed;
    while let Some(rest) = body.strip_prefix("- ") {
        body = rest.trim_start();
    }
    let indent = indent_of(line) + (trimmed.len() - body.len());
    [
        format!("{key}:"),
        format!("\"{key}\":"),
        format!("'{key}':"),
    ]
    .iter()
    .any(|c| body.starts_with(c.as_str()))
    .then_some(indent)
}

fn find_key(lines: &[&str], ctx: Context, key: &str) -> Option<Context> {
    // Inside an item, the first key sits on the dash line itself.
    if let Context::Item(l, _) = ctx {
        if let Some(k) = key_at(lines[l], key) {
            return Some(Context::Key(l, k));
        }
    }
    children(lines, ctx).find_map(|(i, l)| key_at(l, key).map(|k| Context::Key(i, k)))
}

/// The `index`-th item of the sequence below `ctx`.
fn find_item(lines: &[&str], ctx: Context, index: usize) -> Option<Context> {
    let mut list_indent = None;
    let mut count = 0;
    for (i, l) in children(lines, ctx) {
        let t = l.trim_start();
        if !(t.starts_with("- ") || t == "-") {
            continue;
        }
        let indent = indent_of(l);
        let want = *list_indent.get_or_insert(indent);
        if indent == want {
            if count == index {
                return Some(Context::Item(i, indent));
            }
            count += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_documents_with_lines() {
        let text = "# header\na: 1\n---\n\n---\nb: 2\n--- {c: 3}\n...\n";
        let (docs, errs) = parse_file("f.yaml", text.as_bytes());
        assert!(errs.is_empty(), "{errs:?}");
        let got: Vec<(usize, usize, Value)> = docs
            .iter()
            .map(|d| (d.origin.document, d.origin.line, d.value.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, 2, serde_json::json!({"a": 1})),
                (2, 6, serde_json::json!({"b": 2})),
                (3, 7, serde_json::json!({"c": 3})),
            ]
        );
    }

    #[test]
    fn yaml_errors_carry_the_file_line() {
        let text = "a: 1\n---\nb: [unclosed\nc: 2\n";
        let (_, errs) = parse_file("f.yaml", text.as_bytes());
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].origin.document, 1);
        assert!(errs[0].origin.line >= 3, "{:?}", errs[0]);
        assert!(
            errs[0].message.starts_with("invalid YAML"),
            "{}",
            errs[0].message
        );
    }

    #[test]
    fn duplicate_keys_are_errors() {
        let (_, errs) = parse_file("f.yaml", b"a: 1\na: 2\n");
        assert_eq!(errs.len(), 1, "{errs:?}");
    }

    #[test]
    fn json_files_are_one_document() {
        let (docs, errs) = parse_file("f.json", b"\n{\"kind\": \"List\"}");
        assert!(errs.is_empty());
        assert_eq!(docs[0].origin.line, 2);
        let (_, errs) = parse_file("f.json", b"{\n\"a\": }");
        assert_eq!(errs[0].origin.line, 2);
    }

    #[test]
    fn locates_fields() {
        let text = "---\napiVersion: v1\nkind: X\nmetadata:\n  name: a\nspec:\n  name: inner\n  items:\n  - name: zero\n  - name: one\n    value: 1\n  policy:\n    numberOfClusters: 3\n";
        let (docs, _) = parse_file("f.yaml", text.as_bytes());
        let d = &docs[0];
        assert_eq!(d.origin.line, 2);
        assert_eq!(locate(d, "metadata.name"), 5);
        assert_eq!(locate(d, "spec.name"), 7);
        assert_eq!(locate(d, "spec.items[1].name"), 10);
        assert_eq!(locate(d, "spec.items[1].value"), 11);
        assert_eq!(locate(d, "spec.policy.numberOfClusters"), 13);
        assert_eq!(locate(d, "spec.missing"), 6);
        let (docs, _) = parse_file("f.yaml", b"data:\n  a.b.yaml:\n    x: 1\n");
        assert_eq!(locate(&docs[0], "data.a.b.yaml.x"), 3);
        assert_eq!(locate(d, ""), 2);
    }
}
