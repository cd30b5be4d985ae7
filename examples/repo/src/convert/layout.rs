//! Writing the converted tree: all or nothing into an empty directory, or
//! nothing at all when the directory already holds exactly this conversion
//! (so converting twice is harmless and a stale or foreign directory is
//! never overwritten).

use std::collections::BTreeMap;
use std::path::Path;

use super::ConvertError;
use super::history::read_dir;

/// What happened to `--out`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Written {
    /// The tree was written.
    Written,
    /// The directory already held these exact files; nothing was touched.
    Unchanged,
}

/// Writes `files` (relative path to bytes) under `out`.
pub fn write(out: &Path, files: &BTreeMap<String, Vec<u8>>) -> Result<Written, ConvertError> {
    let exists = out.exists();
    if exists {
        let io = |source| ConvertError::Io {
            path: out.to_path_buf(),
            source,
        };
        let empty = std::fs::read_dir(out).map_err(io)?.next().is_none();
        if !empty {
            let present = read_dir(out)?;
            if &present == files {
                return Ok(Written::Unchanged);
            }
            return Err(ConvertError::OutNotEmpty {
                out: out.to_path_buf(),
                detail: first_difference(&present, files),
            });
        }
    }
    // Written beside the target and renamed into place, so an interrupted
    // conversion leaves no half tree under --out.
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|source| ConvertError::Io {
        path: parent.to_path_buf(),
        source,
    })?;
    let staging = tempfile::Builder::new()
        .prefix(".migrate-convert-")
        .tempdir_in(parent)
        .map_err(|source| ConvertError::Io {
            path: parent.to_path_buf(),
            source,
        })?;
    for (rel, bytes) in files {
        let path = staging.path().join(rel);
        let io = |source| ConvertError::Io {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        std::fs::write(&path, bytes).map_err(io)?;
        if rel.starts_with("pre-apply/") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
        }
    }
    if exists {
        std::fs::remove_dir(out).map_err(|source| ConvertError::Io {
            path: out.to_path_buf(),
            source,
        })?;
    }
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(staging.path(), std::fs::Permissions::from_mode(0o755)).map_err(
            |source| ConvertError::Io {
                path: staging.path().to_path_buf(),
                source,
            },
        )?;
    }
    let staged = staging.keep();
    std::fs::rename(&staged, out).map_err(|source| ConvertError::Io {
        path: out.to_path_buf(),
        source,
    })?;
    Ok(Written::Written)
}

/// The first path that is missing, extra or different.
fn first_difference(
    present: &BTreeMap<String, Vec<u8>>,
    wanted: &BTreeMap<String, Vec<u8>>,
) -> String {
    for (path, bytes) in wanted {
        match present.get(path) {
            None => return format!("{path} is missing"),
            Some(b) if b != bytes => return format!("{path} differs"),
            Some(_) => {}
        }
    }
    present
        .keys()
        .find(|p| !wanted.contains_key(*p))
        .map_or_else(
            || "unknown".to_owned(),
            |p| format!("{p} is not part of the conversion"),
        )
}
