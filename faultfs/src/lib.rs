//! faultfs: a test-only `LD_PRELOAD` shim that makes a power cut reproducible.
//!
//! A SIGKILLed process loses nothing it handed to the kernel; a power cut loses every write the
//! disk was never told to keep. This library, preloaded into a real `recourse serve`, keeps an
//! *undo journal* for the files of one folder: before each `write`, `pwrite`, `pwrite64`,
//! `ftruncate` or `ftruncate64` of such a file it appends what the change is about to overwrite
//! (the file, the offset, the old bytes there and the old length of the file), and after each
//! successful `fsync` or `fdatasync` of a file it appends a *synced* mark for that file: from
//! then on the changes before the mark are on stable storage. After the process is killed, a
//! test replays, file by file, the undo records written after that file's last synced mark,
//! newest first; what is left is what the disk would hold after losing power at the moment of
//! the kill (`server/tests/common/power.rs` does this).
//!
//! It is pessimistic on purpose: a real disk may have written some unsynced pages on its own;
//! here none were. It does not see writes through `mmap` (SQLite's `-shm` wal-index, which
//! SQLite rebuilds from the WAL after every restart, so the test deletes it at the cut), nor
//! `writev`, `pwritev` or `fallocate` (SQLite uses none of them with our settings). Directory
//! entries are not modelled: a file created since the last sync keeps existing, emptied.
//!
//! Configuration, read once from the environment:
//! - `FAULTFS_DIR`: the folder whose files are journaled (its direct and deeper entries);
//! - `FAULTFS_JOURNAL`: where the journal goes (outside `FAULTFS_DIR`);
//! - `FAULTFS_KILL_ON` (optional): a path; once a file exists there, the process SIGKILLs
//!   itself right after its next change to a watched file, before anything can sync it (the
//!   cut then lands inside a commit, the moment a power cut hurts most).
//!
//! Without the first two, every call goes straight to libc.
//!
//! Journal format (little endian), one record after another, each appended with one `write`
//! before the change it describes (so a record cut short by the kill describes a change that
//! never happened and is ignored):
//! - `1u8`, path length `u32`, path, offset `u64`, old file length `u64`, old byte count `u64`,
//!   the old bytes (those at `offset..` that existed before the change);
//! - `2u8`, path length `u32`, path: everything before this in that file is synced.

use libc::{c_int, c_void, off64_t, off_t, size_t, ssize_t};
use std::{
    cell::Cell,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Mutex, MutexGuard, OnceLock,
    },
};

const UNDO: u8 = 1;
const SYNCED: u8 = 2;

type WriteFn = unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t;
type PwriteFn = unsafe extern "C" fn(c_int, *const c_void, size_t, off_t) -> ssize_t;
type Pwrite64Fn = unsafe extern "C" fn(c_int, *const c_void, size_t, off64_t) -> ssize_t;
type FtruncateFn = unsafe extern "C" fn(c_int, off_t) -> c_int;
type Ftruncate64Fn = unsafe extern "C" fn(c_int, off64_t) -> c_int;
type SyncFn = unsafe extern "C" fn(c_int) -> c_int;

/// libc's own definition of a function this library interposes (looked up once).
macro_rules! real {
    ($name:literal, $ty:ty) => {{
        static PTR: AtomicUsize = AtomicUsize::new(0);
        let mut p = PTR.load(Ordering::Relaxed);
        if p == 0 {
            // SAFETY: `dlsym` with RTLD_NEXT and a NUL-terminated name only looks a symbol up.
            p = unsafe { libc::dlsym(libc::RTLD_NEXT, concat!($name, "\0").as_ptr().cast()) } as usize;
            if p == 0 {
                // Without the real call there is nothing sensible to do.
                // SAFETY: `abort` has no preconditions.
                unsafe { libc::abort() };
            }
            PTR.store(p, Ordering::Relaxed);
        }
        // SAFETY: `p` is the address of libc's `$name`, whose C signature is `$ty`.
        unsafe { std::mem::transmute::<usize, $ty>(p) }
    }};
}

struct Config {
    /// The watched folder, canonical, with a trailing `/`.
    dir: Vec<u8>,
    /// The journal, open for appending.
    journal: c_int,
    /// `FAULTFS_KILL_ON`, NUL-terminated.
    kill_on: Option<std::ffi::CString>,
}

static CONFIG: OnceLock<Option<Config>> = OnceLock::new();

/// One change at a time across threads, so a file's records are in the order of its changes
/// and a synced mark never passes a change that had not reached the kernel.
static ORDER: Mutex<()> = Mutex::new(());

thread_local! {
    /// Set while this thread is inside a hook: the hook's own calls go straight to libc.
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

fn config() -> Option<&'static Config> {
    CONFIG
        .get_or_init(|| {
            let dir = std::fs::canonicalize(std::env::var_os("FAULTFS_DIR")?).ok()?;
            let journal =
                std::ffi::CString::new(std::env::var_os("FAULTFS_JOURNAL")?.into_encoded_bytes()).ok()?;
            // SAFETY: a NUL-terminated path and plain flags; `open` is not interposed here.
            let fd = unsafe {
                libc::open(
                    journal.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC,
                    0o600,
                )
            };
            if fd < 0 {
                return None;
            }
            let mut dir = dir.into_os_string().into_encoded_bytes();
            dir.push(b'/');
            let kill_on = std::env::var_os("FAULTFS_KILL_ON")
                .and_then(|p| std::ffi::CString::new(p.into_encoded_bytes()).ok());
            Some(Config {
                dir,
                journal: fd,
                kill_on,
            })
        })
        .as_ref()
}

/// A call on a watched file, inside the hook: holds the order lock and marks the thread busy.
struct Watched {
    fd: c_int,
    path: Vec<u8>,
    config: &'static Config,
    _order: MutexGuard<'static, ()>,
}

impl Watched {
    /// `Some` when `fd` is a file under the watched folder and this thread is not already in a
    /// hook.
    fn new(fd: c_int) -> Option<Watched> {
        if BUSY.with(Cell::get) {
            return None;
        }
        BUSY.with(|b| b.set(true));
        let watched = Watched::find(fd);
        if watched.is_none() {
            BUSY.with(|b| b.set(false));
        }
        watched
    }

    fn find(fd: c_int) -> Option<Watched> {
        let config = config()?;
        let link = format!("/proc/self/fd/{fd}\0");
        let mut buf = [0u8; 4096];
        // SAFETY: a NUL-terminated path and a buffer of the length given.
        let n = unsafe { libc::readlink(link.as_ptr().cast(), buf.as_mut_ptr().cast(), buf.len()) };
        let n = usize::try_from(n).ok()?;
        let path = &buf[..n];
        if !path.starts_with(&config.dir) || path.ends_with(b"-shm") {
            return None;
        }
        let order = ORDER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(Watched {
            fd,
            path: path.to_vec(),
            config,
            _order: order,
        })
    }

    fn size(&self) -> Option<u64> {
        // SAFETY: `stat` is plain old data; `fstat` fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid pointer to a `stat`.
        if unsafe { libc::fstat(self.fd, &mut st) } != 0 {
            return None;
        }
        u64::try_from(st.st_size).ok()
    }

    /// Journals how to undo a change of `len` bytes at `offset` (or, for a truncation, of
    /// everything from `offset` on).
    fn undo(&self, offset: u64, len: u64) {
        let Some(size) = self.size() else { return };
        let keep = if offset < size { len.min(size - offset) } else { 0 };
        let mut old = vec![0u8; usize::try_from(keep).unwrap_or(0)];
        let mut got = 0usize;
        while got < old.len() {
            // SAFETY: reads into the unfilled tail of `old`; `pread` is not interposed.
            let n = unsafe {
                libc::pread(
                    self.fd,
                    old[got..].as_mut_ptr().cast(),
                    old.len() - got,
                    off_t::try_from(offset + got as u64).unwrap_or(off_t::MAX),
                )
            };
            match usize::try_from(n) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        old.truncate(got);
        let mut record = self.head(UNDO, 24 + old.len());
        record.extend_from_slice(&offset.to_le_bytes());
        record.extend_from_slice(&size.to_le_bytes());
        record.extend_from_slice(&(old.len() as u64).to_le_bytes());
        record.extend_from_slice(&old);
        self.append(&record);
    }

    /// After a change: dies here if `FAULTFS_KILL_ON` exists.
    fn changed(&self) {
        let Some(path) = &self.config.kill_on else { return };
        // SAFETY: a NUL-terminated path; `access` only checks it.
        if unsafe { libc::access(path.as_ptr(), libc::F_OK) } == 0 {
            // SAFETY: signals this very process; nothing after it runs.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
    }

    fn synced(&self) {
        let record = self.head(SYNCED, 0);
        self.append(&record);
    }

    fn head(&self, kind: u8, rest: usize) -> Vec<u8> {
        let mut r = Vec::with_capacity(5 + self.path.len() + rest);
        r.push(kind);
        r.extend_from_slice(&u32::try_from(self.path.len()).unwrap_or(0).to_le_bytes());
        r.extend_from_slice(&self.path);
        r
    }

    fn append(&self, record: &[u8]) {
        let write = real!("write", WriteFn);
        let mut done = 0;
        while done < record.len() {
            // SAFETY: writes the unwritten tail of `record` to the journal's descriptor.
            let n = unsafe {
                write(
                    self.config.journal,
                    record[done..].as_ptr().cast(),
                    record.len() - done,
                )
            };
            match usize::try_from(n) {
                Ok(n) if n > 0 => done += n,
                _ => return,
            }
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        BUSY.with(|b| b.set(false));
    }
}

/// Where a plain `write` on `fd` lands.
fn position(fd: c_int) -> u64 {
    // SAFETY: `fcntl(F_GETFL)` and `lseek(…, 0, SEEK_CUR)` only query the descriptor.
    let (flags, pos) = unsafe { (libc::fcntl(fd, libc::F_GETFL), libc::lseek(fd, 0, libc::SEEK_CUR)) };
    if flags >= 0 && flags & libc::O_APPEND != 0 {
        // SAFETY: as above; the end of the file.
        let end = unsafe { libc::lseek(fd, 0, libc::SEEK_END) };
        // SAFETY: puts the position back where it was.
        unsafe { libc::lseek(fd, pos, libc::SEEK_SET) };
        return u64::try_from(end).unwrap_or(0);
    }
    u64::try_from(pos).unwrap_or(0)
}

/// # Safety
/// As libc's `write`.
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t {
    let real = real!("write", WriteFn);
    let w = Watched::new(fd).inspect(|w| w.undo(position(fd), count as u64));
    // SAFETY: the caller's arguments, unchanged.
    let rc = unsafe { real(fd, buf, count) };
    if let Some(w) = &w {
        w.changed();
    }
    rc
}

/// # Safety
/// As libc's `pwrite`.
#[no_mangle]
pub unsafe extern "C" fn pwrite(fd: c_int, buf: *const c_void, count: size_t, offset: off_t) -> ssize_t {
    let real = real!("pwrite", PwriteFn);
    let w = Watched::new(fd).inspect(|w| w.undo(u64::try_from(offset).unwrap_or(0), count as u64));
    // SAFETY: the caller's arguments, unchanged.
    let rc = unsafe { real(fd, buf, count, offset) };
    if let Some(w) = &w {
        w.changed();
    }
    rc
}

/// # Safety
/// As libc's `pwrite64`.
#[no_mangle]
pub unsafe extern "C" fn pwrite64(fd: c_int, buf: *const c_void, count: size_t, offset: off64_t) -> ssize_t {
    let real = real!("pwrite64", Pwrite64Fn);
    let w = Watched::new(fd).inspect(|w| w.undo(u64::try_from(offset).unwrap_or(0), count as u64));
    // SAFETY: the caller's arguments, unchanged.
    let rc = unsafe { real(fd, buf, count, offset) };
    if let Some(w) = &w {
        w.changed();
    }
    rc
}

/// # Safety
/// As libc's `ftruncate`.
#[no_mangle]
pub unsafe extern "C" fn ftruncate(fd: c_int, length: off_t) -> c_int {
    let real = real!("ftruncate", FtruncateFn);
    let w = Watched::new(fd).inspect(|w| w.undo(u64::try_from(length).unwrap_or(0), u64::MAX));
    // SAFETY: the caller's arguments, unchanged.
    let rc = unsafe { real(fd, length) };
    if let Some(w) = &w {
        w.changed();
    }
    rc
}

/// # Safety
/// As libc's `ftruncate64`.
#[no_mangle]
pub unsafe extern "C" fn ftruncate64(fd: c_int, length: off64_t) -> c_int {
    let real = real!("ftruncate64", Ftruncate64Fn);
    let w = Watched::new(fd).inspect(|w| w.undo(u64::try_from(length).unwrap_or(0), u64::MAX));
    // SAFETY: the caller's arguments, unchanged.
    let rc = unsafe { real(fd, length) };
    if let Some(w) = &w {
        w.changed();
    }
    rc
}

/// # Safety
/// As libc's `fsync`.
#[no_mangle]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    let real = real!("fsync", SyncFn);
    let w = Watched::new(fd);
    // SAFETY: the caller's argument, unchanged.
    let rc = unsafe { real(fd) };
    if let (0, Some(w)) = (rc, w) {
        w.synced();
    }
    rc
}

/// # Safety
/// As libc's `fdatasync`.
#[no_mangle]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    let real = real!("fdatasync", SyncFn);
    let w = Watched::new(fd);
    // SAFETY: the caller's argument, unchanged.
    let rc = unsafe { real(fd) };
    if let (0, Some(w)) = (rc, w) {
        w.synced();
    }
    rc
}
