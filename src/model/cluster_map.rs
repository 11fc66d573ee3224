//! Values by member cluster, as a placement's per-cluster results and state hold them: one
//! entry for each of up to every member of the fleet, so the entries are one sorted
//! allocation, without a map's nodes (a B-tree's nodes are half to two-thirds full, each
//! with its own header), and by default named by the fleet's shared [`ClusterName`]s.

use std::borrow::Borrow;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Index;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ClusterName;

/// Values by cluster name, sorted by name, found by text. Filled in any order, cheapest in
/// name order (each entry then goes at the end); an entry added or removed elsewhere moves
/// those after it, which a placement's few hundred or thousand entries afford.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterMap<V, K = ClusterName> {
    entries: Vec<(K, V)>,
}

impl<V, K> Default for ClusterMap<V, K> {
    fn default() -> Self {
        ClusterMap {
            entries: Vec::new(),
        }
    }
}

impl<V, K: Borrow<str> + Ord> ClusterMap<V, K> {
    pub fn new() -> Self {
        Self::default()
    }

    fn find(&self, name: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(n, _)| n.borrow().cmp(name))
    }

    /// Room for one more entry, grown by an eighth rather than doubled: the map is kept
    /// long once filled, and a doubled allocation would be up to half empty.
    fn reserve_one(&mut self) {
        if self.entries.len() == self.entries.capacity() {
            self.entries.reserve_exact(self.entries.len() / 8 + 4);
        }
    }

    /// Where `name` is (`Ok`) or goes (`Err`).
    fn place(&self, name: &str) -> Result<usize, usize> {
        // Most maps are filled in name order: a new entry goes at the end.
        match self.entries.last() {
            Some((last, _)) if last.borrow() < name => Err(self.entries.len()),
            _ => self.find(name),
        }
    }

    /// Sets `name`'s value; the one it replaces, if any (the name kept is the first one).
    pub fn insert(&mut self, name: K, value: V) -> Option<V> {
        match self.place(name.borrow()) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.reserve_one();
                self.entries.insert(i, (name, value));
                None
            }
        }
    }

    /// `name`'s value, made by `make` first if it has none, under the key `key` makes of the
    /// name (a key is made only for a new entry).
    pub fn get_or_insert_named(
        &mut self,
        name: &str,
        key: impl FnOnce(&str) -> K,
        make: impl FnOnce() -> V,
    ) -> &mut V {
        let i = match self.place(name) {
            Ok(i) => i,
            Err(i) => {
                self.reserve_one();
                self.entries.insert(i, (key(name), make()));
                i
            }
        };
        &mut self.entries[i].1
    }

    pub fn get(&self, name: &str) -> Option<&V> {
        self.find(name).ok().map(|i| &self.entries[i].1)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut V> {
        self.find(name).ok().map(|i| &mut self.entries[i].1)
    }

    pub fn remove(&mut self, name: &str) -> Option<V> {
        self.find(name).ok().map(|i| self.entries.remove(i).1)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.find(name).is_ok()
    }

    /// Lets `share` replace each name by an equal one (one shared with other maps): the
    /// order stays, as equal names sort alike.
    pub fn share_keys(&mut self, mut share: impl FnMut(&mut K)) {
        for (name, _) in &mut self.entries {
            share(name);
        }
        debug_assert!(self.entries.is_sorted_by(|(a, _), (b, _)| a < b));
    }

    /// Gives back the room the filling left over: for a map that is kept once filled.
    pub fn shrink_to_fit(&mut self) {
        crate::exact_fit::fit(&mut self.entries);
    }
}

impl<V, K> ClusterMap<V, K> {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// In name order.
    pub fn iter(&self) -> Iter<'_, K, V> {
        Iter(self.entries.iter())
    }

    pub fn keys(&self) -> impl ExactSizeIterator<Item = &K> + DoubleEndedIterator {
        self.entries.iter().map(|(n, _)| n)
    }

    pub fn values(&self) -> impl ExactSizeIterator<Item = &V> + DoubleEndedIterator {
        self.entries.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl ExactSizeIterator<Item = &mut V> {
        self.entries.iter_mut().map(|(_, v)| v)
    }
}

/// The entries of a map, in name order.
pub struct Iter<'a, K, V>(std::slice::Iter<'a, (K, V)>);

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = (&'a K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(n, v)| (n, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<K, V> DoubleEndedIterator for Iter<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(n, v)| (n, v))
    }
}

impl<K, V> ExactSizeIterator for Iter<'_, K, V> {}

impl<'a, V, K> IntoIterator for &'a ClusterMap<V, K> {
    type Item = (&'a K, &'a V);
    type IntoIter = Iter<'a, K, V>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<V, K> IntoIterator for ClusterMap<V, K> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl<V, K: Borrow<str> + Ord> Index<&str> for ClusterMap<V, K> {
    type Output = V;

    fn index(&self, name: &str) -> &V {
        self.get(name)
            .unwrap_or_else(|| panic!("no cluster {name:?} in the map"))
    }
}

impl<V, K: Borrow<str> + Ord> FromIterator<(K, V)> for ClusterMap<V, K> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut map = ClusterMap::new();
        map.extend(iter);
        map
    }
}

impl<V, K: Borrow<str> + Ord> Extend<(K, V)> for ClusterMap<V, K> {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (name, value) in iter {
            self.insert(name, value);
        }
    }
}

impl<V: fmt::Debug, K: fmt::Debug> fmt::Debug for ClusterMap<V, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// As a map from name to value, in name order (as a `BTreeMap` is written).
impl<V: Serialize, K: Serialize> Serialize for ClusterMap<V, K> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.len()))?;
        for (name, value) in self {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl<'de, V, K> Deserialize<'de> for ClusterMap<V, K>
where
    V: Deserialize<'de>,
    K: Deserialize<'de> + Borrow<str> + Ord,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries<V, K>(PhantomData<(V, K)>);

        impl<'de, V, K> Visitor<'de> for Entries<V, K>
        where
            V: Deserialize<'de>,
            K: Deserialize<'de> + Borrow<str> + Ord,
        {
            type Value = ClusterMap<V, K>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of cluster names")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
                let mut map = ClusterMap {
                    entries: Vec::with_capacity(access.size_hint().unwrap_or(0)),
                };
                // As a map's: the last of a name written twice wins.
                while let Some((name, value)) = access.next_entry()? {
                    map.insert(name, value);
                }
                Ok(map)
            }
        }

        d.deserialize_map(Entries(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<ClusterName> {
        ClusterName::table(list.iter().copied())
    }

    #[test]
    fn entries_are_kept_in_name_order_whatever_the_order_of_filling() {
        let n = names(&["a", "b", "c", "d"]);
        let mut map = ClusterMap::new();
        for i in [2, 0, 3, 1] {
            assert_eq!(map.insert(n[i].clone(), i), None);
        }
        let keys: Vec<&str> = map.keys().map(|k| k.as_str()).collect();
        assert_eq!(keys, ["a", "b", "c", "d"]);
        assert_eq!(map.values().copied().collect::<Vec<_>>(), [0, 1, 2, 3]);
    }

    #[test]
    fn a_name_set_again_replaces_its_value_and_is_found_by_text() {
        let n = names(&["east", "west"]);
        let mut map: ClusterMap<u32> = n.iter().cloned().zip([1, 2]).collect();
        assert_eq!(map.insert(ClusterName::new("east"), 10), Some(1));
        assert_eq!(map.len(), 2);
        assert_eq!(map.get("east"), Some(&10));
        assert_eq!(map["west"], 2);
        assert!(!map.contains_key("north"));
        assert_eq!(map.get("north"), None);
        *map.get_or_insert_named("north", ClusterName::new, || 0) += 3;
        *map.get_or_insert_named("west", ClusterName::new, || 0) += 3;
        assert_eq!(map.remove("east"), Some(10));
        assert_eq!(map.remove("east"), None);
        let all: Vec<(&str, u32)> = map.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(all, [("north", 3), ("west", 5)]);
    }

    #[test]
    fn an_entry_is_a_shared_name_and_its_value_with_no_node_of_its_own() {
        let n = names(&["m1", "m2", "m3"]);
        let mut map: ClusterMap<u64> = n.iter().cloned().zip(1..).collect();
        map.shrink_to_fit();
        // The whole map is one allocation of entries; each name points into the fleet's table.
        assert_eq!(map.entries.capacity(), 3);
        assert_eq!(std::mem::size_of::<(ClusterName, u64)>(), 24);
        assert!(map
            .keys()
            .zip(&n)
            .all(|(k, t)| k.as_str().as_ptr() == t.as_str().as_ptr()));
    }

    #[test]
    fn it_grows_by_an_eighth_not_by_doubling() {
        let mut map: ClusterMap<u8, String> = ClusterMap::new();
        for i in 0..1000 {
            map.insert(format!("m{i:04}"), 0);
        }
        assert!(map.entries.capacity() <= 1000 + 1000 / 8 + 4);
    }

    #[test]
    fn it_reads_and_writes_as_a_btree_map_does() {
        let text = r#"{"b":2,"a":1,"c":3,"a":4}"#;
        let map: ClusterMap<u32, String> = serde_json::from_str(text).unwrap();
        let tree: std::collections::BTreeMap<String, u32> = serde_json::from_str(text).unwrap();
        assert_eq!(
            serde_json::to_string(&map).unwrap(),
            serde_json::to_string(&tree).unwrap()
        );
        assert_eq!(
            serde_json::to_string(&map).unwrap(),
            r#"{"a":4,"b":2,"c":3}"#
        );
    }
}
