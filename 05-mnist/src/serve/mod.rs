//! `mnist serve`: a web page to train a digit classifier, watch it learn, and draw digits for
//! it to read.
//!
//! ```text
//! cargo run --release -p mnist -- serve            # then open http://127.0.0.1:8080/
//! cargo run --release -p mnist -- serve --model model.safetensors --port 3000
//! ```
//!
//! How it fits together:
//! - `routes.rs`: the HTTP API on [axum](https://docs.rs/axum), and the server-sent event stream;
//! - `state.rs`: the shared state (data, current model, the run in flight) behind one mutex;
//! - `run.rs`: a training run on its own thread, reporting events; stop after the current batch;
//!   the device choice and the loop are the command line's (`crate::train`);
//! - `model.rs`: the model of the latest epoch (or `--model`) on the CPU: a drawing becomes an
//!   MNIST-like 28x28 image (`crate::preprocess`, as `mnist predict` does) and ten outputs
//!   (probabilities, or an MSE model's scores);
//! - `api.rs` / `error.rs`: request validation, and `{"error": ...}` answers with 4xx codes;
//!   what the page gets back (the events and the answers) is `crate::events`, which the
//!   browser trainer sends too;
//! - `assets.rs`: the page (`web/`), compiled into the binary;
//! - `site.rs`: the trainer compiled to WebAssembly (`pkg/`, from the site `web/build.sh`
//!   builds) and the data sets' files (`data/` for MNIST, `data/fashion/`), so that the page can also train in
//!   the browser, as it does on any static host.
//! - `guard.rs` / `connections.rs` / `slots.rs`: what keeps other web pages and greedy clients
//!   out (the `Host` and `Origin` checks, security headers, timeouts, caps on connections per
//!   client and in all, with idle ones giving way, and on streams).
//!
//! The page is at `/`; the API is documented in `routes.rs`.

mod api;
mod assets;
mod connections;
mod error;
mod guard;
mod model;
mod routes;
mod run;
mod site;
mod slots;
mod state;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

pub use crate::train::TrainRequest;
pub use api::PredictRequest;
pub use error::ApiError;
pub use model::ServeModel;
pub use guard::{AllowedHosts, CSP, Limits};
pub use routes::{router, router_with};
pub use site::SiteFiles;
pub use assets::INDEX_HTML;
pub use state::AppState;

use crate::data_args::{DataArgs, load_data};
use crate::datasets::DatasetKind;
use crate::error::{MnistError, Result};

/// `mnist serve`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// The address to listen on (127.0.0.1: this machine only; 0.0.0.0: every interface).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The port (0 picks a free one; the URL is printed).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// A model saved by `mnist train --save` to classify drawings with from the start.
    #[arg(long, value_name = "PATH")]
    pub model: Option<PathBuf>,
    /// The static site built by `bash 05-mnist/web/build.sh` (for the page's in-browser
    /// training). Default: target/site of the workspace, when it is built.
    #[arg(long, value_name = "DIR")]
    pub site: Option<PathBuf>,
    #[command(flatten)]
    pub data: DataArgs,
}

/// `mnist serve`: checks the model, takes the port, loads the data (downloading it if needed),
/// then serves. The cheap checks come first: a typo in `--model` or a port in use should not wait
/// for MNIST to load.
pub fn run(args: &ServeArgs) -> Result<()> {
    let model = args.model.as_deref().map(ServeModel::load).transpose()?;
    if let Some(m) = &model {
        eprintln!("model: {}", m.info().description);
    }
    let listener = std::net::TcpListener::bind((args.host.as_str(), args.port))
        .map_err(|e| MnistError::io(format!("--host {} --port {}", args.host, args.port), e))?;
    if let Some(warning) = exposure_warning(&args.host) {
        eprintln!("{warning}");
    }
    let data = load_data(&args.data, None)?;
    // `--data-dir` is the folder of `--dataset`; the other set's is its variable's or default.
    let dir = |kind| {
        let flag = args.data.data_dir.as_deref().filter(|_| kind == data.kind);
        crate::data::resolve_data_dir(flag, kind)
    };
    let files = SiteFiles::resolve(args.site.as_deref(), dir(DatasetKind::Mnist), dir(DatasetKind::Fashion));
    eprintln!("{}", files.describe());
    for kind in [DatasetKind::Mnist, DatasetKind::Fashion].into_iter().filter(|&k| k != data.kind) {
        let d = dir(kind);
        let state = if crate::data::files_present(&d) { "loaded when a run asks for it" } else { "not there: runs on it are refused" };
        eprintln!("{}: {} ({state}; set {} to change)", kind.title(), d.display(), kind.dir_env());
    }
    let dirs = vec![(DatasetKind::Mnist, files.data_dir.clone()), (DatasetKind::Fashion, files.fashion_dir.clone())];
    let state = AppState::with_data_dirs(Arc::new(data), model, dirs);
    serve_until(listener, state, files, AllowedHosts::with_bound(&args.host), Limits::default(), shutdown_twice())
}

/// The warning for a `--host` that other machines can reach (None for loopback addresses).
/// The server has no login: anyone who reaches it can start and stop training runs (CPU or GPU
/// time), predict, and watch.
pub fn exposure_warning(host: &str) -> Option<String> {
    let ip = match host.trim().parse::<std::net::IpAddr>() {
        Ok(ip) if ip.is_loopback() => return None,
        Ok(ip) => Some(ip),
        Err(_) if host.trim().eq_ignore_ascii_case("localhost") => return None,
        Err(_) => None,
    };
    let reach = match ip {
        Some(ip) if ip.is_unspecified() => "every network interface of this machine".to_string(),
        _ => format!("{host}, an address other machines may reach"),
    };
    let bar = "!".repeat(78);
    Some(format!(
        "{bar}\n!! WARNING: --host {host} listens on {reach}.\n\
         !! This server has no login and no encryption: anyone on the network who can reach this\n\
         !! port can start and stop training runs (your CPU or GPU time), classify images, and\n\
         !! watch. Use it only on a network you trust; the default, 127.0.0.1, is this machine only.\n{bar}"
    ))
}

/// Serves `state` on `listener` until `shutdown` resolves (`mnist serve`: Ctrl-C or SIGTERM;
/// tests: a future of their own), then shuts down cleanly: the event streams end, a run in
/// flight stops after its current batch (or GPU submission), and the call returns. `files` are
/// the static files beside the API (`site.rs`). It answers requests addressed to `hosts` (and
/// the address they arrive on), within `limits`.
///
/// Prints `listening on http://HOST:PORT/` on stdout when it is ready for the browser.
pub fn serve_until(
    listener: std::net::TcpListener,
    state: AppState,
    files: SiteFiles,
    hosts: AllowedHosts,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<()> {
    let addr: SocketAddr = listener.local_addr().map_err(|e| MnistError::io("the server socket", e))?;
    let io = |e| MnistError::io(format!("the server on {addr}"), e);
    listener.set_nonblocking(true).map_err(io)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(io)?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::from_std(listener).map_err(io)?;
        println!("listening on http://{addr}/  (Ctrl-C stops the server)");
        let signal_state = state.clone();
        let page = routes::api(state.clone(), limits).layer(axum::middleware::map_response(site::trainer_header(&files)));
        let app = routes::protect(page.merge(site::routes(files)), hosts, limits);
        connections::serve_connections(listener, app, limits, async move {
            shutdown.await;
            eprintln!("shutting down: a training run in flight stops after its current batch");
            signal_state.shutdown();
        })
        .await;
        Ok::<(), MnistError>(())
    })?;
    state.wait_for_run();
    Ok(())
}

/// Resolves on the first Ctrl-C or SIGTERM: the shutdown begins. The second exits the process
/// at once (status 130), even while a run's thread is still busy with its batch or submission.
/// Each message names the signal that came.
async fn shutdown_twice() {
    let mut signals = match crate::signals::StopSignals::new() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("warning: Ctrl-C and SIGTERM will end the server at once ({e})");
            return std::future::pending().await;
        }
    };
    let Some(first) = signals.recv().await else { return std::future::pending().await };
    eprintln!("{}: shutting down ({} again exits at once)", first.name(), first.name());
    // Runs on the runtime's worker threads, which live until the run's thread has ended.
    tokio::spawn(async move {
        if let Some(second) = signals.recv().await {
            let again = if second == first { format!("{} again", second.name()) } else { format!("{} after {}", second.name(), first.name()) };
            eprintln!("{again}: exiting now");
            std::process::exit(130);
        }
    });
}
