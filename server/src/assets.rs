//! The built UI (the WASM, its JavaScript glue, the stylesheet and the `public/` files), embedded
//! in the binary at compile time and served from memory.
//!
//! Why embedded: the binary is what an operator installs, and the WASM must come from the same
//! sources as the server or hydration breaks. A binary that carries its UI cannot meet a
//! missing, moved or mismatched asset folder, whatever directory it is started from.
//!
//! What is embedded is `target/site` as `cargo leptos build --release --precompress --split`
//! leaves it ([`Embedded`]; `server/build.rs` makes the server crate rebuild when that folder
//! changes). [`Site::from_files`] turns the files into a table of [`Asset`]s:
//! - every file of the UI build (`pkg/`: the script, the WASM, the stylesheet, and with
//!   `--split` the WASM pieces of the pages that load on demand, their loader script and its
//!   manifest) is served under one folder named for the whole build, `/pkg/{build}/`, where
//!   `build` is a hash of every one of them. So the files of one build only ever meet each other
//!   (a script never loads a WASM piece of another build), they refer to each other by their
//!   own relative names as cargo-leptos wrote them (the split loader imports the main script by
//!   name and must get the very module the page started), and browsers keep them for a year
//!   (`immutable`). The WASM and the stylesheet are also served under the script's name
//!   (`{script}.wasm`, `{script}.css`) because Leptos's page shell derives all three from one
//!   output name: `serve` puts that name and the folder into Leptos's options ([`Ui`]);
//! - every file is also served at its own path with `no-cache` (browsers revalidate it with its
//!   ETag, a cheap 304): `/favicon.svg` and anything else from `public/`;
//! - `F.br` and `F.gz` beside a file `F` are its precompressed variants (written by cargo-leptos'
//!   `--precompress`), chosen by the request's `Accept-Encoding`. A file without them is left
//!   to the compression layer.
//!
//! A binary built before the UI was (a plain `cargo build` in a fresh clone) has no UI files:
//! `serve` says so at start and [`ui_missing`] answers page requests with a page that says how
//! to build it, instead of a page that never becomes interactive.

use crate::hex::hex;
use axum::{
    body::{Body, Bytes},
    extract::Request,
    http::{
        header::{
            ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG,
            VARY,
        },
        HeaderMap, HeaderValue, Method, StatusCode,
    },
    middleware::Next,
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use sha2::{Digest, Sha256};
use std::{
    borrow::Cow,
    collections::{BTreeMap, HashMap},
    sync::{Arc, LazyLock},
};

/// `target/site`, read at compile time in release builds and in debug builds with the
/// `embed-ui` feature (rust-embed reads it from disk at run time in other debug builds). Keep the folder in step with `site-root` in the workspace's
/// `[[workspace.metadata.leptos]]` and with `server/build.rs`.
#[derive(rust_embed::Embed)]
#[folder = "../target/site"]
#[allow_missing = true]
struct Embedded;

/// The folder of the UI build inside the site (`site-pkg-dir`).
pub const PKG_DIR: &str = "pkg";

/// How long browsers may keep a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caching {
    /// Its name changes with its content: keep it for a year without asking again.
    Immutable,
    /// Its name stays: keep it, but ask (with the ETag) before each use.
    Revalidate,
}

impl Caching {
    fn header(self) -> HeaderValue {
        HeaderValue::from_static(match self {
            Caching::Immutable => "public, max-age=31536000, immutable",
            Caching::Revalidate => "no-cache",
        })
    }
}

/// One file as it is served: its bytes and the precompressed variants the build made.
#[derive(Clone, Debug)]
pub struct Asset {
    content_type: HeaderValue,
    etag: HeaderValue,
    caching: Caching,
    identity: Bytes,
    brotli: Option<Bytes>,
    gzip: Option<Bytes>,
}

/// Content codings a response can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Coding {
    Brotli,
    Gzip,
    Identity,
}

impl Asset {
    /// The response to a GET or HEAD with these request headers: 304 when the client's copy is
    /// current, otherwise the best encoding the client accepts.
    pub fn respond(&self, request: &HeaderMap) -> Response {
        let mut headers = HeaderMap::new();
        headers.insert(CACHE_CONTROL, self.caching.header());
        if self.brotli.is_some() || self.gzip.is_some() {
            headers.insert(VARY, HeaderValue::from_static("accept-encoding"));
        }
        // Only a file served under a fixed name carries its ETag. A file whose name changes with
        // its content is kept for a year and never asked for again, so a validator would be
        // bytes for nothing on each of the dozens of pieces a first visit fetches.
        if self.caching == Caching::Immutable {
            headers.insert(
                CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(crate::headers::RESOURCE_POLICY),
            );
        }
        if self.caching == Caching::Revalidate {
            headers.insert(ETAG, self.etag.clone());
            if crate::revalidate::is_current(request, &self.etag) {
                return (StatusCode::NOT_MODIFIED, headers).into_response();
            }
        }
        headers.insert(CONTENT_TYPE, self.content_type.clone());
        let (coding, body) = match preferred_coding(request, self.brotli.is_some(), self.gzip.is_some()) {
            Coding::Brotli => (Some("br"), self.brotli.clone()),
            Coding::Gzip => (Some("gzip"), self.gzip.clone()),
            Coding::Identity => (None, None),
        };
        if let Some(coding) = coding {
            headers.insert(CONTENT_ENCODING, HeaderValue::from_static(coding));
        }
        let body = body.unwrap_or_else(|| self.identity.clone());
        (StatusCode::OK, headers, Body::from(body)).into_response()
    }

    pub fn caching(&self) -> Caching {
        self.caching
    }
}

/// The coding to answer with: the highest `q` among the available variants (brotli on a tie),
/// identity when the client accepts neither.
fn preferred_coding(request: &HeaderMap, brotli: bool, gzip: bool) -> Coding {
    let q = |name: &str| -> f32 {
        let mut wildcard = None;
        for value in request.get_all(ACCEPT_ENCODING) {
            for item in value.to_str().unwrap_or_default().split(',') {
                let mut parts = item.split(';');
                let coding = parts.next().unwrap_or_default().trim();
                let weight = parts
                    .find_map(|p| p.trim().strip_prefix("q="))
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .unwrap_or(1.0);
                if coding.eq_ignore_ascii_case(name) {
                    return weight;
                }
                if coding == "*" {
                    wildcard = Some(weight);
                }
            }
        }
        wildcard.unwrap_or(0.0)
    };
    let br = if brotli { q("br") } else { 0.0 };
    let gz = if gzip { q("gzip") } else { 0.0 };
    if br > 0.0 && br >= gz {
        Coding::Brotli
    } else if gz > 0.0 {
        Coding::Gzip
    } else {
        Coding::Identity
    }
}

/// The names of the UI build in a [`Site`], as Leptos's page shell needs them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ui {
    pkg_dir: String,
    output_name: String,
    split: Option<Split>,
}

/// A build made with `--split`: the pages that load on demand, and what each needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// The file name of the loader script (`__wasm_split.{hash}.js`).
    pub loader: String,
    /// For each lazily loaded function (Leptos's id for it), the WASM pieces it needs, by file
    /// name without `.wasm`.
    pub pieces: HashMap<String, Vec<String>>,
}

impl Ui {
    /// The folder the build is served under, without the leading `/` (`pkg/{build}`): Leptos's
    /// `site_pkg_dir`.
    pub fn pkg_dir(&self) -> &str {
        &self.pkg_dir
    }

    /// The shared file name of the script, WASM and stylesheet (without the extension): what
    /// Leptos calls the output name.
    pub fn output_name(&self) -> &str {
        &self.output_name
    }

    /// The split build's loader and manifest, when the build was split.
    pub fn split(&self) -> Option<&Split> {
        self.split.as_ref()
    }
}

/// A site that cannot be served as it is.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SiteError {
    #[error(
        "the UI build has {count} {what} in `{PKG_DIR}/` where one was expected; rebuild it with \
         `cargo leptos build --release --precompress --split` and then the server"
    )]
    Ambiguous { what: &'static str, count: usize },
    #[error("the UI build's `{PKG_DIR}/{file}` is not a manifest of lazily loaded pieces: {problem}")]
    Manifest { file: String, problem: String },
}

/// Every servable file, by the path it is served at.
#[derive(Debug, Default)]
pub struct Site {
    ui: Option<Ui>,
    assets: BTreeMap<String, Arc<Asset>>,
}

impl Site {
    /// The site embedded in this binary, read once.
    pub fn embedded() -> Result<&'static Site, &'static SiteError> {
        static SITE: LazyLock<Result<Site, SiteError>> = LazyLock::new(|| {
            Site::from_files(Embedded::iter().filter_map(|path| {
                let file = Embedded::get(&path)?;
                let bytes = match file.data {
                    Cow::Borrowed(b) => Bytes::from_static(b),
                    Cow::Owned(v) => Bytes::from(v),
                };
                Some((path.into_owned(), bytes))
            }))
        });
        SITE.as_ref()
    }

    /// Builds the table from `(path relative to the site root, contents)` pairs.
    pub fn from_files(files: impl IntoIterator<Item = (String, Bytes)>) -> Result<Site, SiteError> {
        let files: BTreeMap<String, Bytes> = files.into_iter().collect();
        let variant = |path: &str, suffix: &str| files.get(&format!("{path}.{suffix}")).cloned();
        let mut assets = BTreeMap::new();
        for (path, bytes) in &files {
            if is_variant(path) {
                continue;
            }
            let content_type = mime_guess::from_path(path).first_or_octet_stream();
            let asset = Asset {
                content_type: HeaderValue::from_str(content_type.essence_str())
                    .unwrap_or(HeaderValue::from_static("application/octet-stream")),
                etag: weak_etag(bytes),
                caching: Caching::Revalidate,
                identity: bytes.clone(),
                brotli: variant(path, "br"),
                gzip: variant(path, "gz"),
            };
            assets.insert(format!("/{path}"), Arc::new(asset));
        }
        let Some(build) = ui_files(&files)? else {
            return Ok(Site { ui: None, assets });
        };
        // One name for the whole build: a hash of every file in it, names included.
        let mut hash = Sha256::new();
        for (path, bytes) in files.iter().filter(|(p, _)| in_pkg(p) && !is_variant(p)) {
            hash.update(Sha256::digest(path.as_bytes()));
            hash.update(Sha256::digest(bytes));
        }
        let pkg_dir = format!("{PKG_DIR}/{}", &hex(&hash.finalize())[..16]);
        let immutable = |path: &str| {
            Arc::new(Asset {
                caching: Caching::Immutable,
                ..Asset::clone(&assets[&format!("/{path}")])
            })
        };
        let mut served = Vec::new();
        for path in files.keys().filter(|p| in_pkg(p) && !is_variant(p)) {
            let name = &path[PKG_DIR.len() + 1..];
            served.push((format!("/{pkg_dir}/{name}"), immutable(path)));
        }
        let output_name = build.script_stem().to_owned();
        for (path, extension) in [(build.wasm, "wasm"), (build.css, "css")] {
            served.push((format!("/{pkg_dir}/{output_name}.{extension}"), immutable(path)));
        }
        assets.extend(served);
        let split = build.split(&files)?;
        Ok(Site {
            ui: Some(Ui {
                pkg_dir,
                output_name,
                split,
            }),
            assets,
        })
    }

    /// The UI build, if the site has one.
    pub fn ui(&self) -> Option<&Ui> {
        self.ui.as_ref()
    }

    /// The file served at `path`.
    pub fn get(&self, path: &str) -> Option<&Asset> {
        self.assets.get(path).map(|a| a.as_ref())
    }

    /// One GET (and HEAD) route per file. Paths that axum would read as a pattern are skipped.
    pub fn routes<S: Clone + Send + Sync + 'static>(&self) -> Router<S> {
        let mut router = Router::new();
        for (path, asset) in &self.assets {
            if path.contains(['{', '}', '*']) {
                tracing::warn!(path, "an asset name axum cannot route is not served");
                continue;
            }
            let asset = asset.clone();
            router = router.route(
                path,
                get(move |headers: HeaderMap| {
                    let asset = asset.clone();
                    async move { asset.respond(&headers) }
                }),
            );
        }
        router
    }
}

/// The routes of the embedded site (none if it cannot be served; `serve` refuses to start then).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Site::embedded().map(Site::routes).unwrap_or_default()
}

/// `F.br` and `F.gz` are variants of `F`, never served on their own.
fn is_variant(path: &str) -> bool {
    path.ends_with(".br") || path.ends_with(".gz")
}

/// A file of the UI build (anywhere under `pkg/`).
fn in_pkg(path: &str) -> bool {
    path.strip_prefix(PKG_DIR)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// The name of a file at the top of `pkg/` (`None` for any other file).
fn top_of_pkg(path: &str) -> Option<&str> {
    path.strip_prefix(PKG_DIR)
        .and_then(|rest| rest.strip_prefix('/'))
        .filter(|name| !name.contains('/'))
}

/// The prefix cargo-leptos gives the split build's loader script, and its manifest.
const SPLIT_LOADER: &str = "__wasm_split.";
const SPLIT_MANIFEST: &str = "__wasm_split_manifest";

/// The files of a UI build at the top of `pkg/`, by site path.
struct Build<'a> {
    script: &'a str,
    wasm: &'a str,
    css: &'a str,
    loader: Option<&'a str>,
    manifest: Option<&'a str>,
}

impl<'a> Build<'a> {
    /// The script's file name without `.js` (`recourse.{hash}`).
    fn script_stem(&self) -> &'a str {
        let name = top_of_pkg(self.script).unwrap_or_default();
        name.strip_suffix(".js").unwrap_or(name)
    }

    /// The loader and the parsed manifest of a split build (both or neither).
    fn split(&self, files: &BTreeMap<String, Bytes>) -> Result<Option<Split>, SiteError> {
        let (Some(loader), Some(manifest)) = (self.loader, self.manifest) else {
            return Ok(None);
        };
        let file = top_of_pkg(manifest).unwrap_or_default().to_owned();
        let pieces = serde_json::from_slice(&files[manifest]).map_err(|e| SiteError::Manifest {
            file,
            problem: e.to_string(),
        })?;
        Ok(Some(Split {
            loader: top_of_pkg(loader).unwrap_or_default().to_owned(),
            pieces,
        }))
    }
}

/// The UI build at the top of `pkg/`, if its script, WASM and stylesheet are all there: the one
/// script that is not the split loader, the one WASM named like it (the pages' pieces are
/// `split_*` and `chunk_*`), the one stylesheet; and with `--split`, the loader and manifest.
fn ui_files<'a>(files: &'a BTreeMap<String, Bytes>) -> Result<Option<Build<'a>>, SiteError> {
    let top = || {
        files
            .keys()
            .filter_map(|p| top_of_pkg(p).map(|name| (p.as_str(), name)))
            .filter(|(p, _)| !is_variant(p))
    };
    fn one<'a>(what: &'static str, found: Vec<&'a str>) -> Result<Option<&'a str>, SiteError> {
        match found.len() {
            0 => Ok(None),
            1 => Ok(Some(found[0])),
            count => Err(SiteError::Ambiguous { what, count }),
        }
    }
    let scripts = top()
        .filter(|(_, n)| n.ends_with(".js") && !n.starts_with(SPLIT_LOADER))
        .map(|(p, _)| p)
        .collect();
    let Some(script) = one("scripts", scripts)? else {
        return Ok(None);
    };
    let prefix = format!(
        "{}.",
        top_of_pkg(script)
            .unwrap_or_default()
            .split('.')
            .next()
            .unwrap_or_default()
    );
    let wasm = top()
        .filter(|(_, n)| n.ends_with(".wasm") && n.starts_with(&prefix))
        .map(|(p, _)| p)
        .collect();
    let css = top()
        .filter(|(_, n)| n.ends_with(".css"))
        .map(|(p, _)| p)
        .collect();
    let loader = top()
        .filter(|(_, n)| n.starts_with(SPLIT_LOADER) && n.ends_with(".js"))
        .map(|(p, _)| p)
        .collect();
    let manifest = top()
        .filter(|(_, n)| n.starts_with(SPLIT_MANIFEST) && n.ends_with(".json"))
        .map(|(p, _)| p)
        .collect();
    let (Some(wasm), Some(css)) = (one("main WASM files", wasm)?, one("stylesheets", css)?) else {
        return Ok(None);
    };
    Ok(Some(Build {
        script,
        wasm,
        css,
        loader: one("split loaders", loader)?,
        manifest: one("split manifests", manifest)?,
    }))
}

fn weak_etag(bytes: &[u8]) -> HeaderValue {
    let digest = hex(&Sha256::digest(bytes));
    HeaderValue::from_str(&format!("W/\"{}\"", &digest[..32])).unwrap_or(HeaderValue::from_static("W/\"\""))
}

/// What a page request gets from a binary built without its UI: 503 and how to build it. The
/// API, server functions, the gateway (`/v1/...`), `/healthz`, `/readyz` and `/metrics` answer
/// as usual.
pub async fn ui_missing(req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let page = matches!(*req.method(), Method::GET | Method::HEAD)
        && !matches!(path, "/healthz" | "/readyz" | "/metrics")
        && !path.starts_with("/api/")
        && !path.starts_with("/v1/")
        && !path.starts_with(&format!("/{PKG_DIR}/"));
    if !page {
        return next.run(req).await;
    }
    let mut response = (
        StatusCode::SERVICE_UNAVAILABLE,
        [
            (CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8")),
            (CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        UI_MISSING_PAGE,
    )
        .into_response();
    crate::headers::secure(response.headers_mut(), crate::headers::over_tls(req.headers()));
    response
}

const UI_MISSING_PAGE: &str = "<!DOCTYPE html>
<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">
<title>Recourse: this binary has no web UI</title></head>
<body><main>
<h1>This Recourse binary was built without its web UI</h1>
<p>It was compiled before the UI (WASM, script and stylesheet) had been built, so it has none to serve.
The REST API under <code>/api/v1</code> and <code>/healthz</code> work.</p>
<p>To get the UI, in the Recourse repository run <code>cargo leptos build --release --precompress --split</code>
(or <code>./dev run</code>), then build or install the server again (<code>cargo build --release --bin recourse</code>
or <code>cargo install --path server --locked</code>): it embeds the UI. README, section \u{201c}Install\u{201d}, has the details.</p>
</main></body></html>
";

#[cfg(test)]
mod tests {
    use super::*;

    fn site(files: &[(&str, &[u8])]) -> Site {
        Site::from_files(
            files
                .iter()
                .map(|(p, b)| (p.to_string(), Bytes::copy_from_slice(b))),
        )
        .unwrap()
    }

    fn ui_site() -> Site {
        site(&[
            ("favicon.svg", b"<svg/>"),
            ("pkg/recourse.AAA.js", b"export function hydrate() {}"),
            ("pkg/recourse.AAA.js.br", b"br-js"),
            ("pkg/recourse.BBB.wasm", b"\0asm wasm"),
            ("pkg/recourse.BBB.wasm.br", b"br-wasm"),
            ("pkg/recourse.BBB.wasm.gz", b"gz-wasm"),
            ("pkg/recourse.CCC.css", b"body{}"),
        ])
    }

    fn request(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    fn header<'r>(res: &'r Response, name: &str) -> Option<&'r str> {
        res.headers().get(name).map(|v| v.to_str().unwrap())
    }

    #[test]
    fn the_ui_build_is_served_under_one_content_hashed_folder_cached_for_a_year() {
        let site = ui_site();
        let ui = site.ui().unwrap();
        let dir = ui.pkg_dir().to_string();
        assert!(dir.starts_with("pkg/") && dir.len() == "pkg/".len() + 16, "{dir}");
        assert_eq!(ui.output_name(), "recourse.AAA");
        assert_eq!(ui.split(), None);
        // Every file under its own name, and the WASM and stylesheet under the script's too.
        for name in [
            "recourse.AAA.js",
            "recourse.BBB.wasm",
            "recourse.CCC.css",
            "recourse.AAA.wasm",
            "recourse.AAA.css",
        ] {
            let asset = site.get(&format!("/{dir}/{name}")).unwrap();
            assert_eq!(asset.caching(), Caching::Immutable, "{name}");
            let res = asset.respond(&HeaderMap::new());
            assert_eq!(
                header(&res, "cache-control"),
                Some("public, max-age=31536000, immutable")
            );
            assert_eq!(
                header(&res, "etag"),
                None,
                "{name}: a content-hashed name needs no validator"
            );
            // A file a page loads, never a document: the policy that allows nothing (the
            // security layer keeps a policy a response already has).
            assert_eq!(
                header(&res, "content-security-policy"),
                Some("default-src 'none'; frame-ancestors 'none'"),
                "{name}"
            );
        }
        assert_eq!(
            site.get(&format!("/{dir}/recourse.AAA.wasm")).unwrap().identity,
            Bytes::from_static(b"\0asm wasm")
        );
        let favicon = site.get("/favicon.svg").unwrap().respond(&HeaderMap::new());
        assert_eq!(header(&favicon, "cache-control"), Some("no-cache"));
        assert!(header(&favicon, "etag").is_some_and(|e| e.starts_with("W/\"")));
        assert_eq!(header(&favicon, "content-type"), Some("image/svg+xml"));
        // Not a file of the build: the security layer gives it the policy of every response.
        assert_eq!(header(&favicon, "content-security-policy"), None);
    }

    #[test]
    fn any_change_to_the_script_wasm_or_stylesheet_changes_the_folder() {
        let before = ui_site().ui().unwrap().pkg_dir().to_string();
        let changed = site(&[
            ("pkg/recourse.AAA.js", b"export function hydrate() {}"),
            ("pkg/recourse.BBB.wasm", b"\0asm wasm"),
            ("pkg/recourse.CCC.css", b"body{color:red}"),
        ]);
        assert_ne!(changed.ui().unwrap().pkg_dir(), before);
    }

    #[test]
    fn a_split_build_keeps_its_pieces_and_loader_beside_the_script() {
        let site = site(&[
            ("pkg/recourse.AAA.js", b"import './__wasm_split.LLL.js';"),
            ("pkg/recourse.BBB.wasm", b"\0asm main"),
            ("pkg/recourse.CCC.css", b"body{}"),
            ("pkg/split_home_1.DDD.wasm", b"\0asm home"),
            ("pkg/split_home_1.DDD.wasm.br", b"br-home"),
            ("pkg/chunk_3.EEE.wasm", b"\0asm shared"),
            (
                "pkg/__wasm_split.LLL.js",
                b"import { initSync } from './recourse.AAA.js';",
            ),
            (
                "pkg/__wasm_split_manifest.MMM.json",
                br#"{"home_1": ["split_home_1.DDD", "chunk_3.EEE"]}"#,
            ),
        ]);
        let ui = site.ui().unwrap();
        assert_eq!(ui.output_name(), "recourse.AAA");
        let split = ui.split().unwrap();
        assert_eq!(split.loader, "__wasm_split.LLL.js");
        assert_eq!(
            split.pieces["home_1"],
            vec!["split_home_1.DDD".to_string(), "chunk_3.EEE".to_string()]
        );
        let dir = ui.pkg_dir();
        for name in ["__wasm_split.LLL.js", "split_home_1.DDD.wasm", "chunk_3.EEE.wasm"] {
            assert_eq!(
                site.get(&format!("/{dir}/{name}")).unwrap().caching(),
                Caching::Immutable
            );
        }
        // The main WASM is the one named like the script, not a piece.
        assert_eq!(
            site.get(&format!("/{dir}/recourse.AAA.wasm")).unwrap().identity,
            Bytes::from_static(b"\0asm main")
        );
        let piece = site
            .get(&format!("/{dir}/split_home_1.DDD.wasm"))
            .unwrap()
            .respond(&request(&[("accept-encoding", "br")]));
        assert_eq!(header(&piece, "content-encoding"), Some("br"));
        assert_eq!(header(&piece, "content-type"), Some("application/wasm"));
    }

    #[test]
    fn a_manifest_that_is_not_one_is_refused() {
        let err = Site::from_files(
            [
                ("pkg/recourse.A.js", "a"),
                ("pkg/recourse.A.wasm", "w"),
                ("pkg/recourse.A.css", "c"),
                ("pkg/__wasm_split.L.js", "l"),
                ("pkg/__wasm_split_manifest.M.json", "[1]"),
            ]
            .map(|(p, b)| (p.to_string(), Bytes::from_static(b.as_bytes()))),
        )
        .unwrap_err();
        assert!(
            matches!(&err, SiteError::Manifest { file, .. } if file == "__wasm_split_manifest.M.json"),
            "{err:?}"
        );
    }

    #[test]
    fn content_types_follow_the_file_extension() {
        let site = ui_site();
        let ui = site.ui().unwrap();
        for (ext, ty) in [
            ("js", "text/javascript"),
            ("wasm", "application/wasm"),
            ("css", "text/css"),
        ] {
            let res = site
                .get(&format!("/{}/{}.{ext}", ui.pkg_dir(), ui.output_name()))
                .unwrap()
                .respond(&HeaderMap::new());
            assert_eq!(header(&res, "content-type"), Some(ty), "{ext}");
        }
    }

    #[tokio::test]
    async fn brotli_is_preferred_then_gzip_then_the_plain_bytes() {
        use http_body_util::BodyExt;
        let site = ui_site();
        let wasm = site.get("/pkg/recourse.BBB.wasm").unwrap();
        // (request headers, expected content coding, expected body)
        type Case = (
            &'static [(&'static str, &'static str)],
            Option<&'static str>,
            &'static [u8],
        );
        let cases: [Case; 6] = [
            (
                &[("accept-encoding", "gzip, deflate, br")],
                Some("br"),
                b"br-wasm",
            ),
            (&[("accept-encoding", "gzip")], Some("gzip"), b"gz-wasm"),
            (
                &[("accept-encoding", "br;q=0.5, gzip;q=0.8")],
                Some("gzip"),
                b"gz-wasm",
            ),
            (&[("accept-encoding", "br;q=0, gzip;q=0")], None, b"\0asm wasm"),
            (&[("accept-encoding", "*")], Some("br"), b"br-wasm"),
            (&[], None, b"\0asm wasm"),
        ];
        for (req, coding, body) in cases {
            let res = wasm.respond(&request(req));
            assert_eq!(res.status(), StatusCode::OK);
            assert_eq!(header(&res, "content-encoding"), coding, "{req:?}");
            assert_eq!(header(&res, "vary"), Some("accept-encoding"));
            let bytes = res.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(&bytes[..], body, "{req:?}");
        }
        // Only a brotli variant: a gzip-only client gets the plain bytes.
        let js = site.get("/pkg/recourse.AAA.js").unwrap();
        let res = js.respond(&request(&[("accept-encoding", "gzip")]));
        assert_eq!(header(&res, "content-encoding"), None);
    }

    #[test]
    fn a_current_copy_is_answered_with_304_and_no_body() {
        let site = ui_site();
        let favicon = site.get("/favicon.svg").unwrap();
        let etag = favicon.respond(&HeaderMap::new()).headers()["etag"].clone();
        let mut req = HeaderMap::new();
        req.insert(axum::http::header::IF_NONE_MATCH, etag.clone());
        let res = favicon.respond(&req);
        assert_eq!(res.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(res.headers()["etag"], etag);
        assert_eq!(header(&res, "content-type"), None);
        let stale = favicon.respond(&request(&[("if-none-match", "W/\"0123\", \"abc\"")]));
        assert_eq!(stale.status(), StatusCode::OK);
    }

    #[test]
    fn a_site_without_the_ui_build_has_no_ui_but_serves_its_files() {
        let site = site(&[("favicon.svg", b"<svg/>"), ("pkg/recourse.AAA.js", b"x")]);
        assert_eq!(site.ui(), None);
        assert!(site.get("/favicon.svg").is_some());
        assert!(Site::from_files([]).unwrap().ui().is_none());
    }

    #[test]
    fn two_builds_mixed_in_one_folder_are_refused() {
        let err = Site::from_files(
            [
                ("pkg/recourse.A.js", "a"),
                ("pkg/recourse.B.js", "b"),
                ("pkg/recourse.A.wasm", "w"),
                ("pkg/recourse.A.css", "c"),
            ]
            .map(|(p, b)| (p.to_string(), Bytes::from_static(b.as_bytes()))),
        )
        .unwrap_err();
        assert_eq!(
            err,
            SiteError::Ambiguous {
                what: "scripts",
                count: 2
            }
        );
    }
}
