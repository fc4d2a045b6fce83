//! Unit tests of the export table and the owner's returns, over a stand-in property.

use super::*;
use crate::property::PropHead;
use crate::runtime::proxy::Release;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering as O};

/// A stand-in property: the real header, its trustee, and how often it was released.
pub(crate) struct FakeProp {
    pub(crate) head: PropHead,
    pub(crate) trustee: usize,
    pub(crate) released: AtomicUsize,
}

/// The pointer a table holds (as [`PropPtr`] in the runtime).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fake(pub(crate) NonNull<FakeProp>);

// SAFETY: points to a leaked `FakeProp`, whose fields are atomics.
unsafe impl Send for Fake {}

impl Fake {
    /// A fresh stand-in of `trustee` with one local handle (leaked: tests are small).
    pub(crate) fn new(trustee: usize) -> Fake {
        let p = FakeProp { head: PropHead::new(), trustee, released: AtomicUsize::new(0) };
        Fake(NonNull::from(Box::leak(Box::new(p))))
    }

    pub(crate) fn get(&self) -> &'static FakeProp {
        // SAFETY: leaked, never freed.
        unsafe { &*self.0.as_ptr() }
    }

    /// Local handles.
    pub(crate) fn refs(&self) -> usize {
        self.get().head.refs.load(O::Relaxed)
    }

    /// Times `release_last` ran.
    pub(crate) fn released(&self) -> usize {
        self.get().released.load(O::Relaxed)
    }
}

impl ExportedProp for Fake {
    fn trustee(&self) -> usize {
        self.get().trustee
    }

    unsafe fn clone_ref(&self) {
        free::clone_ref(&self.get().head);
    }

    unsafe fn drop_ref(&self) -> bool {
        free::drop_ref(&self.get().head)
    }

    fn release_last(self) {
        self.get().released.fetch_add(1, O::Relaxed);
    }
}

fn release(slot: u32, gen: u32, weight: u64, issued: &[u64]) -> Release {
    Release { owner: 0, slot, gen, weight, issued: issued.into() }
}

#[test]
fn chunks_cover_every_slot_without_gaps() {
    assert_eq!(chunk_of(0), (0, 0));
    assert_eq!(chunk_of(63), (0, 63));
    assert_eq!(chunk_of(64), (1, 0));
    assert_eq!(chunk_of(191), (1, 127));
    assert_eq!(chunk_of(192), (2, 0));
    let (k, i) = chunk_of(u32::MAX);
    assert!(k < CHUNKS && (i as u64) < FIRST_CHUNK << k, "{k} {i}");
    let mut expect = (0, 0);
    for s in 0..5000u32 {
        let got = chunk_of(s);
        if got != expect {
            assert_eq!((got.0, got.1), (expect.0 + 1, 0), "slot {s}");
            assert_eq!(expect.1 as u64, FIRST_CHUNK << expect.0, "chunk {} filled", expect.0);
        }
        expect = (got.0, got.1 + 1);
    }
}

#[test]
fn wire_target_round_trips() {
    let w = wire_target(0xdead_beef, 7);
    assert_eq!(w, 0x0000_0007_dead_beef);
    assert_eq!(split_target(w), (0xdead_beef, 7));
}

#[test]
fn export_takes_a_count_and_lookup_finds_it() {
    let (table, owner) = ExportTable::new(3);
    assert_eq!(table.trustee(), 3);
    assert!(Arc::ptr_eq(owner.table(), &table));
    let p = Fake::new(3);
    let e = table.export(p).unwrap();
    assert_eq!(e, Export { slot: 0, gen: 0, weight: W0 });
    assert_eq!(p.refs(), 2, "the export count");
    assert_eq!(owner.lookup(0, 0).unwrap().0, p.0);
    assert_eq!(owner.weights(0, 0).unwrap(), (u128::from(W0), 0));
    let q = Fake::new(3);
    assert_eq!(table.export(q).unwrap().slot, 1);
    assert_eq!(owner.lookup(1, 0).unwrap().0, q.0);
}

#[test]
fn export_refuses_a_property_of_another_trustee() {
    let (table, _owner) = ExportTable::new(1);
    let p = Fake::new(2);
    let e = table.export(p).unwrap_err();
    assert_eq!(e, ExportError::OtherTrustee { got: 2, table: 1 });
    assert!(e.to_string().contains("trustee 2"), "{e}");
    assert_eq!(p.refs(), 1, "no count taken");
}

#[test]
fn lookup_refuses_bad_targets_with_reasons() {
    let (table, owner) = ExportTable::new(0);
    let p = Fake::new(0);
    table.export(p).unwrap();
    let e = owner.lookup(5000, 0).unwrap_err();
    assert_eq!(e, LookupError::OutOfRange { slot: 5000, trustee: 0 });
    assert!(e.to_string().contains("out of range"), "{e}");
    let e = owner.lookup(1, 0).unwrap_err();
    assert_eq!(e, LookupError::Free { slot: 1, trustee: 0 });
    let e = owner.lookup(0, 1).unwrap_err();
    assert_eq!(e, LookupError::Stale { slot: 0, gen: 1, current: 0, trustee: 0 });
    assert!(e.to_string().contains("generation 0, not 1"), "{e}");
}

#[test]
fn returns_recycle_the_slot_at_full_budget_and_drop_the_export_count() {
    let (table, mut owner) = ExportTable::new(0);
    let p = Fake::new(0);
    let e = table.export(p).unwrap();
    assert_eq!(owner.apply_return(e.slot, e.gen, W0 / 2), Ok(Applied::Held));
    assert_eq!(owner.weights(0, 0).unwrap(), (u128::from(W0), u128::from(W0 / 2)));
    assert_eq!(p.refs(), 2);
    assert_eq!(owner.apply_return(e.slot, e.gen, W0 / 2), Ok(Applied::Recycled));
    assert_eq!(p.refs(), 1, "export count dropped");
    assert_eq!(p.released(), 0, "a local handle remains");
    assert_eq!(
        owner.lookup(0, 0).unwrap_err(),
        LookupError::Free { slot: 0, trustee: 0 },
        "recycled"
    );
    // The slot is reused with the next generation; the old target stays refused.
    let q = Fake::new(0);
    let e2 = table.export(q).unwrap();
    assert_eq!((e2.slot, e2.gen), (0, 1));
    assert_eq!(
        owner.lookup(0, 0).unwrap_err(),
        LookupError::Stale { slot: 0, gen: 0, current: 1, trustee: 0 }
    );
    assert_eq!(owner.lookup(0, 1).unwrap().0, q.0);
}

#[test]
fn the_last_local_count_goes_to_release_last() {
    let (table, mut owner) = ExportTable::new(0);
    let p = Fake::new(0);
    let e = table.export(p).unwrap();
    // The local handle is dropped while the export is out: the export count keeps it.
    // SAFETY: the test's handle.
    assert!(!unsafe { p.drop_ref() });
    assert_eq!(p.released(), 0);
    assert_eq!(owner.apply_return(e.slot, e.gen, W0), Ok(Applied::Recycled));
    assert_eq!((p.refs(), p.released()), (0, 1));
}

#[test]
fn bad_returns_are_refused_and_change_nothing() {
    let (table, mut owner) = ExportTable::new(0);
    let p = Fake::new(0);
    let e = table.export(p).unwrap();
    owner.apply_return(e.slot, e.gen, 10).unwrap();
    let err = owner.apply_return(e.slot, e.gen, W0).unwrap_err();
    assert_eq!(
        err,
        ReleaseError::ExceedsBudget {
            slot: 0,
            gen: 0,
            weight: W0,
            outstanding: u128::from(W0 - 10)
        }
    );
    assert!(err.to_string().contains("exceeds"), "{err}");
    assert_eq!(
        owner.apply_return(e.slot, e.gen, 0),
        Err(ReleaseError::ZeroWeight { slot: 0, gen: 0 })
    );
    assert!(matches!(owner.apply_return(e.slot, 9, 1), Err(ReleaseError::Lookup(_))));
    assert_eq!(owner.weights(0, 0).unwrap(), (u128::from(W0), 10));
    assert_eq!(p.refs(), 2);
}

#[test]
fn grants_raise_the_budget_beyond_u64() {
    let (table, mut owner) = ExportTable::new(0);
    let p = Fake::new(0);
    let e = table.export(p).unwrap();
    for _ in 0..5 {
        assert_eq!(owner.grant(e.slot, e.gen), Ok(W0));
    }
    let budget = owner.weights(0, 0).unwrap().0;
    assert_eq!(budget, 6 * u128::from(W0), "more than u64 can hold");
    assert!(owner.grant(e.slot, 3).is_err());
    for _ in 0..11 {
        assert_eq!(owner.apply_return(e.slot, e.gen, W0 / 2), Ok(Applied::Held));
    }
    assert_eq!(owner.apply_return(e.slot, e.gen, W0 / 2), Ok(Applied::Recycled));
    assert_eq!(p.refs(), 1);
}

#[test]
fn a_release_waits_for_its_senders_requests_to_be_served() {
    let (table, mut owner) = ExportTable::new(0);
    let p = Fake::new(0);
    let e = table.export(p).unwrap();
    // SAFETY: the test's handle.
    assert!(!unsafe { p.drop_ref() });
    // Rank 1 (global workers 2 and 3) had issued 4 and 2 requests to trustee 0.
    owner.schedule_release(release(e.slot, e.gen, W0, &[4, 2]), 2).unwrap();
    let served = std::cell::Cell::new([0u64; 4]);
    let f = |c: usize| served.get()[c];
    assert_eq!(owner.process(f).applied, 0);
    served.set([0, 0, 4, 1]);
    assert_eq!(owner.process(f).applied, 0);
    assert_eq!(p.released(), 0, "client 3 still has a request unserved");
    served.set([0, 0, 4, 2]);
    let done = owner.process(f);
    assert_eq!((done.applied, done.recycled, done.errors.len()), (1, 1, 0));
    assert_eq!(p.released(), 1);
    assert_eq!(owner.pending(), 0);
}

#[test]
fn releases_from_different_ranks_apply_out_of_arrival_order() {
    let (table, mut owner) = ExportTable::new(0);
    let p = Fake::new(0);
    let e = table.export(p).unwrap();
    owner.schedule_release(release(e.slot, e.gen, W0 / 2, &[7]), 1).unwrap();
    owner.schedule_release(release(e.slot, e.gen, W0 / 4, &[0, 1]), 2).unwrap();
    // Client 1 (the first release's) has been served nothing; client 3 its one request.
    let served = |c: usize| u64::from(c == 3);
    let done = owner.process(served);
    assert_eq!((done.applied, done.recycled), (1, 0));
    assert_eq!(owner.pending(), 1);
    assert_eq!(owner.weights(0, 0).unwrap().1, u128::from(W0 / 4));
}

#[test]
fn schedule_refuses_releases_that_cannot_be_right() {
    let (table, mut owner) = ExportTable::new(0);
    owner.set_max_clients(2);
    let p = Fake::new(0);
    let e = table.export(p).unwrap();
    let err = owner.schedule_release(release(e.slot, e.gen, 1, &[0, 0, 0]), 0).unwrap_err();
    assert_eq!(err, ReleaseError::Clients { slot: 0, got: 3, max: 2 });
    let err = owner.schedule_release(release(e.slot, e.gen + 1, 1, &[]), 0).unwrap_err();
    assert!(err.to_string().contains("generation"), "{err}");
    let err = owner.schedule_release(release(e.slot, e.gen, 0, &[]), 0).unwrap_err();
    assert_eq!(err, ReleaseError::ZeroWeight { slot: 0, gen: 0 });
    assert_eq!(owner.pending(), 0);
}

#[test]
fn a_pending_release_that_turns_out_too_heavy_is_reported() {
    let (table, mut owner) = ExportTable::new(0);
    let p = Fake::new(0);
    let e = table.export(p).unwrap();
    owner.schedule_release(release(e.slot, e.gen, W0 - 1, &[]), 0).unwrap();
    owner.schedule_release(release(e.slot, e.gen, 2, &[]), 0).unwrap();
    let done = owner.process(|_| 0);
    assert_eq!(done.applied, 2);
    assert!(matches!(done.errors[..], [ReleaseError::ExceedsBudget { .. }]), "{:?}", done.errors);
    assert_eq!(p.refs(), 2, "the slot stays");
}

#[test]
fn receiving_on_the_owner_clones_and_returns_the_weight() {
    let (table, mut owner) = ExportTable::new(0);
    let p = Fake::new(0);
    let e = table.export(p).unwrap();
    // SAFETY: the test holds the export's weight (it plays the message).
    let (q, ret) = unsafe { table.receive_on_owner(e.slot, e.gen, e.weight) }.unwrap();
    assert_eq!(q.0, p.0);
    assert_eq!(p.refs(), 3, "handle, export count, received handle");
    assert_eq!(ret, OwnerReturn { slot: 0, gen: 0, weight: W0 });
    assert_eq!(owner.apply_return(ret.slot, ret.gen, ret.weight), Ok(Applied::Recycled));
    assert_eq!(p.refs(), 2);
    // SAFETY: no weight held; the slot is free, so this must be refused, not read.
    let err = unsafe { table.receive_on_owner(e.slot, e.gen, 1) }.unwrap_err();
    assert!(matches!(err, ReleaseError::Lookup(LookupError::Free { .. })), "{err:?}");
    // SAFETY: as above (refused before any read).
    let err = unsafe { table.receive_on_owner(e.slot, e.gen, 0) }.unwrap_err();
    assert_eq!(err, ReleaseError::ZeroWeight { slot: 0, gen: 0 });
}

#[test]
fn end_of_run_drops_every_live_export_count() {
    let (table, mut owner) = ExportTable::new(0);
    let props: Vec<Fake> = (0..150).map(|_| Fake::new(0)).collect();
    let exports: Vec<Export> = props.iter().map(|&p| table.export(p).unwrap()).collect();
    // Some slots come back first; the program drops every local handle.
    for e in exports.iter().step_by(3) {
        owner.apply_return(e.slot, e.gen, W0).unwrap();
    }
    for &p in &props {
        // SAFETY: the test's handle.
        if unsafe { p.drop_ref() } {
            p.release_last();
        }
    }
    owner.schedule_release(release(exports[1].slot, 0, 5, &[1]), 0).unwrap();
    let released = props.iter().filter(|p| p.released() == 1).count();
    assert_eq!(released, 50);
    assert_eq!(owner.end_of_run(), 100);
    assert_eq!(owner.pending(), 0);
    assert!(props.iter().all(|p| p.released() == 1 && p.refs() == 0));
    assert_eq!(owner.end_of_run(), 0);
}

#[test]
fn many_exports_across_chunks_and_threads() {
    let (table, mut owner) = ExportTable::new(0);
    let props: Vec<Fake> = (0..4).map(|_| Fake::new(0)).collect();
    let got: Vec<Vec<Export>> = std::thread::scope(|s| {
        let hs: Vec<_> = props
            .iter()
            .map(|&p| {
                let t = &table;
                s.spawn(move || (0..100).map(|_| t.export(p).unwrap()).collect::<Vec<_>>())
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut slots: Vec<u32> = got.iter().flatten().map(|e| e.slot).collect();
    slots.sort_unstable();
    assert_eq!(slots, (0..400).collect::<Vec<_>>(), "distinct slots, no gaps");
    for (p, es) in props.iter().zip(&got) {
        assert_eq!(p.refs(), 101);
        for e in es {
            assert_eq!(owner.lookup(e.slot, e.gen).unwrap().0, p.0);
            owner.apply_return(e.slot, e.gen, W0).unwrap();
        }
        assert_eq!(p.refs(), 1);
    }
}

/// `docs/rack-mode.md` 5.3, hard case 1: rank A (workers 1) sends its handle on to rank C
/// (workers 2) and drops its own; the owner drops its local handle too. The message's weight
/// keeps the slot, and so the property, until C's proxy is released behind C's requests.
#[test]
fn hard_case_1_a_handle_sent_on_while_the_sender_drops() {
    use crate::runtime::proxy::Proxy;
    use crate::runtime::run_state::WorkerCounters;
    let counters: Vec<Vec<WorkerCounters>> = (0..3).map(|_| vec![WorkerCounters::new(3)]).collect();
    let (table, mut owner) = ExportTable::new(0);
    let p = Fake::new(0);
    let e = table.export(p).unwrap();
    let a = Proxy::receive(0, e.slot, e.gen, e.weight, 0, 3).unwrap();
    // SAFETY: A's handle holds the proxy.
    let to_c = unsafe { a.as_ref() }.export().unwrap();
    assert_eq!(to_c.weight, W0 / 2);
    // SAFETY: A's handle, its last.
    let rel_a = unsafe { Proxy::drop_handle(a, &counters[1]) }.unwrap();
    owner.schedule_release(rel_a, 1).unwrap();
    // SAFETY: the owner's program handle.
    assert!(!unsafe { p.drop_ref() });
    assert_eq!(owner.process(|_| 0).applied, 1);
    assert_eq!((p.refs(), p.released()), (1, 0), "the message's weight holds the slot");
    // C receives, issues a request, drops.
    let c = Proxy::receive(to_c.owner, to_c.slot, to_c.gen, to_c.weight, 0, 3).unwrap();
    crate::sync::bump(&counters[2][0].issued[0], 1);
    // SAFETY: C's handle, its last.
    let rel_c = unsafe { Proxy::drop_handle(c, &counters[2]) }.unwrap();
    assert_eq!(rel_c.issued[..], [1]);
    owner.schedule_release(rel_c, 2).unwrap();
    assert_eq!(owner.process(|_| 0).applied, 0, "C's request is not served yet");
    assert_eq!(p.released(), 0);
    owner.lookup(e.slot, e.gen).expect("C's request finds its property");
    let done = owner.process(|c| u64::from(c == 2));
    assert_eq!((done.applied, done.recycled), (1, 1));
    assert_eq!((p.refs(), p.released()), (0, 1));
}

/// Hard case 2: worker 0 of rank A queues 10^4 requests and drops its handle, worker 1 drops
/// the last handle on A: the `Release` (which may arrive before the requests) waits until all
/// 10^4 are served.
#[test]
fn hard_case_2_the_last_drop_overtakes_queued_requests() {
    use crate::runtime::proxy::Proxy;
    use crate::runtime::run_state::WorkerCounters;
    let a_workers: Vec<WorkerCounters> = (0..2).map(|_| WorkerCounters::new(4)).collect();
    let (table, mut owner) = ExportTable::new(1);
    let p = Fake::new(1);
    let e = table.export(p).unwrap();
    // SAFETY: the owner's program handle.
    assert!(!unsafe { p.drop_ref() });
    let a = Proxy::receive(1, e.slot, e.gen, e.weight, 0, 4).unwrap();
    // SAFETY: worker 0's handle keeps the proxy; the clone moves to worker 1.
    crate::runtime::free::clone_ref(unsafe { &a.as_ref().head });
    for _ in 0..10_000 {
        crate::sync::bump(&a_workers[0].issued[1], 1);
    }
    // SAFETY: worker 0's handle.
    assert!(unsafe { Proxy::drop_handle(a, &a_workers) }.is_none());
    // SAFETY: worker 1's handle, the last on A.
    let rel = unsafe { Proxy::drop_handle(a, &a_workers) }.unwrap();
    assert_eq!(rel.issued[..], [10_000, 0]);
    // Rank A is workers 2 and 3.
    owner.schedule_release(rel, 2).unwrap();
    let served = std::cell::Cell::new(0);
    for n in [0, 1, 9_999] {
        served.set(n);
        assert_eq!(owner.process(|c| if c == 2 { served.get() } else { 0 }).applied, 0);
        assert_eq!(p.released(), 0, "served {n} of 10^4");
    }
    served.set(10_000);
    assert_eq!(owner.process(|c| if c == 2 { served.get() } else { 0 }).recycled, 1);
    assert_eq!(p.released(), 1);
}

#[test]
fn the_owner_finds_slots_in_chunks_made_after_it_looked() {
    let (table, owner) = ExportTable::new(0);
    let p = Fake::new(0);
    assert_eq!(owner.lookup(64, 0).unwrap_err(), LookupError::OutOfRange { slot: 64, trustee: 0 });
    for _ in 0..65 {
        table.export(p).unwrap();
    }
    assert_eq!(owner.lookup(64, 0).unwrap().0, p.0);
    assert_eq!(owner.lookup(65, 0).unwrap_err(), LookupError::Free { slot: 65, trustee: 0 });
}
