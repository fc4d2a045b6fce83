//! Test hook: a forged request envelope, sent to a worker of another rank through the run's
//! own transport (`docs/rack-mode.md` §3.4, §7: "a forged batch refused").
//!
//! [`forge_envelope`] is not part of the API (`#[doc(hidden)]`): `tests/rack.rs` and
//! `tests/loopback.rs` call it from a fiber to check that the receiving worker refuses the
//! envelope with an error naming the sending rank, that the run then stops on every rank
//! with that error, and that nothing runs. The envelope is written with the real encoder
//! (`wire::envelope::RequestWriter`) for the real pair sequence number and job, then broken
//! in one place ([`Forgery`]), and handed to `Transport::publish` as the runtime's own
//! envelopes are: under MPI it travels as a real MPI message (`transport::mpi`), in a loopback
//! split through the loopback inbox. Its record names no property that exists, or is
//! refused before any record is read, so it never reaches user code.
//!
//! It writes neither a loopback control record nor an address target (`Forgery` has no such
//! case): the loopback transport's argument that the records it accepts come from this
//! process's own clients (`runtime::remote::trustee`, `run_loopback_record`) covers these envelopes too.

use crate::runtime::context;
use crate::runtime::export::wire_target;
use crate::wire::code_id::code_id;
use crate::wire::envelope::{Head, RequestWriter};
use crate::wire::remote::RemoteVTable;
use std::time::{Duration, Instant};

/// How [`forge_envelope`] breaks its envelope.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forgery {
    /// Another job's token in the header.
    Token,
    /// Another run of the job in the header (`job_run`).
    JobRun,
    /// A record whose code id lies outside the executable's tables.
    CodeId,
    /// A uniform segment whose size does not match its table's argument size.
    RecordSize,
    /// A segment header claiming far more records than its bytes hold.
    Count,
    /// A well-formed record naming an export of the receiving worker that existed and has
    /// been released (its slot free, or reused by a later generation).
    StaleTarget,
}

/// Sends a forged request envelope from the calling worker to worker `to` of another rank
/// (module docs). Call from a fiber: [`Forgery::StaleTarget`] first makes, exports, uses and
/// releases a property on `to` and waits until its slot is free.
///
/// # Panics
/// Outside a fiber, when `to` is not a worker of another rank of a split run (MPI or
/// loopback), or when the stale export is not released within 10 s.
#[doc(hidden)]
#[track_caller]
pub fn forge_envelope(to: usize, how: Forgery) {
    let w = context::expect("forge_envelope");
    w.check_may_block("forge_envelope");
    let transport = match w.run_state.transport.as_deref() {
        Some(t) if to < w.n && !w.is_local(to) => t,
        _ => panic!("skein: forge_envelope({to}): not a worker of another rank of a split run"),
    };
    let target = match how {
        Forgery::StaleTarget => stale_export(to),
        _ => wire_target(0, 0),
    };
    // A table of this binary, as a real record of `apply(1u64, ..)` on a `u64` would name.
    let vt = RemoteVTable::of::<u64, u64, u64, _>(&|c: &mut u64, k: u64| *c + k);
    let head = Head {
        token: transport.token() ^ u64::from(how == Forgery::Token),
        job_run: w.run_state.job_run.wrapping_add(u32::from(how == Forgery::JobRun)),
        from: w.index as u32,
        to_rank: (to / w.local_n) as u32,
        to: to as u32,
        seq: u64::MAX,
    };
    // The next batch of the pair (client, `to`), so that only the forgery is wrong.
    let pair_seq = w.next_pair_seq(to);
    let mut wr = RequestWriter::new(&head);
    let uniform = (how == Forgery::RecordSize).then_some(vt);
    wr.begin_segment(to as u32, pair_seq, uniform);
    wr.push_plain(vt, target, 1u64);
    wr.end_segment();
    let mut bytes = wr.finish();
    // Segment 0's header starts right after the envelope's 64-byte header: records at +16,
    // body bytes at +20; a record's code id is the body's first word (+24).
    const SEG: usize = 64;
    match how {
        // The real code id moved 1 TiB on: aligned as a table is, far outside the binary.
        Forgery::CodeId => {
            let far = code_id(vt).wrapping_add(1 << 40);
            bytes[SEG + 24..SEG + 32].copy_from_slice(&far.to_le_bytes());
        }
        // One record's body, 8 more bytes than a record of this table takes.
        Forgery::RecordSize => {
            bytes[SEG + 20..SEG + 24].copy_from_slice(&32u32.to_le_bytes());
            bytes.extend_from_slice(&[0; 8]);
            let total = bytes.len() as u32;
            bytes[36..40].copy_from_slice(&total.to_le_bytes());
        }
        Forgery::Count => bytes[SEG + 16..SEG + 20].copy_from_slice(&1_000_000u32.to_le_bytes()),
        Forgery::Token | Forgery::JobRun | Forgery::StaleTarget => {}
    }
    transport.publish(w.index, to, bytes);
}

/// Makes a `u64` property on `to` (another rank), uses it, drops its one handle and waits
/// until the owner has freed its export slot; returns the export's wire target, now stale.
fn stale_export(to: usize) -> u64 {
    let t = crate::trust::trustee(to).entrust_new(5u64, |v| v);
    assert_eq!(t.apply(1u64, |c, k| *c + k), 6);
    let (slot, gen) = t.proxy().target();
    drop(t);
    let start = Instant::now();
    // The owner applies the `Release` of the dropped proxy; ask it until the slot is stale.
    while crate::runtime::spawn_on(to, (slot, gen), |(slot, gen)| {
        let w = context::expect("forge_envelope");
        u8::from(w.export_live(slot, gen))
    })
    .join()
        == 1
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "skein: forge_envelope: export ({slot}, {gen}) of worker {to} still live after 10 s"
        );
        crate::runtime::yield_now();
    }
    wire_target(slot, gen)
}
