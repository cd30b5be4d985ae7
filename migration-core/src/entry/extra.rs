//! The fields of an entry this version does not know.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::LazyLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Fields of an entry this version does not know, preserved verbatim: a
/// JSON object's members in their stored order, used as that object
/// (`Map`, through `Deref` and `DerefMut`). Nearly every entry has none, so
/// an empty one is a single null pointer rather than an empty map (some 70
/// bytes, in every one of a snapshot's 10^5 entries). Empty is empty
/// however it came to be: equality compares the members.
#[derive(Clone, Default)]
pub struct Extra(Option<Box<Map<String, Value>>>);

/// What an `Extra` without members reads as.
static EMPTY: LazyLock<Map<String, Value>> = LazyLock::new(Map::new);

impl Extra {
    /// No fields.
    pub fn new() -> Self {
        Extra(None)
    }

    /// The members as a map.
    pub fn into_map(self) -> Map<String, Value> {
        self.0.map(|m| *m).unwrap_or_default()
    }
}

impl From<Map<String, Value>> for Extra {
    fn from(map: Map<String, Value>) -> Self {
        if map.is_empty() {
            Extra(None)
        } else {
            Extra(Some(Box::new(map)))
        }
    }
}

impl FromIterator<(String, Value)> for Extra {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(members: I) -> Self {
        Extra::from(Map::from_iter(members))
    }
}

impl Deref for Extra {
    type Target = Map<String, Value>;

    fn deref(&self) -> &Map<String, Value> {
        self.0.as_deref().unwrap_or(&EMPTY)
    }
}

impl DerefMut for Extra {
    fn deref_mut(&mut self) -> &mut Map<String, Value> {
        self.0.get_or_insert_with(Box::default)
    }
}

impl PartialEq for Extra {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Extra {}

impl fmt::Debug for Extra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl<'a> IntoIterator for &'a Extra {
    type Item = (&'a String, &'a Value);
    type IntoIter = serde_json::map::Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        (**self).iter()
    }
}

impl Serialize for Extra {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Extra {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Map::deserialize(deserializer).map(Extra::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_extra_is_one_pointer_and_equals_an_emptied_one() {
        assert_eq!(std::mem::size_of::<Extra>(), std::mem::size_of::<usize>());
        let mut touched = Extra::new();
        touched.insert("k".into(), Value::Null);
        touched.remove("k");
        assert_eq!(touched, Extra::new());
        assert!(touched.is_empty());
        let mut one = Extra::new();
        one.insert("k".into(), Value::Bool(true));
        assert_ne!(one, Extra::new());
        assert_eq!(Extra::from(one.clone().into_map()), one);
        assert_eq!(serde_json::to_string(&one).unwrap(), r#"{"k":true}"#);
        assert_eq!(serde_json::from_str::<Extra>(r#"{"k":true}"#).unwrap(), one);
        assert_eq!(format!("{:?}", Extra::new()), "{}");
    }
}
