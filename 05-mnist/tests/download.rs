//! The downloader against a local HTTP server on 127.0.0.1 that serves the real MNIST and
//! Fashion-MNIST files (never the internet): a dead mirror, a mirror serving wrong files, a
//! truncated download, one data set's files under the other's names.

mod support;

use std::path::Path;
use std::sync::Arc;

use mnist::data;
use mnist::datasets::{DatasetKind, FILE_NAMES};
use mnist::download::download_missing;

/// A tiny_http server on a free port of 127.0.0.1, stopped when dropped. Routes:
/// `/good/<name>.gz`: the real file; `/wrong/<name>.gz`: a valid gzip of ANOTHER MNIST file
/// (the checksum must catch it); `/truncated/<name>.gz`: the first half of the real file;
/// anything else: 404.
struct Mirror {
    server: Arc<tiny_http::Server>,
    thread: Option<std::thread::JoinHandle<()>>,
    base: String,
}

impl Mirror {
    fn start(data: &Path) -> Self {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("binding 127.0.0.1"));
        let port = server.server_addr().to_ip().unwrap().port();
        let files: Vec<(String, Vec<u8>)> = FILE_NAMES
            .iter()
            .map(|n| (format!("{n}.gz"), std::fs::read(data.join(format!("{n}.gz"))).expect("the shared .gz files")))
            .collect();
        let s = server.clone();
        let thread = std::thread::spawn(move || {
            for req in s.incoming_requests() {
                let url = req.url().to_string();
                let (route, name) = url.trim_start_matches('/').split_once('/').unwrap_or(("", ""));
                let idx = files.iter().position(|(n, _)| n == name);
                let body = match (route, idx) {
                    ("good", Some(i)) => Some(files[i].1.clone()),
                    ("wrong", Some(i)) => Some(files[(i + 1) % files.len()].1.clone()),
                    ("truncated", Some(i)) => Some(files[i].1[..files[i].1.len() / 2].to_vec()),
                    _ => None,
                };
                let _ = match body {
                    Some(b) => req.respond(tiny_http::Response::from_data(b)),
                    None => req.respond(tiny_http::Response::empty(404)),
                };
            }
        });
        Mirror { server, thread: Some(thread), base: format!("http://127.0.0.1:{port}") }
    }

    fn url(&self, route: &str) -> String {
        format!("{}/{route}/", self.base)
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A base URL where nothing listens: bind a port, then free it (connection refused).
fn dead_mirror() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}/mnist/")
}

fn dir_entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

#[test]
fn falls_through_dead_and_wrong_mirrors_to_a_good_one() {
    let mirror = Mirror::start(&support::mnist_dir());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("fresh").join("mnist");
    let (dead, wrong, good) = (dead_mirror(), mirror.url("wrong"), mirror.url("good"));
    let mut log = Vec::new();
    let written = download_missing(&dir, DatasetKind::Mnist, &[&dead, &wrong, &good], |l| log.push(l.to_string())).unwrap();
    assert_eq!(written.len(), 4);
    let text = log.join("\n");
    assert!(text.contains("checksum mismatch"), "{text}");
    assert_eq!(text.matches("SHA-256 ok").count(), 4, "{text}");
    // Exactly the four files, no temporary leftovers, and they load.
    let expected: Vec<String> = {
        let mut v: Vec<String> = FILE_NAMES.iter().map(|n| format!("{n}.gz")).collect();
        v.sort();
        v
    };
    assert_eq!(dir_entries(&dir), expected);
    let m = data::load(&dir, DatasetKind::Mnist).unwrap();
    assert_eq!((m.train.len(), m.test.len()), (60_000, 10_000));

    // Present files are not downloaded again (the dead mirror alone would fail).
    assert!(download_missing(&dir, DatasetKind::Mnist, &[&dead], |_| {}).unwrap().is_empty());
}

#[test]
fn every_mirror_failing_is_a_clear_error_and_leaves_no_file() {
    let mirror = Mirror::start(&support::mnist_dir());
    let tmp = tempfile::tempdir().unwrap();
    let dead = dead_mirror();
    let mirrors = [dead.as_str(), &mirror.url("wrong"), &mirror.url("truncated"), &mirror.url("missing")];
    let err = download_missing(tmp.path(), DatasetKind::Mnist, &mirrors, |_| {}).unwrap_err().to_string();
    for want in ["could not download", "Connection refused", "checksum mismatch", "gzip", "404", "by hand"] {
        assert!(err.contains(want), "missing {want:?} in: {err}");
    }
    assert_eq!(err.lines().filter(|l| l.starts_with("  - ")).count(), 4, "{err}");
    assert!(dir_entries(tmp.path()).is_empty(), "left behind: {:?}", dir_entries(tmp.path()));
}

/// Fashion-MNIST has the same file names as MNIST: a mirror that serves MNIST's files under
/// them must be refused by Fashion-MNIST's own checksums, and its real files accepted.
#[test]
fn fashion_mnist_downloads_are_checked_against_their_own_sums() {
    let digits = Mirror::start(&support::mnist_dir());
    let clothes = Mirror::start(&support::fashion_dir());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("fashion-mnist");
    let mut log = Vec::new();
    let written =
        download_missing(&dir, DatasetKind::Fashion, &[&digits.url("good"), &clothes.url("good")], |l| log.push(l.to_string())).unwrap();
    assert_eq!(written.len(), 4);
    let text = log.join("\n");
    assert_eq!(text.matches("checksum mismatch").count(), 4, "{text}");
    assert_eq!(text.matches("SHA-256 ok").count(), 4, "{text}");
    let m = data::load(&dir, DatasetKind::Fashion).unwrap();
    assert_eq!((m.train.len(), m.test.len()), (60_000, 10_000));
    // And every mirror failing names Fashion-MNIST's variables.
    let err = download_missing(&tmp.path().join("none"), DatasetKind::Fashion, &[&digits.url("good")], |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("FASHION_MNIST_MIRRORS") && err.contains("FASHION_MNIST_DIR"), "{err}");
}
