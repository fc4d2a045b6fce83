//! The travel rule's calls (`docs/rack-mode.md` §2): argument-first requests, `Plain`
//! arguments and results of every size and alignment, the serialized and the local variants,
//! and the ids of one rank.

use skein::{Latch, Runtime, TrustArray};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

fn rt(w: usize) -> Runtime {
    Runtime::builder().workers(w).fibers_per_worker(4).build().unwrap()
}

/// A 16-aligned argument and result (`u128`) at the records' 8-byte alignment, and a result of
/// exactly 256 bytes, through the remote path (worker 0 to 1), the local queue and the inline
/// local call.
#[test]
fn plain_arguments_and_results_of_any_alignment_and_size() {
    rt(2)
        .run(|| {
            let big = u128::MAX - 100;
            for w in 0..2 {
                let t = skein::trustee(w).entrust_new(1u128, |x| x);
                // After one u8 of argument, so that an aligned read of the u128 would be off.
                let r = t.apply((7u8, big), |c, (k, b)| {
                    *c += u128::from(k);
                    b + *c
                });
                assert_eq!(r, u128::MAX - 92, "worker {w}");
                let words = t.apply(3u64, |c, k| [*c as u64 + k; 32]);
                assert_eq!(words, [11u64; 32]);
                let seen = Arc::new(AtomicU64::new(0));
                for i in 0..100u64 {
                    let s = seen.clone();
                    t.apply_then(
                        (i, 1u128 << 100),
                        |c, (i, b)| (*c + b, i),
                        move |(v, i)| {
                            assert_eq!(v, 8 + (1u128 << 100));
                            s.fetch_add(i, Relaxed);
                        },
                    );
                }
                skein::wait_quiescent();
                assert_eq!(seen.load(Relaxed), 4950);
            }
        })
        .unwrap();
}

/// The requests of one fiber stay in order whatever the argument sizes (records of several
/// sizes interleaved in one queue).
#[test]
fn mixed_argument_sizes_keep_their_order() {
    let v = rt(2)
        .run(|| {
            let t = skein::trustee(1).entrust_new((), |()| Vec::<u64>::new());
            for i in 0..300u64 {
                match i % 3 {
                    0 => t.apply_then((), |v, ()| v.push(0), |()| {}),
                    1 => t.apply_then(i, |v, i| v.push(i), |()| {}),
                    _ => t.apply_then([i; 20], |v, a| v.push(a[19]), |()| {}),
                }
            }
            skein::wait_quiescent();
            t.apply_with((), |v, ()| v.clone())
        })
        .unwrap();
    let want: Vec<u64> = (0..300).map(|i| if i % 3 == 0 { 0 } else { i }).collect();
    assert_eq!(v, want);
}

/// `apply_with` and `apply_with_then` serialize both ways; a panic in a serialized closure is
/// resumed (`apply_with`) or fails the run (`apply_with_then`).
#[test]
fn serialized_calls() {
    let r = rt(2)
        .run(|| {
            let t = skein::trustee(1).entrust_new((), |()| Vec::<String>::new());
            let n = t.apply_with("a".to_string(), |v, s: String| {
                v.push(s);
                v.clone()
            });
            assert_eq!(n, ["a"]);
            let got = Arc::new(std::sync::Mutex::new(Vec::new()));
            let g = got.clone();
            t.apply_with_then(
                vec!["b".to_string(), "c".into()],
                |v, mut more: Vec<String>| {
                    v.append(&mut more);
                    v.join("")
                },
                move |s| g.lock().unwrap().push(s),
            );
            skein::wait_quiescent();
            assert_eq!(*got.lock().unwrap(), ["abc"]);
            let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                t.apply_with(1u8, |_, _: u8| -> u8 { panic!("serialized closure fails") })
            }))
            .unwrap_err();
            // The payload itself from a trustee of this rank; from one of another (fake) rank
            // its message, naming where it arose.
            if t.is_local() {
                assert_eq!(e.downcast_ref::<&str>(), Some(&"serialized closure fails"));
            } else {
                let msg = e.downcast_ref::<String>().map(String::as_str);
                assert_eq!(msg, Some("rank 1 worker 1: serialized closure fails"));
            }
            t.apply_with_then((), |_, ()| -> u8 { panic!("async serialized fails") }, |_| {});
        })
        .unwrap_err();
    assert!(r.to_string().contains("async serialized fails"), "{r}");
}

/// `entrust_new`, `spawn_on` with an argument, `launch` with an argument, `TrustArray::new`
/// with an argument, and the ids: of one rank, or of the fake ranks of a loopback split
/// (`SKEIN_LOOPBACK_RANKS=3`: one worker each).
#[test]
fn constructors_spawns_and_ids() {
    rt(3)
        .run(|| {
            let ranks = skein::ranks();
            assert_eq!(skein::rank(), 0);
            assert_eq!(skein::local_workers() * ranks, 3);
            for g in 0..3 {
                assert_eq!(skein::rank_of(g), g * ranks / 3);
                let t = skein::trustee(g).entrust_new((g, 4usize), |(g, n)| vec![g; n]);
                assert_eq!(t.is_local(), g < skein::local_workers());
                assert_eq!(t.trustee().worker(), g);
                assert_eq!(t.apply((), |v, ()| v.iter().sum::<usize>()), 4 * g);
                let h = skein::spawn_on(g, (g as u64, 10u64), |(g, k)| {
                    (skein::current_worker() as u64, g * k)
                });
                assert_eq!(h.join(), (g as u64, 10 * g as u64));
            }
            let l = skein::trustee(2).entrust_new(0u64, Latch::new);
            let hs: Vec<_> = (1..=10u64).map(|i| skein::spawn(move || i)).collect();
            let sum: u64 = hs.into_iter().map(|h| h.join()).sum();
            let got = l.launch(sum, |x, s| {
                assert_eq!(skein::current_worker(), 2);
                skein::yield_now(); // may block: a fiber, holding the latch
                *x += s;
                *x
            });
            assert_eq!(got, 55);
            let a = TrustArray::new(10, 1000u64, |base, i| base + i as u64);
            assert_eq!(a.apply(9, 1u64, |v, k| *v + k), 1010);
        })
        .unwrap();
}

/// The local variants keep taking capturing closures, on every worker of the caller's rank (4
/// workers: worker 1 is on the caller's rank also in a loopback split into 2 ranks).
#[test]
fn local_variants_capture() {
    rt(4)
        .run(|| {
            let name = String::from("abc");
            let t = skein::trustee(1).entrust(String::new());
            let n2 = name.clone();
            t.apply_local(move |s| s.push_str(&n2));
            let (n3, seen) = (name.clone(), Arc::new(AtomicU64::new(0)));
            let s2 = seen.clone();
            t.apply_then_local(move |s| s.len() + n3.len(), move |n| s2.store(n as u64, Relaxed));
            skein::wait_quiescent();
            assert_eq!(seen.load(Relaxed), 6);
            let h = skein::spawn_local_on(1, move || format!("{name}{}", skein::current_worker()));
            assert_eq!(h.join(), "abc1");
        })
        .unwrap();
}
