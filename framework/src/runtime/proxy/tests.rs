use super::*;
use crate::runtime::free::clone_ref;

/// A run id no run is given ([`run_ids::acquire`] hands out 1..), so the tests' proxies
/// count on it without touching a real run.
const RUN: u32 = 0;

fn counters(n: usize) -> Vec<WorkerCounters> {
    (0..n).map(|_| WorkerCounters::new(n)).collect()
}

#[test]
fn layout_is_a_property_header_first_and_16_aligned() {
    assert_eq!(std::mem::offset_of!(Proxy, head), 0);
    assert_eq!(std::mem::align_of::<Proxy>(), 16);
}

#[test]
fn receive_refuses_zero_weight_and_wide_owner() {
    let e = Proxy::receive(1, 3, 0, 0, RUN, 4).unwrap_err();
    assert_eq!(e, ProxyError::ZeroWeight { owner: 1, slot: 3 });
    assert!(e.to_string().contains("zero weight"), "{e}");
    let e = Proxy::receive(4, 3, 0, 5, RUN, 4).unwrap_err();
    assert_eq!(e, ProxyError::Owner { owner: 4, workers: 4 });
    assert!(e.to_string().contains("has 4 workers"), "{e}");
    if usize::BITS > 32 {
        let e = Proxy::receive(1 << 40, 3, 0, 5, RUN, usize::MAX).unwrap_err();
        assert!(matches!(e, ProxyError::Owner { .. }), "{e:?}");
    }
}

#[test]
fn export_halves_then_takes_ones_then_needs_a_grant() {
    let p = Proxy::receive(2, 7, 4, 1 << 35, RUN, 3).unwrap();
    // SAFETY: the test holds the proxy's one count until `drop_handle` below.
    let proxy = unsafe { p.as_ref() };
    assert_eq!(proxy.target(), (7, 4));
    assert_eq!(proxy.owner(), 2);
    let a = proxy.export().unwrap();
    assert_eq!((a.weight, a.slot, a.gen, a.owner, a.grant), (1 << 34, 7, 4, 2, None));
    let b = proxy.export().unwrap();
    assert_eq!(b.weight, 1 << 33);
    assert_eq!(proxy.weight(), 1 << 33);
    // 2^33 is still halved: 2^32 left, not below the grant threshold.
    let c = proxy.export().unwrap();
    assert_eq!((c.weight, c.grant), (1 << 32, None));
    // Below 2^33: ones; the first export that leaves less than 2^32 asks for a grant, once.
    let d = proxy.export().unwrap();
    assert_eq!(d.weight, 1);
    assert_eq!(d.grant, Some(Grant { owner: 2, slot: 7, gen: 4 }));
    assert_eq!(proxy.export().unwrap().grant, None);
    assert_eq!(proxy.weight(), (1 << 32) - 2);
    let c = counters(3);
    // SAFETY: the count the test holds.
    let rel = unsafe { Proxy::drop_handle(p, &c) }.expect("last handle");
    assert_eq!(rel.weight, (1 << 32) - 2);
}

#[test]
fn weight_one_needs_a_grant_and_the_answer_lets_it_leave() {
    let p = Proxy::receive(0, 1, 0, 2, RUN, 1).unwrap();
    // SAFETY: held until `drop_handle`.
    let proxy = unsafe { p.as_ref() };
    let out = proxy.export().unwrap();
    assert_eq!(out.weight, 1);
    let grant = out.grant.expect("below 2^32: asks");
    let e = proxy.export().unwrap_err();
    // The grant is outstanding: this refusal does not ask again.
    assert_eq!(e, NeedsGrant { owner: 0, slot: 1, grant: None });
    assert!(e.to_string().contains("grant"), "{e}");
    assert_eq!(proxy.weight(), 1, "the last unit stays");
    proxy.apply_grant(crate::runtime::export::W0);
    assert_eq!(proxy.weight(), crate::runtime::export::W0 + 1);
    let out = proxy.export().unwrap();
    assert_eq!(out.weight, crate::runtime::export::W0 / 2);
    assert_eq!(grant, Grant { owner: 0, slot: 1, gen: 0 });
    // SAFETY: held.
    unsafe { Proxy::drop_handle(p, &counters(1)) }.expect("last handle");
}

#[test]
fn a_refused_export_without_a_grant_outstanding_asks_for_one() {
    let p = Proxy::receive(0, 1, 0, 1, RUN, 1).unwrap();
    // SAFETY: held until `drop_handle`.
    let proxy = unsafe { p.as_ref() };
    let e = proxy.export().unwrap_err();
    assert_eq!(e.grant, Some(Grant { owner: 0, slot: 1, gen: 0 }));
    // SAFETY: held.
    unsafe { Proxy::drop_handle(p, &counters(1)) }.expect("last handle");
}

#[test]
fn last_drop_releases_with_the_issued_snapshot() {
    let c = counters(3);
    let p = Proxy::receive(2, 9, 1, 1000, RUN, 3).unwrap();
    // SAFETY: the test holds a count.
    clone_ref(unsafe { &p.as_ref().head });
    crate::sync::bump(&c[0].issued[2], 5);
    crate::sync::bump(&c[1].issued[2], 3);
    crate::sync::bump(&c[1].issued[0], 9); // to another trustee: not in the snapshot
                                           // SAFETY: one of the two counts the test holds.
    assert_eq!(unsafe { Proxy::drop_handle(p, &c) }, None);
    crate::sync::bump(&c[0].issued[2], 1);
    // SAFETY: the other count.
    let rel = unsafe { Proxy::drop_handle(p, &c) }.expect("last handle");
    assert_eq!(
        rel,
        Release { owner: 2, slot: 9, gen: 1, weight: 1000, issued: vec![6, 3, 0].into() }
    );
}

#[test]
fn concurrent_exports_never_take_the_last_unit() {
    for _ in 0..50 {
        let p = Proxy::receive(0, 0, 0, 64, RUN, 1).unwrap();
        let addr = p.as_ptr() as usize;
        let taken: u64 = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(move || {
                        // SAFETY: the test's count keeps the proxy alive until the scope
                        // ends.
                        let proxy = unsafe { &*(addr as *const Proxy) };
                        let mut sum = 0;
                        while let Ok(o) = proxy.export() {
                            sum += o.weight;
                        }
                        sum
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum()
        });
        // SAFETY: the test's count.
        let rel = unsafe { Proxy::drop_handle(p, &counters(1)) }.expect("last");
        assert_eq!(rel.weight, 1);
        assert_eq!(taken + rel.weight, 64, "weight conserved");
    }
}
