//! In-process request/response channels between workers (DESIGN §3.2).
//!
//! * [`record`]: type-erased `FnOnce` records stored inline in word buffers (the batch format).
//! * [`slot`]: the per-(client, trustee) request and response slots and their publish protocol.
//!
//! This module knows nothing about fibers or trustees; the runtime drives it.

pub(crate) mod record;
pub(crate) mod slot;
