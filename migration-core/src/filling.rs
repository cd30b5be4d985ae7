//! A B-tree map filled one key at a time, mostly in ascending order (a
//! tree's sorted listing, a journal's replay), that keeps its nodes full.
//!
//! Inserted in ascending order, a `BTreeMap` splits every full node into a
//! half-full one that is never filled again: nearly twice the nodes the
//! entries need (for 10^5 scripts, 25 MB of nodes where 14 MB hold them),
//! and rebuilding it afterwards needs both at once and leaves the old
//! nodes' memory behind as holes. Here new keys go into a small map that
//! is merged into the full one whenever it reaches a quarter of it (the
//! merge, `BTreeMap::append`, writes full nodes and frees the old ones as
//! it goes), so at most a fifth of the entries are ever in half-full nodes.
//! Each entry is moved about five times in all.

use std::collections::BTreeMap;

/// Fewest entries merged at once: below this, merging costs more than the
/// half-full nodes it saves.
const MIN_MERGE: usize = 4096;

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct FillingMap<K, V> {
    full: BTreeMap<K, V>,
    recent: BTreeMap<K, V>,
}

impl<K, V> Default for FillingMap<K, V> {
    fn default() -> Self {
        FillingMap {
            full: BTreeMap::new(),
            recent: BTreeMap::new(),
        }
    }
}

impl<K: Ord, V> FillingMap<K, V> {
    /// The stored key and value of `key`.
    pub(crate) fn get_key_value(&self, key: &K) -> Option<(&K, &V)> {
        self.full
            .get_key_value(key)
            .or_else(|| self.recent.get_key_value(key))
    }

    /// True when nothing is stored.
    pub(crate) fn is_empty(&self) -> bool {
        self.full.is_empty() && self.recent.is_empty()
    }

    /// True when `key` may be in the full map: it is not after its last
    /// key (the common case, a key in ascending order, costs one comparison
    /// instead of a search).
    fn may_be_full(&self, key: &K) -> bool {
        self.full
            .last_key_value()
            .is_some_and(|(last, _)| key <= last)
    }

    /// Merges the recent keys in once there are enough of them.
    fn merge_when_due(&mut self) {
        if self.recent.len() >= MIN_MERGE.max(self.full.len() / 4) {
            self.full.append(&mut self.recent);
        }
    }

    /// Stores `value` under `key`, replacing (and returning) what it held.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        if self.may_be_full(&key)
            && let Some(slot) = self.full.get_mut(&key)
        {
            return Some(std::mem::replace(slot, value));
        }
        let old = self.recent.insert(key, value);
        self.merge_when_due();
        old
    }

    /// Stores `value` under `key` unless the key is there already; then
    /// `value` is handed back and the stored one kept.
    pub(crate) fn insert_new(&mut self, key: K, value: V) -> Result<(), V> {
        if self.may_be_full(&key) && self.full.contains_key(&key) {
            return Err(value);
        }
        match self.recent.entry(key) {
            std::collections::btree_map::Entry::Occupied(_) => return Err(value),
            std::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert(value);
            }
        }
        self.merge_when_due();
        Ok(())
    }

    /// Removes `key`, returning its value.
    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        self.full.remove(key).or_else(|| self.recent.remove(key))
    }

    /// Every entry, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.full.iter().chain(self.recent.iter())
    }

    /// Every entry, in no particular order (for collecting into another
    /// map, which sorts them anyway).
    pub(crate) fn into_unordered(self) -> impl Iterator<Item = (K, V)> {
        self.full.into_iter().chain(self.recent)
    }

    /// The map, its nodes full.
    pub(crate) fn finish(mut self) -> BTreeMap<K, V> {
        if self.full.is_empty() {
            // `append` into an empty map only swaps: rebuild from one entry.
            match self.recent.pop_first() {
                Some(first) => self.full.insert(first.0, first.1),
                None => return self.full,
            };
        }
        self.full.append(&mut self.recent);
        self.full
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_holds_what_a_map_holds_whatever_the_order_of_inserts() {
        let mut filling = FillingMap::default();
        let mut map = BTreeMap::new();
        let keys = (0..20_000u32)
            .map(|i| i * 3)
            .chain((0..2_000).map(|i| i * 7 + 1))
            .chain((0..5_000).map(|i| i * 2));
        for (n, key) in keys.enumerate() {
            if n % 3 == 0 {
                let absent = !map.contains_key(&key);
                if absent {
                    map.insert(key, n);
                }
                assert_eq!(filling.insert_new(key, n).is_ok(), absent, "{key}");
                continue;
            }
            assert_eq!(filling.insert(key, n), map.insert(key, n), "{key}");
            if n % 1000 == 7 {
                assert_eq!(filling.remove(&(key + 3)), map.remove(&(key + 3)));
            }
            assert_eq!(filling.get_key_value(&key), map.get_key_value(&key));
        }
        assert_eq!(filling.iter().count(), map.len());
        assert!(!filling.is_empty());
        let mut unordered: Vec<_> = filling.iter().map(|(k, v)| (*k, *v)).collect();
        unordered.sort_unstable();
        assert_eq!(unordered, map.clone().into_iter().collect::<Vec<_>>());
        assert_eq!(filling.finish(), map);
    }
}
