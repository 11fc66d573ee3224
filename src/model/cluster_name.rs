//! A member cluster's name as the scheduler's results carry it. A fleet-wide placement names
//! every cluster in its bindings, selection and decisions, and a commit has many such
//! placements: a fleet's names are one shared table ([`ClusterName::table`]) and a name is
//! that table and a place in it, so naming a cluster again copies no text and counts on the
//! table's one counter (with a counter per name, spread over memory, nearly every copy would be
//! a cache miss). It reads, compares, orders, hashes and serialises as the plain text.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

#[derive(Clone)]
pub struct ClusterName {
    names: Arc<Names>,
    index: u32,
}

/// Names one after another, and where each ends.
struct Names {
    text: String,
    ends: Vec<usize>,
}

impl ClusterName {
    pub fn new(name: &str) -> Self {
        let names = Arc::new(Names {
            text: name.to_string(),
            ends: vec![name.len()],
        });
        ClusterName { names, index: 0 }
    }

    /// `names`, in order, sharing one table.
    pub fn table<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<ClusterName> {
        let mut table = Names {
            text: String::new(),
            ends: Vec::new(),
        };
        for name in names {
            table.text.push_str(name);
            table.ends.push(table.text.len());
        }
        let count = table.ends.len() as u32;
        let names = Arc::new(table);
        (0..count)
            .map(|index| ClusterName {
                names: names.clone(),
                index,
            })
            .collect()
    }

    /// Whether `a` and `b` are the same name of the same table (not merely equal text).
    pub fn ptr_eq(a: &ClusterName, b: &ClusterName) -> bool {
        Arc::ptr_eq(&a.names, &b.names) && a.index == b.index
    }

    pub fn as_str(&self) -> &str {
        let i = self.index as usize;
        let start = match i {
            0 => 0,
            i => self.names.ends[i - 1],
        };
        &self.names.text[start..self.names.ends[i]]
    }
}

impl Default for ClusterName {
    fn default() -> Self {
        ClusterName::new("")
    }
}

impl PartialEq for ClusterName {
    fn eq(&self, other: &Self) -> bool {
        (Arc::ptr_eq(&self.names, &other.names) && self.index == other.index)
            || self.as_str() == other.as_str()
    }
}

impl Eq for ClusterName {}

impl PartialOrd for ClusterName {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ClusterName {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

/// As the text's, so that maps keyed by names are found by text.
impl Hash for ClusterName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl Serialize for ClusterName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ClusterName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(ClusterName::from)
    }
}

impl Deref for ClusterName {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for ClusterName {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for ClusterName {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// As the text's own: a name reads `"east-1"` in messages and test output, as a `String` did.
impl fmt::Debug for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&str> for ClusterName {
    fn from(name: &str) -> Self {
        ClusterName::new(name)
    }
}

impl From<&String> for ClusterName {
    fn from(name: &String) -> Self {
        ClusterName::new(name)
    }
}

impl From<String> for ClusterName {
    fn from(name: String) -> Self {
        let ends = vec![name.len()];
        let names = Arc::new(Names { text: name, ends });
        ClusterName { names, index: 0 }
    }
}

impl From<ClusterName> for String {
    fn from(name: ClusterName) -> Self {
        name.as_str().to_string()
    }
}

impl PartialEq<str> for ClusterName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ClusterName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for ClusterName {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<ClusterName> for str {
    fn eq(&self, other: &ClusterName) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<ClusterName> for &str {
    fn eq(&self, other: &ClusterName) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<ClusterName> for String {
    fn eq(&self, other: &ClusterName) -> bool {
        self.as_str() == other.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, HashSet};

    #[test]
    fn reads_compares_and_serialises_as_its_text() {
        let name = ClusterName::new("east-1");
        assert_eq!(name, "east-1");
        assert_eq!("east-1", name);
        assert_eq!(name, "east-1".to_string());
        assert_eq!(name.to_string(), "east-1");
        assert_eq!(format!("{name:?}"), format!("{:?}", "east-1"));
        assert_eq!(serde_json::to_string(&name).unwrap(), r#""east-1""#);
        assert_eq!(
            serde_json::from_str::<ClusterName>(r#""east-1""#).unwrap(),
            name
        );
        assert!(ClusterName::new("east-1") < ClusterName::new("east-2"));
    }

    #[test]
    fn maps_keyed_by_names_are_found_by_text() {
        let map: BTreeMap<ClusterName, u32> = [(ClusterName::new("a"), 1)].into();
        assert_eq!(map.get("a"), Some(&1));
        let set: HashSet<ClusterName> = [ClusterName::new("b")].into();
        assert!(set.contains("b"));
    }

    #[test]
    fn a_table_holds_each_name_once_and_clones_share_it() {
        let names = ClusterName::table(["", "east", "west-1"]);
        let texts: Vec<&str> = names.iter().map(ClusterName::as_str).collect();
        assert_eq!(texts, ["", "east", "west-1"]);
        let copy = names[2].clone();
        assert!(std::ptr::eq(names[2].as_str(), copy.as_str()));
        // A name equals the same text from anywhere else, and orders and hashes as it.
        assert_eq!(names[1], ClusterName::new("east"));
        assert_ne!(names[1], names[2]);
        assert!(names[1] < names[2]);
        let set: HashSet<ClusterName> = names.iter().cloned().collect();
        assert!(set.contains("west-1") && set.contains(&ClusterName::from("east".to_string())));
        assert_eq!(ClusterName::default(), "");
    }
}
