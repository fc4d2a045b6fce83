//! Writing envelopes: [`RequestWriter`] (a client's batch) and [`ResponseWriter`] (a
//! trustee's answers, results appended as each record runs).

use super::*;

/// Starts an envelope: writes the header with placeholders for the counts.
#[cfg(any(test, feature = "testing"))]
pub(super) fn start(kind: u8, head: &Head) -> Vec<u8> {
    start_in(Vec::with_capacity(4096), kind, head)
}

/// Starts an envelope in the buffer `buf` (its contents are dropped, its capacity kept):
/// writes the header with placeholders for the counts.
pub(super) fn start_in(mut buf: Vec<u8>, kind: u8, head: &Head) -> Vec<u8> {
    buf.clear();
    buf.extend_from_slice(&head.token.to_le_bytes());
    buf.extend_from_slice(&head.job_run.to_le_bytes());
    buf.extend_from_slice(&[kind, 0, 0, 0]);
    buf.extend_from_slice(&head.from.to_le_bytes());
    buf.extend_from_slice(&head.to_rank.to_le_bytes());
    buf.extend_from_slice(&head.seq.to_le_bytes());
    buf.extend_from_slice(&[0; 8]); // segments, total: at `finish`
    buf.extend_from_slice(&head.to.to_le_bytes());
    buf.extend_from_slice(&[0; 20]);
    debug_assert_eq!(buf.len(), HEADER_BYTES);
    buf
}

/// The open segment of a writer.
#[derive(Debug)]
pub(super) struct Open {
    at: usize,
    records: u32,
    uniform: Option<&'static RemoteVTable>,
}

pub(super) fn begin(buf: &mut Vec<u8>, trustee: u32, flags: u32, pair_seq: u64) -> usize {
    let at = buf.len();
    buf.extend_from_slice(&trustee.to_le_bytes());
    buf.extend_from_slice(&flags.to_le_bytes());
    buf.extend_from_slice(&pair_seq.to_le_bytes());
    buf.extend_from_slice(&[0; 8]); // records, bytes: at `end`
    at
}

pub(super) fn end(buf: &mut [u8], open: &Open) {
    let bytes = (buf.len() - open.at - SEGMENT_HEADER_BYTES) as u32;
    buf[open.at + 16..open.at + 20].copy_from_slice(&open.records.to_le_bytes());
    buf[open.at + 20..open.at + 24].copy_from_slice(&bytes.to_le_bytes());
}

pub(super) fn finish(mut buf: Vec<u8>, segments: u32) -> Vec<u8> {
    let total = u32::try_from(buf.len()).expect("skein: envelope over 4 GiB");
    buf[32..36].copy_from_slice(&segments.to_le_bytes());
    buf[36..40].copy_from_slice(&total.to_le_bytes());
    buf
}

/// Writes a request envelope: [`begin_segment`](Self::begin_segment), records,
/// [`end_segment`](Self::end_segment), ..., [`finish`](Self::finish). Misuse (a record
/// outside a segment, an argument of the wrong size) is a bug of the caller and panics.
#[derive(Debug)]
pub(crate) struct RequestWriter {
    buf: Vec<u8>,
    segments: u32,
    open: Option<Open>,
}

impl RequestWriter {
    /// An empty request envelope with this header.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn new(head: &Head) -> Self {
        RequestWriter { buf: start(KIND_REQUESTS, head), segments: 0, open: None }
    }

    /// An empty request envelope with this header, written into `buf` (a transport's buffer;
    /// its contents are dropped, its capacity kept).
    pub(crate) fn new_in(buf: Vec<u8>, head: &Head) -> Self {
        RequestWriter { buf: start_in(buf, KIND_REQUESTS, head), segments: 0, open: None }
    }

    /// Opens the segment of batch `pair_seq` to `trustee` (trustees in increasing order);
    /// with `uniform`, every record of the segment must use that table.
    pub(crate) fn begin_segment(
        &mut self,
        trustee: u32,
        pair_seq: u64,
        uniform: Option<&'static RemoteVTable>,
    ) {
        assert!(self.open.is_none(), "skein: segment already open");
        let flags = if uniform.is_some() { FLAG_UNIFORM } else { 0 };
        let at = begin(&mut self.buf, trustee, flags, pair_seq);
        if let Some(vt) = uniform {
            assert!(!vt.arg_prefixed(), "skein: a uniform segment needs fixed-size arguments");
            self.buf.extend_from_slice(&code_id(vt).to_le_bytes());
        }
        self.open = Some(Open { at, records: 0, uniform });
    }

    /// Writes a record's code id (unless uniform) and target word.
    fn push_head(&mut self, vt: &'static RemoteVTable, target: u64) {
        let open = self.open.as_mut().expect("skein: no segment open");
        match open.uniform {
            Some(u) => assert!(std::ptr::eq(u, vt), "skein: another table in a uniform segment"),
            None => self.buf.extend_from_slice(&code_id(vt).to_le_bytes()),
        }
        self.buf.extend_from_slice(&target.to_le_bytes());
        open.records += 1;
    }

    /// Appends a record: its table, its target word, its argument (`arg_bytes` bytes, or the
    /// serialized argument without a prefix).
    /// A control table ([`control_id`]) writes its control id, the target word and `arg` as
    /// it is (its fields, already laid out and padded by the caller).
    pub(crate) fn push(&mut self, vt: &'static RemoteVTable, target: u64, arg: &[u8]) {
        if let Some(id) = control_id(vt) {
            let open = self.open.as_mut().expect("skein: no segment open");
            assert!(open.uniform.is_none(), "skein: a control record in a uniform segment");
            assert!(arg.len() % 8 == 0, "skein: control record fields not padded");
            self.buf.extend_from_slice(&id.to_le_bytes());
            self.buf.extend_from_slice(&target.to_le_bytes());
            self.buf.extend_from_slice(arg);
            open.records += 1;
        } else if vt.arg_prefixed() {
            assert!(arg.len() <= MAX_SERIALIZED_BYTES, "skein: serialized argument too long");
            self.push_head(vt, target);
            crate::wire::remote::push_prefixed(&mut self.buf, arg);
        } else {
            assert_eq!(arg.len(), vt.arg_bytes as usize, "skein: argument of the wrong size");
            self.push_head(vt, target);
            self.buf.extend_from_slice(arg);
        }
    }

    /// Appends a record of table `vt`, whose argument has a fixed size, written in place:
    /// `write` appends exactly `arg_bytes` bytes to the envelope and returns the target word
    /// (a `RemoteHook::take_arg`, given the envelope instead of a scratch buffer: the
    /// argument is copied once, with its size known to the compiler).
    pub(crate) fn push_with(
        &mut self,
        vt: &'static RemoteVTable,
        write: impl FnOnce(&mut Vec<u8>) -> u64,
    ) {
        assert!(
            control_id(vt).is_none() && !vt.arg_prefixed(),
            "skein: push_with needs a table with fixed-size arguments"
        );
        self.push_head(vt, 0);
        let at = self.buf.len() - 8;
        let target = write(&mut self.buf);
        assert_eq!(
            self.buf.len() - at - 8,
            vt.arg_bytes as usize,
            "skein: argument of the wrong size"
        );
        self.buf[at..at + 8].copy_from_slice(&target.to_le_bytes());
    }

    /// Appends `n` records of table `vt` to the open uniform segment of that table, each
    /// written in place as by [`push_with`](Self::push_with): `write(i, buf)` appends record
    /// `i`'s argument (exactly `arg_bytes` bytes) and returns its target word.
    pub(crate) fn push_uniform(
        &mut self,
        vt: &'static RemoteVTable,
        n: usize,
        mut write: impl FnMut(usize, &mut Vec<u8>) -> u64,
    ) {
        let open = self.open.as_mut().expect("skein: no segment open");
        assert!(
            open.uniform.is_some_and(|u| std::ptr::eq(u, vt)),
            "skein: push_uniform outside a uniform segment of its table"
        );
        let size = vt.arg_bytes as usize;
        self.buf.reserve(n * (8 + size));
        for i in 0..n {
            let at = self.buf.len();
            self.buf.extend_from_slice(&[0; 8]);
            let target = write(i, &mut self.buf);
            assert_eq!(self.buf.len() - at - 8, size, "skein: argument of the wrong size");
            self.buf[at..at + 8].copy_from_slice(&target.to_le_bytes());
        }
        open.records += n as u32;
    }

    /// Appends `n` records of table `vt` to the open uniform segment of that table at once:
    /// `write(buf)` appends exactly `n` wire records (per record the target word, then
    /// `arg_bytes` bytes of argument), as [`push_uniform`](Self::push_uniform) would one by
    /// one (a `RemoteHook::take_uniform`).
    pub(crate) fn push_uniform_block(
        &mut self,
        vt: &'static RemoteVTable,
        n: usize,
        write: impl FnOnce(&mut Vec<u8>),
    ) {
        let open = self.open.as_mut().expect("skein: no segment open");
        assert!(
            open.uniform.is_some_and(|u| std::ptr::eq(u, vt)),
            "skein: push_uniform_block outside a uniform segment of its table"
        );
        let at = self.buf.len();
        write(&mut self.buf);
        assert_eq!(
            self.buf.len() - at,
            n * (8 + vt.arg_bytes as usize),
            "skein: uniform records of the wrong size"
        );
        open.records += n as u32;
    }

    /// Appends a [`LOOPBACK_CONTROL`] record: `target` and `record`, the bytes that name the
    /// in-process record (length-prefixed). Only the loopback transport writes these.
    pub(crate) fn push_loopback(&mut self, target: u64, record: &[u8]) {
        let open = self.open.as_mut().expect("skein: no segment open");
        assert!(open.uniform.is_none(), "skein: a loopback record in a uniform segment");
        assert!(record.len() <= MAX_SERIALIZED_BYTES, "skein: loopback record too long");
        self.buf.extend_from_slice(&LOOPBACK_CONTROL.to_le_bytes());
        self.buf.extend_from_slice(&target.to_le_bytes());
        open.records += 1;
        crate::wire::remote::push_prefixed(&mut self.buf, record);
    }

    /// Appends a record whose argument is a `Plain` value (its table's `arg_bytes` must be
    /// its size rounded up to 8).
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn push_plain<A: crate::Plain>(
        &mut self,
        vt: &'static RemoteVTable,
        target: u64,
        arg: A,
    ) {
        assert_eq!(
            vt.arg_bytes as usize,
            std::mem::size_of::<A>().next_multiple_of(8),
            "skein: argument of the wrong size"
        );
        self.push_head(vt, target);
        crate::wire::remote::push_plain(&mut self.buf, arg);
    }

    /// Appends a record on element `index` of a `TrustArray` part (a table of
    /// `RemoteVTable::of_element`): the index, then the `Plain` argument.
    #[cfg(test)]
    pub(crate) fn push_element<A: crate::Plain>(
        &mut self,
        vt: &'static RemoteVTable,
        target: u64,
        index: u64,
        arg: A,
    ) {
        assert_eq!(vt.kind, crate::wire::remote::KIND_ELEMENT, "skein: not an element table");
        assert_eq!(
            vt.arg_bytes as usize,
            8 + std::mem::size_of::<A>().next_multiple_of(8),
            "skein: argument of the wrong size"
        );
        self.push_head(vt, target);
        crate::wire::remote::push_plain(&mut self.buf, index);
        crate::wire::remote::push_plain(&mut self.buf, arg);
    }

    /// Closes the open segment.
    pub(crate) fn end_segment(&mut self) {
        let open = self.open.take().expect("skein: no segment open");
        end(&mut self.buf, &open);
        self.segments += 1;
    }

    /// The envelope's bytes.
    pub(crate) fn finish(self) -> Vec<u8> {
        assert!(self.open.is_none(), "skein: segment still open");
        finish(self.buf, self.segments)
    }
}

/// Writes a response envelope: per answered batch, [`begin_segment`](Self::begin_segment),
/// one result per record in order ([`run`](Self::run) or [`push_result`](Self::push_result)),
/// [`end_segment`](Self::end_segment); then [`finish`](Self::finish).
#[derive(Debug)]
pub(crate) struct ResponseWriter {
    buf: Vec<u8>,
    segments: u32,
    open: Option<Open>,
    panics: Vec<(u32, String)>,
}

impl ResponseWriter {
    /// An empty response envelope with this header.
    #[cfg(test)]
    pub(crate) fn new(head: &Head) -> Self {
        Self::new_in(Vec::with_capacity(4096), head)
    }

    /// An empty response envelope with this header, written into `buf` (a transport's
    /// buffer; its contents are dropped, its capacity kept).
    pub(crate) fn new_in(buf: Vec<u8>, head: &Head) -> Self {
        ResponseWriter {
            buf: start_in(buf, KIND_RESPONSES, head),
            segments: 0,
            open: None,
            panics: Vec::new(),
        }
    }

    /// Opens the answer to batch `pair_seq` of `trustee`.
    pub(crate) fn begin_segment(&mut self, trustee: u32, pair_seq: u64) {
        assert!(self.open.is_none(), "skein: segment already open");
        let at = begin(&mut self.buf, trustee, 0, pair_seq);
        self.open = Some(Open { at, records: 0, uniform: None });
    }

    /// Runs `rec` on `target` and appends its result; a panic is added to the segment's
    /// panic list. A record that cannot run (`RunError::Refused`) still takes its result
    /// space, and its reason is returned: the batch is bad (`docs/rack-mode.md` §3.4 item 4).
    ///
    /// # Safety
    /// As [`RemoteVTable::run`]: `target` is what `rec.target` names on this rank, valid for
    /// `rec.vt`'s kind and used by nothing else during the call.
    pub(crate) unsafe fn run(&mut self, rec: &Record<'_>, target: *mut u8) -> Result<(), String> {
        let open = self.open.as_mut().expect("skein: no segment open");
        let index = open.records;
        open.records += 1;
        // SAFETY: caller promise on `target`; `rec.arg` comes from an accepted envelope, so
        // it has the table's size (module docs, rule 3).
        match unsafe { rec.vt.run(target, rec.arg, &mut self.buf) } {
            Ok(()) => Ok(()),
            Err(RunError::Panicked(msg)) => {
                self.panics.push((index, msg));
                Ok(())
            }
            Err(RunError::Refused(why)) => Err(why),
        }
    }

    /// Runs the records of the uniform segment `body` of table `vt` (what
    /// [`Segment::uniform_body`] hands out) in one loop and appends their results, as
    /// [`run`](Self::run) would record by record ([`RemoteVTable::run_uniform`]): each
    /// record's target word goes through `resolve` right before it runs, and a refused one
    /// stops the segment, its reason returned with the record's index in the segment.
    /// `None` when the table has no such loop (nothing ran: the caller runs the records one by
    /// one).
    ///
    /// # Safety
    /// As [`run`](Self::run) for each record, with "`target`" what `resolve` returns for its
    /// target word.
    pub(crate) unsafe fn run_uniform(
        &mut self,
        vt: &RemoteVTable,
        body: &[u8],
        resolve: &mut crate::wire::remote::Resolve<'_>,
    ) -> Option<Result<(), (u32, String)>> {
        let open = self.open.as_mut().expect("skein: no segment open");
        let first = open.records;
        let stride = 8 + vt.arg_bytes as usize;
        let panicked = self.panics.len();
        // SAFETY: caller promise; `body` is a uniform segment of `vt` from an accepted
        // envelope (module docs, rule 3).
        let r = unsafe { vt.run_uniform(body, resolve, &mut self.buf, &mut self.panics) }?;
        // Indexes in the segment: after the records written before.
        for p in &mut self.panics[panicked..] {
            p.0 += first;
        }
        open.records += (body.len() / stride.max(1)) as u32;
        Some(r.map_err(|(k, why)| (k + first, why)))
    }

    /// Appends the result of a record of table `vt`: `result_bytes` bytes, or a serialized
    /// result without its prefix.
    pub(crate) fn push_result(&mut self, vt: &RemoteVTable, result: &[u8]) {
        let open = self.open.as_mut().expect("skein: no segment open");
        if vt.result_prefixed() {
            assert!(result.len() <= MAX_SERIALIZED_BYTES, "skein: serialized result too long");
            crate::wire::remote::push_prefixed(&mut self.buf, result);
        } else {
            assert_eq!(result.len(), vt.result_bytes as usize, "skein: result of the wrong size");
            self.buf.extend_from_slice(result);
        }
        open.records += 1;
    }

    /// Records that record `index` of the open segment panicked with `message` (indexes in
    /// increasing order; `run` does this itself).
    pub(crate) fn push_panic(&mut self, index: u32, message: &str) {
        self.panics.push((index, message.to_string()));
    }

    /// Closes the open segment: writes its panic list.
    pub(crate) fn end_segment(&mut self) {
        let open = self.open.take().expect("skein: no segment open");
        self.buf.extend_from_slice(&(self.panics.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(&[0; 4]);
        for (index, msg) in self.panics.drain(..) {
            assert!(index < open.records, "skein: panic of a record not written");
            let mut cut = msg.len().min(MAX_PANIC_MESSAGE);
            while !msg.is_char_boundary(cut) {
                cut -= 1;
            }
            self.buf.extend_from_slice(&index.to_le_bytes());
            self.buf.extend_from_slice(&(cut as u32).to_le_bytes());
            self.buf.extend_from_slice(&msg.as_bytes()[..cut]);
            self.buf.resize(self.buf.len() + pad_of(cut), 0);
        }
        end(&mut self.buf, &open);
        self.segments += 1;
    }

    /// The envelope's bytes.
    pub(crate) fn finish(self) -> Vec<u8> {
        assert!(self.open.is_none(), "skein: segment still open");
        finish(self.buf, self.segments)
    }
}
