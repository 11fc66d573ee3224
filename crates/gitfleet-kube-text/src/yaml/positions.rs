//! Where each value of a document is written: one line per node, in the order of the
//! `serde_json::Value` built from it, so a field path such as `spec.policy.numberOfClusters`
//! finds its line by walking the value and the table side by side.
//!
//! The table is flat (12 bytes a node, in pre-order, each node knowing the size of its
//! subtree) rather than a tree beside the value: it adds little to a large document's memory.

use serde_json::Value;

/// One node of a document: the line it is written on (for a map value, the line of its key),
/// how many nodes its subtree holds (itself included), and the plain-scalar text it was read
/// from when that differs from how JSON writes the value (`yes`, `0755`, `~`), 0 for none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Node {
    pub line: u32,
    pub size: u32,
    pub spelling: u32,
}

/// The lines of one document (or of one object inside it, such as an item of a `List`).
#[derive(Debug, Clone, Default)]
pub struct Positions {
    pub(super) nodes: Vec<Node>,
    /// Texts of plain scalars that YAML read as something else than a string, where the text is
    /// not how JSON writes that value; `Node::spelling` is an index into it, plus one.
    pub(super) spellings: Vec<Box<str>>,
    /// Read from YAML (not from a JSON file): hints about YAML's reading apply.
    pub(super) yaml: bool,
}

/// A step of a field path: a key (`spec`), a list index (`[3]`), or a key written as a JSON
/// string in brackets (`labels["app.kubernetes.io/name"]`), taken whole: dots inside it do not
/// split it.
enum Step<'a> {
    Key(&'a str),
    Index(usize),
    Quoted(String),
}

fn steps(field: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    let mut rest = field;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            rest = after;
            continue;
        }
        if let Some(inside) = rest.strip_prefix('[') {
            if inside.starts_with('"') {
                // A JSON string up to its closing quote, then `]`.
                let mut de = serde_json::Deserializer::from_str(inside).into_iter::<String>();
                if let Some(Ok(key)) = de.next() {
                    let used = de.byte_offset();
                    out.push(Step::Quoted(key));
                    rest = inside[used..].strip_prefix(']').unwrap_or(&inside[used..]);
                    continue;
                }
                break;
            }
            let end = inside.find(']').unwrap_or(inside.len());
            if let Ok(i) = inside[..end].parse() {
                out.push(Step::Index(i));
            }
            rest = inside.get(end + 1..).unwrap_or("");
            continue;
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        out.push(Step::Key(&rest[..end]));
        rest = &rest[end..];
    }
    out
}

impl Positions {
    /// The line the document's value starts on.
    pub fn root_line(&self) -> Option<usize> {
        self.nodes.first().map(|n| n.line as usize)
    }

    /// The line of `field` (a path such as `spec.items[1].name`; map keys may contain dots, as
    /// in `data.app.yaml`) in `value`, which must be the value these positions were read with.
    /// When the path does not exist in full, the line of the deepest part that does.
    pub fn line(&self, value: &Value, field: &str) -> Option<usize> {
        let (node, _) = self.find(value, field)?;
        Some(self.nodes[node].line as usize)
    }

    /// Why YAML's reading may have surprised the author at `field`: for a boolean, number or
    /// null read from a plain scalar, a sentence naming the text and what YAML made of it
    /// (`` YAML reads `yes` as the boolean true here; quote it ("yes") to keep the text``).
    /// `None` for strings, collections, JSON files, and paths that do not exist.
    pub fn hint(&self, value: &Value, field: &str) -> Option<String> {
        if !self.yaml {
            return None;
        }
        let (node, Some(found)) = self.find(value, field)? else {
            return None;
        };
        let spelled = match self.nodes[node].spelling {
            0 => None,
            i => self.spellings.get(i as usize - 1).map(|s| s.to_string()),
        };
        let what = match found {
            Value::Bool(b) => format!("the boolean {b}"),
            Value::Number(n) => format!("the number {n}"),
            Value::Null => "null".to_string(),
            _ => return None,
        };
        let text = spelled.unwrap_or_else(|| found.to_string());
        let quoted = serde_json::to_string(&text).unwrap_or_default();
        Some(format!(
            "YAML reads `{text}` as {what} here; quote it ({quoted}) to keep the text"
        ))
    }

    /// The positions of the value at `field`, as a table of its own.
    pub fn subtree(&self, value: &Value, field: &str) -> Positions {
        match self.find(value, field) {
            Some((node, Some(_))) => self.slice(node, self.nodes[node].size as usize),
            _ => self.empty(),
        }
    }

    /// The positions of each item of the list at `field` (the objects of a `List`), as tables
    /// of their own; none when the list is not found.
    pub fn items(&self, value: &Value, field: &str) -> Vec<Positions> {
        let Some((node, Some(Value::Array(items)))) = self.find(value, field) else {
            return Vec::new();
        };
        let mut n = node + 1;
        items
            .iter()
            .map(|_| {
                let size = self.nodes.get(n).map_or(0, |node| node.size as usize);
                let table = self.slice(n, size);
                n += size.max(1);
                table
            })
            .collect()
    }

    fn empty(&self) -> Positions {
        Positions {
            yaml: self.yaml,
            ..Positions::default()
        }
    }

    /// `size` nodes from `start`, with the spellings they use.
    fn slice(&self, start: usize, size: usize) -> Positions {
        let end = (start + size).min(self.nodes.len());
        let mut spellings = Vec::new();
        let nodes = self.nodes[start.min(end)..end]
            .iter()
            .map(|n| {
                let mut n = *n;
                if n.spelling != 0 {
                    if let Some(s) = self.spellings.get(n.spelling as usize - 1) {
                        spellings.push(s.clone());
                        n.spelling = spellings.len() as u32;
                    } else {
                        n.spelling = 0;
                    }
                }
                n
            })
            .collect();
        Positions {
            nodes,
            spellings,
            yaml: self.yaml,
        }
    }

    /// The deepest node of `field` found, and the value there when the whole path was found.
    fn find<'v>(&self, value: &'v Value, field: &str) -> Option<(usize, Option<&'v Value>)> {
        if self.nodes.is_empty() {
            return None;
        }
        let steps = steps(field);
        let (mut node, mut at) = (0usize, value);
        let mut s = 0;
        while s < steps.len() {
            let next = match (&steps[s], at) {
                (Step::Index(i), Value::Array(items)) => {
                    self.child(node, items.iter(), *i).map(|(n, v)| (n, v, 1))
                }
                (Step::Quoted(key), Value::Object(map)) => map
                    .get_index_of_key(key)
                    .and_then(|i| self.child(node, map.values(), i))
                    .map(|(n, v)| (n, v, 1)),
                (Step::Key(_), Value::Object(map)) => {
                    // A key may contain dots: try the shortest key first, then longer ones
                    // joined from the following steps.
                    let mut key = String::new();
                    let mut hit = None;
                    for (used, step) in steps[s..].iter().enumerate() {
                        let Step::Key(part) = step else { break };
                        if used > 0 {
                            key.push('.');
                        }
                        key.push_str(part);
                        if let Some(i) = map.get_index_of_key(&key) {
                            hit = self
                                .child(node, map.values(), i)
                                .map(|(n, v)| (n, v, used + 1));
                            break;
                        }
                    }
                    hit
                }
                _ => None,
            };
            let Some((n, v, used)) = next else {
                return Some((node, None));
            };
            node = n;
            at = v;
            s += used;
        }
        Some((node, Some(at)))
    }

    /// The node and value of the `index`-th child of `node`.
    fn child<'v>(
        &self,
        node: usize,
        mut children: impl Iterator<Item = &'v Value>,
        index: usize,
    ) -> Option<(usize, &'v Value)> {
        let mut n = node + 1;
        for _ in 0..index {
            children.next()?;
            n += self.nodes.get(n)?.size as usize;
        }
        let v = children.next()?;
        (n < self.nodes.len()).then_some((n, v))
    }
}

/// The position of a key in a map, for walking the map's values in order.
trait KeyIndex {
    fn get_index_of_key(&self, key: &str) -> Option<usize>;
}

impl KeyIndex for serde_json::Map<String, Value> {
    fn get_index_of_key(&self, key: &str) -> Option<usize> {
        if !self.contains_key(key) {
            return None;
        }
        self.keys().position(|k| k == key)
    }
}

/// The number of nodes of `value` (to check a table read from the same text fits it).
pub(super) fn count(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(count).sum::<usize>(),
        Value::Object(map) => 1 + map.values().map(count).sum::<usize>(),
        _ => 1,
    }
}
