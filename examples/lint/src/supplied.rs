//! The tree's files as lint reads them: through core's one reader
//! ([`migration_core::tree::supplied`]), so lint sees the same files the
//! loader and the run do, and a FIFO, a device or a dangling symlink is
//! refused the same way.

use std::path::{Path, PathBuf};

use migration_core::tree::supplied::{self, FileError, Within};

/// The file `rel` of the tree at `root` (`None`: nothing is there),
/// symlinks followed only inside the tree; errors name `rel`.
pub fn tree_file(root: &Path, rel: &str) -> Result<Option<Vec<u8>>, FileError> {
    let canonical = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    supplied::read_file(
        &root.join(rel),
        Within::Tree(&canonical),
        supplied::MAX_FILE_BYTES,
    )
    .map_err(|e| e.named(PathBuf::from(rel)))
}
