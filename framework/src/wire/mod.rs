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
//! and their validation). They are not wired into the runtime yet (`docs/rack-mode.md` §8,
//! step 4), so outside tests their items are unused.

#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod code_id;
pub mod codec;
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod envelope;
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod remote;
