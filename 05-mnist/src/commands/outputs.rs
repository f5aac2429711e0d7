//! The files `mnist train` writes when it ends (`--save`, `--metrics`, `--plot`), checked
//! before any training starts, so that minutes of training are never lost to a path:
//! - each is a file name (not a folder) in a folder that exists;
//! - no two are the same file, however they are spelled (`m.json` and `./m.json`, a relative
//!   and an absolute path, a link and its target, two hard links): compared by what they are
//!   on disk (device and inode) when both exist, else by their paths once resolved (the
//!   folder's links followed, the file's own when it is one);
//! - each can be written under its final name: a file is created there and removed (or, when a
//!   file is already there, one with a name of the same length beside it), so a name the file
//!   system refuses (too long, a character it does not take) or a folder that takes no new
//!   files fails now, with the flag named.

use std::ffi::OsString;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::error::{MnistError, Result};

/// Checks `outputs` (flag, path) as above. `Err` names the flag (or both flags) and says what
/// to change.
pub(super) fn check_outputs(outputs: &[(&str, &Path)]) -> Result<()> {
    let mut seen: Vec<(&str, &Path, Identity)> = Vec::new();
    for &(flag, path) in outputs {
        let identity = check_one(flag, path)?;
        if let Some((other, other_path, _)) = seen.iter().find(|(_, _, id)| id.same_as(&identity)) {
            let spelled = if *other_path == path { String::new() } else { format!(" (as {})", other_path.display()) };
            return Err(MnistError::InvalidArgument(format!(
                "{other} and {flag} name the same file {}{spelled}: the second would overwrite the first; give each its own file",
                path.display()
            )));
        }
        seen.push((flag, path, identity));
    }
    Ok(())
}

/// What a path names, for comparing two of them.
#[derive(Debug)]
struct Identity {
    /// The path with its folder's links resolved (and the file's own, when it is one).
    resolved: PathBuf,
    /// Device and inode, when the file exists (unix).
    file_id: Option<(u64, u64)>,
}

impl Identity {
    fn same_as(&self, other: &Identity) -> bool {
        self.resolved == other.resolved || matches!((self.file_id, other.file_id), (Some(a), Some(b)) if a == b)
    }
}

/// The checks on one output; its identity when they pass.
fn check_one(flag: &str, path: &Path) -> Result<Identity> {
    let bad = |msg: String| Err(MnistError::InvalidArgument(format!("{flag} {}: {msg}", path.display())));
    let Some(name) = path.file_name() else {
        return bad("that is not a file name; give a file name such as model.safetensors".into());
    };
    if path.is_dir() {
        return bad("that is a folder; give a file name in it".into());
    }
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return bad(format!("the folder {} does not exist; create it first", dir.display()));
    }
    let resolved_dir = dir.canonicalize().map_err(|e| MnistError::io(dir, e))?;
    let existing = std::fs::metadata(path).ok();
    let resolved = match &existing {
        Some(_) => path.canonicalize().map_err(|e| MnistError::io(path, e))?,
        None => resolved_dir.join(name),
    };
    probe_writable(dir, name, existing.is_some())
        .map_err(|msg| MnistError::InvalidArgument(format!("{flag} {}: {msg}", path.display())))?;
    Ok(Identity { resolved, file_id: existing.as_ref().and_then(file_id) })
}

#[cfg(unix)]
fn file_id(m: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn file_id(_: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

/// Creates a file named `name` in `dir` and removes it; when `name` is already there, a file
/// with a fresh name of the same length instead (the model is written through a temporary file
/// in the same folder, then renamed, so the folder must take new files).
fn probe_writable(dir: &Path, name: &std::ffi::OsStr, exists: bool) -> Result<(), String> {
    let probe = if exists { sibling_of_same_length(dir, name) } else { dir.join(name) };
    let created = std::fs::OpenOptions::new().write(true).create_new(true).open(&probe);
    match created {
        Ok(file) => {
            drop(file);
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(match e.kind() {
            ErrorKind::InvalidFilename => format!("the file system does not take that file name ({e}); choose a shorter or plainer name"),
            ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => {
                format!("the folder {} does not take new files ({e}); choose another folder", dir.display())
            }
            ErrorKind::StorageFull => format!("the disk is full ({e}); free some space or choose another folder"),
            _ => format!("a file cannot be written there ({e}); choose another path"),
        }),
    }
}

/// `dir/.check-N…` with a name as long as `name` (in bytes), not there yet.
fn sibling_of_same_length(dir: &Path, name: &std::ffi::OsStr) -> PathBuf {
    let len = name.as_encoded_bytes().len().max(1);
    let pid = std::process::id();
    let mut attempt = 0u64;
    loop {
        attempt += 1;
        let mut stem = format!(".{pid}-{attempt}-");
        while stem.len() < len {
            stem.push('x');
        }
        stem.truncate(len);
        let candidate = dir.join(OsString::from(&stem));
        if std::fs::symlink_metadata(&candidate).is_err() && candidate.file_name() != Some(name) {
            return candidate;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(outputs: &[(&str, &Path)]) -> String {
        check_outputs(outputs).unwrap_err().to_string()
    }

    #[test]
    fn folders_missing_folders_and_good_paths() {
        let dir = tempfile::tempdir().unwrap();
        let e = err(&[("--metrics", dir.path())]);
        assert!(e.contains("--metrics") && e.contains("that is a folder"), "{e}");
        let e = err(&[("--save", &dir.path().join("no/such/m.safetensors"))]);
        assert!(e.contains("does not exist"), "{e}");
        let (m, j) = (dir.path().join("m.safetensors"), dir.path().join("m.jsonl"));
        check_outputs(&[("--save", &m), ("--metrics", &j)]).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the check leaves nothing behind");
        // A file already there is kept as it is, and nothing else is left.
        std::fs::write(&m, b"old").unwrap();
        check_outputs(&[("--save", &m)]).unwrap();
        assert_eq!(std::fs::read(&m).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn one_file_spelled_two_ways_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let m = d.join("m.out");
        // `./` inside the path, and `..` through a sub-folder.
        std::fs::create_dir(d.join("sub")).unwrap();
        let dotted = d.join(".").join("m.out");
        let through = d.join("sub").join("..").join("m.out");
        for other in [&dotted, &through] {
            let e = err(&[("--save", &m), ("--metrics", other)]);
            assert!(e.contains("--save and --metrics name the same file"), "{e}");
        }
        // The same, once the file exists.
        std::fs::write(&m, b"x").unwrap();
        assert!(err(&[("--save", &m), ("--plot", &dotted)]).contains("the same file"));
        #[cfg(unix)]
        {
            // A link to the file, a linked folder, and a hard link.
            std::os::unix::fs::symlink(&m, d.join("link.out")).unwrap();
            assert!(err(&[("--save", &m), ("--metrics", &d.join("link.out"))]).contains("the same file"));
            std::os::unix::fs::symlink(d, d.join("here")).unwrap();
            assert!(err(&[("--save", &d.join("here/new.out")), ("--metrics", &d.join("new.out"))]).contains("the same file"));
            std::fs::hard_link(&m, d.join("hard.out")).unwrap();
            assert!(err(&[("--save", &m), ("--metrics", &d.join("hard.out"))]).contains("the same file"));
        }
        check_outputs(&[("--save", &m), ("--metrics", &d.join("other.out"))]).unwrap();
    }

    #[test]
    fn a_relative_and_an_absolute_path_to_one_file_are_the_same() {
        let cwd = std::env::current_dir().unwrap();
        let name = format!("outputs-check-{}.tmp", std::process::id());
        let e = err(&[("--save", Path::new(&name)), ("--metrics", &cwd.join(&name))]);
        assert!(e.contains("the same file"), "{e}");
        let e = err(&[("--save", Path::new(&name)), ("--metrics", &Path::new(".").join(&name))]);
        assert!(e.contains("the same file"), "{e}");
        assert!(!cwd.join(&name).exists());
    }

    #[test]
    fn a_name_the_file_system_refuses_fails_before_training() {
        let dir = tempfile::tempdir().unwrap();
        // Most file systems take names of at most 255 bytes.
        let long = dir.path().join(format!("{}.safetensors", "m".repeat(300)));
        let e = err(&[("--save", &long)]);
        assert!(e.contains("does not take that file name"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_folder_that_takes_no_new_files_fails_before_training() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::write(locked.join("m.safetensors"), b"old").unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
        // Root writes anywhere: then there is nothing to check.
        let writable = std::fs::File::create(locked.join("probe")).is_ok();
        if !writable {
            for name in ["new.safetensors", "m.safetensors"] {
                let e = err(&[("--save", &locked.join(name))]);
                assert!(e.contains("does not take new files"), "{name}: {e}");
            }
        }
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}
