//! Text that many long-kept entries share, behind one thin pointer.
//!
//! The rollout state keeps an entry per binding (hundreds of thousands in a large fleet), and
//! each names its rendering, the commit that delivered it and why it is re-checked: texts made
//! once and shared by every entry that holds them. `Arc<str>` would take 16 bytes of each entry
//! for each (a pointer and a length); this takes 8, the length kept once with the text.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

/// Shared, immutable text; compared, hashed and ordered as the text it holds.
#[derive(Clone)]
pub struct SharedText(Arc<Box<str>>);

impl SharedText {
    /// Whether `a` and `b` are the same allocation (not merely equal text).
    pub fn ptr_eq(a: &SharedText, b: &SharedText) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// The allocation's address: the same for every clone, and no other live text's.
    pub fn address(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for SharedText {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SharedText {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Hashed and compared as its text, so a set of them can be looked up by `&str`.
impl Borrow<str> for SharedText {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for SharedText {
    fn from(text: &str) -> SharedText {
        SharedText(Arc::new(Box::from(text)))
    }
}

impl From<String> for SharedText {
    fn from(text: String) -> SharedText {
        SharedText(Arc::new(text.into_boxed_str()))
    }
}

impl PartialEq for SharedText {
    fn eq(&self, other: &SharedText) -> bool {
        SharedText::ptr_eq(self, other) || self.as_str() == other.as_str()
    }
}

impl Eq for SharedText {}

impl PartialEq<str> for SharedText {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for SharedText {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Hash for SharedText {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for SharedText {
    fn partial_cmp(&self, other: &SharedText) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SharedText {
    fn cmp(&self, other: &SharedText) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl fmt::Debug for SharedText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for SharedText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

impl serde::Serialize for SharedText {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for SharedText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<SharedText, D::Error> {
        String::deserialize(d).map(SharedText::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_takes_one_pointer_and_behaves_as_its_text() {
        assert_eq!(std::mem::size_of::<SharedText>(), 8);
        assert_eq!(std::mem::size_of::<Option<SharedText>>(), 8);
        let a = SharedText::from("sha256:abc");
        let b = SharedText::from(String::from("sha256:abc"));
        assert_eq!(a, b);
        assert!(!SharedText::ptr_eq(&a, &b), "equal text, two allocations");
        assert!(SharedText::ptr_eq(&a, &a.clone()));
        assert_eq!(a, "sha256:abc");
        let (x, y) = (SharedText::from("a"), SharedText::from("b"));
        assert!(x < y);
        let set: std::collections::HashSet<SharedText> = [a.clone()].into();
        assert!(set.contains("sha256:abc"), "looked up by its text");
        assert_eq!(format!("{a} {a:?}"), "sha256:abc \"sha256:abc\"");
    }

    #[test]
    fn it_is_written_and_read_as_a_plain_string() {
        let text = SharedText::from("re-checked: the member changed");
        let json = serde_json::to_string(&text).unwrap();
        assert_eq!(json, "\"re-checked: the member changed\"");
        let back: SharedText = serde_json::from_str(&json).unwrap();
        assert_eq!(back, text);
    }
}
