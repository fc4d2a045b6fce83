//! The idle policy: a worker with nothing due backs off to sleeping instead of burning a core.
//!
//! No timed assertion: the bound below is two orders of magnitude above what a sleeping worker
//! does in the same time, and far below what a spinning or yielding one does.

use skein::Runtime;

#[test]
fn idle_worker_sleeps_instead_of_spinning() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    rt.run(|| {
        // Worker 1 has nothing to do: no fibers, no requests for it, none of its own in flight.
        // Block worker 0's thread (not just the fiber) for a while.
        let t = skein::trustee(1).entrust_new(0u32, |x| x);
        t.apply((), |c, ()| *c += 1);
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_eq!(t.apply((), |c, ()| *c), 1);
    })
    .unwrap();
    let idle = rt.stats().workers[1].idle_polls;
    // Spinning/yielding for 300 ms would be millions of polls; sleeping (25-400 µs per poll
    // after about 2,100 spins and yields) is a few thousand.
    assert!(idle < 200_000, "worker 1 polled {idle} times while idle: it did not sleep");
}
