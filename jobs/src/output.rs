//! Output files written atomically: every file the CLI writes (JSON reports, result dumps,
//! PNG charts, generated graphs) goes through [`AtomicFile`].
//!
//! The data is written to a temporary file beside the final path (same folder, so the
//! rename cannot cross file systems), flushed and synced, and then renamed over the final
//! path. Readers see the old file or the new one, never a mix; two runs writing the same
//! path leave one complete file (the last to finish); a run that fails (full disk, an
//! error in the middle) removes its temporary file and leaves the final path as it was.
//!
//! Temporary names are `.NAME.PID.COUNTER.RANDOM.tmp[.EXT]`, created with `create_new` (never
//! an existing file). The final extension is kept at the end because some writers (the
//! PNG encoder) choose the format by extension.
//!
//! Paths that are not regular files (`/dev/null`, `/dev/full`, a FIFO), and links under
//! `/dev` and `/proc` (`/dev/stdout` may lead to a regular file the shell holds open), are
//! written in place: renaming over them would replace the device or detach the
//! descriptor. A symbolic link is followed, and its target replaced.
//!
//! # Interrupts
//!
//! On Unix, SIGINT, SIGTERM, SIGHUP and SIGQUIT end a run by their default action (the
//! process dies; nothing in the CLI catches them), and so does SIGXFSZ when a write passes
//! the file size limit. So that an interrupted run leaves no temporary
//! file behind, the first [`AtomicFile`] installs a handler for those signals whose
//! default action was still in place (an ignored signal stays ignored). The handler
//! unlinks every temporary file still pending, restores the default action and raises the
//! signal again, so the process still dies by that signal (exit status as before). While a
//! run has written part of its outputs (the first root's dump, before its report is
//! complete: [`incomplete`]), the handler first prints that on stderr, so an interrupted run
//! says what it left behind. (SIGQUIT during a run of the skein engine is the runtime's: it
//! asks for a stall dump, `framework/src/runtime/stall.rs`, and the run goes on.)
//!
//! Invariants of the unsafe code (the signal handler and its registry):
//! * Every non-null pointer in `PENDING` came from `CString::into_raw` and is owned by the
//!   slot: whoever swaps it out (the owner on commit or drop, or the handler) owns it from
//!   then on. The owner frees it; the handler only reads it (unlink) and never frees.
//! * The handler calls only async-signal-safe functions (`unlink`, `sigaction`, `raise`)
//!   and atomic operations; it allocates nothing and takes no lock.
//!
//! For tests, `SKEIN_HOLD_OUTPUT_MS=N` makes every commit wait N milliseconds with its
//! temporary file complete but not yet renamed, so that a test can interrupt a write.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;

/// An output file being written: bytes go to a temporary file until [`AtomicFile::commit`]
/// renames it over the final path. Dropped without a commit, it removes the temporary
/// file and leaves the final path untouched.
#[derive(Debug)]
pub(crate) struct AtomicFile {
    /// The path as the caller gave it (for messages).
    shown: PathBuf,
    /// The path that is replaced (the caller's path with symbolic links followed).
    target: PathBuf,
    /// The temporary file, or `None` when writing in place (not a regular file).
    temp: Option<Temp>,
    file: Option<File>,
}

#[derive(Debug)]
struct Temp {
    path: PathBuf,
    /// This file's slot in the interrupt registry (`None`: no free slot, not cleaned on
    /// interrupt).
    slot: Option<usize>,
}

impl AtomicFile {
    /// Starts writing `path`: checks that it can be written (its folder exists, it is not
    /// a folder) and creates the temporary file beside it. Nothing at `path` changes yet.
    pub(crate) fn create(path: &Path) -> anyhow::Result<AtomicFile> {
        let cannot = || format!("cannot create {}", path.display());
        anyhow::ensure!(!path.as_os_str().is_empty(), "the output path is empty");
        let md = std::fs::metadata(path); // links followed
        if md.as_ref().is_ok_and(|md| md.is_dir()) {
            anyhow::bail!("cannot create {}: it is a folder", path.display());
        }
        let special = md.as_ref().is_ok_and(|md| !md.is_file());
        let descriptor = (path.starts_with("/dev") || path.starts_with("/proc"))
            && std::fs::symlink_metadata(path).is_ok_and(|md| md.file_type().is_symlink());
        if special || descriptor {
            // A device, FIFO or descriptor (`/dev/stdout` may lead to a regular file that
            // the shell holds open): write in place, as renaming would replace it.
            let file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)
                .with_context(cannot)?;
            return Ok(AtomicFile {
                shown: path.to_path_buf(),
                target: path.to_path_buf(),
                temp: None,
                file: Some(file),
            });
        }
        let target = resolve_links(path).with_context(cannot)?;
        if md.is_ok() {
            // Only a file this user may write is replaced (as writing it in place needed):
            // opening it for writing, without truncating, changes nothing.
            OpenOptions::new().write(true).open(&target).with_context(cannot)?;
        }
        let old_permissions = md.ok().map(|md| md.permissions());
        let (temp, file) = create_temp(&target).with_context(cannot)?;
        let mut out =
            AtomicFile { shown: path.to_path_buf(), target, temp: Some(temp), file: Some(file) };
        if let Some(perm) = old_permissions {
            // The replacement keeps the old file's permissions.
            out.file_mut().set_permissions(perm).with_context(cannot)?;
        }
        Ok(out)
    }

    /// Drops the cached pages of the file being replaced (it stays whole on disk until
    /// the commit), so that a large output does not hold the old version's pages in memory
    /// next to the new one: what truncating the old file first used to give for free.
    /// Advice only: nothing happens where it is not supported.
    pub(crate) fn release_old_cache(&self) {
        #[cfg(target_os = "linux")]
        if self.temp.is_some() {
            if let Ok(old) = File::open(&self.target) {
                use std::os::fd::AsRawFd;
                // SAFETY: `old` is an open descriptor for the whole call; POSIX_FADV_DONTNEED
                // only drops clean cached pages and changes no data.
                unsafe { libc::posix_fadvise(old.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            }
        }
    }

    /// Where the bytes go now: the temporary file (or the final path when writing in
    /// place). For writers that open a path themselves, such as the PNG encoder.
    pub(crate) fn write_path(&self) -> &Path {
        self.temp.as_ref().map_or(&self.target, |t| &t.path)
    }

    /// The open file the bytes go to.
    pub(crate) fn file_mut(&mut self) -> &mut File {
        self.file.as_mut().expect("the file is open until commit or drop")
    }

    /// Syncs the data and renames the temporary file over the final path. On error the
    /// temporary file is removed and the final path is as it was.
    pub(crate) fn commit(mut self) -> anyhow::Result<()> {
        hold_for_tests();
        let context = || format!("cannot write {}", self.shown.display());
        let file = self.file.take().expect("the file is open until commit");
        // A full or failing disk often reports only here.
        file.sync_all().or_else(ignore_unsupported).with_context(context)?;
        drop(file);
        let Some(temp) = &self.temp else { return Ok(()) };
        std::fs::rename(&temp.path, &self.target).with_context(|| {
            format!("cannot replace {} with the new file", self.shown.display())
        })?;
        if let Some(slot) = self.temp.take().and_then(|t| t.slot) {
            interrupts::unregister(slot);
        }
        // Make the rename itself durable (best effort: not every file system syncs folders).
        if let Ok(dir) = File::open(parent_or_dot(&self.target)) {
            let _ = dir.sync_all();
        }
        Ok(())
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        drop(self.file.take());
        if let Some(temp) = self.temp.take() {
            let _ = std::fs::remove_file(&temp.path);
            if let Some(slot) = temp.slot {
                interrupts::unregister(slot);
            }
        }
    }
}

/// Writes `path` atomically with `write`, through a buffer; `what` names the file in
/// errors (`the JSON report`, `the dump file`). Creates the path's folder if needed.
/// On a rank other than 0 of an `mpirun` job, where every rank runs the same kernel: standard
/// output goes to `/dev/null` (rank 0 prints the report), and [`write_file`] writes nothing
/// (rank 0 writes the files). Errors still reach standard error on every rank.
pub(crate) fn quiet_this_rank() {
    QUIET.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 on two open descriptors (ours, and standard output's 1); it only
        // replaces what descriptor 1 refers to. Rust's `stdout()` keeps writing to fd 1.
        unsafe { libc::dup2(null.as_raw_fd(), 1) };
    }
}

/// Set by [`quiet_this_rank`].
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Prints `line` and a newline to standard error in one write, so that the lines of ranks
/// sharing one terminal never interleave mid-line (`eprintln!` writes its pieces one by
/// one); on a rank other than 0 of a job over several ranks, prefixed with `rank R: ` (rank
/// 0 alone prints the lines every rank shares).
pub(crate) fn eline(line: impl std::fmt::Display) {
    match skein::rank() {
        0 => eline_as_is(line),
        r => eline_as_is(format_args!("rank {r}: {line}")),
    }
}

/// [`eline`] without the rank prefix (for a line that names its rank itself).
pub(crate) fn eline_as_is(line: impl std::fmt::Display) {
    let _ = std::io::stderr().lock().write_all(format!("{line}\n").as_bytes());
}

/// Whether this process writes files and reports (false on ranks other than 0 of a job that
/// runs on every rank).
pub(crate) fn writes() -> bool {
    !QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

pub(crate) fn write_file(
    path: &Path,
    what: &str,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    if !writes() {
        return Ok(());
    }
    create_parent(path)?;
    let context = || format!("cannot write {what} {}", path.display());
    let mut out = AtomicFile::create(path).with_context(context)?;
    let mut w = BufWriter::with_capacity(1 << 20, out.file_mut());
    write(&mut w).with_context(context)?;
    w.flush().with_context(context)?;
    drop(w);
    out.commit().with_context(context)
}

/// Checks, before a long run, that a file can be written at `path` later: its folder is
/// made if missing and a temporary file is created in it and removed again; `path` itself
/// is left as it is. Paths that are not regular files (`/dev/null`, a FIFO) are left to
/// the write itself (opening a FIFO would wait for a reader).
pub(crate) fn check_writable(path: &Path) -> anyhow::Result<()> {
    if std::fs::metadata(path).is_ok_and(|md| !md.is_file()) && !path.is_dir() {
        return Ok(());
    }
    let what = || format!("cannot write {}", path.display());
    create_parent(path).with_context(what)?;
    drop(AtomicFile::create(path).with_context(what)?);
    Ok(())
}

/// Creates the folder `path` will be written into, if it has one and it is missing.
pub(crate) fn create_parent(path: &Path) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the folder {}", dir.display()))?;
    }
    Ok(())
}

fn parent_or_dot(path: &Path) -> &Path {
    path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// `path` with symbolic links followed, so that the link's target is replaced and the
/// link kept. A dangling link resolves to the path it names.
fn resolve_links(path: &Path) -> std::io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    // A bounded walk: a loop of links ends with an error instead of a hang.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(md) if md.file_type().is_symlink() => {
                let to = std::fs::read_link(&p)?;
                p = if to.is_absolute() { to } else { parent_or_dot(&p).join(to) };
            }
            _ => return Ok(p),
        }
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}

/// `sync_all` fails on some special files (`/dev/null`, pipes); that is no write error.
fn ignore_unsupported(e: std::io::Error) -> std::io::Result<()> {
    match e.kind() {
        std::io::ErrorKind::InvalidInput | std::io::ErrorKind::Unsupported => Ok(()),
        _ if e.raw_os_error() == Some(22) => Ok(()), // EINVAL
        _ => Err(e),
    }
}

/// Creates a fresh temporary file beside `target` and registers it for removal on an
/// interrupt.
fn create_temp(target: &Path) -> std::io::Result<(Temp, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = parent_or_dot(target);
    let name = target.file_name().map_or("out".into(), |n| n.to_string_lossy());
    let name: String = name.chars().take(64).collect();
    let ext = target
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy().chars().take(16).collect::<String>()))
        .unwrap_or_default();
    let pid = std::process::id();
    let mut last = None;
    for _ in 0..16 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!(".{name}.{pid}.{n}.{:016x}.tmp{ext}", random_u64(n)));
        // Registered before it exists, so that no interrupt can leave it behind.
        let slot = interrupts::register(&path);
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => return Ok((Temp { path, slot }, file)),
            Err(e) => {
                if let Some(slot) = slot {
                    interrupts::unregister(slot);
                }
                if e.kind() != std::io::ErrorKind::AlreadyExists {
                    return Err(e);
                }
                last = Some(e);
            }
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free temporary name")))
}

/// A random number (std's per-process random hash keys, mixed with the time and `salt`).
fn random_u64(salt: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(salt);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    h.write_u128(now.map_or(0, |d| d.as_nanos()));
    h.finish()
}

fn hold_for_tests() {
    if let Some(ms) = std::env::var("SKEIN_HOLD_OUTPUT_MS").ok().and_then(|v| v.parse().ok()) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// Says what an interrupt from now on would leave incomplete: the handler prints `what` on
/// stderr before the process dies (until [`complete`]).
pub(crate) fn incomplete(what: &str) {
    interrupts::set_note(what);
}

/// The outputs are complete again: an interrupt says nothing more.
pub(crate) fn complete() {
    interrupts::clear_note();
}

#[cfg(unix)]
mod interrupts {
    //! The registry of pending temporary files and the signal handler that removes them
    //! (see the module docs of `output` for the invariants).

    use std::ffi::{c_char, c_int, CString};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;
    use std::ptr::null_mut;
    use std::sync::atomic::{AtomicPtr, Ordering};
    use std::sync::Once;

    /// Temporary files pending at once that an interrupt removes (more are still written
    /// correctly, but an interrupt may leave them behind).
    const SLOTS: usize = 64;

    static PENDING: [AtomicPtr<c_char>; SLOTS] = [const { AtomicPtr::new(null_mut()) }; SLOTS];

    /// The line an interrupt prints ([`super::incomplete`]): a NUL-terminated string from
    /// `CString::into_raw`, never freed (a handler may be reading it; a run sets few).
    static NOTE: AtomicPtr<c_char> = AtomicPtr::new(null_mut());

    pub(super) fn set_note(what: &str) {
        install();
        if let Ok(c) = CString::new(format!("{}\n", what.trim_end())) {
            NOTE.store(c.into_raw(), Ordering::Release);
        }
    }

    pub(super) fn clear_note() {
        NOTE.store(null_mut(), Ordering::Release);
    }

    /// Signals whose default action ends the process while a write may be pending: the
    /// interrupts, and SIGXFSZ (a write past the file size limit, `ulimit -f`).
    const SIGNALS: [c_int; 5] =
        [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGXFSZ];

    /// Records `path` for removal on an interrupt; returns its slot.
    pub(super) fn register(path: &Path) -> Option<usize> {
        install();
        let raw = CString::new(path.as_os_str().as_bytes()).ok()?.into_raw();
        for (i, slot) in PENDING.iter().enumerate() {
            if slot.compare_exchange(null_mut(), raw, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                return Some(i);
            }
        }
        // SAFETY: `raw` came from `CString::into_raw` above and was stored nowhere.
        drop(unsafe { CString::from_raw(raw) });
        None
    }

    /// Forgets slot `i` (its file was renamed or removed).
    pub(super) fn unregister(i: usize) {
        let raw = PENDING[i].swap(null_mut(), Ordering::AcqRel);
        if !raw.is_null() {
            // SAFETY: a non-null pointer in a slot came from `CString::into_raw` in
            // `register`, and the swap made us its only owner (the handler never frees).
            drop(unsafe { CString::from_raw(raw) });
        }
    }

    extern "C" fn on_signal(sig: c_int) {
        let note = NOTE.load(Ordering::Acquire);
        if !note.is_null() {
            // SAFETY: a non-null NOTE is a NUL-terminated string that is never freed;
            // strlen and write are async-signal-safe.
            unsafe { libc::write(2, note.cast(), libc::strlen(note)) };
        }
        for slot in &PENDING {
            let raw = slot.swap(null_mut(), Ordering::AcqRel);
            if !raw.is_null() {
                // SAFETY: `raw` is a valid NUL-terminated string owned by us since the swap
                // (never freed here: the process is about to die); unlink is
                // async-signal-safe.
                unsafe { libc::unlink(raw) };
            }
        }
        // SAFETY: a zeroed sigaction with SIG_DFL is a valid action; sigaction and raise
        // are async-signal-safe. Dying by the same signal keeps the exit status a caller
        // expects from an interrupt.
        unsafe {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &dfl, null_mut());
            libc::raise(sig);
        }
    }

    /// Installs [`on_signal`] for every signal of [`SIGNALS`] still at its default action.
    fn install() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            for sig in SIGNALS {
                // SAFETY: `old` and `new` are valid sigaction structs on our stack (zeroed
                // is a valid initial value: empty mask, no flags); the handler has the
                // signature `sa_sigaction` expects without SA_SIGINFO.
                unsafe {
                    let mut old: libc::sigaction = std::mem::zeroed();
                    if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                        || old.sa_sigaction != libc::SIG_DFL
                    {
                        continue; // ignored or handled by someone else: leave it
                    }
                    let mut new: libc::sigaction = std::mem::zeroed();
                    new.sa_sigaction = on_signal as extern "C" fn(c_int) as libc::sighandler_t;
                    new.sa_flags = libc::SA_RESTART;
                    libc::sigemptyset(&mut new.sa_mask);
                    for other in SIGNALS {
                        // One handler at a time: the others wait until it is done.
                        libc::sigaddset(&mut new.sa_mask, other);
                    }
                    libc::sigaction(sig, &new, std::ptr::null_mut());
                }
            }
        });
    }
}

#[cfg(not(unix))]
mod interrupts {
    //! No signal handling here: an interrupted run may leave a temporary file behind
    //! (never a partial final file).

    pub(super) fn register(_: &std::path::Path) -> Option<usize> {
        None
    }

    pub(super) fn unregister(_: usize) {}

    pub(super) fn set_note(_: &str) {}

    pub(super) fn clear_note() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("skein-output-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn writes_and_replaces() {
        let dir = scratch("replace");
        let path = dir.join("a.json");
        write_file(&path, "the test file", |w| w.write_all(b"one\n")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\n");
        write_file(&path, "the test file", |w| w.write_all(b"two\n")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
        assert_eq!(entries(&dir), ["a.json"]);
        // Folders are created.
        write_file(&dir.join("x/y/b.txt"), "the test file", |w| w.write_all(b"b")).unwrap();
        assert_eq!(std::fs::read(dir.join("x/y/b.txt")).unwrap(), b"b");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_error_midway_keeps_the_old_file_and_leaves_no_temporary() {
        let dir = scratch("midway");
        let path = dir.join("r.json");
        std::fs::write(&path, "old\n").unwrap();
        let e = write_file(&path, "the JSON report", |w| {
            w.write_all(&[b'x'; 3 << 20])?; // past the buffer: bytes reach the temporary file
            Err(std::io::Error::other("injected failure"))
        })
        .unwrap_err();
        let e = format!("{e:#}");
        assert!(e.contains("cannot write the JSON report") && e.contains("injected"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old\n");
        assert_eq!(entries(&dir), ["r.json"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn dropped_without_commit_changes_nothing() {
        let dir = scratch("drop");
        let path = dir.join("g.skg");
        std::fs::write(&path, "good graph").unwrap();
        let mut f = AtomicFile::create(&path).unwrap();
        f.file_mut().write_all(b"half a gra").unwrap();
        assert_eq!(entries(&dir).len(), 2, "the temporary file sits beside the target");
        assert!(f.write_path().starts_with(&dir) && f.write_path() != path);
        drop(f);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "good graph");
        assert_eq!(entries(&dir), ["g.skg"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_rename_removes_the_temporary() {
        let dir = scratch("rename");
        let path = dir.join("out");
        let mut f = AtomicFile::create(&path).unwrap();
        f.file_mut().write_all(b"data").unwrap();
        // Someone puts a non-empty folder where the file goes: the rename must fail.
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("keep"), "x").unwrap();
        let e = format!("{:#}", f.commit().unwrap_err());
        assert!(e.contains("cannot replace"), "{e}");
        assert_eq!(entries(&dir), ["out"]);
        assert_eq!(std::fs::read_to_string(path.join("keep")).unwrap(), "x");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refuses_folders_and_missing_folders() {
        let dir = scratch("refuse");
        let e = format!("{:#}", AtomicFile::create(&dir).unwrap_err());
        assert!(e.contains("is a folder") && e.contains(&dir.display().to_string()), "{e}");
        let e = format!("{:#}", AtomicFile::create(Path::new("")).unwrap_err());
        assert!(e.contains("the output path is empty"), "{e}");
        let e = format!("{:#}", AtomicFile::create(&dir.join("no/such/f")).unwrap_err());
        assert!(e.contains("cannot create") && e.contains("No such file"), "{e}");
        assert!(entries(&dir).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn special_files_are_written_in_place() {
        if !Path::new("/dev/null").exists() {
            return;
        }
        // Through a link, too (the link is kept, the device written).
        let dir = scratch("special");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/dev/null", dir.join("null")).unwrap();
            write_file(&dir.join("null"), "the test file", |w| w.write_all(b"x")).unwrap();
            assert!(std::fs::symlink_metadata(dir.join("null")).unwrap().is_symlink());
            assert_eq!(entries(&dir), ["null"]);
        }
        std::fs::remove_dir_all(&dir).unwrap();
        write_file(Path::new("/dev/null"), "the test file", |w| w.write_all(b"gone")).unwrap();
        // A link under /dev that leads to a regular file (as `/dev/stdout > file` does) is
        // written through, not replaced.
        #[cfg(unix)]
        if Path::new("/dev/shm").is_dir() {
            let name = format!("skein-output-{}", std::process::id());
            let (file, link) =
                (Path::new("/dev/shm").join(&name), Path::new("/dev/shm").join(name + ".link"));
            std::fs::write(&file, "old").unwrap();
            std::os::unix::fs::symlink(&file, &link).unwrap();
            let held = File::open(&file).unwrap();
            write_file(&link, "the test file", |w| w.write_all(b"new")).unwrap();
            let mut seen = String::new();
            std::io::Read::read_to_string(&mut &held, &mut seen).unwrap();
            assert_eq!(seen, "new", "the same file, written in place");
            let _ = std::fs::remove_file(&link);
            std::fs::remove_file(&file).unwrap();
        }
        assert!(!std::fs::metadata("/dev/null").unwrap().is_file());
        if Path::new("/dev/full").exists() {
            let e =
                write_file(Path::new("/dev/full"), "the dump file", |w| w.write_all(&[0; 4 << 20]))
                    .unwrap_err();
            assert!(format!("{e:#}").contains("cannot write the dump file /dev/full"), "{e:#}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn symbolic_links_are_followed_and_kept() {
        let dir = scratch("link");
        std::fs::create_dir(dir.join("real")).unwrap();
        std::fs::write(dir.join("real/r.json"), "old").unwrap();
        std::os::unix::fs::symlink("real/r.json", dir.join("link.json")).unwrap();
        write_file(&dir.join("link.json"), "the test file", |w| w.write_all(b"new")).unwrap();
        assert!(std::fs::symlink_metadata(dir.join("link.json")).unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(dir.join("real/r.json")).unwrap(), "new");
        assert_eq!(entries(&dir.join("real")), ["r.json"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn permissions_of_the_old_file_are_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("perm");
        let path = dir.join("p.txt");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_file(&path, "the test file", |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o640);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A file this user may not write is not replaced either (skipped as root, who may).
    #[cfg(unix)]
    #[test]
    fn read_only_files_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("readonly");
        let path = dir.join("keep.json");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
        let refused = write_file(&path, "the test file", |w| w.write_all(b"new"));
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            let e = format!("{:#}", refused.unwrap_err());
            assert!(e.contains("Permission denied"), "{e}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        }
        assert_eq!(entries(&dir), ["keep.json"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Many writers racing on one path, and a reader: every read sees one whole version.
    #[test]
    fn concurrent_writers_leave_a_complete_file() {
        let dir = scratch("race");
        let path = dir.join("same.json");
        let body = |t: usize, i: usize| {
            let v = serde_json::json!({ "writer": t, "round": i, "pad": "x".repeat(200_000) });
            serde_json::to_string_pretty(&v).unwrap()
        };
        std::fs::write(&path, body(99, 0)).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut reads = 0;
                while !stop.load(Ordering::Relaxed) {
                    let text = std::fs::read_to_string(&path).unwrap();
                    let v: serde_json::Value = serde_json::from_str(&text).expect("whole JSON");
                    assert_eq!(v["pad"].as_str().unwrap().len(), 200_000);
                    reads += 1;
                }
                reads
            });
            let writers: Vec<_> = (0..4)
                .map(|t| {
                    let (path, body) = (&path, &body);
                    s.spawn(move || {
                        for i in 0..10 {
                            write_file(path, "the report", |w| w.write_all(body(t, i).as_bytes()))
                                .unwrap();
                        }
                    })
                })
                .collect();
            writers.into_iter().for_each(|w| w.join().unwrap());
            stop.store(true, Ordering::Relaxed);
            assert!(reader.join().unwrap() > 0);
        });
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["round"], 9);
        assert_eq!(entries(&dir), ["same.json"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
