//! The trustee half of the remote protocol (module docs of [`super`]): a worker validates a
//! request envelope from another rank before anything runs, resolves each record's target,
//! runs the records (control records included) and answers with one response envelope
//! ([`Worker::serve_requests`]).

use super::*;

impl Worker {
    /// Runs a control record from worker `client` (module docs, "Control records").
    fn run_control(&self, id: u64, client: usize, rec: &Record<'_>) -> Result<Option<u64>, String> {
        match id {
            CONTROL_SPAWN => {
                let (vt, arg) = spawn_parts(rec.arg).map_err(|e| e.to_string())?;
                let (arg, join) = (arg.to_vec(), rec.target);
                // SAFETY: `validate` checked the table's kind (`KIND_SPAWN`: no target) and
                // sized `arg` to it.
                self.spawn_local(move || unsafe {
                    run_remote_spawn(vt, std::ptr::null_mut(), arg, client, join)
                });
                Ok(None)
            }
            CONTROL_LAUNCH => {
                let (vt, target, arg) = launch_parts(rec.arg).map_err(|e| e.to_string())?;
                // An address target only in a loopback run, as for a request's target (the
                // validator refuses one under MPI before this: a second line of defence).
                let latch = self.resolve_target(target, vt, self.run_state.is_loopback())?;
                let (arg, join) = (arg.to_vec(), rec.target);
                // SAFETY: `validate` checked the table's kind (`KIND_LAUNCH`) and sized `arg`
                // to it. The target word names the `Latch<T>` inside the client's live
                // property (`resolve_target`: an export of this trustee, or a loopback
                // address), of the type the table was made for (`Trust::launch` wrote both
                // from one handle), owned by this worker (the segment's trustee, checked by
                // `serve_requests`); the client's `launch` holds its handle (so its proxy's
                // weight, or the property) until the `Joined` record has come back, which
                // this fiber sends after the latch is unlocked.
                self.spawn_local(move || unsafe { run_remote_spawn(vt, latch, arg, client, join) });
                Ok(None)
            }
            CONTROL_JOINED => {
                let f = self.side().joins.borrow_mut().remove(&rec.target).ok_or_else(|| {
                    format!("joined record for join id {}, which is not waiting", rec.target)
                })?;
                f(joined_parts(rec.arg)).map(|()| None)
            }
            CONTROL_RELEASE => {
                let o = self.owner.as_ref().ok_or("release record outside a split run")?;
                let (slot, gen) = split_target(rec.target);
                let (weight, issued) = release_parts(rec.arg);
                let rel =
                    Release { owner: self.index, slot, gen, weight, issued: issued.collect() };
                // The `issued` counts are those of the sending rank's workers, in order.
                let client_base = client / self.local_n * self.local_n;
                o.borrow_mut()
                    .schedule_release(rel, client_base)
                    .map(|()| None)
                    .map_err(|e| e.to_string())
            }
            CONTROL_GRANT => {
                let o = self.owner.as_ref().ok_or("grant record outside a split run")?;
                let (slot, gen) = split_target(rec.target);
                o.borrow_mut().grant(slot, gen).map(Some).map_err(|e| e.to_string())
            }
            _ => Err(format!("control record {id} is not handled here")),
        }
    }

    /// The trustee role for a request envelope from `from_rank`, and the landing worker's
    /// (module invariant 4): the segments for this worker are served and answered in one
    /// response envelope; every other one is forwarded to its trustee, which checks its pair
    /// sequence number.
    pub(super) fn serve_requests(&self, from_rank: usize, bytes: &[u8]) -> Result<(), BadBatch> {
        let me = self.index as u32;
        let next_seq = |c: u32, t: u32| {
            (t == me).then(|| self.trustees.get(c as usize).map_or(0, |ts| ts.served_seq.get() + 1))
        };
        let expect = Expect {
            job: self.job(),
            max_response_bytes: usize::MAX,
            next_seq: &next_seq,
            seq_window: 1,
            loopback: self.run_state.is_loopback(),
        };
        let env = validate(bytes, from_rank, &expect)?;
        let client = env.head.from as usize;
        let bad = |reason| BadBatch { rank: from_rank, reason };
        // Forwarded first, so that the other trustees start on theirs while this one serves.
        let mut own = 0;
        for seg in env.segments() {
            if seg.trustee == me {
                own += 1;
                continue;
            }
            let to = seg.trustee as usize;
            // Into a buffer its trustee gave back, or a new one of the envelope's size.
            let queue = &self.run_state.forwarded[to];
            let fwd =
                env.forward(&seg, queue.buffer(crate::wire::envelope::Envelope::forward_len(&seg)));
            queue.push(from_rank, fwd);
            self.run_state.sleepers.wake(to);
            bump(&self.ctr().stats.segments_forwarded, 1);
        }
        if own == 0 {
            return Ok(());
        }
        // The loopback transport always has a buffer; one without credit for a response
        // would hold the request envelope until it has (not needed here).
        let buf = self.transport().claim(self.index, client).unwrap_or_default();
        let mut rw = ResponseWriter::new_in(
            buf,
            &Head {
                token: expect.job.token,
                job_run: self.run_state.job_run,
                from: self.index as u32,
                to_rank: from_rank as u32,
                to: client as u32,
                seq: env.head.seq,
            },
        );
        for (s, seg) in env.segments().enumerate() {
            let s = s as u32;
            if seg.trustee != me {
                continue; // forwarded above
            }
            rw.begin_segment(seg.trustee, seg.pair_seq);
            let mut k = 0u32;
            // A uniform segment of a table with its own loop runs in one call; its targets are
            // resolved one by one as below.
            let ran = seg.uniform_body().and_then(|(vt, body)| {
                let loopback = expect.loopback;
                // The owner stays borrowed for the whole segment: no export of this trustee
                // can be recycled meanwhile (only `&mut Owner` recycles; a closure that tried
                // would panic on the borrow, never free the slot under a reused target), so
                // a target word equal to the previous record's, which `run_uniform` does not
                // resolve again, names the same live value of the same, checked, type
                // (module docs, "Targets").
                let owner = self.owner.as_ref().map(|o| o.borrow());
                let mut resolve = |word| self.resolve_in(owner.as_deref(), word, vt, loopback);
                // SAFETY: as for `rw.run` below, record by record: each target is what
                // `resolve_in` found for the record's word, or for the same word earlier in
                // this segment with the owner borrowed since (above) (the client wrote the
                // code id and the target from one handle; a target of another type is refused
                // before its record runs), alive until the request has been served, and this
                // runs as delegated code on its trustee (the segment is ours, checked above).
                self.delegated(|| unsafe { rw.run_uniform(vt, body, &mut resolve) })
            });
            let uniform_ran = match ran {
                Some(r) => {
                    r.map_err(|(record, why)| bad(Reason::Target { segment: s, record, why }))?;
                    k = seg.records;
                    true
                }
                None => false,
            };
            if !uniform_ran {
                for rec in seg.records() {
                    let refused = |why| bad(Reason::Target { segment: s, record: k, why });
                    if let Some(id) = control_id(rec.vt) {
                        let r = self.delegated(|| self.run_control(id, client, &rec));
                        match r.map_err(refused)? {
                            Some(granted) => rw.push_result(rec.vt, &granted.to_le_bytes()),
                            None => rw.push_result(rec.vt, &[]),
                        }
                    } else if is_loopback_table(rec.vt) {
                        let panic = self.run_loopback_record(rec.arg).map_err(refused)?;
                        rw.push_result(&LOOPBACK_TABLE, &[]);
                        if let Some(p) = panic {
                            rw.push_panic(k, &panic_message(p));
                        }
                    } else {
                        let target = self
                            .resolve_target(rec.target, rec.vt, expect.loopback)
                            .map_err(refused)?;
                        // SAFETY: `target` is the value the record works on, of the type its table
                        // was made for (the client wrote the code id and the target from one
                        // handle; `resolve_target`), alive until this request has been served (an
                        // export's weight, or a loopback handle, `super::free`), and this runs as
                        // delegated code on its trustee (checked above: the segment is ours), so
                        // nothing else accesses it.
                        let r = self.delegated(|| unsafe { rw.run(&rec, target) });
                        r.map_err(refused)?;
                    }
                    k += 1;
                }
            }
            rw.end_segment();
            let ts = &self.trustees[client];
            ts.served.set(ts.served.get() + k as u64);
            ts.served_seq.set(seg.pair_seq);
            let st = &self.ctr().stats;
            bump(&st.requests_served, k as u64);
            bump(&st.batches_served, 1);
        }
        let env = rw.finish();
        self.ctr().stats.sent_envelope(from_rank, env.len(), own, 0, true);
        self.transport().publish(self.index, client, env);
        Ok(())
    }

    /// The value a request's wire target word names on this trustee: an export `(slot, gen)`
    /// of this trustee's table, found with the owner's lock-free lookup (an unknown, free or
    /// stale one is refused: `export::LookupError`), or, in a loopback run only, an address
    /// in this process (`export::ADDR_TARGET`; module docs, "Loopback only").
    ///
    /// The export's property is alive while a request through it is unserved: the weight of
    /// the proxy it was issued through is returned only after this rank has served it (the
    /// `Release`'s snapshot, `super::export`). An export's value must be of the type `vt` was
    /// made for ([`RemoteVTable::target_type`] against the name the export recorded): a wire
    /// target of a live export of another type is refused before anything runs. A loopback
    /// address carries no type; the client wrote the code id and the target from one handle.
    fn resolve_target(
        &self,
        word: u64,
        vt: &RemoteVTable,
        loopback: bool,
    ) -> Result<*mut u8, String> {
        let owner = self.owner.as_ref().map(|o| o.borrow());
        self.resolve_in(owner.as_deref(), word, vt, loopback)
    }

    /// [`Worker::resolve_target`] with this worker's export table already borrowed (`None`:
    /// not a split run).
    fn resolve_in(
        &self,
        owner: Option<&Owner<PropPtr>>,
        word: u64,
        vt: &RemoteVTable,
        loopback: bool,
    ) -> Result<*mut u8, String> {
        if word & ADDR_TARGET != 0 {
            let addr = word & !ADDR_TARGET;
            if !loopback {
                return Err("an address target outside a loopback run".into());
            }
            if addr == 0 {
                return Err("null target".into());
            }
            return Ok(std::ptr::with_exposed_provenance_mut(addr as usize));
        }
        let (slot, gen) = split_target(word);
        let o = owner.ok_or("an export target outside a split run")?;
        let p = o.lookup(slot, gen).map_err(|e| e.to_string())?;
        // The type check, unless this live export passed it for this table last time: a
        // `(slot, generation)` names one export for the whole run (the generation grows at
        // every recycle, a slot at the last one is retired), which holds one property, so
        // the answer cannot have changed; the lookup above still ran.
        let key = (word, vt as *const RemoteVTable as usize);
        let typed = &self.side().typed;
        if typed.get() != key {
            let (want, have) = ((vt.target_type)(), p.type_name());
            if !std::ptr::eq(want, have) && want != have {
                return Err(format!(
                    "export (slot {slot}, generation {gen}) holds a {have}, the record is for a \
                     {want}"
                ));
            }
            typed.set(key);
        }
        Ok(p.value_addr())
    }

    /// Runs a loopback control record as the slots would: its request half, as delegated
    /// code. Its argument is the address and the length in words of a box holding the
    /// in-process record (moved there by `poll_remote`), which this takes back. Returns the
    /// record's panic, or why it is refused.
    fn run_loopback_record(&self, arg: &[u8]) -> Result<Option<PanicPayload>, String> {
        let word = |i: usize| u64::from_le_bytes(arg[i..i + 8].try_into().unwrap_or([0; 8]));
        if arg.len() != 16 {
            return Err(format!("loopback record argument of {} bytes, not 16", arg.len()));
        }
        let (addr, words) = (word(0) as usize, word(8) as usize);
        if addr == 0 || addr % 8 != 0 || words < 2 {
            return Err(format!("loopback record at {addr:#x} of {words} words"));
        }
        // SAFETY: loopback only (module docs): the validator accepted a LOOPBACK_CONTROL record,
        // which only a loopback validator does; loopback envelopes are written by this
        // process's clients (`poll_remote`) and never leave it (the test hook corrupts header
        // bytes only, which `validate` checks before any record, and `super::forge` writes no
        // loopback record). So `(addr, words)` is a box
        // `poll_remote` leaked for this record, taken back exactly once, here (each envelope
        // is served once: its pair sequence number is accepted once).
        let rec: Box<[MaybeUninit<u64>]> = unsafe {
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(addr as *mut MaybeUninit<u64>, words))
        };
        let at = rec.as_ptr() as *mut u64;
        // SAFETY: the box holds the record the client moved out of its queue (record
        // invariant 3), whose word 0 is its `&'static VTable`.
        let h = unsafe { header(at) };
        if h.words as usize != words || h.result_bytes != 0 {
            return Err("loopback record does not match its vtable".into());
        }
        let mut space = 0u64;
        // SAFETY: the record's request half is live (moved here from the client's queue) and
        // consumed once, here; no result bytes; delegated code on this trustee as with slots.
        // The box is freed afterwards without dropping anything (`MaybeUninit`): the
        // completion's bytes in it are dead (the client kept its own copy).
        let panic = self.delegated(|| unsafe {
            (h.run_request)(at.add(HEADER_WORDS) as *mut u8, &mut space as *mut u64 as *mut u8)
        });
        drop(rec);
        Ok(panic)
    }
}
