//! The signals that stop `mnist train` and `mnist serve`, told apart so that every message
//! names the one that came: Ctrl-C (SIGINT, from the terminal) or SIGTERM (from `kill`, a
//! service manager, a container runtime). Built on tokio's signal handling, which the server
//! uses anyway; Windows has Ctrl-C only.
//!
//! ```text
//! let mut signals = StopSignals::new()?;   // inside a tokio runtime
//! let first = signals.recv().await;        // Some(StopSignal::Terminate) after `kill PID`
//! ```
//! [`on_stop_signal`] runs a callback on a thread of its own for each signal, for code that is
//! not async (the training loop).

use std::io;

/// A signal asking the program to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT: Ctrl-C in the terminal.
    Interrupt,
    /// SIGTERM: `kill PID`, a service manager stopping the program.
    Terminate,
}

impl StopSignal {
    /// How messages name it: `Ctrl-C` or `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "Ctrl-C",
            StopSignal::Terminate => "SIGTERM",
        }
    }
}

/// The stop signals, registered: from [`StopSignals::new`] on, they no longer end the process
/// by themselves; [`StopSignals::recv`] hands each one over.
pub struct StopSignals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(windows)]
    ctrl_c: tokio::signal::windows::CtrlC,
}

impl StopSignals {
    /// Registers the handlers. Must be called inside a tokio runtime.
    pub fn new() -> io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self { interrupt: signal(SignalKind::interrupt())?, terminate: signal(SignalKind::terminate())? })
        }
        #[cfg(windows)]
        {
            Ok(Self { ctrl_c: tokio::signal::windows::ctrl_c()? })
        }
        #[cfg(not(any(unix, windows)))]
        {
            Err(io::Error::new(io::ErrorKind::Unsupported, "no signals on this platform"))
        }
    }

    /// The next stop signal (None if the handlers are gone, which tokio does not do while the
    /// runtime lives).
    pub async fn recv(&mut self) -> Option<StopSignal> {
        #[cfg(unix)]
        {
            tokio::select! {
                got = self.interrupt.recv() => got.map(|()| StopSignal::Interrupt),
                got = self.terminate.recv() => got.map(|()| StopSignal::Terminate),
            }
        }
        #[cfg(windows)]
        {
            self.ctrl_c.recv().await.map(|()| StopSignal::Interrupt)
        }
        #[cfg(not(any(unix, windows)))]
        {
            std::future::pending().await
        }
    }
}

/// Calls `handler` with every stop signal, on a thread of its own (so it runs while the
/// calling thread waits for the GPU). `Err` when the handlers cannot be registered; the
/// signals then end the process as they do by default.
pub fn on_stop_signal(mut handler: impl FnMut(StopSignal) + Send + 'static) -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
    let mut signals = {
        let _inside = runtime.enter();
        StopSignals::new()?
    };
    std::thread::Builder::new().name("stop-signals".into()).spawn(move || {
        runtime.block_on(async move {
            while let Some(signal) = signals.recv().await {
                handler(signal);
            }
        })
    })?;
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn each_signal_is_named_as_it_came() {
        let (tx, rx) = mpsc::channel();
        on_stop_signal(move |s| {
            let _ = tx.send(s);
        })
        .unwrap();
        // SIGTERM to this test process: handled, so the process goes on.
        let status = std::process::Command::new("kill").args(["-TERM", &std::process::id().to_string()]).status().unwrap();
        assert!(status.success());
        let got = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(got, StopSignal::Terminate);
        assert_eq!(got.name(), "SIGTERM");
        assert_eq!(StopSignal::Interrupt.name(), "Ctrl-C");
    }
}
