//! Release versions: the order in which a line's tags are walked (CONTRACT.md §4.1).

use std::cmp::Ordering;
use std::fmt;

/// A semantic version as release tags use it: `v1.7.0-rc.1`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version {
    core: [u64; 3],
    pre: Vec<PreId>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum PreId {
    Num(u64),
    Alpha(String),
}

impl Version {
    /// True for a pre-release (`v1.7.0-rc.1`), which sorts before its release.
    pub fn is_prerelease(&self) -> bool {
        !self.pre.is_empty()
    }

    /// Parses a tag: an optional leading `v`, `MAJOR.MINOR.PATCH`, an
    /// optional `-PRERELEASE`, an optional `+BUILD` (ignored for order).
    pub fn parse(tag: &str) -> Option<Version> {
        let s = tag.strip_prefix('v').unwrap_or(tag);
        let s = s.split_once('+').map_or(s, |(v, _)| v);
        let (core, pre) = match s.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (s, None),
        };
        let mut parts = core.split('.');
        let mut nums = [0u64; 3];
        for n in &mut nums {
            *n = crate::line_file::decimal(parts.next()?)?;
        }
        if parts.next().is_some() {
            return None;
        }
        let pre = match pre {
            None => Vec::new(),
            Some(p) => p
                .split('.')
                .map(|id| {
                    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    {
                        None
                    } else if id.bytes().all(|b| b.is_ascii_digit()) {
                        id.parse().ok().map(PreId::Num)
                    } else {
                        Some(PreId::Alpha(id.to_owned()))
                    }
                })
                .collect::<Option<Vec<_>>>()?,
        };
        Some(Version { core: nums, pre })
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.core
            .cmp(&other.core)
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                // A pre-release sorts before its release.
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => {
                    for (a, b) in self.pre.iter().zip(&other.pre) {
                        let o = match (a, b) {
                            (PreId::Num(x), PreId::Num(y)) => x.cmp(y),
                            (PreId::Num(_), PreId::Alpha(_)) => Ordering::Less,
                            (PreId::Alpha(_), PreId::Num(_)) => Ordering::Greater,
                            (PreId::Alpha(x), PreId::Alpha(y)) => x.cmp(y),
                        };
                        if o != Ordering::Equal {
                            return o;
                        }
                    }
                    self.pre.len().cmp(&other.pre.len())
                }
            })
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.core[0], self.core[1], self.core[2])?;
        for (i, id) in self.pre.iter().enumerate() {
            f.write_str(if i == 0 { "-" } else { "." })?;
            match id {
                PreId::Num(n) => write!(f, "{n}")?,
                PreId::Alpha(a) => f.write_str(a)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn pre_releases_sort_before_their_release() {
        let mut tags = vec![
            "v1.7.1",
            "v1.7.0",
            "v1.7.0-rc.2",
            "v1.7.0-rc.1",
            "v1.6.10",
            "v1.6.9",
            "v1.7.0-rc.10",
            "v1.7.0-alpha",
        ];
        tags.sort_by_key(|t| v(t));
        assert_eq!(
            tags,
            [
                "v1.6.9",
                "v1.6.10",
                "v1.7.0-alpha",
                "v1.7.0-rc.1",
                "v1.7.0-rc.2",
                "v1.7.0-rc.10",
                "v1.7.0",
                "v1.7.1"
            ]
        );
    }

    #[test]
    fn non_versions_are_rejected() {
        for bad in [
            "vfoo",
            "v1.2",
            "v1.2.3.4",
            "v01.2.3",
            "v1.2.3-",
            "v1.2.3-rc..1",
            "v1.2.x",
        ] {
            assert!(Version::parse(bad).is_none(), "{bad}");
        }
        assert_eq!(v("v1.2.3+build.5"), v("v1.2.3"));
    }
}
