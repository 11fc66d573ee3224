//! A member cluster's name as the scheduler's results carry it: one shared text per cluster.
//! A fleet-wide placement names every cluster in its bindings, selection and decisions, and a
//! commit has many such placements; sharing the fleet's text makes each of those names a
//! reference count, not a string of its own. It reads, compares, orders, hashes and serialises
//! as the plain text.

use serde::{Deserialize, Serialize};
use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ClusterName(Arc<str>);

impl ClusterName {
    pub fn new(name: &str) -> Self {
        ClusterName(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for ClusterName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ClusterName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for ClusterName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// As the text's own: a name reads `"east-1"` in messages and test output, as a `String` did.
impl fmt::Debug for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
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
        ClusterName(name.into())
    }
}

impl From<ClusterName> for String {
    fn from(name: ClusterName) -> Self {
        name.0.to_string()
    }
}

impl PartialEq<str> for ClusterName {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for ClusterName {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for ClusterName {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<ClusterName> for str {
    fn eq(&self, other: &ClusterName) -> bool {
        self == &*other.0
    }
}

impl PartialEq<ClusterName> for &str {
    fn eq(&self, other: &ClusterName) -> bool {
        *self == &*other.0
    }
}

impl PartialEq<ClusterName> for String {
    fn eq(&self, other: &ClusterName) -> bool {
        **self == *other.0
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
    fn clones_share_the_text() {
        let name = ClusterName::new("west");
        let copy = name.clone();
        assert!(std::ptr::eq(name.as_str(), copy.as_str()));
    }
}
