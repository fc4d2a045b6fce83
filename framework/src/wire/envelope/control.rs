//! The control records (`docs/rack-mode.md` §4.4): the loopback control record, the five typed
//! control records' tables (spawn, joined, launch, release, grant), their bodies and how a
//! validator reads them.

use super::*;

/// The reserved control id of a *loopback control record*: a runtime-internal request (a free
/// handed to the property's owner, a quiescence wake-up: records without a `RemoteVTable`)
/// crossing between fake ranks of one process. Its argument names the in-process record (the
/// loopback transport's: the address and length of a box holding it), which means something
/// only inside the process that wrote it: only a validator with [`Expect::loopback`] accepts
/// it.
/// Remote spawns, joins and launches already travel as typed control records
/// ([`CONTROL_SPAWN`], [`CONTROL_JOINED`], [`CONTROL_LAUNCH`]); the free hand-offs these
/// records still carry become `Release`/`Grant` records with the export table
/// (`docs/rack-mode.md` §4.4, §5).
pub(crate) const LOOPBACK_CONTROL: u64 = crate::wire::code_id::CONTROL_IDS;

/// The table that stands for a [`LOOPBACK_CONTROL`] record in a batch's list of tables: a
/// serialized argument, no result. Its `magic` is 0, so it is not a `RemoteVTable` any code id
/// can name, and its `run` refuses.
pub(crate) static LOOPBACK_TABLE: RemoteVTable = control_table(0);

/// The one definition of the tables that stand for control records ([`LOOPBACK_TABLE`] and
/// the five typed ones): `magic` 0, so no code id names them; a length-prefixed argument (not
/// a fixed size: a control record never goes into a uniform segment); `result_bytes` of
/// result; a `run` that refuses (the transport runs control records itself). Each table is
/// its own `static`: a record's control id is its table's address ([`control_id`]).
const fn control_table(result_bytes: u32) -> RemoteVTable {
    RemoteVTable {
        magic: 0,
        arg_bytes: crate::wire::remote::LEN_PREFIXED,
        result_bytes,
        kind: 0,
        run: refuse_loopback_run,
        target_type: std::any::type_name::<()>,
        run_uniform: None,
    }
}

/// `run` of [`LOOPBACK_TABLE`]: a loopback control record is run by the loopback transport
/// itself, never through a table.
///
/// # Safety
/// None (it touches nothing).
unsafe fn refuse_loopback_run(_: *mut u8, _: &[u8], out: &mut Vec<u8>) -> Result<(), RunError> {
    let _ = out;
    Err(RunError::Refused("a loopback control record has no table to run".into()))
}

/// True when `vt` is [`LOOPBACK_TABLE`].
pub(crate) fn is_loopback_table(vt: &RemoteVTable) -> bool {
    std::ptr::eq(vt, &LOOPBACK_TABLE)
}

/// Control id of a remote spawn (`docs/rack-mode.md` §4.4 `Spawn`). Wire record:
///
/// | size | field |
/// | --- | --- |
/// | 8 | `1` (this id) |
/// | 8 | join id: names the waiting `JoinHandle` on the sending worker |
/// | 8 | code id of a [`KIND_SPAWN`] table (`RemoteVTable::of_spawn`) |
/// | `arg_bytes` of that table | the `Plain` argument, rounded up to 8 |
///
/// Its response is an empty result (answered like any request).
pub(crate) const CONTROL_SPAWN: u64 = 1;

/// Control id of the end of a remote spawn (`docs/rack-mode.md` §4.4 `Joined`), sent by the
/// spawned fiber's worker to the worker that spawned it. Wire record:
///
/// | size | field |
/// | --- | --- |
/// | 8 | `2` (this id) |
/// | 8 | join id (the `Spawn`'s) |
/// | 4 | status: 0 the fiber returned, 1 it panicked |
/// | 4 | `len`: at most [`MAX_RESULT_BYTES`] for a result, [`MAX_PANIC_MESSAGE`] for a panic |
/// | `len` | the result's bytes, or the panic message (UTF-8, named with rank and worker) |
/// | to a multiple of 8 | zero |
///
/// Its response is an empty result. The receiver checks the join id and the result's size
/// against the `JoinHandle` it names.
pub(crate) const CONTROL_JOINED: u64 = 2;

/// Control id of a remote `launch` on a `Latch` property (`docs/rack-mode.md` §4.4
/// `Launch`): a spawn on the property's trustee whose fiber runs a [`KIND_LAUNCH`] table on
/// the latch. Wire record:
///
/// | size | field |
/// | --- | --- |
/// | 8 | `3` (this id) |
/// | 8 | join id (answered by a [`CONTROL_JOINED`] record) |
/// | 8 | code id of a [`KIND_LAUNCH`] table (`RemoteVTable::of_launch`) |
/// | 8 | target: the property, as in a request record |
/// | `arg_bytes` of that table | the `Plain` argument, rounded up to 8 |
pub(crate) const CONTROL_LAUNCH: u64 = 3;

/// Control id of a return of weight to an export slot (`docs/rack-mode.md` §5.2 item 4
/// `Release`), sent by a rank whose last handle of a proxy was dropped to the property's
/// trustee. Wire record:
///
/// | size | field |
/// | --- | --- |
/// | 8 | `4` (this id) |
/// | 8 | target: export slot (low 32 bits) and generation (high 32 bits), as in a request |
/// | 8 | `weight`: the proxy's weight, at least 1 |
/// | 4 | `n`: the sending rank's workers counted, at most [`MAX_RELEASE_CLIENTS`] |
/// | 4 | zero |
/// | 8·`n` | `issued[c]`: requests worker `c` of the sending rank had issued to the trustee |
///
/// Its response is an empty result. The trustee applies the return only once it has served
/// `issued[c]` requests from every client `c` (`crate::runtime::export::Owner::process`),
/// and checks the slot, generation, weight and client count against its export table.
pub(crate) const CONTROL_RELEASE: u64 = 4;

/// Control id of a request for more weight (`docs/rack-mode.md` §5.2 item 5 `Grant`), sent by
/// a proxy whose weight runs low to the property's trustee. Wire record:
///
/// | size | field |
/// | --- | --- |
/// | 8 | `5` (this id) |
/// | 8 | target: export slot (low 32 bits) and generation (high 32 bits), as in a request |
///
/// Its response is a result of 8 bytes: the weight granted (`W0`), which the trustee has
/// added to the slot's budget and the proxy adds to its weight.
pub(crate) const CONTROL_GRANT: u64 = 5;

/// The most clients a [`CONTROL_RELEASE`] record may list (a bound on the record's size; the
/// trustee's export table checks the sending rank's real worker count).
pub(crate) const MAX_RELEASE_CLIENTS: usize = 1 << 16;

/// Status of a [`CONTROL_JOINED`] record: the fiber returned.
pub(crate) const JOINED_OK: u32 = 0;
/// Status of a [`CONTROL_JOINED`] record: the fiber panicked.
pub(crate) const JOINED_PANIC: u32 = 1;

/// The table that stands for a [`CONTROL_SPAWN`] record in a batch's list of tables (no
/// result). Like [`LOOPBACK_TABLE`] its `magic` is 0 (no code id names it) and its `run`
/// refuses: the transport runs control records itself.
pub(crate) static SPAWN_TABLE: RemoteVTable = control_table(0);

/// The table that stands for a [`CONTROL_LAUNCH`] record (as [`SPAWN_TABLE`]).
pub(crate) static LAUNCH_TABLE: RemoteVTable = control_table(0);

/// The table that stands for a [`CONTROL_JOINED`] record (as [`SPAWN_TABLE`]).
pub(crate) static JOINED_TABLE: RemoteVTable = control_table(0);

/// The table that stands for a [`CONTROL_GRANT`] record (as [`SPAWN_TABLE`], with an 8-byte
/// result: the weight granted).
pub(crate) static GRANT_TABLE: RemoteVTable = control_table(8);

/// The table that stands for a [`CONTROL_RELEASE`] record (as [`SPAWN_TABLE`]).
pub(crate) static RELEASE_TABLE: RemoteVTable = control_table(0);

/// The control id `vt` stands for, if it is one of the control tables.
pub(crate) fn control_id(vt: &RemoteVTable) -> Option<u64> {
    if std::ptr::eq(vt, &SPAWN_TABLE) {
        Some(CONTROL_SPAWN)
    } else if std::ptr::eq(vt, &JOINED_TABLE) {
        Some(CONTROL_JOINED)
    } else if std::ptr::eq(vt, &LAUNCH_TABLE) {
        Some(CONTROL_LAUNCH)
    } else if std::ptr::eq(vt, &RELEASE_TABLE) {
        Some(CONTROL_RELEASE)
    } else if std::ptr::eq(vt, &GRANT_TABLE) {
        Some(CONTROL_GRANT)
    } else {
        None
    }
}

/// The parts of an accepted [`CONTROL_SPAWN`] record's argument: the spawn table (resolved
/// again: validation resolved it already) and the `Plain` argument's bytes.
pub(crate) fn spawn_parts(arg: &[u8]) -> Result<(&'static RemoteVTable, &[u8]), BadCode> {
    let code = if arg.len() >= 8 { le64(arg, 0) } else { 0 };
    Ok((resolve(code)?, &arg[8..]))
}

/// The parts of an accepted [`CONTROL_LAUNCH`] record's argument: the launch table
/// (resolved again), the property's target word and the `Plain` argument's bytes.
pub(crate) fn launch_parts(arg: &[u8]) -> Result<(&'static RemoteVTable, u64, &[u8]), BadCode> {
    let code = if arg.len() >= 16 { le64(arg, 0) } else { 0 };
    Ok((resolve(code)?, le64(arg, 8), &arg[16..]))
}

/// The parts of an accepted [`CONTROL_JOINED`] record's argument: `Ok(result bytes)` or
/// `Err(panic message)`.
pub(crate) fn joined_parts(arg: &[u8]) -> Result<&[u8], &str> {
    let (status, len) = (le32(arg, 0), le32(arg, 4) as usize);
    let bytes = &arg[8..8 + len];
    if status == JOINED_OK {
        Ok(bytes)
    } else {
        Err(std::str::from_utf8(bytes).unwrap_or("<bad panic message>"))
    }
}

/// The parts of an accepted [`CONTROL_RELEASE`] record's argument: the weight and the
/// `issued` counts, one per worker of the sending rank.
pub(crate) fn release_parts(arg: &[u8]) -> (u64, impl Iterator<Item = u64> + '_) {
    let n = le32(arg, 8) as usize;
    (le64(arg, 0), (0..n).map(move |c| le64(arg, 16 + 8 * c)))
}

/// The argument bytes of a [`CONTROL_RELEASE`] record (weight, count, zero, `issued`).
pub(crate) fn release_body(weight: u64, issued: &[u64]) -> Vec<u8> {
    assert!(weight > 0, "skein: a release of zero weight");
    assert!(issued.len() <= MAX_RELEASE_CLIENTS, "skein: a release lists too many clients");
    let mut out = Vec::with_capacity(16 + 8 * issued.len());
    out.extend_from_slice(&weight.to_le_bytes());
    out.extend_from_slice(&(issued.len() as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    for n in issued {
        out.extend_from_slice(&n.to_le_bytes());
    }
    out
}

/// The argument bytes of a [`CONTROL_JOINED`] record (status, length, bytes, zero padding).
/// A panic message longer than [`MAX_PANIC_MESSAGE`] is cut at a char boundary.
pub(crate) fn joined_body(result: Result<&[u8], &str>) -> Vec<u8> {
    let (status, bytes) = match result {
        Ok(b) => {
            assert!(b.len() <= MAX_RESULT_BYTES, "skein: spawn result too big");
            (JOINED_OK, b)
        }
        Err(msg) => {
            let mut cut = msg.len().min(MAX_PANIC_MESSAGE);
            while !msg.is_char_boundary(cut) {
                cut -= 1;
            }
            (JOINED_PANIC, &msg.as_bytes()[..cut])
        }
    };
    let mut out = Vec::with_capacity(8 + bytes.len().next_multiple_of(8));
    out.extend_from_slice(&status.to_le_bytes());
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
    out.resize(out.len() + pad_of(bytes.len()), 0);
    out
}

/// Reads a control record's target and argument (after its id): its fixed fields and sizes
/// (the layouts of [`CONTROL_SPAWN`], [`CONTROL_JOINED`], [`CONTROL_LAUNCH`] and
/// [`CONTROL_RELEASE`]).
pub(super) fn read_control<'b>(
    r: &mut Reader<'b>,
    id: u64,
    loopback: bool,
) -> Result<Record<'b>, Fault> {
    let target = r.u64().ok_or(Fault::Overrun)?;
    let start = r.at;
    let vt = match id {
        CONTROL_SPAWN => {
            let code = r.u64().ok_or(Fault::Overrun)?;
            let spawn = resolve(code).map_err(Fault::Code)?;
            if spawn.kind != KIND_SPAWN || spawn.arg_prefixed() {
                return Err(Fault::Control("spawn record naming a table that is not a spawn"));
            }
            r.take(spawn.arg_bytes as usize).ok_or(Fault::Overrun)?;
            &SPAWN_TABLE
        }
        CONTROL_LAUNCH => {
            let code = r.u64().ok_or(Fault::Overrun)?;
            let launch = resolve(code).map_err(Fault::Code)?;
            if launch.kind != KIND_LAUNCH || launch.arg_prefixed() {
                return Err(Fault::Control("launch record naming a table that is not a launch"));
            }
            check_target(r.u64().ok_or(Fault::Overrun)?, loopback)?;
            r.take(launch.arg_bytes as usize).ok_or(Fault::Overrun)?;
            &LAUNCH_TABLE
        }
        CONTROL_JOINED => {
            let status = r.u32().ok_or(Fault::Overrun)?;
            let len = r.u32().ok_or(Fault::Overrun)? as usize;
            let max = match status {
                JOINED_OK => MAX_RESULT_BYTES,
                JOINED_PANIC => MAX_PANIC_MESSAGE,
                _ => return Err(Fault::Control("joined record with an unknown status")),
            };
            if len > max {
                return Err(Fault::Length(len as u32));
            }
            let bytes = r.take(len).ok_or(Fault::Overrun)?;
            if status == JOINED_PANIC && std::str::from_utf8(bytes).is_err() {
                return Err(Fault::Control("joined record with a panic message that is not UTF-8"));
            }
            let pad = r.take(pad_of(len)).ok_or(Fault::Overrun)?;
            if pad.iter().any(|&b| b != 0) {
                return Err(Fault::Padding);
            }
            &JOINED_TABLE
        }
        CONTROL_GRANT => {
            if target & ADDR_TARGET != 0 {
                return Err(Fault::AddressTarget(target));
            }
            &GRANT_TABLE
        }
        CONTROL_RELEASE => {
            if target & ADDR_TARGET != 0 {
                return Err(Fault::AddressTarget(target));
            }
            if r.u64().ok_or(Fault::Overrun)? == 0 {
                return Err(Fault::Control("release record of zero weight"));
            }
            let n = r.u32().ok_or(Fault::Overrun)? as usize;
            if r.u32().ok_or(Fault::Overrun)? != 0 {
                return Err(Fault::Padding);
            }
            if n > MAX_RELEASE_CLIENTS {
                return Err(Fault::Control("release record listing too many clients"));
            }
            r.take(8 * n).ok_or(Fault::Overrun)?;
            &RELEASE_TABLE
        }
        _ => return Err(Fault::Code(BadCode::Control(id))),
    };
    Ok(Record { vt, target, arg: &r.b[start..r.at] })
}
