use super::*;
use crate::channel::batch::serve_batch;
use crate::channel::record::NoResult;
use std::cell::RefCell;
use std::rc::Rc;

/// 8 bytes of result space.
struct Eight;
impl ResultSize for Eight {
    const BYTES: u32 = 8;
}

type Log = Rc<RefCell<Vec<u64>>>;

/// A request that adds `i` to the target's `u64` and answers the new value; its completion
/// logs `i * 1000 + answer` (or `u64::MAX` for a panic). The tests take one raw pointer to
/// their cell (`addr_of_mut!`, once) and give it to every record: a second `&mut cell` would
/// invalidate the pointer of a record still queued (Miri, Stacked Borrows).
fn add(q: &mut RecordQueue, target: *mut u64, i: u64, log: &Log) -> bool {
    let log = log.clone();
    q.push::<Eight, _, _>(
        target as *mut u8,
        move |t, out| {
            // SAFETY: `t` points to a live u64 nobody else touches during the run; `out`
            // has 8 bytes of result space.
            unsafe {
                *(t as *mut u64) += i;
                *(out as *mut u64) = *(t as *mut u64);
            }
            None
        },
        move |o: Outcome| {
            let v = match o.panic {
                // SAFETY: the request wrote a u64 at `resp`.
                None => i * 1000 + unsafe { *(o.resp as *const u64) },
                Some(_) => u64::MAX,
            };
            log.borrow_mut().push(v)
        },
    )
}

/// Sends everything staged in `q` through batches of at most `max_words` words, serving
/// each (as a trustee would) and completing it (as the client does).
fn round_trips(q: &mut RecordQueue, max_words: usize) -> (usize, usize) {
    let (mut batches, mut uniform_batches) = (0, 0);
    let mut slot = vec![0u64; max_words];
    let mut resp = vec![0u64; max_words];
    while q.staged() > 0 {
        // SAFETY: `slot` holds max_words words; the batch is served right below.
        let (w, n, uni) = unsafe { q.send_to(slot.as_mut_ptr(), max_words, 8 * max_words) };
        assert!(n > 0 && w <= max_words);
        uniform_batches += uni as usize;
        // SAFETY: exactly `n` records were copied into `slot`; `resp` has room.
        let panics = unsafe { serve_batch(slot.as_ptr(), n, uni, resp.as_mut_ptr() as *mut u8) };
        q.complete_front(n, uni, resp.as_ptr() as *const u8, panics);
        batches += 1;
    }
    (batches, uniform_batches)
}

#[test]
fn staging_limit_and_uniformity() {
    let mut q = RecordQueue::default();
    let mut cell = 0u64;
    let cell: *mut u64 = std::ptr::addr_of_mut!(cell);
    let tg = cell as *mut u8;
    for i in 1..=600usize {
        let over = q.push::<NoResult, _, _>(tg, |_, _| None, |_| {});
        assert_eq!(over, i >= STAGING_YIELD, "push {i}");
    }
    assert_eq!(q.staged(), 600);
    assert!(!q.uniform().is_null(), "one record type");
    // A record of another type (it captures a word) makes the staged records mixed.
    let k = 7u64;
    q.push::<NoResult, _, _>(tg, move |_, _| (k == 0).then(|| unreachable!()), |_| {});
    q.push::<NoResult, _, _>(tg, |_, _| None, |_| {});
    assert_eq!(q.staged(), 602);
    assert!(q.uniform().is_null());
    q.run_local(602);
    assert!(q.is_empty() && !q.has_staged());
    // Empty again: the next records start a new uniform run.
    q.push::<NoResult, _, _>(tg, |_, _| None, |_| {});
    assert!(!q.uniform().is_null());
    q.run_local(1);
}

#[test]
fn a_queue_that_never_drains_is_uniform_again_once_an_odd_record_has_left() {
    let log: Log = Rc::default();
    let mut cell = 0u64;
    let cell: *mut u64 = std::ptr::addr_of_mut!(cell);
    let mut q = RecordQueue::default();
    // An odd record (another type) ahead of a stream of like ones.
    let k = 7u64;
    q.push::<NoResult, _, _>(cell as *mut u8, move |_, _| (k == 0).then(|| unreachable!()), |_| {});
    for i in 0..30u64 {
        add(&mut q, cell, i, &log);
    }
    assert!(q.uniform().is_null(), "mixed while the odd record is staged");
    let mut slot = vec![0u64; 200];
    let mut resp = vec![0u64; 200];
    // Batches of 10 words; the queue is topped up after each, so it never drains.
    for round in 0..6u64 {
        // SAFETY: `slot` holds 200 words; the batch is served and completed below.
        let (_, n, uni) = unsafe { q.send_to(slot.as_mut_ptr(), 10, 80) };
        assert!(n > 0);
        assert_eq!(uni, round > 0, "only the batch with the odd record is mixed (round {round})");
        // SAFETY: `n` records were copied to `slot`; `resp` has room for their results.
        let panics = unsafe { serve_batch(slot.as_ptr(), n, uni, resp.as_mut_ptr() as *mut u8) };
        q.complete_front(n, uni, resp.as_ptr() as *const u8, panics);
        assert!(!q.uniform().is_null(), "like records only are staged after round {round}");
        add(&mut q, cell, 100 + round, &log);
    }
    // Another odd record at the tail: mixed again, and the run starts over behind it.
    q.push::<NoResult, _, _>(cell as *mut u8, |_, _| None, |_| {});
    assert!(q.uniform().is_null());
    q.run_local(q.staged());
    assert!(q.is_empty());
    // Appending a uniform queue of the same type to an empty one keeps it uniform.
    let mut other = RecordQueue::default();
    for i in 0..3u64 {
        add(&mut other, cell, i, &log);
        add(&mut q, cell, i, &log);
    }
    q.run_local(2);
    q.append(&mut other);
    assert_eq!(q.staged(), 4);
    assert!(!q.uniform().is_null());
    q.run_local(4);
}

#[test]
fn remote_round_trip_in_order() {
    let log: Log = Rc::default();
    let mut cells = vec![0u64; 10];
    let base = cells.as_mut_ptr();
    let mut q = RecordQueue::default();
    for i in 0..100u64 {
        // SAFETY: `i % 10` is within the 10 cells.
        let t = unsafe { base.add((i % 10) as usize) };
        assert_eq!(add(&mut q, t, i, &log), i + 1 >= 512);
    }
    // 5-word records (header, target, i; i and the log), 20 per batch of 100 words: the
    // uniform fast path sizes the batches.
    assert_eq!(round_trips(&mut q, 100), (5, 5), "all batches uniform");
    assert!(q.is_empty());
    let mut expect_cells = [0u64; 10];
    let expect: Vec<u64> = (0..100u64)
        .map(|i| {
            expect_cells[(i % 10) as usize] += i;
            i * 1000 + expect_cells[(i % 10) as usize]
        })
        .collect();
    assert_eq!(*log.borrow(), expect);
    assert_eq!(cells, expect_cells);
}

#[test]
fn mixed_and_boxed_records_walk() {
    let log: Log = Rc::default();
    let mut cell = 0u64;
    let cell: *mut u64 = std::ptr::addr_of_mut!(cell);
    let mut q = RecordQueue::default();
    for i in 0..60u64 {
        match i % 3 {
            0 => {
                add(&mut q, cell, i, &log);
            }
            1 => {
                // A request too big to store inline, with a small completion.
                let big = [i; 40];
                let l = log.clone();
                q.push::<NoResult, _, _>(
                    std::ptr::null_mut(),
                    move |_, _| {
                        assert_eq!(big[39], i);
                        None
                    },
                    move |_| l.borrow_mut().push(i),
                );
            }
            _ => {
                // A small request with a big completion.
                let big = [i; 40];
                let l = log.clone();
                q.push::<NoResult, _, _>(
                    std::ptr::null_mut(),
                    |_, _| None,
                    move |_| l.borrow_mut().push(big[0]),
                );
            }
        }
    }
    // Mixed records: the batch prefixes are found by walking; 7 words hold at most 2.
    let (batches, uniform) = round_trips(&mut q, 7);
    assert!(batches >= 30 && uniform < batches);
    let got = log.borrow().clone();
    assert_eq!(got.len(), 60);
    for (k, v) in got.iter().enumerate() {
        if k % 3 != 0 {
            assert_eq!(*v, k as u64);
        }
    }
    // SAFETY: every record that pointed to the cell has been consumed.
    assert_eq!(unsafe { *cell }, (0..60).filter(|i| i % 3 == 0).sum::<u64>());
}

#[test]
fn local_runs_both_halves_and_append_keeps_order() {
    let log: Log = Rc::default();
    let mut cell = 5u64;
    let cell: *mut u64 = std::ptr::addr_of_mut!(cell);
    let mut q = RecordQueue::default();
    let mut newer = RecordQueue::default();
    for i in 1..=4u64 {
        add(&mut q, cell, i, &log);
        add(&mut newer, cell, 10 * i, &log);
    }
    q.run_local(2);
    assert_eq!(q.staged(), 2);
    q.append(&mut newer);
    assert!(newer.is_empty());
    assert_eq!(q.staged(), 6);
    q.run_local(6);
    assert!(q.is_empty());
    assert_eq!(*log.borrow(), vec![1006, 2008, 3011, 4015, 10025, 20045, 30075, 40115]);
}

#[test]
fn a_panicking_request_is_reported_to_its_completion() {
    let log: Log = Rc::default();
    let mut cell = 0u64;
    let cell: *mut u64 = std::ptr::addr_of_mut!(cell);
    let mut q = RecordQueue::default();
    add(&mut q, cell, 1, &log);
    let l = log.clone();
    q.push::<NoResult, _, _>(
        std::ptr::null_mut(),
        |_, _| std::panic::catch_unwind(|| panic!("request fails")).err(),
        move |o| l.borrow_mut().push(if o.panic.is_some() { 7 } else { 0 }),
    );
    add(&mut q, cell, 2, &log);
    round_trips(&mut q, 64);
    assert_eq!(*log.borrow(), vec![1001, 7, 2003]);
}

#[test]
fn drop_consumes_what_each_side_owns() {
    let rc = Rc::new(());
    let mut slot = vec![0u64; 64];
    {
        let mut q = RecordQueue::default();
        for _ in 0..6 {
            let (a, b) = (rc.clone(), rc.clone());
            q.push::<NoResult, _, _>(
                std::ptr::null_mut(),
                move |_, _| {
                    drop(a);
                    None
                },
                move |_| drop(b),
            );
        }
        assert_eq!(Rc::strong_count(&rc), 13);
        // Two requests go in flight: their request halves belong to the batch now.
        // SAFETY: `slot` holds 64 words; the batch is served below.
        let (w, n, uni) = unsafe { q.send_to(slot.as_mut_ptr(), 2 * 4, 0) };
        assert_eq!((w, n, uni), (8, 2, true));
        // SAFETY: exactly `n` records were copied into `slot`; they need no result space.
        let panics = unsafe { serve_batch(slot.as_ptr(), n, uni, std::ptr::null_mut()) };
        assert!(panics.is_empty());
        assert_eq!(Rc::strong_count(&rc), 11, "the batch consumed its two request halves");
    }
    // Dropping the queue dropped the two in-flight completions and four staged pairs.
    assert_eq!(Rc::strong_count(&rc), 1);
}

#[test]
fn unwinding_completion_consumes_each_record_once() {
    // Both ways of running completions: the type's own loop and the record walk.
    for uniform in [true, false] {
        let rc = Rc::new(());
        let mut q = RecordQueue::default();
        for i in 0..6 {
            let r = rc.clone();
            q.push::<NoResult, _, _>(
                std::ptr::null_mut(),
                |_, _| None,
                move |_| {
                    let _r = r;
                    assert_ne!(i, 2, "completion 2 fails");
                },
            );
        }
        let mut slot = vec![0u64; 64];
        // SAFETY: `slot` holds 64 words; every record is sent and served.
        let (_, n, uni) = unsafe { q.send_to(slot.as_mut_ptr(), 64, 0) };
        assert!(uni);
        // SAFETY: exactly `n` records were copied; no result space needed.
        unsafe { serve_batch(slot.as_ptr(), n, uniform, std::ptr::null_mut()) };
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            q.complete_front(5, uniform, std::ptr::null(), Vec::new())
        }));
        assert!(caught.is_err());
        // completions 0..=2 consumed (2 unwound, dropping its capture); 3, 4, 5 queued
        assert_eq!((q.in_flight, Rc::strong_count(&rc)), (3, 4));
        drop(q);
        assert_eq!(Rc::strong_count(&rc), 1);
    }
}

#[test]
fn mixed_local_requests_run_in_order() {
    let log: Log = Rc::default();
    let mut cell = 0u64;
    let cell: *mut u64 = std::ptr::addr_of_mut!(cell);
    let mut q = RecordQueue::default();
    for i in 1..=6u64 {
        if i % 2 == 0 {
            add(&mut q, cell, i, &log);
        } else {
            let l = log.clone();
            q.push::<NoResult, _, _>(
                std::ptr::null_mut(),
                |_, _| None,
                move |_| l.borrow_mut().push(i),
            );
        }
    }
    assert!(q.uniform().is_null());
    q.run_local(6);
    assert_eq!(*log.borrow(), vec![1, 2002, 3, 4006, 5, 6012]);
}

#[test]
fn small_requests_are_small() {
    let mut q = RecordQueue::default();
    q.push::<NoResult, _, _>(std::ptr::null_mut(), |_, _| None, |_| {});
    let x = 5u64;
    q.push::<NoResult, _, _>(
        std::ptr::null_mut(),
        move |_, _| {
            assert_eq!(x, 5);
            None
        },
        |_| {},
    );
    assert_eq!((q.tail - q.head, q.staged()), (2 + 3, 2));
    q.run_local(2);
    assert!(q.is_empty());
}
