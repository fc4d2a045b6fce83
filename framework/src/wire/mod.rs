//! How values become bytes: the codec for `apply_with` arguments (and, later, rack mode).
//!
//! In-process, a request is already in its wire shape: a *code id* (the monomorphized
//! trampoline in a record header), the captured environment (closure bytes, including the
//! property address) and an optional serialized argument (this module's codec).

pub mod codec;
