//! A YAML stream → documents, each a `serde_json::Value` built from granit-parser's events with
//! Kubernetes' reading of scalars ([`super::resolve`]) and go-yaml v2's anchors, aliases and
//! merge keys, with the line of every node ([`Positions`]).
//!
//! Problems are per document: a syntax error or a value JSON cannot carry drops that document
//! and reading goes on with the next one, so one broken document does not hide the others.

use super::positions::{Node, Positions};
use super::resolve::{self, Scalar};
use granit_parser::{Event, Options, Parser, ScalarStyle, ScanError, Span, StrInput, Tag};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::ops::Range;

/// One document of a stream, read.
#[derive(Debug, Clone)]
pub struct Document {
    /// 0-based index of the document in the stream (empty documents count).
    pub index: usize,
    /// The line (1-based) its content starts on.
    pub line: usize,
    pub value: Value,
    pub positions: Positions,
}

/// A problem that kept a document from being read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentError {
    pub index: usize,
    pub line: usize,
    pub message: String,
}

/// Collections may nest this deep (serde_yaml's and serde_json's limit): the rest of gitfleet
/// walks values recursively.
const MAX_DEPTH: usize = 128;

/// Nodes an alias may copy in one document before it is refused (a "billion laughs" guard,
/// as go-yaml's "excessive aliasing"), beyond ten times the nodes written out.
const ALIAS_ALLOWANCE: usize = 100_000;

fn options() -> Options {
    let mut o = Options::default();
    // libyaml (and so go-yaml) adds no line feed to a block scalar that ends the input.
    o.block_scalar_eof_without_line_feed = true;
    o.set_emit_comments(false);
    o
}

/// Reads every document of `text`.
pub fn stream(text: &str) -> (Vec<Document>, Vec<DocumentError>) {
    let mut parser = Parser::new_from_str_with_options(text, options());
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    let mut index = 0;
    let mut last_error_line = 0;
    loop {
        let failed = match parser.next_event() {
            None | Some(Ok((Event::StreamEnd, _))) => break,
            Some(Ok((Event::DocumentStart(..), span))) => {
                let mut b = Builder::new(&mut parser);
                let result = b.document(span);
                let found = std::mem::take(&mut b.errors);
                let this = index;
                index += 1;
                let clean = found.is_empty();
                errors.extend(found.into_iter().map(|(line, message)| DocumentError {
                    index: this,
                    line,
                    message,
                }));
                match result {
                    Ok(doc) => {
                        if clean {
                            docs.push(Document { index: this, ..doc });
                        }
                        continue;
                    }
                    Err(abort) => {
                        let (line, message) = abort.describe();
                        errors.push(DocumentError {
                            index: this,
                            line,
                            message,
                        });
                        Some(line)
                    }
                }
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => {
                let (line, message) = Abort::Syntax(e).describe();
                errors.push(DocumentError {
                    index,
                    line,
                    message,
                });
                index += 1;
                Some(line)
            }
        };
        if let Some(line) = failed {
            // Go on with the next document; stop when recovery makes no progress.
            if line <= last_error_line || !matches!(parser.proceed_next_document(), Ok(true)) {
                break;
            }
            last_error_line = line;
        }
    }
    (docs, errors)
}

/// Why a document was abandoned before its end.
enum Abort {
    Syntax(ScanError),
    Fatal(usize, String),
}

impl Abort {
    fn describe(self) -> (usize, String) {
        match self {
            Abort::Syntax(e) => (e.marker().line().max(1), e.info()),
            Abort::Fatal(line, message) => (line, message),
        }
    }
}

/// An anchored node: its value and its positions, copied where an alias names it.
struct Anchored {
    value: Value,
    nodes: Vec<Node>,
}

/// Builds one document from the parser's events.
struct Builder<'p, 'a> {
    parser: &'p mut Parser<'a, StrInput<'a>>,
    nodes: Vec<Node>,
    spellings: Vec<Box<str>>,
    anchors: HashMap<usize, Anchored>,
    /// Problems that make the document invalid without stopping its reading (so all are found).
    errors: Vec<(usize, String)>,
    /// Nodes written out in the text, and nodes copied through aliases.
    written: usize,
    copied: usize,
    /// Collections open around the current node.
    depth: usize,
}

type Step<T> = Result<T, Abort>;

fn line_of(span: &Span) -> u32 {
    span.start.line().max(1) as u32
}

fn full_tag(tag: &Tag) -> String {
    format!("{}{}", tag.handle(), tag.suffix())
}

impl<'p, 'a> Builder<'p, 'a> {
    fn new(parser: &'p mut Parser<'a, StrInput<'a>>) -> Self {
        Builder {
            parser,
            nodes: Vec::new(),
            spellings: Vec::new(),
            anchors: HashMap::new(),
            errors: Vec::new(),
            written: 0,
            copied: 0,
            depth: 0,
        }
    }

    fn next(&mut self) -> Step<(Event<'a>, Span)> {
        loop {
            match self.parser.next_event() {
                // Anchor events are metadata (off in our options; the anchor id is on the node).
                // Comment events are off in our options too.
                Some(Ok((Event::Anchor(..), _))) => continue,
                Some(Ok((event, span))) => return Ok((event, span)),
                Some(Err(e)) => return Err(Abort::Syntax(e)),
                None => {
                    return Err(Abort::Fatal(
                        self.nodes.last().map_or(1, |n| n.line as usize),
                        "unexpected end of the YAML stream".into(),
                    ))
                }
            }
        }
    }

    fn error(&mut self, line: u32, message: String) {
        self.errors.push((line as usize, message));
    }

    /// The document after its `DocumentStart`, through its `DocumentEnd`.
    fn document(&mut self, start: Span) -> Step<Document> {
        let (event, span) = self.next()?;
        let value = if matches!(event, Event::DocumentEnd) {
            return Ok(Document {
                index: 0,
                line: line_of(&start) as usize,
                value: Value::Null,
                positions: Positions::default(),
            });
        } else {
            self.node(event, span, None)?
        };
        match self.next()? {
            (Event::DocumentEnd, _) => {}
            (_, span) => {
                return Err(Abort::Fatal(
                    line_of(&span) as usize,
                    "expected the end of the document".into(),
                ))
            }
        }
        let line = self.nodes.first().map_or(line_of(&start), |n| n.line) as usize;
        Ok(Document {
            index: 0,
            line,
            value,
            positions: Positions {
                nodes: std::mem::take(&mut self.nodes),
                spellings: std::mem::take(&mut self.spellings),
                yaml: true,
            },
        })
    }

    /// One node starting with `event`; `line` is its key's line when it is a map value.
    fn node(&mut self, event: Event<'a>, span: Span, line: Option<u32>) -> Step<Value> {
        if matches!(event, Event::Scalar(..) | Event::Alias(_)) {
            return self.node_on_stack(event, span, line);
        }
        // Depth is bounded (MAX_DEPTH), but an unoptimised build's frames are large enough to
        // exhaust a 2 MiB thread stack before that: grow the stack when it runs low.
        stacker::maybe_grow(128 * 1024, 2 * 1024 * 1024, || {
            self.node_on_stack(event, span, line)
        })
    }

    fn node_on_stack(&mut self, event: Event<'a>, span: Span, line: Option<u32>) -> Step<Value> {
        let line = line.unwrap_or_else(|| line_of(&span));
        self.written += 1;
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let (scalar, spelling) = self.scalar(&text, style, tag.as_deref(), line);
                let value = match resolve::to_json(scalar) {
                    Ok(v) => v,
                    Err(what) => {
                        self.error(
                            line,
                            format!("YAML reads `{text}` as {what}, which JSON cannot carry; quote it to keep the text"),
                        );
                        Value::Null
                    }
                };
                self.nodes.push(Node {
                    line,
                    size: 1,
                    spelling,
                });
                self.remember(anchor, self.nodes.len() - 1, &value);
                Ok(value)
            }
            Event::SequenceStart(_, anchor, _) => {
                let start = self.open(line)?;
                let mut items = Vec::new();
                loop {
                    let (event, span) = self.next()?;
                    if matches!(event, Event::SequenceEnd) {
                        break;
                    }
                    items.push(self.node(event, span, None)?);
                }
                self.close(start);
                let value = Value::Array(items);
                self.remember(anchor, start, &value);
                Ok(value)
            }
            Event::MappingStart(_, anchor, _) => {
                let start = self.open(line)?;
                let map = self.mapping(start)?;
                self.close(start);
                let value = Value::Object(map);
                self.remember(anchor, start, &value);
                Ok(value)
            }
            Event::Alias(id) => self.alias(id, line),
            _ => Err(Abort::Fatal(line as usize, "unexpected YAML event".into())),
        }
    }

    /// A scalar as Kubernetes reads it, and its spelling when YAML made a non-string of a
    /// text JSON would write otherwise.
    fn scalar(
        &mut self,
        text: &str,
        style: ScalarStyle,
        tag: Option<&Tag>,
        line: u32,
    ) -> (Scalar, u32) {
        let scalar = match tag {
            Some(tag) => match resolve::tagged(&full_tag(tag), text) {
                Ok(s) => s,
                Err(message) => {
                    self.error(line, message);
                    Scalar::Null
                }
            },
            None if style == ScalarStyle::Plain => resolve::plain(text),
            None => Scalar::Str(text.to_string()),
        };
        let spelling = if tag.is_none() && style == ScalarStyle::Plain && !canonical(text, &scalar)
        {
            self.spellings.push(text.into());
            self.spellings.len() as u32
        } else {
            0
        };
        (scalar, spelling)
    }

    fn open(&mut self, line: u32) -> Step<usize> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Abort::Fatal(
                line as usize,
                format!("the document nests deeper than {MAX_DEPTH} levels"),
            ));
        }
        self.nodes.push(Node {
            line,
            size: 0,
            spelling: 0,
        });
        Ok(self.nodes.len() - 1)
    }

    fn close(&mut self, start: usize) {
        self.depth -= 1;
        self.nodes[start].size = (self.nodes.len() - start) as u32;
    }

    fn remember(&mut self, anchor: usize, start: usize, value: &Value) {
        if anchor != 0 {
            let nodes = self.nodes[start..].to_vec();
            self.anchors.insert(
                anchor,
                Anchored {
                    value: value.clone(),
                    nodes,
                },
            );
        }
    }

    /// The anchored node, copied; its first line becomes the alias's.
    fn alias(&mut self, id: usize, line: u32) -> Step<Value> {
        let Some(anchored) = self.anchors.get(&id) else {
            // The parser knows every anchor defined before; one not finished yet is the
            // node the alias sits in.
            self.error(line, "an alias refers to the node that contains it".into());
            self.nodes.push(Node {
                line,
                size: 1,
                spelling: 0,
            });
            return Ok(Value::Null);
        };
        self.copied += anchored.nodes.len();
        if self.copied > ALIAS_ALLOWANCE.max(10 * self.written) {
            return Err(Abort::Fatal(
                line as usize,
                "the document contains excessive aliasing".into(),
            ));
        }
        let value = anchored.value.clone();
        let start = self.nodes.len();
        self.nodes.extend_from_slice(&anchored.nodes);
        self.nodes[start].line = line;
        Ok(value)
    }

    /// The entries of a mapping, after its `MappingStart` through its `MappingEnd`, in go-yaml
    /// v2's order: each key in turn, a merge key (`<<`) writing the merged entries at its place
    /// (so they replace earlier keys and later keys replace them); a key written twice is an
    /// error (kubectl keeps the last silently).
    fn mapping(&mut self, start: usize) -> Step<Map<String, Value>> {
        let mut entries = Entries::default();
        loop {
            let (event, span) = self.next()?;
            if matches!(event, Event::MappingEnd) {
                break;
            }
            let key_line = line_of(&span);
            if is_merge_key(&event) {
                let (event, span) = self.next()?;
                self.merge(event, span, key_line, &mut entries)?;
                continue;
            }
            let key = self.key(event, span)?;
            let (event, span) = self.next()?;
            let from = self.nodes.len();
            let value = self.node(event, span, Some(key_line))?;
            let range = from..self.nodes.len();
            match key {
                Some(key) => {
                    if let Some(first) =
                        entries.insert(key.clone(), value, range, true, &self.nodes)
                    {
                        self.error(
                            key_line,
                            format!("duplicate key {key:?} (first written at line {first})"),
                        );
                    }
                }
                None => self.nodes.truncate(from),
            }
        }
        if entries.moved {
            // Entries were replaced or merged: lay their nodes out again in the map's order.
            let tail: Vec<Node> = entries
                .ranges
                .iter()
                .flat_map(|r| self.nodes[r.clone()].iter().copied())
                .collect();
            self.nodes.truncate(start + 1);
            self.nodes.extend(tail);
        }
        Ok(entries.map)
    }

    /// A map key as a JSON object key; `None` (with an error) when it cannot be one.
    fn key(&mut self, event: Event<'a>, span: Span) -> Step<Option<String>> {
        let line = line_of(&span);
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let (scalar, _) = self.scalar(&text, style, tag.as_deref(), line);
                if anchor != 0 {
                    let value = resolve::to_json(scalar.clone()).unwrap_or(Value::Null);
                    self.anchors.insert(
                        anchor,
                        Anchored {
                            value,
                            nodes: vec![Node {
                                line,
                                size: 1,
                                spelling: 0,
                            }],
                        },
                    );
                }
                match resolve::to_key(scalar) {
                    Ok(k) => Ok(Some(k)),
                    Err(message) => {
                        self.error(line, message);
                        Ok(None)
                    }
                }
            }
            Event::Alias(id) => {
                let key = self.anchors.get(&id).map(|a| json_key(&a.value));
                match key {
                    Some(Ok(k)) => Ok(Some(k)),
                    Some(Err(message)) => {
                        self.error(line, message);
                        Ok(None)
                    }
                    None => {
                        self.error(line, "an alias refers to the node that contains it".into());
                        Ok(None)
                    }
                }
            }
            event => {
                let from = self.nodes.len();
                let kind = if matches!(event, Event::MappingStart(..)) {
                    "mapping"
                } else {
                    "sequence"
                };
                self.node(event, span, None)?;
                self.nodes.truncate(from);
                self.error(
                    line,
                    format!("a map key must be a scalar, not a {kind}: JSON keys are strings"),
                );
                Ok(None)
            }
        }
    }

    /// The value of a merge key: a mapping, an alias of one, or a sequence of those (earlier
    /// ones win, as go-yaml merges them last to first).
    fn merge(
        &mut self,
        event: Event<'a>,
        span: Span,
        line: u32,
        entries: &mut Entries,
    ) -> Step<()> {
        let mut sources = Vec::new();
        match event {
            Event::SequenceStart(..) => {
                loop {
                    let (event, span) = self.next()?;
                    if matches!(event, Event::SequenceEnd) {
                        break;
                    }
                    let from = self.nodes.len();
                    let value = self.node(event, span, None)?;
                    sources.push((value, from));
                }
                // The items' nodes stay where they are; `entries` refers to them and the map's
                // nodes are laid out again at its end.
                sources.reverse();
            }
            event => {
                let from = self.nodes.len();
                let value = self.node(event, span, Some(line))?;
                sources.push((value, from));
            }
        }
        for (value, from) in sources {
            let Value::Object(map) = value else {
                self.error(
                    line,
                    "a merge key (<<) needs a mapping, or a sequence of mappings, as its value"
                        .into(),
                );
                continue;
            };
            let mut n = from + 1;
            for (k, v) in map {
                let size = self.nodes.get(n).map_or(1, |node| node.size as usize);
                entries.insert(k, v, n..n + size, false, &self.nodes);
                n += size;
            }
        }
        entries.moved = true;
        Ok(())
    }
}

/// A mapping being built: its entries and where each entry's nodes are.
#[derive(Default)]
struct Entries {
    map: Map<String, Value>,
    ranges: Vec<Range<usize>>,
    /// Whether each entry's key was written in this mapping (not merged in).
    written: Vec<bool>,
    /// Whether the nodes must be laid out again (an entry was replaced or merged).
    moved: bool,
}

impl Entries {
    /// Inserts or replaces `key`; returns the line of the earlier written key when both were
    /// written in this mapping.
    fn insert(
        &mut self,
        key: String,
        value: Value,
        range: Range<usize>,
        written: bool,
        nodes: &[Node],
    ) -> Option<u32> {
        if !self.map.contains_key(&key) {
            self.map.insert(key, value);
            self.ranges.push(range);
            self.written.push(written);
            return None;
        }
        let i = self.map.keys().position(|k| *k == key)?;
        let duplicate = (written && self.written[i])
            .then(|| nodes.get(self.ranges[i].start).map_or(0, |n| n.line));
        self.map.insert(key, value);
        self.ranges[i] = range;
        self.written[i] |= written;
        self.moved = true;
        duplicate
    }
}

fn is_merge_key(event: &Event<'_>) -> bool {
    match event {
        Event::Scalar(text, style, _, tag) => match tag {
            Some(tag) => full_tag(tag) == "tag:yaml.org,2002:merge",
            None => *style == ScalarStyle::Plain && text == "<<",
        },
        _ => false,
    }
}

/// An aliased value used as a key.
fn json_key(value: &Value) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Ok(i.to_string()),
            None => resolve::to_key(Scalar::Float(n.as_f64().unwrap_or(0.0))),
        },
        Value::Null => resolve::to_key(Scalar::Null),
        _ => Err("a map key must be a scalar: JSON keys are strings".into()),
    }
}

/// Whether `text` is how JSON writes the scalar it resolved to (so no spelling is kept).
fn canonical(text: &str, scalar: &Scalar) -> bool {
    match scalar {
        Scalar::Str(_) => true,
        Scalar::Bool(b) => text == if *b { "true" } else { "false" },
        Scalar::Null => text == "null",
        Scalar::Int(_) => {
            let digits = text.strip_prefix('-').unwrap_or(text);
            digits == "0"
                || (!digits.is_empty()
                    && !digits.starts_with('0')
                    && digits.bytes().all(|c| c.is_ascii_digit()))
        }
        Scalar::Uint(_) => false,
        Scalar::Float(f) => f.fract() != 0.0 && f.to_string() == text,
    }
}
