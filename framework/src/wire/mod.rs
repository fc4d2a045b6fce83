//! How values become bytes: the codec for `apply_with` arguments (and, later, rack mode).
//!
//! In-process requests do not use it: a request is a record of two closures stored by value
//! in the client's queue and copied into a slot as they are (see `docs/ARCHITECTURE.md`), which
//! holds code and data addresses meaningful only inside this process. `apply_with` is the one
//! call whose argument travels as bytes: it encodes the argument with [`codec`], the closure
//! carries the bytes, and the trustee decodes them before calling the user's closure.

pub mod codec;
