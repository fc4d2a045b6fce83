//! How values become bytes: the codec for `apply_with` arguments, and rack mode's wire format.
//!
//! In-process requests do not use it: a request is a record of two closures stored by value
//! in the client's queue and copied into a slot as they are (see `docs/ARCHITECTURE.md`), which
//! holds code and data addresses meaningful only inside this process. `apply_with` is the one
//! call whose argument travels as bytes: it encodes the argument with [`codec`], the closure
//! carries the bytes, and the trustee decodes them before calling the user's closure.
//!
//! Rack mode (`docs/rack-mode.md` §3) sends requests to trustees in other processes. The
//! crate-private modules here are its wire: `remote` (the `RemoteVTable` that runs a request
//! known only by its bytes), `code_id` (naming a table across processes, and checking a
//! name) and `envelope` (the byte layout of request and response envelopes, their encoders
//! and their validation). The runtime uses them through its transport seam
//! (`crate::runtime::remote`): the MPI transport of a run over `mpirun` ranks
//! (`crate::rack`) and the loopback transport of a split run (`Builder::loopback_ranks`)
//! carry the same envelopes. Some items are still used by tests only.
//!
//! How they fit together, end to end (the loopback test `envelope::tests::
//! a_request_batch_runs_in_one_process` does exactly this in one process):
//!
//! 1. the client's entry point names its table, `RemoteVTable::of(&f)` (or `of_with`,
//!    `of_element`, `of_spawn`), and keeps it beside its in-process record;
//! 2. the client's transport writes a `RequestWriter` envelope: per trustee a segment, per
//!    record `push_plain(vt, target, arg)`; it keeps each batch's tables for the response;
//! 3. the landing worker calls `validate(bytes, source rank, &Expect)`; a `BadBatch` ends the
//!    job (`docs/rack-mode.md` §3.4), an accepted `Envelope` hands out records whose table and
//!    argument size are checked;
//! 4. the trustee translates each record's target word through its export table, and runs it
//!    with `ResponseWriter::run`, which appends its result and catches its panic;
//! 5. the client calls `validate_response(bytes, source rank, &ExpectResponse)` with its
//!    batches in flight, and reads each result (`remote::read_plain`, or `codec::decode`)
//!    and each panic message.

pub(crate) mod code_id;
pub mod codec;
pub(crate) mod envelope;
pub mod raw;
pub(crate) mod remote;
