//! Ctrl-C (SIGINT) as a user presses it, sent to the `mnist` binary: during `mnist train` the
//! first one stops after the current batch and writes the model and metrics of the last finished
//! epoch (exit status 130); a second one exits at once, even while the GPU is busy; `mnist serve`
//! shuts down on the first and exits at once on the second while its run's thread is busy.
//! Unix only (signals).
#![cfg(unix)]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The binary, running, with its stdout lines arriving on a channel and its stderr collected.
struct Running {
    child: Child,
    stdout: Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl Running {
    fn start(args: &[&str]) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mnist"))
            .args(args)
            .env("MNIST_DIR", support::mnist_dir())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running the mnist binary");
        let (tx, stdout) = channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
                let _ = tx.send(line);
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let (mut err, sink) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Running { child, stdout, stderr }
    }

    /// Waits (at most `limit`) for a stdout line that starts with `prefix`, and returns it.
    fn line_starting(&self, prefix: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stdout.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(_) => {}
                Err(_) => panic!("no stdout line starting with {prefix:?} within {limit:?}; stderr: {}", self.stderr()),
            }
        }
    }

    /// Waits (at most `limit`) until stderr holds `text`.
    fn wait_stderr(&self, text: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        while !self.stderr().contains(text) {
            assert!(Instant::now() < deadline, "{text:?} not on stderr within {limit:?}: {}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    fn interrupt(&self) {
        self.signal("-INT");
    }

    /// `kill -TERM`, as a service manager stops a program.
    fn terminate(&self) {
        self.signal("-TERM");
    }

    fn signal(&self, which: &str) {
        let status = Command::new("kill").args([which, &self.child.id().to_string()]).status().expect("running kill");
        assert!(status.success(), "kill {which} failed");
    }

    /// The exit status, within `limit` (the process is killed and the test fails otherwise),
    /// and how long it took.
    fn exit_within(&mut self, limit: Duration) -> (ExitStatus, Duration) {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, start.elapsed());
            }
            if start.elapsed() > limit {
                let _ = self.child.kill();
                panic!("still running {limit:?} after the signal; stderr: {}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn still_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.still_running() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A run of 20 quick epochs on `device`; the first Ctrl-C comes after epoch 2 has ended.
fn first_ctrl_c_keeps_the_last_finished_epoch(device: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (model, metrics) = (dir.path().join("m.safetensors"), dir.path().join("m.jsonl"));
    #[rustfmt::skip]
    let mut run = Running::start(&[
        "--device", device, "--limit-train", "1000", "--limit-test", "200", "--hidden", "32",
        "--batch-size", "50", "--steps-per-submit", "2", "--epochs", "1000", "--preview", "0",
        "--save", model.to_str().unwrap(), "--metrics", metrics.to_str().unwrap(),
    ]);
    run.line_starting("epoch    2/1000", Duration::from_secs(120));
    run.interrupt();
    let (status, took) = run.exit_within(Duration::from_secs(30));
    let stderr = run.stderr();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("Ctrl-C: stopping after the current batch"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // "stopped by Ctrl-C during epoch N+1 (B of 20 batches done); kept epoch N, the last finished
    // one (...): model PATH, metrics PATH"
    let kept: usize = stderr
        .split("kept epoch ")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no 'kept epoch N' in stderr: {stderr}"));
    assert!(kept >= 2, "{stderr}");
    // The Ctrl-C came during epoch N+1, or between two epochs (during an evaluation).
    let next = kept + 1;
    assert!(stderr.contains(&format!("during epoch {next} (")) || stderr.contains(&format!("before epoch {next} began")), "{stderr}");
    assert!(stderr.contains(&format!("model {}", model.display())), "{stderr}");
    // The metrics hold exactly the finished epochs, and the model loads.
    let lines = std::fs::read_to_string(&metrics).unwrap();
    assert_eq!(lines.lines().count(), kept, "{lines}");
    let last: serde_json::Value = serde_json::from_str(lines.lines().last().unwrap()).unwrap();
    assert_eq!(last["epoch"], kept);
    let loaded = mnist::model_io::load_model(&model).unwrap();
    assert_eq!(loaded.spec.describe(), "784-32-relu-10");
    eprintln!("{device}: exited {took:?} after Ctrl-C, keeping epoch {kept}");
}

#[test]
fn ctrl_c_during_train_on_the_cpu_writes_the_last_finished_epoch() {
    first_ctrl_c_keeps_the_last_finished_epoch("cpu");
}

#[test]
fn ctrl_c_during_train_on_the_gpu_writes_the_last_finished_epoch() {
    first_ctrl_c_keeps_the_last_finished_epoch("gpu");
}

/// SIGTERM instead of Ctrl-C: the same stop, and every message names SIGTERM.
#[test]
fn sigterm_during_train_is_named_as_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.safetensors");
    #[rustfmt::skip]
    let mut run = Running::start(&[
        "--device", "cpu", "--limit-train", "1000", "--limit-test", "200", "--hidden", "32",
        "--batch-size", "50", "--epochs", "1000", "--preview", "0", "--save", model.to_str().unwrap(),
    ]);
    run.line_starting("epoch    1/1000", Duration::from_secs(120));
    run.terminate();
    let (status, _) = run.exit_within(Duration::from_secs(30));
    let stderr = run.stderr();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("SIGTERM: stopping after the current batch"), "{stderr}");
    assert!(stderr.contains("stopped by SIGTERM"), "{stderr}");
    assert!(!stderr.contains("Ctrl-C"), "a SIGTERM is not a Ctrl-C: {stderr}");
    mnist::model_io::load_model(&model).unwrap();
}

/// A GPU run whose epochs are one submission that takes seconds on the software adapter (4 steps
/// of 784-1024-10 at batch 1024): Ctrl-C comes during epoch 2's submission. The first waits
/// for it, the second does not.
#[test]
fn a_second_ctrl_c_during_train_exits_at_once_while_the_gpu_is_busy() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.safetensors");
    #[rustfmt::skip]
    let mut run = Running::start(&[
        "--device", "gpu", "--hidden", "1024", "--batch-size", "1024", "--limit-train", "4096",
        "--limit-test", "200", "--steps-per-submit", "4", "--epochs", "2", "--preview", "0",
        "--save", model.to_str().unwrap(),
    ]);
    run.line_starting("epoch 1/2", Duration::from_secs(120));
    std::thread::sleep(Duration::from_millis(500));
    run.interrupt();
    run.wait_stderr("Ctrl-C: stopping", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(300));
    assert!(run.still_running(), "the first Ctrl-C waits for the submission in flight: {}", run.stderr());
    run.interrupt();
    let (status, took) = run.exit_within(Duration::from_secs(5));
    let stderr = run.stderr();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("Ctrl-C again: exiting now"), "{stderr}");
    assert!(!model.exists(), "nothing is written after the second Ctrl-C");
    eprintln!("exited {took:?} after the second Ctrl-C");
}

/// `mnist serve` with a GPU run busy on a long submission: the first Ctrl-C starts the shutdown
/// (which waits for the run's batch), the second exits at once.
#[test]
fn a_second_ctrl_c_ends_serve_while_its_run_is_busy() {
    let mut server = Running::start(&["serve", "--port", "0", "--limit-test", "500"]);
    let line = server.line_starting("listening on http://", Duration::from_secs(120));
    let addr = line.trim_start_matches("listening on http://").split('/').next().unwrap().to_string();
    let request = |method: &str, path: &str, body: &str| -> String {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer
    };
    let answer = request("POST", "/api/train", r#"{"device": "gpu", "hidden": [2048], "batch_size": 1024, "epochs": 1}"#);
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
    // Busy once the run has its adapter (the GPU context is made on the first GPU run).
    let deadline = Instant::now() + Duration::from_secs(60);
    while !request("GET", "/api/status", "").contains("\"adapter\":{") {
        assert!(Instant::now() < deadline, "the run never started: {}", server.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    server.interrupt();
    server.wait_stderr("shutting down", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(300));
    assert!(server.still_running(), "the first Ctrl-C waits for the run's submission: {}", server.stderr());
    server.interrupt();
    let (status, took) = server.exit_within(Duration::from_secs(5));
    let stderr = server.stderr();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("Ctrl-C again: exiting now"), "{stderr}");
    eprintln!("serve exited {took:?} after the second Ctrl-C");
}
