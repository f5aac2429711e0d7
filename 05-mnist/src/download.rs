//! Downloading MNIST and Fashion-MNIST from public mirrors, so that a download can never look
//! like valid data unless it is.
//!
//! For each missing file we try the mirrors of its data set in order (`datasets.rs`; for MNIST
//! the ossci-datasets S3 bucket, then yann.lecun.com, which is often down). A download counts only when it decompresses and the
//! SHA-256 of the decompressed bytes equals the known sum below (the sums of the raw files are
//! the same whichever mirror gzipped them). The bytes go to a temporary file in the target
//! folder, are flushed to disk, and only then renamed to their final name: a rename within
//! one folder is atomic, so an interrupted download leaves no file that looks complete (the
//! temporary file is deleted on every error path).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::datasets::sha256_hex;
use crate::datasets::{DatasetKind, FILE_NAMES};
use crate::error::{MnistError, Result};
use crate::idx::gunzip;

/// The mirrors to try for `kind`: `$MNIST_MIRRORS` (or `$FASHION_MNIST_MIRRORS`) when set, else
/// the public ones ([`DatasetKind::mirrors`]).
pub fn mirrors(kind: DatasetKind) -> Vec<String> {
    match std::env::var(kind.mirrors_env()) {
        Ok(list) if !list.trim().is_empty() => list
            .split(',')
            .map(|m| m.trim())
            .filter(|m| !m.is_empty())
            .map(|m| if m.ends_with('/') { m.to_string() } else { format!("{m}/") })
            .collect(),
        _ => kind.mirrors().iter().map(|m| m.to_string()).collect(),
    }
}

/// The largest download we accept (the biggest file, Fashion-MNIST's training images, is 26 MB
/// gzipped).
const MAX_DOWNLOAD: u64 = 64 << 20;

/// The known SHA-256 (hex) of the decompressed MNIST file `name`.
pub fn expected_sha256(name: &str) -> Option<&'static str> {
    DatasetKind::Mnist.expected_sha256(name)
}

/// Downloads every file of `kind` missing from `dir` (creating `dir`), trying `mirrors` in order.
/// `log` receives one line per action. Returns the paths written.
pub fn download_missing(dir: &Path, kind: DatasetKind, mirrors: &[&str], mut log: impl FnMut(&str)) -> Result<Vec<PathBuf>> {
    let missing: Vec<&str> = FILE_NAMES.iter().copied().filter(|n| !crate::data::file_path(dir, n).is_file()).collect();
    if missing.is_empty() {
        return Ok(Vec::new());
    }
    std::fs::create_dir_all(dir).map_err(|e| MnistError::io(dir, e))?;
    let agent = agent();
    let mut written = Vec::new();
    for name in missing {
        written.push(download_file(&agent, dir, kind, name, mirrors, &mut log)?);
    }
    Ok(written)
}

/// An HTTP agent with timeouts, so a dead mirror fails instead of hanging.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_secs(15)))
        .timeout_global(Some(Duration::from_secs(300)))
        .build()
        .into()
}

/// Downloads `<mirror><name>.gz` from the first mirror that serves it with the right checksum
/// and writes it to `dir/<name>.gz` atomically.
pub fn download_file(
    agent: &ureq::Agent,
    dir: &Path,
    kind: DatasetKind,
    name: &str,
    mirrors: &[&str],
    log: &mut impl FnMut(&str),
) -> Result<PathBuf> {
    let expected = kind
        .expected_sha256(name)
        .ok_or_else(|| MnistError::InvalidArgument(format!("{name} is not a {} file", kind.title())))?;
    let target = dir.join(format!("{name}.gz"));
    let mut attempts = Vec::new();
    for base in mirrors {
        let url = format!("{base}{name}.gz");
        log(&format!("downloading {url}"));
        match fetch_verified(agent, &url, expected) {
            Ok(bytes) => {
                write_atomically(&target, &bytes)?;
                log(&format!("  {} bytes, SHA-256 ok -> {}", bytes.len(), target.display()));
                return Ok(target);
            }
            Err(why) => {
                log(&format!("  failed: {why}"));
                attempts.push(format!("{url}: {why}"));
            }
        }
    }
    Err(MnistError::Download { file: format!("{name}.gz"), attempts, kind })
}

/// GETs `url` and checks the SHA-256 of its decompressed body. `Err` says why it is unusable.
fn fetch_verified(agent: &ureq::Agent, url: &str, expected: &str) -> Result<Vec<u8>, String> {
    let mut response = agent.get(url).call().map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    response
        .body_mut()
        .as_reader()
        .take(MAX_DOWNLOAD + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("download interrupted: {e}"))?;
    if bytes.len() as u64 > MAX_DOWNLOAD {
        return Err(format!("more than {} MiB: not a data set file", MAX_DOWNLOAD >> 20));
    }
    let raw = gunzip(&bytes)?;
    let got = sha256_hex(&raw);
    if got != expected {
        return Err(format!("checksum mismatch: SHA-256 of the decompressed data is {got}, expected {expected}"));
    }
    Ok(bytes)
}

// ANCHOR: write_atomically
/// Writes `bytes` to `target` through a temporary file in the same folder, flushed, then
/// renamed: readers see either no file or the whole file. On unix the file ends up with the
/// permissions `File::create` would leave: a replaced file's own, else `0o666` less the umask
/// (`0o644` under the usual `022`), not the `0o600` a temporary file is made with.
pub fn write_atomically(target: &Path, bytes: &[u8]) -> Result<()> {
    let dir = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut builder = tempfile::Builder::new();
    builder.prefix(".partial-");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Asked for at creation, so the umask applies, as it does to `File::create`.
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut tmp = builder.tempfile_in(dir).map_err(|e| MnistError::io(dir, e))?;
    #[cfg(unix)]
    if let Ok(existing) = std::fs::metadata(target) {
        use std::os::unix::fs::PermissionsExt;
        // `File::create` truncates a file and keeps its mode (a model kept private stays so).
        let mode = std::fs::Permissions::from_mode(existing.permissions().mode() & 0o777);
        tmp.as_file().set_permissions(mode).map_err(|e| MnistError::io(tmp.path(), e))?;
    }
    tmp.write_all(bytes).map_err(|e| MnistError::io(tmp.path(), e))?;
    tmp.as_file().sync_all().map_err(|e| MnistError::io(tmp.path(), e))?;
    // On error `persist` hands the temporary file back; dropping it deletes it.
    tmp.persist(target).map_err(|e| MnistError::io(target, e.error))?;
    Ok(())
}
// ANCHOR_END: write_atomically

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_has_a_sum() {
        for name in FILE_NAMES {
            assert_eq!(expected_sha256(name).map(str::len), Some(64), "{name}");
        }
        assert!(expected_sha256("other").is_none());
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn atomic_write_leaves_only_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("f.gz");
        write_atomically(&target, b"hello").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"hello");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[cfg(unix)]
    #[test]
    fn atomic_write_gives_the_permissions_file_create_gives() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let dir = tempfile::tempdir().unwrap();
        // A new file: what `File::create` gives one under this process's umask, 0o644 under the
        // usual 022 (the temporary file alone would be 0o600: nobody else could read a model).
        let reference = dir.path().join("reference");
        std::fs::File::create(&reference).unwrap();
        let target = dir.path().join("model.safetensors");
        write_atomically(&target, b"first").unwrap();
        let created = mode(&target);
        assert_eq!(created, mode(&reference), "{created:o}, File::create gives {:o}", mode(&reference));
        if mode(&reference) & 0o044 != 0 {
            assert_ne!(created & 0o044, 0, "{created:o}: group and others may read it, as the umask allows");
        }
        // A replaced file keeps its permissions, whatever they are.
        for kept in [0o600, 0o640, 0o664] {
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(kept)).unwrap();
            write_atomically(&target, b"again").unwrap();
            assert_eq!(mode(&target), kept, "{:o}, not {kept:o}", mode(&target));
            assert_eq!(std::fs::read(&target).unwrap(), b"again");
        }
    }
}
