//! Power cuts for tests: the `faultfs` shim (`faultfs/`, an `LD_PRELOAD` library) journals how
//! to undo every write under a folder that was never fsynced; [`cut`] replays that journal after
//! the process is killed, leaving the files as a power cut at the moment of the kill would.
//!
//! Cargo builds a package's own binaries before its integration tests, not other workspace
//! members' libraries, so [`shim`] builds `faultfs` itself into a target directory of its own
//! (`target/faultfs`: the outer `cargo test` holds the lock of the main one while tests run),
//! as `fake_agent::binary` does for the fake agent.

use std::{
    collections::HashMap,
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
    sync::OnceLock,
};

/// The shim's shared library (built on first use; panics with the build's output if that
/// fails).
pub fn shim() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let target = workspace.join("target").join("faultfs");
        let out = std::process::Command::new(env!("CARGO"))
            .args(["build", "--quiet", "--offline", "-p", "faultfs", "--lib"])
            .arg("--target-dir")
            .arg(&target)
            .current_dir(workspace)
            .output()
            .expect("cannot run cargo to build the faultfs shim");
        assert!(
            out.status.success(),
            "building the faultfs shim (`cargo build -p faultfs`) failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lib = target.join("debug").join("libfaultfs.so");
        assert!(lib.exists(), "no shim at {}", lib.display());
        lib
    })
    .clone()
}

/// The environment that loads the shim into a process, journaling the files under `dir` into
/// `journal`; once a file exists at `kill`, the process SIGKILLs itself right after its next
/// write under `dir` (before anything can sync it).
pub fn env(dir: &Path, journal: &Path, kill: &Path) -> Vec<(String, String)> {
    vec![
        ("LD_PRELOAD".into(), shim().to_str().unwrap().into()),
        ("FAULTFS_DIR".into(), dir.to_str().unwrap().into()),
        ("FAULTFS_JOURNAL".into(), journal.to_str().unwrap().into()),
        ("FAULTFS_KILL_ON".into(), kill.to_str().unwrap().into()),
    ]
}

/// What a cut did, per file name.
#[derive(Debug, Default)]
pub struct Cut {
    /// Changes journaled (all, synced or not).
    pub changes: HashMap<String, usize>,
    /// Successful `fsync`/`fdatasync` calls.
    pub syncs: HashMap<String, usize>,
    /// Changes undone (made after the file's last sync).
    pub undone: HashMap<String, usize>,
}

struct Undo {
    offset: u64,
    old_len: u64,
    old: Vec<u8>,
}

/// Reads little-endian fields off the journal; `None` at a record the kill cut short.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
}

/// Undoes, file by file and newest first, every change journaled after the file's last
/// `fsync` (the journal format is in `faultfs/src/lib.rs`). Call it once the process is dead.
pub fn cut(journal: &Path) -> Cut {
    let bytes = std::fs::read(journal).expect("the faultfs journal (was the shim loaded?)");
    let mut r = Reader(&bytes);
    let mut pending: HashMap<PathBuf, Vec<Undo>> = HashMap::new();
    let mut cut = Cut::default();
    let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
    while let Some(kind) = r.take(1) {
        let Some(path) = r.u32().and_then(|n| r.take(n as usize)) else {
            break;
        };
        let path = PathBuf::from(String::from_utf8(path.to_vec()).unwrap());
        match kind[0] {
            1 => {
                let (Some(offset), Some(old_len), Some(old)) =
                    (r.u64(), r.u64(), r.u64().and_then(|n| r.take(n as usize)))
                else {
                    break;
                };
                *cut.changes.entry(name(&path)).or_default() += 1;
                pending.entry(path).or_default().push(Undo {
                    offset,
                    old_len,
                    old: old.to_vec(),
                });
            }
            2 => {
                *cut.syncs.entry(name(&path)).or_default() += 1;
                pending.remove(&path);
            }
            k => panic!("faultfs journal: unknown record kind {k}"),
        }
    }
    for (path, undos) in pending {
        let Ok(file) = std::fs::OpenOptions::new().write(true).open(&path) else {
            continue;
        };
        for u in undos.iter().rev() {
            file.write_all_at(&u.old, u.offset).unwrap();
            file.set_len(u.old_len).unwrap();
        }
        cut.undone.insert(name(&path), undos.len());
    }
    cut
}
