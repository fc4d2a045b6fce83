//! In-process request/response channels between workers: how a request is stored, batched,
//! carried and run. See `docs/ARCHITECTURE.md` for the whole path of a request.
//!
//! * [`record`]: one request as a type-erased record in a word buffer (the batch format).
//! * [`queue`]: the client's queue of records towards one trustee (staged, then in flight).
//! * [`batch`]: running records in order: a batch on the trustee, completions and local
//!   requests on the client.
//! * [`slot`]: the per-(client, trustee) request and response slots and their publish protocol.
//! * [`prefetch`]: the cache-line prefetch hint.
//!
//! This module knows nothing about fibers or trustees; the runtime drives it.

pub(crate) mod batch;
pub(crate) mod prefetch;
pub(crate) mod queue;
pub(crate) mod record;
pub(crate) mod result;
pub(crate) mod slot;
