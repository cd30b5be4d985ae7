//! The index ConfigMap: what the current release ships for the background
//! tier, rendered by `migrate index` and read by the operator.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::ObjectMeta;
use migration_core::{BatchName, Slug};

/// Index ConfigMap keys.
pub mod index_keys {
    /// The image reference migrations run from.
    pub const IMAGE: &str = "image";
    /// The migrations tree's path inside the image.
    pub const TREE: &str = "tree";
    /// Background slugs in manifest order, one per line.
    pub const SLUGS: &str = "slugs";
    /// Revoked slugs, one per line.
    pub const REVOKED: &str = "revoked";
    /// The manifest batch of each background slug, one `<slug> <batch>`
    /// line each. Optional: an index rendered before it existed has none,
    /// and an operator that predates it ignores it (it reads only the keys
    /// it knows), so adding it changes nothing for either.
    pub const BATCHES: &str = "batches";
}

/// The index: what the current release ships for the background tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    /// The image reference.
    pub image: String,
    /// The tree's path inside the image.
    pub tree: String,
    /// Background slugs, in manifest order.
    pub slugs: Vec<Slug>,
    /// Revoked slugs.
    pub revoked: Vec<Slug>,
    /// The manifest batch (`00003-v1.8.0`) of each background slug that has
    /// one, so the operator's give-up entry records the batch a runner's
    /// entry would.
    pub batches: BTreeMap<Slug, BatchName>,
}

/// Checks an image reference for the index, saying what is wrong with it:
/// a name (no blank, no control character) followed by `@sha256:` and 64
/// lowercase hex digits, or with `allow_tag` any such name without a
/// digest. A digest is checked whenever one is given: text after
/// `@sha256:` that is not a digest pins nothing.
pub fn check_image(image: &str, allow_tag: bool) -> Result<(), String> {
    if image.is_empty() {
        return Err("empty image reference".into());
    }
    if let Some(c) = image.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{c:?} in an image reference (no blank or control character belongs there)"
        ));
    }
    match image.split_once('@') {
        Some((name, digest)) => {
            if name.is_empty() {
                return Err("no image name before '@'".into());
            }
            let hex = digest.strip_prefix("sha256:").ok_or_else(|| {
                format!("the digest {digest:?} is not sha256:HEX")
            })?;
            if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                return Err(format!(
                    "the digest sha256:{hex} is not 64 lowercase hex digits"
                ));
            }
            Ok(())
        }
        None if allow_tag => Ok(()),
        None => Err("has no digest (NAME@sha256:HEX): a tag can move, so the operator could run other scripts than these; pin the digest, or pass --allow-tag".into()),
    }
}

/// Why an index ConfigMap cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("index {name}: {reason}")]
pub struct IndexError {
    /// The ConfigMap.
    pub name: String,
    /// What is wrong.
    pub reason: String,
}

impl Index {
    /// Reads an index ConfigMap. A missing or malformed key is an error:
    /// an index that cannot be read is never "nothing to do".
    pub fn from_configmap(cm: &ConfigMap) -> Result<Index, IndexError> {
        let name = cm.name_any();
        let bad = |reason: String| IndexError {
            name: name.clone(),
            reason,
        };
        let data = cm.data.clone().unwrap_or_default();
        let get = |key: &str| {
            data.get(key)
                .cloned()
                .ok_or_else(|| bad(format!("missing key '{key}'")))
        };
        let image = get(index_keys::IMAGE)?;
        if image.trim().is_empty() {
            return Err(bad("empty image".into()));
        }
        let tree = get(index_keys::TREE)?;
        let list = |key: &str, text: &str| -> Result<Vec<Slug>, IndexError> {
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .enumerate()
                .map(|(i, l)| Slug::parse(l).map_err(|e| bad(format!("{key} line {}: {e}", i + 1))))
                .collect()
        };
        let slugs = list(index_keys::SLUGS, &get(index_keys::SLUGS)?)?;
        let revoked = list(
            index_keys::REVOKED,
            data.get(index_keys::REVOKED).map_or("", String::as_str),
        )?;
        let batches = match data.get(index_keys::BATCHES) {
            None => BTreeMap::new(),
            Some(text) => parse_batches(text, &slugs).map_err(bad)?,
        };
        Ok(Index {
            image: image.trim().to_owned(),
            tree,
            slugs,
            revoked,
            batches,
        })
    }

    /// The manifest batch of `slug`, when the index names one.
    pub fn batch_of(&self, slug: &Slug) -> Option<&BatchName> {
        self.batches.get(slug)
    }

    /// The index as ConfigMap data.
    pub fn to_data(&self) -> BTreeMap<String, String> {
        let lines = |v: &[Slug]| v.iter().map(|s| format!("{s}\n")).collect::<String>();
        let mut data = BTreeMap::from([
            (index_keys::IMAGE.to_owned(), self.image.clone()),
            (index_keys::TREE.to_owned(), self.tree.clone()),
            (index_keys::SLUGS.to_owned(), lines(&self.slugs)),
            (index_keys::REVOKED.to_owned(), lines(&self.revoked)),
        ]);
        if !self.batches.is_empty() {
            // In manifest order, so the rendered ConfigMap reads like order.d.
            let text = self
                .slugs
                .iter()
                .filter_map(|s| self.batches.get(s).map(|b| format!("{s} {b}\n")))
                .collect();
            data.insert(index_keys::BATCHES.to_owned(), text);
        }
        data
    }

    /// Builds the index from a tree's manifest: background slugs whose
    /// scripts exist, in manifest order (retired lines cannot run).
    pub fn from_tree(
        tree: &migration_core::MigrationsTree,
        image: &str,
        tree_path: &str,
    ) -> Option<Index> {
        let manifest = tree.manifest()?;
        let background: Vec<_> = manifest
            .iter()
            .filter(|(_, line)| !line.retired)
            .filter(|(_, line)| {
                tree.script(&line.slug)
                    .is_some_and(|s| s.tier == migration_core::Tier::Background)
            })
            .collect();
        let slugs = background.iter().map(|(_, l)| l.slug.clone()).collect();
        let batches = background
            .iter()
            .map(|(batch, l)| (l.slug.clone(), batch.name.clone()))
            .collect();
        let revoked = tree.revoked().iter().map(|r| r.slug.clone()).collect();
        Some(Index {
            image: image.to_owned(),
            tree: tree_path.to_owned(),
            slugs,
            revoked,
            batches,
        })
    }
}

/// Reads the `batches` key: one `<slug> <batch>` line per slug, each slug
/// one of `slugs` and named once. Anything else makes the index unreadable:
/// a batch recorded against the wrong slug would be a record that lies.
fn parse_batches(text: &str, slugs: &[Slug]) -> Result<BTreeMap<Slug, BatchName>, String> {
    let listed: std::collections::BTreeSet<&Slug> = slugs.iter().collect();
    let mut batches = BTreeMap::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let at = format!("{} line {}", index_keys::BATCHES, i + 1);
        let mut words = line.split_whitespace();
        let (Some(slug), Some(batch), None) = (words.next(), words.next(), words.next()) else {
            return Err(format!("{at}: expected '<slug> <batch>', found {line:?}"));
        };
        let slug = Slug::parse(slug).map_err(|e| format!("{at}: {e}"))?;
        if !listed.contains(&slug) {
            return Err(format!("{at}: {slug} is not one of the index's slugs"));
        }
        let batch: BatchName = batch.parse().map_err(|e| format!("{at}: {e}"))?;
        if batches.insert(slug.clone(), batch).is_some() {
            return Err(format!("{at}: {slug} is named twice"));
        }
    }
    Ok(batches)
}

/// Builds the index ConfigMap object.
pub fn index_configmap(index: &Index, namespace: &str, name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(index.to_data()),
        ..ConfigMap::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use migration_core::testing::fixtures::s;

    /// The ConfigMap of an index of `slugs`, without batches.
    fn index_cm(slugs: Vec<Slug>) -> ConfigMap {
        let i = Index {
            image: "img".into(),
            tree: "/migrations".into(),
            slugs,
            revoked: vec![],
            batches: BTreeMap::new(),
        };
        index_configmap(&i, "ns", "idx")
    }

    #[test]
    fn the_index_round_trips_and_rejects_bad_slugs() {
        let i = Index {
            image: "img".into(),
            tree: "/migrations".into(),
            slugs: vec![s("a"), s("b")],
            revoked: vec![s("c")],
            batches: BTreeMap::from([(s("a"), "00002-v1.8.0".parse().unwrap())]),
        };
        let cm = index_configmap(&i, "ns", "idx");
        assert_eq!(Index::from_configmap(&cm).unwrap(), i);
        let mut bad = cm.clone();
        bad.data
            .as_mut()
            .unwrap()
            .insert("slugs".into(), "ok\nNot Ok\n".into());
        assert!(
            Index::from_configmap(&bad)
                .unwrap_err()
                .reason
                .contains("slugs line 2")
        );
        let mut missing = cm;
        missing.data.as_mut().unwrap().remove("image");
        assert!(Index::from_configmap(&missing).is_err());
    }

    #[test]
    fn an_index_without_batches_reads_as_one_that_names_none() {
        let cm = index_cm(vec![s("a")]);
        assert!(!cm.data.as_ref().unwrap().contains_key(index_keys::BATCHES));
        let read = Index::from_configmap(&cm).unwrap();
        assert_eq!(read.batch_of(&s("a")), None);
    }

    #[test]
    fn a_batches_line_that_lies_makes_the_index_unreadable_naming_the_line() {
        let cm = index_cm(vec![s("a"), s("b")]);
        for (text, says) in [
            (
                "a 00001-v1\nzzz 00002-v2\n",
                "batches line 2: zzz is not one of the index's slugs",
            ),
            (
                "a 00001-v1\na 00002-v2\n",
                "batches line 2: a is named twice",
            ),
            ("a\n", "batches line 1: expected '<slug> <batch>'"),
            (
                "a 00001-v1 extra\n",
                "batches line 1: expected '<slug> <batch>'",
            ),
            ("a v1\n", "batches line 1: invalid batch file name"),
            ("Not-A-Slug 00001-v1\n", "batches line 1:"),
        ] {
            let mut bad = cm.clone();
            bad.data
                .as_mut()
                .unwrap()
                .insert(index_keys::BATCHES.into(), text.into());
            let err = Index::from_configmap(&bad).unwrap_err();
            assert!(err.reason.starts_with(says), "{text:?}: {err}");
        }
    }
}
