//! Rebuilds the server crate when what it embeds at compile time changes: the migrations
//! (`sqlx::migrate!` embeds `../migrations`) and the built UI (`src/assets.rs`).
//!
//! In release builds rust-embed reads `target/site` when the server crate compiles, and cargo
//! then tracks only the files it found there. A UI built later (new, content-hashed file names)
//! would not make cargo rebuild the server, so this script watches the folder and the crate
//! rebuilds whenever cargo-leptos rewrites it. (cargo compares modification times, so every
//! `cargo leptos build` recompiles the server crate, even when the UI came out the same.) It also says, as a build warning, when there is no UI to embed
//! (a plain `cargo build` in a fresh clone), when the UI was built without precompressed
//! variants, or when it is older than its sources.
//!
//! It also links `recourse-acp` with packed relative relocations where this machine's C library
//! reads them ([`pack_relative_relocations`]).

use std::{
    fs,
    path::{Path, PathBuf},
    time::SystemTime,
};

/// The UI's sources, relative to the workspace root: the UI build is stale when one of them is
/// newer than it.
const UI_SOURCES: [&str; 5] = ["app/src", "frontend/src", "policy/src", "style", "public"];

fn main() {
    println!("cargo::rerun-if-changed=../migrations");
    pack_relative_relocations();
    let Some(workspace) = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .and_then(|dir| dir.parent().map(Path::to_path_buf))
    else {
        println!("cargo::warning=CARGO_MANIFEST_DIR is not set; the UI build is not watched");
        return;
    };
    let site = workspace.join("target").join("site");
    // Debug builds read the folder when they run (rust-embed's dynamic mode), so they neither
    // need to rebuild when it changes nor embed anything that could be stale; with the
    // `embed-ui` feature they embed it as release builds do.
    if std::env::var_os("CARGO_CFG_DEBUG_ASSERTIONS").is_some()
        && std::env::var_os("CARGO_FEATURE_EMBED_UI").is_none()
    {
        return;
    }
    // cargo reruns a script on every build while a path it watches is missing; the folder
    // cargo-leptos writes to is created empty instead, so only real UI builds are noticed.
    if let Err(err) = fs::create_dir_all(&site) {
        println!("cargo::warning=cannot create {}: {err}", site.display());
    }
    println!("cargo::rerun-if-changed={}", site.display());
    for source in UI_SOURCES {
        println!("cargo::rerun-if-changed={}", workspace.join(source).display());
    }

    let pkg = site.join("pkg");
    let ui: Vec<PathBuf> = files(&pkg)
        .into_iter()
        .filter(|p| p.parent() == Some(pkg.as_path()))
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "js" || e == "wasm" || e == "css")
        })
        .collect();
    if !["js", "wasm", "css"]
        .iter()
        .all(|ext| ui.iter().any(|p| p.extension().is_some_and(|e| e == *ext)))
    {
        println!(
            "cargo::warning=no web UI in {}: this binary will serve the API, and pages that say \
             how to build the UI. Run `cargo leptos build --release --precompress --split` (or `./dev run`) \
             first to embed it.",
            site.display()
        );
        return;
    }
    // The server renders what the embedded WASM hydrates; both must be compiled with Leptos's
    // erased components or hydration fails in every browser. `.cargo/config.toml` sets it for
    // every build run from the repository; a build run from elsewhere (say `cargo install
    // --path /somewhere/server` from another directory) would not get it.
    if std::env::var_os("CARGO_CFG_ERASE_COMPONENTS").is_none() {
        eprintln!(
            "error: the server would embed the UI in {} but is not compiled with \
             `--cfg erase_components` as the UI was: run cargo from the repository root, so \
             `.cargo/config.toml` applies",
            site.display()
        );
        std::process::exit(1);
    }
    if !ui
        .iter()
        .all(|p| p.with_extension(format!("{}.br", ext(p))).exists())
    {
        println!(
            "cargo::warning=the UI in {} has no precompressed (.br/.gz) files: build it with \
             `cargo leptos build --release --precompress --split` so it is served compressed without \
             per-request work",
            site.display()
        );
    }
    let built = ui.iter().filter_map(|p| modified(p)).min();
    let newest_source = UI_SOURCES
        .iter()
        .flat_map(|s| files(&workspace.join(s)))
        .filter_map(|p| modified(&p).map(|t| (t, p)))
        .max();
    if let (Some(built), Some((changed, path))) = (built, newest_source) {
        if changed > built {
            println!(
                "cargo::warning=the UI in {} is older than {}: this binary embeds the old UI. \
                 Run `cargo leptos build --release --precompress --split` to rebuild both.",
                site.display(),
                path.display()
            );
        }
    }
}

fn ext(path: &Path) -> String {
    path.extension()
        .map(|e| e.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn modified(path: &Path) -> Option<SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Every file under `dir` (none if it cannot be read).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// Links `recourse-acp` (the process an editor keeps open, `src/editor/binary.rs`) with its
/// relative relocations packed (`DT_RELR`): the dynamic loader then reads a table of a few KB
/// at start-up instead of 1.3 MB of `.rela.dyn`, pages that stayed in the process's memory.
/// Only for this machine's own target with glibc 2.36 or later (whose loader reads them);
/// elsewhere it links as usual. A binary built here may be copied to an older system: there
/// `recourse acp` does not exec it (`src/editor/binary.rs` reads the running C library).
fn pack_relative_relocations() {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("TARGET") != var("HOST")
        || var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
    {
        return;
    }
    let glibc = std::process::Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .unwrap_or_default();
    // "glibc 2.36"
    let version: Vec<u32> = glibc
        .trim()
        .trim_start_matches("glibc ")
        .split('.')
        .filter_map(|p| p.parse().ok())
        .collect();
    if version.as_slice() >= [2, 36].as_slice() {
        println!("cargo::rustc-link-arg-bin=recourse-acp=-Wl,-z,pack-relative-relocs");
        // `recourse acp` execs it only where the C library it runs with reads them
        // (`src/editor/binary.rs`): a binary built here may be copied to an older system.
        println!("cargo::rustc-env=RECOURSE_ACP_PACKED_RELOCATIONS=1");
    }
}
