//! Release tags and every file of a directory at each of them (what `migrate convert` reads).

use std::collections::BTreeMap;

use crate::git::{BlobReader, GitError, Repo, TreeRecord, bad_entry, ls_tree_records};
use migration_core::version::Version;

impl Repo {
    /// The tags matching `pattern`, in version order (every one must be a
    /// version); with `merged_only`, only those merged into HEAD (the line).
    pub fn release_tags(
        &self,
        pattern: &str,
        merged_only: bool,
    ) -> Result<Vec<(Version, String)>, GitError> {
        let mut args = vec!["tag"];
        if merged_only {
            args.extend(["--merged", "HEAD"]);
        }
        args.extend(["--list", pattern]);
        let mut tags = self
            .lines(&args)?
            .into_iter()
            .map(|t| {
                Version::parse(&t)
                    .map(|v| (v, t.clone()))
                    .ok_or(GitError::NotSemver { tag: t })
            })
            .collect::<Result<Vec<_>, _>>()?;
        tags.sort();
        Ok(tags)
    }

    /// Every regular file of the directory each of `tags` has at one of
    /// `paths` (the directory's path history, newest first: it moved), by
    /// path relative to that directory (`/`-separated), with its bytes; a tag
    /// with none of them gives an empty map, a tag with more than one is
    /// [`GitError::AmbiguousPath`]. Blobs are read through one `git cat-file`
    /// process. Symlinks and submodules are reported as
    /// [`GitError::BadEntry`]: a converted tree must not depend on what they
    /// point to.
    pub fn files_at_tags(
        &self,
        tags: &[String],
        paths: &[String],
    ) -> Result<Vec<BTreeMap<String, Vec<u8>>>, GitError> {
        let mut reader = BlobReader::start(&self.root)?;
        let mut out = Vec::with_capacity(tags.len());
        for tag in tags {
            let rev = format!("refs/tags/{tag}^{{commit}}");
            let mut found: Vec<(String, Vec<u8>)> = Vec::new();
            for path in paths {
                let path = path.trim_matches('/').to_owned();
                let listing =
                    self.git(&["ls-tree", "-r", "-z", &rev, "--", &format!("{path}/")])?;
                if !listing.is_empty() {
                    found.push((path, listing));
                }
            }
            if found.len() > 1 {
                return Err(GitError::AmbiguousPath {
                    tag: tag.clone(),
                    paths: found.into_iter().map(|(p, _)| p).collect(),
                });
            }
            let mut files = BTreeMap::new();
            for (path, listing) in &found {
                for text in ls_tree_records(listing) {
                    let bad = |reason: &str| bad_entry(tag, &text, reason);
                    let record = TreeRecord::parse(&text, tag)?;
                    let rel = record
                        .file
                        .strip_prefix(&format!("{path}/"))
                        .ok_or_else(|| bad("outside the requested path"))?;
                    if record.kind != "blob"
                        || !(record.mode == "100644" || record.mode == "100755")
                    {
                        return Err(bad("not a regular file (symlink or submodule)"));
                    }
                    files.insert(rel.to_owned(), reader.read(record.oid)?);
                }
            }
            out.push(files);
        }
        reader.finish()?;
        Ok(out)
    }
}
