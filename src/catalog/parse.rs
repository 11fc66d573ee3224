//! The files of a commit → documents with their origin (file, document, line) and the line of
//! every field. YAML is read as Kubernetes reads it ([`crate::yaml`]); a `.json` file is one
//! JSON document, read as JSON.

use crate::model::Origin;
use crate::yaml::{self, Positions};
use serde_json::Value;
use std::sync::Arc;

/// One document of a file, read, with the lines of its fields. Value and lines are shared: the
/// daemon's parse cache hands the same documents to every commit that has the file unchanged,
/// and the catalog's objects keep them as they are.
#[derive(Debug, Clone)]
pub struct Document {
    pub origin: Origin,
    pub value: Arc<Value>,
    pub positions: Arc<Positions>,
}

impl Document {
    /// The line (in the file) of a field path such as `spec.policy.numberOfClusters` or
    /// `spec.resourceSelectors[1].name`; the nearest enclosing field written, or the document's
    /// first line.
    pub fn line(&self, field: &str) -> usize {
        self.positions
            .line(&self.value, field)
            .unwrap_or(self.origin.line)
    }
}

/// A document that could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub origin: Origin,
    pub message: String,
}

/// Reads a file into its non-empty documents. JSON files hold one document; YAML files a stream,
/// in which a broken document is reported and the others are still read.
pub fn parse_file(path: &str, bytes: &[u8]) -> (Vec<Document>, Vec<ParseError>) {
    let origin = |document: usize, line: usize| Origin {
        file: path.into(),
        document,
        line,
    };
    match yaml::text(bytes) {
        Ok(text) if path.ends_with(".json") => parse_json(text, origin(0, 1)),
        Ok(text) => parse_yaml(text, origin),
        Err(e) => {
            // Read the rest of the file all the same; the document holding the bad bytes is
            // reported instead of read.
            let line = e.line.unwrap_or(1);
            let lossy = String::from_utf8_lossy(bytes);
            let (docs, mut errors) = parse_yaml(&lossy, origin);
            let mut index = 0;
            for d in &docs {
                if d.origin.line <= line {
                    index = index.max(d.origin.document);
                }
            }
            for err in &errors {
                if err.origin.line <= line {
                    index = index.max(err.origin.document);
                }
            }
            if path.ends_with(".json") {
                return (Vec::new(), vec![utf8_error(origin(0, line), &e)]);
            }
            let docs = docs
                .into_iter()
                .filter(|d| d.origin.document != index)
                .collect();
            errors.retain(|err| err.origin.document != index);
            errors.push(utf8_error(origin(index, line), &e));
            (docs, errors)
        }
    }
}

fn utf8_error(origin: Origin, e: &yaml::Error) -> ParseError {
    ParseError {
        origin,
        message: format!("the file is {}", e.message),
    }
}

fn parse_json(text: &str, origin: Origin) -> (Vec<Document>, Vec<ParseError>) {
    match serde_json::from_str::<Value>(text) {
        Ok(value) => {
            let positions = yaml::json_positions(text, &value);
            let line = positions.root_line().unwrap_or_else(|| {
                text.lines()
                    .position(|l| !l.trim().is_empty())
                    .map_or(1, |i| i + 1)
            });
            let doc = Document {
                origin: Origin { line, ..origin },
                value: Arc::new(value),
                positions: Arc::new(positions),
            };
            (vec![doc], Vec::new())
        }
        Err(e) => (
            Vec::new(),
            vec![ParseError {
                origin: Origin {
                    line: e.line().max(1),
                    ..origin
                },
                message: format!("invalid JSON: {e}"),
            }],
        ),
    }
}

fn parse_yaml(
    text: &str,
    origin: impl Fn(usize, usize) -> Origin,
) -> (Vec<Document>, Vec<ParseError>) {
    let (docs, errors) = yaml::stream(text);
    let docs = docs
        .into_iter()
        .filter(|d| !d.value.is_null())
        .map(|d| Document {
            origin: origin(d.index, d.line),
            value: Arc::new(d.value),
            positions: Arc::new(d.positions),
        })
        .collect();
    let errors = errors
        .into_iter()
        .map(|e| ParseError {
            origin: origin(e.index, e.line),
            message: format!("invalid YAML: {}", e.message),
        })
        .collect();
    (docs, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_errors_carry_the_file_line() {
        let text = "a: 1\n---\nb: [unclosed\nc: 2\n";
        let (docs, errs) = parse_file("f.yaml", text.as_bytes());
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].origin.document, 1);
        assert!(errs[0].origin.line >= 3, "{:?}", errs[0]);
        assert!(
            errs[0].message.starts_with("invalid YAML"),
            "{}",
            errs[0].message
        );
        assert_eq!(docs.len(), 1);
    }

    #[test]
    fn duplicate_keys_are_errors() {
        let (_, errs) = parse_file("f.yaml", b"a: 1\na: 2\n");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].origin.line, 2);
    }

    #[test]
    fn json_files_are_one_document() {
        let (docs, errs) = parse_file("f.json", b"\n{\"kind\": \"List\",\n \"a\": {\"b\": 1}}");
        assert!(errs.is_empty());
        assert_eq!(docs[0].origin.line, 2);
        assert_eq!(docs[0].line("a.b"), 3);
        let (_, errs) = parse_file("f.json", b"{\n\"a\": }");
        assert_eq!(errs[0].origin.line, 2);
    }

    #[test]
    fn bad_utf8_is_reported_at_its_line_and_the_other_documents_are_read() {
        let text = b"a: 1\n---\nb: 2\nc: \xff\n---\nd: 3\n";
        let (docs, errs) = parse_file("f.yaml", text);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!((errs[0].origin.document, errs[0].origin.line), (1, 4));
        assert_eq!(
            errs[0].message,
            "the file is not valid UTF-8 (byte 0xff at column 4)"
        );
        let values: Vec<&Value> = docs.iter().map(|d| &*d.value).collect();
        assert_eq!(
            values,
            [&serde_json::json!({"a": 1}), &serde_json::json!({"d": 3})]
        );
    }
}
