//! Code ids: naming a [`RemoteVTable`] in a way every process of one binary understands.
//!
//! A code id is the offset of a table from [`ANCHOR`], a static of this crate:
//! `code_id(vt) = &vt − &ANCHOR` (wrapping). Under ASLR the whole executable moves as one
//! block, so the offset is the same in every process running the same binary (the
//! bootstrap's same-binary check, `rack/`, makes that true before any batch is sent); an id
//! from another process is turned back into a table by [`resolve`], which accepts it only if
//! it names one.
//!
//! # Invariants
//!
//! 1. (`docs/rack-mode.md` §3.2) A code id `c` is accepted iff `ANCHOR + c`
//!    * lies inside the main executable's `PT_GNU_RELRO` range (found once with
//!      `dl_iterate_phdr`, whose first object is the main program), with room for a whole
//!      [`RemoteVTable`] before its end;
//!    * is 8-aligned;
//!    * holds [`REMOTE_MAGIC`] in its first `u64`, a known kind, sizes that are multiples
//!      of 8 within the inline limits (or [`LEN_PREFIXED`]) and a `run` pointer inside an
//!      executable `PT_LOAD` segment of the main program.
//! 2. The only `u64`s in RELRO equal to `REMOTE_MAGIC` are `RemoteVTable::magic` fields
//!    (`remote` invariant 1; the value is otherwise used only as an immediate in code, which
//!    lives in the text segment). The test `every_magic_in_relro_is_a_table` scans the whole
//!    range of the test binary and checks every hit; ids `1..=CONTROL_IDS` are reserved for
//!    control messages and never name a table (RELRO never starts at `ANCHOR + 1`).
//!
//! Why an accepted id is a real table: reading any aligned `u64` inside RELRO is sound (the
//! range is mapped, initialised and read-only for the life of the process, so no write
//! races the read); by invariant 2 a hit of the magic is a table's first field, and the
//! table is a `&'static` constant made by `remote`'s constructors, whose `run` was made for
//! exactly its sizes. The extra field checks of invariant 1 add defence (a table broken by
//! some future toolchain change is refused, not run), not soundness.
//!
//! Where it does not hold: an executable without `PT_GNU_RELRO` (non-PIE, or linked with
//! `-z norelro`) puts the tables elsewhere; then no id resolves and [`resolve`] says why.
//! The tables must live in the main program (they do when skein is linked statically, as
//! cargo does; a skein inside a `cdylib` is not supported).

use super::remote::{
    RemoteVTable, KIND_ELEMENT, KIND_LAUNCH, KIND_PROPERTY, KIND_SPAWN, LEN_PREFIXED,
    OFFSET_ARG_BYTES, OFFSET_KIND, OFFSET_RESULT_BYTES, OFFSET_RUN, REMOTE_MAGIC,
};
use crate::channel::record::{INLINE_MAX, MAX_RESULT_BYTES};
use std::mem::size_of;
use std::ops::Range;
use std::sync::OnceLock;

/// The fixed point code ids are measured from. Its value is never read.
pub(crate) static ANCHOR: u8 = 0;

/// Code ids `1..=CONTROL_IDS` are reserved for control messages (`docs/rack-mode.md` §4.4);
/// 0 is never valid.
pub(crate) const CONTROL_IDS: u64 = 15;

/// A code id that does not name a [`RemoteVTable`] of this binary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadCode {
    /// 0 is never a code id.
    #[error("code id 0")]
    Zero,
    /// A control message id (`1..=CONTROL_IDS`).
    #[error("control message {0}: not yet supported")]
    Control(u64),
    /// Not a multiple of 8 from the anchor.
    #[error("code id {0:#x} is misaligned")]
    Misaligned(u64),
    /// Outside the executable's read-only-after-relocation range.
    #[error("code id {0:#x} is outside the executable's RELRO range")]
    OutOfRange(u64),
    /// Inside the range, but not a table.
    #[error("code id {0:#x} names no request table ({1})")]
    NotATable(u64, &'static str),
    /// The executable has no RELRO segment, so no code id can be checked.
    #[error(
        "this executable has no PT_GNU_RELRO segment (not a PIE?): code ids cannot be checked"
    )]
    NoRelro,
}

/// The main program's address ranges that the validator needs.
#[derive(Debug, Clone)]
pub(crate) struct Segments {
    /// `PT_GNU_RELRO`, or `None` if there is none.
    pub(crate) relro: Option<Range<usize>>,
    /// The executable `PT_LOAD` segments.
    pub(crate) text: Vec<Range<usize>>,
}

impl Segments {
    /// True if `addr` is inside an executable segment.
    pub(crate) fn in_text(&self, addr: usize) -> bool {
        self.text.iter().any(|r| r.contains(&addr))
    }
}

/// The main program's segments, found once.
pub(crate) fn segments() -> &'static Segments {
    static SEGMENTS: OnceLock<Segments> = OnceLock::new();
    SEGMENTS.get_or_init(find_segments)
}

fn find_segments() -> Segments {
    unsafe extern "C" fn first_object(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the `&mut Segments` passed to `dl_iterate_phdr` below, alive and
        // unaliased for the whole call; `info` is valid for this callback (dl_iterate_phdr's
        // contract), and `dlpi_phdr` points to `dlpi_phnum` program headers.
        unsafe {
            let out = &mut *(data as *mut Segments);
            let info = &*info;
            let base = info.dlpi_addr as usize;
            let phdrs = std::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize);
            for ph in phdrs {
                let r = base + ph.p_vaddr as usize..base + (ph.p_vaddr + ph.p_memsz) as usize;
                if ph.p_type == libc::PT_GNU_RELRO {
                    out.relro = Some(r);
                } else if ph.p_type == libc::PT_LOAD && ph.p_flags & libc::PF_X != 0 {
                    out.text.push(r);
                }
            }
        }
        1 // stop: the first object is the main program
    }
    let mut s = Segments { relro: None, text: Vec::new() };
    // SAFETY: `first_object` only writes through `data`, which is `&mut s` for this call; it
    // never unwinds (no panicking operation inside).
    unsafe {
        libc::dl_iterate_phdr(Some(first_object), &mut s as *mut Segments as *mut libc::c_void)
    };
    s
}

/// The code id of `vt`: its offset from [`ANCHOR`].
pub(crate) fn code_id(vt: &'static RemoteVTable) -> u64 {
    (vt as *const RemoteVTable as usize).wrapping_sub(&ANCHOR as *const u8 as usize) as u64
}

/// The table a code id names, if it names one (invariant 1).
pub(crate) fn resolve(code: u64) -> Result<&'static RemoteVTable, BadCode> {
    if code == 0 {
        return Err(BadCode::Zero);
    }
    if code <= CONTROL_IDS {
        return Err(BadCode::Control(code));
    }
    let segs = segments();
    let Some(relro) = &segs.relro else { return Err(BadCode::NoRelro) };
    let addr = (&ANCHOR as *const u8 as usize).wrapping_add(code as usize);
    if addr % 8 != 0 {
        return Err(BadCode::Misaligned(code));
    }
    if addr < relro.start
        || relro.end.saturating_sub(relro.start) < size_of::<RemoteVTable>()
        || addr > relro.end - size_of::<RemoteVTable>()
    {
        return Err(BadCode::OutOfRange(code));
    }
    // SAFETY: `addr..addr + size_of::<RemoteVTable>()` is inside RELRO (checked above):
    // mapped, initialised and never written after start-up; `addr` is 8-aligned, so each
    // aligned read of a u64 or u32 at the fields' offsets is in bounds and aligned.
    let (magic, arg, result, kind, run) = unsafe {
        let p = addr as *const u8;
        (
            *(p as *const u64),
            *(p.add(OFFSET_ARG_BYTES) as *const u32),
            *(p.add(OFFSET_RESULT_BYTES) as *const u32),
            *(p.add(OFFSET_KIND) as *const u32),
            *(p.add(OFFSET_RUN) as *const usize),
        )
    };
    if magic != REMOTE_MAGIC {
        return Err(BadCode::NotATable(code, "no magic"));
    }
    if !sane_sizes(arg, result, kind) {
        return Err(BadCode::NotATable(code, "sizes or kind out of range"));
    }
    if !segs.in_text(run) {
        return Err(BadCode::NotATable(code, "run is not code of this program"));
    }
    // SAFETY: by invariant 2 the magic at `addr` is the first field of a `RemoteVTable`
    // constant, which is `'static` and immutable.
    Ok(unsafe { &*(addr as *const RemoteVTable) })
}

/// The sizes and kind a table made by `remote` can have.
pub(crate) fn sane_sizes(arg: u32, result: u32, kind: u32) -> bool {
    let size_ok = |n: u32, max: usize| n == LEN_PREFIXED || (n % 8 == 0 && n as usize <= max);
    matches!(kind, KIND_PROPERTY | KIND_ELEMENT | KIND_SPAWN | KIND_LAUNCH)
        && size_ok(arg, INLINE_MAX)
        && size_ok(result, MAX_RESULT_BYTES)
        && (kind == KIND_PROPERTY || (arg != LEN_PREFIXED && result != LEN_PREFIXED))
        && (kind != KIND_ELEMENT || arg >= 8)
}

#[cfg(test)]
mod tests;
