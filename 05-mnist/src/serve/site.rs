//! The rest of the static site beside the API, so that "this browser" training works on a page
//! served by `mnist serve` exactly as on any static host:
//!
//! - `GET /pkg/{file}`: the trainer compiled to WebAssembly (`mnist_web.js`,
//!   `mnist_web_bg.wasm`), from the site folder that `05-mnist/web/build.sh` writes
//!   (`--site DIR`, by default `target/site` of the workspace);
//! - `GET /pkg/threads/{path}`: the same trainer built for threads (its module, its memory
//!   shared with Web Workers, and wasm-bindgen-rayon's worker script under `snippets/`), which
//!   `cpu_worker.js` loads on a cross-origin isolated page;
//! - `GET /book/{path}`: the book, from `book/` of the site folder that `book/build.sh` writes
//!   (the trainer at the site's root, the book beside it), so that one server shows both;
//! - `GET /data/{file}`: MNIST's four files from the server's MNIST folder, gzipped or not, for
//!   the page to train on in the browser; `GET /data/fashion/{file}`: Fashion-MNIST's, from its
//!   folder (the page's "Data set" choice picks which).
//!
//! Only those names are served (no listing), read-only; a book or `pkg/threads/` path is a file
//! inside its folder or a 404 (no `..`, no hidden names, no link that leads outside).

use std::path::{Path, PathBuf};

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::error::ApiError;
use crate::datasets::FILE_NAMES;

/// The trainer's files in `pkg/`, as `build.sh` names them.
const PKG_FILES: [(&str, &str); 2] =
    [("mnist_web.js", "text/javascript; charset=utf-8"), ("mnist_web_bg.wasm", "application/wasm")];

/// Where the static files come from.
#[derive(Debug, Clone)]
pub struct SiteFiles {
    /// The built site (holds `pkg/`), or None when it is not built.
    pub site: Option<PathBuf>,
    /// The MNIST folder (served as `data/`).
    pub data_dir: PathBuf,
    /// The Fashion-MNIST folder (served as `data/fashion/`).
    pub fashion_dir: PathBuf,
}

impl SiteFiles {
    /// `--site` if given, else `target/site` under the workspace when the trainer is built there.
    /// `data_dir` and `fashion_dir` are MNIST's and Fashion-MNIST's folders.
    pub fn resolve(site: Option<&Path>, data_dir: PathBuf, fashion_dir: PathBuf) -> Self {
        let site = match site {
            Some(dir) => Some(dir.to_path_buf()),
            None => {
                let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
                cwd.ancestors()
                    .find(|d| std::fs::read_to_string(d.join("Cargo.toml")).is_ok_and(|s| s.contains("[workspace]")))
                    .map(|root| root.join("target").join("site"))
                    .filter(|dir| dir.join("pkg").join(PKG_FILES[0].0).is_file())
            }
        };
        Self { site, data_dir, fashion_dir }
    }

    /// One line for the server's start-up output.
    pub fn describe(&self) -> String {
        match &self.site {
            Some(dir) => format!("in-browser trainer: {}", dir.join("pkg").display()),
            None => "in-browser trainer: not built (bash 05-mnist/web/build.sh), so the page trains on the server only".into(),
        }
    }
}

/// The header that tells the page whether this server has the in-browser trainer (`pkg/`): a
/// page served without it does not ask for `pkg/mnist_web.js`, whose 404 the browser would log
/// as an error.
pub const TRAINER_HEADER: &str = "x-in-browser-trainer";

/// A response mapper that adds [`TRAINER_HEADER`] (`built` or `not built`) to the page's answers.
pub fn trainer_header(files: &SiteFiles) -> impl Fn(Response) -> std::future::Ready<Response> + Clone + Send + Sync + 'static {
    let value = header::HeaderValue::from_static(if files.site.is_some() { "built" } else { "not built" });
    move |mut res: Response| {
        res.headers_mut().insert(TRAINER_HEADER, value.clone());
        std::future::ready(res)
    }
}

/// `GET /pkg/{file}`, `GET /pkg/threads/{path}`, `GET /book/{path}`, `GET /data/{file}` and
/// `GET /data/fashion/{file}`.
pub fn routes(files: SiteFiles) -> Router {
    Router::new()
        .route("/pkg/{file}", get(pkg))
        .route("/pkg/threads/{*path}", get(pkg_threads))
        .route("/book", get(|| async { axum::response::Redirect::permanent("/book/") }))
        .route("/book/", get(|State(files): State<SiteFiles>| async move { book_file(&files, "index.html").await }))
        .route("/book/{*path}", get(book))
        .route("/data/{file}", get(mnist_data))
        .route("/data/fashion/{file}", get(fashion_data))
        .with_state(files)
}

async fn pkg(State(files): State<SiteFiles>, UrlPath(file): UrlPath<String>) -> Response {
    let Some(&(name, content_type)) = PKG_FILES.iter().find(|(n, _)| *n == file) else {
        return ApiError::new(StatusCode::NOT_FOUND, "no such file in pkg/").into_response();
    };
    let Some(site) = &files.site else {
        return ApiError::new(StatusCode::NOT_FOUND, "the in-browser trainer is not built: run `bash 05-mnist/web/build.sh`")
            .into_response();
    };
    send(site.join("pkg").join(name), content_type).await
}

/// The threaded trainer's files: its JavaScript and WebAssembly only.
async fn pkg_threads(State(files): State<SiteFiles>, UrlPath(path): UrlPath<String>) -> Response {
    let Some(site) = &files.site else {
        return ApiError::new(StatusCode::NOT_FOUND, "the in-browser trainer is not built: run `bash 05-mnist/web/build.sh`")
            .into_response();
    };
    if !(path.ends_with(".js") || path.ends_with(".wasm")) {
        return ApiError::new(StatusCode::NOT_FOUND, "no such file in pkg/threads/").into_response();
    }
    match file_under(&site.join("pkg").join("threads"), &path) {
        Some(file) => send_typed(file).await,
        None => ApiError::new(StatusCode::NOT_FOUND, "no such file in pkg/threads/ (built without THREADS=0?)").into_response(),
    }
}

async fn book(State(files): State<SiteFiles>, UrlPath(path): UrlPath<String>) -> Response {
    book_file(&files, &path).await
}

/// A file of the built book, by its path inside `book/` (see [`file_under`]).
async fn book_file(files: &SiteFiles, path: &str) -> Response {
    let Some(site) = &files.site else {
        return ApiError::new(StatusCode::NOT_FOUND, "the site is not built: run `bash book/build.sh`").into_response();
    };
    let Some(file) = file_under(&site.join("book"), path) else {
        return ApiError::new(StatusCode::NOT_FOUND, "no such page in the book").into_response();
    };
    let mut res = send_typed(file).await;
    res.headers_mut().insert(header::CONTENT_SECURITY_POLICY, header::HeaderValue::from_static(super::guard::BOOK_CSP));
    res
}

/// The file at `path` inside folder `root`: plain names only (no `.`, `..` or hidden parts, no
/// backslashes), and after links are resolved still inside `root`. None for anything else.
fn file_under(root: &Path, path: &str) -> Option<PathBuf> {
    let plain = |part: &str| !part.is_empty() && !part.starts_with('.') && !part.contains(['\\', '\0', ':']);
    if !path.split('/').all(plain) {
        return None;
    }
    let (root, file) = (root.canonicalize().ok()?, root.join(path).canonicalize().ok()?);
    (file.starts_with(&root) && file.is_file()).then_some(file)
}

/// A file of the site, with the content type its extension names.
async fn send_typed(file: PathBuf) -> Response {
    let content_type = match file.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" => "text/javascript; charset=utf-8",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "woff" => "font/woff",
        "woff2" => "font/woff2",
        "ttf" => "font/ttf",
        "wasm" => "application/wasm",
        _ => "text/plain; charset=utf-8",
    };
    send(file, content_type).await
}

async fn mnist_data(State(files): State<SiteFiles>, UrlPath(file): UrlPath<String>) -> Response {
    data(&files.data_dir, &file).await
}

async fn fashion_data(State(files): State<SiteFiles>, UrlPath(file): UrlPath<String>) -> Response {
    data(&files.fashion_dir, &file).await
}

/// One of the four files (`NAME` or `NAME.gz`) from `dir`; any other name is a 404.
async fn data(dir: &Path, file: &str) -> Response {
    let base = file.strip_suffix(".gz").unwrap_or(file);
    if !FILE_NAMES.contains(&base) {
        return ApiError::new(StatusCode::NOT_FOUND, "not one of the data set's four files").into_response();
    }
    let content_type = if file.ends_with(".gz") { "application/gzip" } else { "application/octet-stream" };
    send(dir.join(file), content_type).await
}

/// The pieces a file is sent in: a client that reads slowly, or not at all, holds at most one
/// piece of it in the server's memory (the training images are 47 MB raw).
pub const PIECE: usize = 64 << 10;

/// The file at `path`, streamed from disk in pieces of [`PIECE`] bytes, each read off the
/// async threads when the client has taken the one before.
async fn send(path: PathBuf, content_type: &'static str) -> Response {
    let shown = path.display().to_string();
    let opened = tokio::task::spawn_blocking(move || {
        let file = std::fs::File::open(&path)?;
        let meta = file.metadata()?;
        Ok::<_, std::io::Error>(meta.is_file().then_some((file, meta.len())))
    })
    .await;
    let (file, len) = match opened {
        Ok(Ok(Some(opened))) => opened,
        Ok(Ok(None)) => return ApiError::new(StatusCode::NOT_FOUND, format!("{shown} is not a file")).into_response(),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            return ApiError::new(StatusCode::NOT_FOUND, format!("{shown} is not there")).into_response();
        }
        Ok(Err(e)) => return ApiError::internal(format!("reading {shown}: {e}")).into_response(),
        Err(e) => return ApiError::internal(format!("reading {shown}: {e}")).into_response(),
    };
    let pieces = futures_util::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let read = tokio::task::spawn_blocking(move || {
            use std::io::Read;
            let mut piece = vec![0u8; PIECE];
            let n = file.read(&mut piece)?;
            piece.truncate(n);
            Ok::<_, std::io::Error>((file, piece))
        })
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        match read {
            Ok((_, piece)) if piece.is_empty() => None,
            Ok((file, piece)) => Some((Ok(axum::body::Bytes::from(piece)), Some(file))),
            Err(e) => Some((Err(e), None)),
        }
    });
    let headers = [
        (header::CONTENT_TYPE, header::HeaderValue::from_static(content_type)),
        (header::CACHE_CONTROL, header::HeaderValue::from_static("no-cache")),
        (header::CONTENT_LENGTH, header::HeaderValue::from(len)),
    ];
    (headers, axum::body::Body::from_stream(pieces)).into_response()
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;

    async fn get(app: &Router, path: &str) -> (StatusCode, Vec<u8>) {
        let res = app.clone().oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
        let status = res.status();
        (status, axum::body::to_bytes(res.into_body(), usize::MAX).await.unwrap().to_vec())
    }

    #[tokio::test]
    async fn each_data_set_is_served_from_its_own_folder_and_nothing_else_is() {
        let tmp = tempfile::tempdir().unwrap();
        let (digits, clothes) = (tmp.path().join("mnist"), tmp.path().join("fashion"));
        for (dir, bytes) in [(&digits, b"digits"), (&clothes, b"clothe")] {
            std::fs::create_dir(dir).unwrap();
            std::fs::write(dir.join("t10k-labels-idx1-ubyte.gz"), bytes).unwrap();
            std::fs::write(dir.join("secret.txt"), b"no").unwrap();
        }
        let app = routes(SiteFiles { site: None, data_dir: digits, fashion_dir: clothes });
        assert_eq!(get(&app, "/data/t10k-labels-idx1-ubyte.gz").await, (StatusCode::OK, b"digits".to_vec()));
        assert_eq!(get(&app, "/data/fashion/t10k-labels-idx1-ubyte.gz").await, (StatusCode::OK, b"clothe".to_vec()));
        for path in ["/data/secret.txt", "/data/fashion/secret.txt", "/data/fashion/..%2Fsecret.txt", "/data/fashion/t10k-labels-idx1-ubyte"] {
            assert_eq!(get(&app, path).await.0, StatusCode::NOT_FOUND, "{path}");
        }
        assert_eq!(get(&app, "/pkg/mnist_web.js").await.0, StatusCode::NOT_FOUND, "no site built");
    }

    #[tokio::test]
    async fn files_are_streamed_in_pieces_not_read_whole() {
        use futures_util::StreamExt;
        let tmp = tempfile::tempdir().unwrap();
        let bytes: Vec<u8> = (0..3 * PIECE + 123).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(tmp.path().join("train-images-idx3-ubyte"), &bytes).unwrap();
        let app = routes(SiteFiles { site: None, data_dir: tmp.path().to_path_buf(), fashion_dir: PathBuf::new() });
        let res = app.oneshot(Request::get("/data/train-images-idx3-ubyte").body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.headers()[header::CONTENT_LENGTH], bytes.len().to_string().as_str());
        let mut pieces = res.into_body().into_data_stream();
        let mut got = Vec::new();
        while let Some(piece) = pieces.next().await {
            let piece = piece.unwrap();
            assert!(piece.len() <= PIECE, "a piece of {} bytes", piece.len());
            got.extend_from_slice(&piece);
        }
        assert_eq!(got, bytes);
    }

    #[tokio::test]
    async fn the_book_is_served_from_the_site_and_nothing_beside_it() {
        let tmp = tempfile::tempdir().unwrap();
        let book = tmp.path().join("site/book");
        std::fs::create_dir_all(book.join("css")).unwrap();
        std::fs::write(book.join("index.html"), b"<h1>book</h1>").unwrap();
        std::fs::write(book.join("css/general.css"), b"body{}").unwrap();
        std::fs::write(book.join(".hidden"), b"no").unwrap();
        std::fs::write(tmp.path().join("site/secret.txt"), b"no").unwrap();
        let app = routes(SiteFiles { site: Some(tmp.path().join("site")), data_dir: PathBuf::new(), fashion_dir: PathBuf::new() });
        assert_eq!(get(&app, "/book/").await, (StatusCode::OK, b"<h1>book</h1>".to_vec()));
        let res = app.clone().oneshot(Request::get("/book/").body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(res.headers()[header::CONTENT_SECURITY_POLICY], super::super::guard::BOOK_CSP, "the book's own policy");
        assert_eq!(get(&app, "/book/css/general.css").await, (StatusCode::OK, b"body{}".to_vec()));
        assert_eq!(get(&app, "/book").await.0, StatusCode::PERMANENT_REDIRECT);
        for path in ["/book/../secret.txt", "/book/..%2Fsecret.txt", "/book/%2E%2E/secret.txt", "/book/.hidden", "/book/css", "/book/nope.html", "/book//etc/passwd"] {
            assert_eq!(get(&app, path).await.0, StatusCode::NOT_FOUND, "{path}");
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(tmp.path().join("site/secret.txt"), book.join("link.txt")).unwrap();
            assert_eq!(get(&app, "/book/link.txt").await.0, StatusCode::NOT_FOUND, "a link out of the book");
        }
    }

    #[tokio::test]
    async fn the_threaded_trainer_is_served_from_its_folder_and_nothing_beside_it() {
        let tmp = tempfile::tempdir().unwrap();
        let threads = tmp.path().join("site/pkg/threads");
        let snippet = threads.join("snippets/wasm-bindgen-rayon-38edf6e439f6d70d/src");
        std::fs::create_dir_all(&snippet).unwrap();
        std::fs::write(threads.join("mnist_web.js"), b"export {}").unwrap();
        std::fs::write(threads.join("mnist_web_bg.wasm"), b"\0asm").unwrap();
        std::fs::write(snippet.join("workerHelpers.no-bundler.js"), b"// helper").unwrap();
        std::fs::write(threads.join("notes.txt"), b"no").unwrap();
        std::fs::write(tmp.path().join("site/secret.js"), b"no").unwrap();
        let app = routes(SiteFiles { site: Some(tmp.path().join("site")), data_dir: PathBuf::new(), fashion_dir: PathBuf::new() });
        assert_eq!(get(&app, "/pkg/threads/mnist_web.js").await, (StatusCode::OK, b"export {}".to_vec()));
        let res = app.clone().oneshot(Request::get("/pkg/threads/mnist_web_bg.wasm").body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(res.headers()[header::CONTENT_TYPE], "application/wasm", "WebAssembly streams only with its own type");
        let helper = "/pkg/threads/snippets/wasm-bindgen-rayon-38edf6e439f6d70d/src/workerHelpers.no-bundler.js";
        assert_eq!(get(&app, helper).await, (StatusCode::OK, b"// helper".to_vec()));
        for path in ["/pkg/threads/notes.txt", "/pkg/threads/../../secret.js", "/pkg/threads/..%2F..%2Fsecret.js", "/pkg/threads/nope.js"] {
            assert_eq!(get(&app, path).await.0, StatusCode::NOT_FOUND, "{path}");
        }
        let unbuilt = routes(SiteFiles { site: None, data_dir: PathBuf::new(), fashion_dir: PathBuf::new() });
        assert_eq!(get(&unbuilt, "/pkg/threads/mnist_web.js").await.0, StatusCode::NOT_FOUND, "no site built");
    }

    #[tokio::test]
    async fn the_page_is_told_whether_the_trainer_is_built() {
        for (site, want) in [(None, "not built"), (Some(PathBuf::from("site")), "built")] {
            let files = SiteFiles { site, data_dir: PathBuf::new(), fashion_dir: PathBuf::new() };
            let res = trainer_header(&files)(().into_response()).await;
            assert_eq!(res.headers()[TRAINER_HEADER], want);
        }
    }
}
