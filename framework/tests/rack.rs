//! Rack mode's bootstrap on several ranks (feature `mpi`; `harness = false`).
//!
//! `cargo test --features mpi` runs this binary without `mpirun`: it is then the *harness*,
//! and re-launches itself under `mpirun` once per case (MPI can be initialised only once per
//! process), with `--rack-case NAME DIR`, where the copies run the case's rank side. Each
//! launch is a subprocess with a deadline; the harness checks its exit status, its output and
//! that no rank outlives it, and prints a libtest-style summary. Arguments that are not flags
//! filter the cases by name, as with libtest.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The launch line that works as root and on a 2-core machine (without `--bind-to none`
/// Open MPI pins each rank to one core).
const MPIRUN_FLAGS: [&str; 4] = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none"];

/// How long a launch may take before the harness kills it and fails the case.
const HARD_LIMIT: Duration = Duration::from_secs(40);

/// Fate sharing promises every rank ends within this long of a panic or `kill -9`.
const FATE_LIMIT: Duration = Duration::from_secs(10);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--rack-case") {
        let (case, dir) = match (args.get(i + 1), args.get(i + 2)) {
            (Some(c), Some(d)) => (c.clone(), PathBuf::from(d)),
            _ => {
                eprintln!("usage: rack --rack-case NAME DIR");
                std::process::exit(2);
            }
        };
        rank_side(&case, &dir);
        return;
    }
    harness(&args[1..]);
}

// ---------------------------------------------------------------------------------------
// The rank side: what each process started by mpirun does.
// ---------------------------------------------------------------------------------------

fn rank_side(case: &str, dir: &Path) {
    // rank() runs the bootstrap (collective) and is known even when the bootstrap failed.
    let (rank, ranks) = (skein::rank(), skein::ranks());
    write_file(&dir.join(format!("pid.{rank}")), &std::process::id().to_string());
    match case {
        "info" => {
            skein::rack::init().expect("bootstrap");
            let token = skein::rack::job_token().expect("a token under mpirun");
            println!("INFO rank={rank} ranks={ranks} token={token:016x}");
        }
        "foreign" => match skein::Runtime::builder().workers(1).build() {
            Err(e) => {
                println!("REFUSED rank={rank}: {e}");
                std::process::exit(3);
            }
            Ok(_) => println!("ACCEPTED rank={rank}"),
        },
        "panic" => {
            skein::rack::init().expect("bootstrap");
            if rank == 1 {
                write_file(&dir.join("panicking"), "");
                panic!("deliberate panic on rank {rank}");
            }
            // Rank 0 would finish only after 30 s: fate sharing must end it long before.
            std::thread::sleep(Duration::from_secs(30));
            println!("SURVIVED rank={rank}");
        }
        "panic-while-0-finalizes" => {
            skein::rack::init().expect("bootstrap");
            if rank == 1 {
                // Rank 0 is in MPI_Finalize by now, which waits for every rank.
                std::thread::sleep(Duration::from_millis(500));
                write_file(&dir.join("panicking"), "");
                panic!("deliberate panic on rank {rank}");
            }
            // Returns at once: MPI_Finalize (at exit) waits for rank 1.
        }
        "exit-within" => {
            skein::rack::init().expect("bootstrap");
            if rank == 1 {
                // An error only this rank met: it exits (MPI_Finalize, at exit, waits for
                // rank 0) while rank 0 waits for it in a collective.
                write_file(&dir.join("panicking"), "");
                skein::rack::exit_within(Duration::from_secs(2), 3);
                return;
            }
            let rt = skein::Runtime::builder().workers(1).build().expect("build");
            report_run(rank, rt.run(|| ()));
            println!("SURVIVED rank={rank}");
        }
        "abort" => {
            skein::rack::init().expect("bootstrap");
            if rank == 1 {
                write_file(&dir.join("panicking"), "");
                skein::rack::abort(7, "deliberate abort");
            }
            std::thread::sleep(Duration::from_secs(30));
            println!("SURVIVED rank={rank}");
        }
        "kill" => {
            skein::rack::init().expect("bootstrap");
            write_file(&dir.join(format!("ready.{rank}")), "");
            std::thread::sleep(Duration::from_secs(30));
            println!("SURVIVED rank={rank}");
        }
        "run" => {
            let rt = skein::Runtime::builder().workers(2).build().expect("build");
            report_run(rank, rt.run(|| (6 * 7, skein::ranks(), skein::num_workers())));
            // The transport the run chose (the same on every rank).
            let used = skein::rack_transport_used().map(|t| t.name()).unwrap_or("none");
            println!("USED rank={rank} {used}");
            // And per rank (different ones when the job spans nodes).
            let per: Vec<&str> = skein::rack_transports().iter().map(|t| t.name()).collect();
            println!("PER rank={rank} {}", per.join(","));
        }
        "verbs" => {
            let rt = skein::Runtime::builder()
                .workers(2)
                .rack_transport(skein::RackTransport::Verbs)
                .build()
                .expect("build");
            report_run(rank, rt.run(|| (6 * 7, skein::ranks(), skein::num_workers())));
        }
        "spawn" => spawn_everywhere(rank),
        "spawn-mixed" => {
            // Ranks 0 and 1 one node, 2 and 3 another (ranks of one host, split): `auto`
            // mixes the rings within a node with MPI between nodes.
            std::env::set_var("SKEIN_RANKS_PER_NODE", "2");
            spawn_everywhere(rank);
            let used: Vec<&str> = skein::rack_transports().iter().map(|t| t.name()).collect();
            println!("TRANSPORTS rank={rank} {}", used.join(" "));
        }
        "stats" => {
            // main starts one fiber on every global worker; afterwards `Runtime::stats` shows
            // every rank's workers (gathered at the end of the run), the same on every rank,
            // and each rank's detector counted the round ends it acted on (at least the last).
            let rt = skein::Runtime::builder().workers(2).round_ends(true).build().expect("build");
            let r = rt.run(|| {
                let n = skein::num_workers();
                let hs: Vec<_> = (0..n).map(|g| skein::spawn_on(g, g as u64, |g| g + 1)).collect();
                hs.into_iter().map(|h| h.join()).sum::<u64>()
            });
            let st = rt.stats();
            let spawned: Vec<u64> = st.workers.iter().map(|w| w.fibers_spawned).collect();
            let ends = st.workers.iter().step_by(2).all(|w| w.round_ends.count >= 1);
            // This rank's own times around the run: one run, its workers timed.
            let timed = st.run.runs == 1 && st.run.workers_ns > 0;
            report_run(rank, r.map(|sum| (sum, spawned, ends, timed)));
        }
        "stall" => {
            // A fiber on rank 1 waits for a latch that another holds until both ranks have
            // printed a stall dump (rank 0 says so with a file): every rank explains itself
            // after the 1 s limit, and the run then finishes normally.
            let _ = STALL_DIR.set(dir.to_path_buf());
            let d = dir.to_path_buf();
            std::thread::spawn(move || {
                while skein::stall_dumps() == 0 {
                    std::thread::sleep(Duration::from_millis(10));
                }
                write_file(&d.join(format!("dumped.{rank}")), "");
            });
            let rt = skein::Runtime::builder().workers(2).stall_secs(1).build().expect("build");
            report_run(
                rank,
                rt.run(|| {
                    let last = skein::num_workers() - 1;
                    let l = skein::trustee(last).entrust_new((), |()| skein::Latch::new(0u32));
                    let (a, b) = (l.clone(), l.clone());
                    // In this order on one pair: the holder's fiber locks first.
                    let h1 = skein::spawn_local_on(0, move || {
                        a.launch((), |_, ()| {
                            let dumped = || {
                                skein::stall_dumps() > 0
                                    && STALL_DIR.get().is_some_and(|d| d.join("dumped.0").exists())
                            };
                            while !dumped() {
                                std::thread::sleep(Duration::from_millis(1));
                                skein::yield_now();
                            }
                        })
                    });
                    let h2 = skein::spawn_local_on(0, move || {
                        b.launch((), |x, ()| {
                            *x += 1;
                            *x
                        })
                    });
                    h1.join();
                    h2.join()
                }),
            );
        }
        "silent" => {
            // A fiber on rank 1 stops its whole process (SIGSTOP); rank 0's stall dump names
            // rank 1 as silent, then the harness continues it (SIGCONT) and the run ends.
            let d = dir.to_path_buf();
            std::thread::spawn(move || {
                while skein::stall_dumps() == 0 {
                    std::thread::sleep(Duration::from_millis(10));
                }
                write_file(&d.join(format!("dumped.{rank}")), "");
            });
            let rt = skein::Runtime::builder().workers(1).stall_secs(1).build().expect("build");
            report_run(
                rank,
                rt.run(|| {
                    skein::spawn_on(1, (), |()| {
                        // SAFETY: raise(2) with a valid signal; it touches no memory.
                        unsafe { libc::raise(libc::SIGSTOP) };
                        7u32
                    })
                    .join()
                }),
            );
        }
        "quiescent" => {
            // Detached fibers across ranks, then wait_quiescent from main: every one of them
            // (and the ones they started) has finished when it returns.
            let rt = skein::Runtime::builder().workers(2).build().expect("build");
            report_run(
                rank,
                rt.run(|| {
                    let n = skein::num_workers();
                    for round in 0..3u64 {
                        for g in 0..n {
                            drop(skein::spawn_on(g, (round, n), |(round, n)| {
                                let g = skein::current_worker();
                                drop(skein::spawn_on((g + 1) % n, round, |_| ()));
                            }));
                        }
                        skein::wait_quiescent();
                    }
                    // Drivers on every worker of every rank: each starts a fiber on the next
                    // worker that counts there (`quiescent_add`) and lowers its minimum lane
                    // 1, sets its own minimum lane 0, then waits; every driver must get the
                    // same exact sums and minima.
                    let drivers: Vec<_> = (0..n)
                        .map(|g| {
                            skein::spawn_on(g, n, |n| {
                                let g = skein::current_worker();
                                drop(skein::spawn_on((g + 1) % n, g as u64, |g| {
                                    skein::quiescent_add([1, g, 0, 0]);
                                    skein::quiescent_min(1, 100 - g);
                                }));
                                skein::quiescent_add([0, 0, 1, 0]);
                                skein::quiescent_set_min(0, 10 + g as u64);
                                let t = skein::wait_quiescent_totals();
                                (t.sums, t.mins)
                            })
                        })
                        .collect();
                    let totals: Vec<_> = drivers.into_iter().map(|d| d.join()).collect();
                    let agree = totals.iter().all(|t| *t == totals[0]);
                    let (sums, mins) = totals[0];
                    format!(
                        "quiescent three times, totals {sums:?}, minima {mins:?}, agreed {agree}"
                    )
                }),
            );
        }
        "batch-bytes" => {
            // The same stream of small requests from rank 0 to a property on rank 1, with the
            // default batches and with `rack_batch_bytes(16384)`: every request served once,
            // and the larger setting carries more of them per request envelope (over the
            // rings; over MPI messages the setting changes nothing).
            let per_envelope = |bytes: Option<usize>| {
                let mut b = skein::Runtime::builder().workers(1);
                if let Some(bytes) = bytes {
                    b = b.rack_batch_bytes(bytes);
                }
                let rt = b.build().expect("build");
                let sum = rt
                    .run(|| {
                        let t = skein::trustee(1).entrust_new(0u64, |v| v);
                        for i in 0..20_000u64 {
                            t.apply_then(i, |v, i| *v += i, |()| ());
                        }
                        skein::wait_quiescent();
                        t.apply((), |v, ()| *v)
                    })
                    .expect("run");
                let w0 = &rt.stats().workers[0];
                (sum, w0.mean_envelope())
            };
            let (small_sum, small) = per_envelope(None);
            let (large_sum, large) = per_envelope(Some(16384));
            let rings = skein::rack_transports().contains(&skein::RackTransport::Shm);
            report_run(
                rank,
                Ok::<_, skein::Error>((small_sum, large_sum, rings, !rings || large > small)),
            );
            if rank == 0 {
                println!(
                    "BATCHES requests per envelope: default {small:.1}, 16384 bytes {large:.1}"
                );
            }
        }
        "many-runs" => {
            // Runs of two runtimes (1 and 2 workers per rank) in turn, each with round trips
            // across ranks and `wait_quiescent`, one whose main panics among them: the rings
            // of a run serve the next run of the same shape (set up again only when the shape
            // changes), the board's rounds go on from where the last run left them, and every
            // result is exact.
            let rts: Vec<skein::Runtime> = [1, 2]
                .iter()
                .map(|&w| skein::Runtime::builder().workers(w).build().expect("build"))
                .collect();
            let work = |rt: &skein::Runtime, k: u64| {
                rt.run(move || {
                    let n = skein::num_workers();
                    let props: Vec<skein::Trust<u64>> =
                        (0..n).map(|g| skein::trustee(g).entrust_new(g as u64, |g| g)).collect();
                    for round in 0..5u64 {
                        for t in &props {
                            t.apply_then(round + k, |v, d| *v += d, |_| ());
                        }
                        skein::wait_quiescent();
                    }
                    props.iter().map(|t| t.apply((), |v, ()| *v)).sum::<u64>()
                })
            };
            let mut sums = Vec::new();
            let mut setups = Vec::new();
            for (rt, runs) in [(0, 4), (0, 1), (0, 2), (1, 3), (0, 2)] {
                for k in 0..runs {
                    if (rt, runs) == (0, 1) {
                        let r = rts[0].run(|| -> u64 { panic!("deliberate panic in main") });
                        sums.push(r.map_or(0, |_| 1));
                    } else {
                        sums.push(work(&rts[rt], k).expect("run"));
                    }
                }
                setups.push(skein::rack_ring_setups());
            }
            let useful: u64 =
                rts.iter().flat_map(|rt| rt.stats().workers).map(|w| w.park_timeouts_useful).sum();
            let rings = skein::rack_transports().contains(&skein::RackTransport::Shm);
            report_run(rank, Ok::<_, skein::Error>((sums, rings, setups, useful)));
        }
        "wake-1" | "wake-2" => {
            // Round trips across ranks (a chain of blocking `apply`s through every worker),
            // detached fibers and `wait_quiescent`, with workers that block between them
            // (over the rings: a futex word each, woken by the other ranks' writes). The
            // results are exact, and no safety-net timeout of a blocked worker ever found
            // work (a lost wake-up), on any rank.
            let w = if case == "wake-1" { 1 } else { 2 };
            let rt = skein::Runtime::builder().workers(w).build().expect("build");
            let r = rt.run(|| {
                let n = skein::num_workers();
                let props: Vec<skein::Trust<u64>> =
                    (0..n).map(|g| skein::trustee(g).entrust_new(g as u64, |g| g)).collect();
                let mut sum = 0u64;
                for round in 0..20u64 {
                    for t in &props {
                        sum += t.apply(round, |v, r| {
                            *v += r;
                            *v
                        });
                    }
                    // A detached fiber on every worker waits for a fiber on the next worker
                    // (a round trip from every rank), and main adds 1 to every property
                    // without waiting; then the round ends at quiescence.
                    for g in 0..n {
                        drop(skein::spawn_on(g, n, |n| {
                            let next = (skein::current_worker() + 1) % n;
                            skein::spawn_on(next, next as u64, |x| x + 1).join()
                        }));
                    }
                    for t in &props {
                        t.apply_then(1u64, |v, d| *v += d, |_| ());
                    }
                    skein::wait_quiescent();
                }
                let finals: Vec<u64> = props.iter().map(|t| t.apply((), |v, ()| *v)).collect();
                (sum, finals)
            });
            let useful: u64 = rt.stats().workers.iter().map(|w| w.park_timeouts_useful).sum();
            report_run(rank, r.map(|r| (r, useful)));
        }
        "remote-panic" => {
            // A fiber on the last rank panics: its joiner gets the message naming where it
            // ran; a detached one fails the run on every rank.
            let rt = skein::Runtime::builder().workers(2).build().expect("build");
            let joined = rt.run(|| {
                let last = skein::num_workers() - 1;
                let h = skein::spawn_on(last, 0u8, |_| -> u8 { panic!("deliberate remote panic") });
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h.join())) {
                    Ok(_) => "no panic".to_string(),
                    Err(p) => p.downcast_ref::<String>().cloned().unwrap_or_default(),
                }
            });
            report_run(rank, joined);
            let detached = rt.run(|| {
                drop(skein::spawn_on(skein::num_workers() - 1, 0u8, |_| -> u8 {
                    panic!("deliberate detached panic")
                }));
            });
            report_run(rank, detached);
            // A report longer than the exchange's head, and a decision longer than its first
            // broadcast (`rack/outcome.rs`): a 20,000-byte panic message recorded on the last
            // rank (by a fiber spawned there: a message that crosses ranks is cut at 4 KiB).
            let long = rt.run(|| {
                drop(skein::spawn_on(skein::num_workers() - 1, 0u8, |_| -> u8 {
                    drop(skein::spawn(|| -> u8 { panic!("long {}", "x".repeat(20_000)) }));
                    0
                }));
            });
            let whole = match &long {
                Err(skein::Error::Panicked { first, count }) => {
                    (first.contains(&"x".repeat(20_000)), *count)
                }
                _ => (false, 0),
            };
            report_run(rank, Ok::<_, skein::Error>(whole));
            // A value of main longer than the head (it travels in rank 0's report).
            let big = rt.run(|| (0..5_000u64).collect::<Vec<u64>>());
            report_run(rank, big.map(|v| (v.len(), v.iter().sum::<u64>())));
        }
        "faults" => {
            // On 3 ranks of 2 workers, the faults are on the last worker (rank 2): a panic in
            // a remote `apply` resumes in its caller and the trustee goes on serving; a panic
            // in an `apply_then` fails the run; `apply_with_then` from main reaches every
            // trustee; a fiber blocked forever on rank 2 is a deadlock; the last handle of a
            // property on rank 2, dropped with requests in flight, drops it after them.
            let rt = skein::Runtime::builder().workers(2).build().expect("build");
            let last = || skein::num_workers() - 1;
            report_run(
                rank,
                rt.run(move || {
                    let t = skein::trustee(last()).entrust_new(0u64, |x| x);
                    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        t.apply(7u64, |_, k| -> u64 { panic!("deliberate panic in apply {k}") })
                    }));
                    let text = caught.err().and_then(|p| p.downcast_ref::<String>().cloned());
                    (text, t.apply(1u64, |c, k| *c + k))
                }),
            );
            report_run(
                rank,
                rt.run(move || {
                    let t = skein::trustee(last()).entrust_new(0u64, |x| x);
                    t.apply_then(
                        (),
                        |_, ()| -> u8 { panic!("deliberate panic in apply_then") },
                        |_| {},
                    );
                    skein::wait_quiescent();
                }),
            );
            report_run(
                rank,
                rt.run(|| {
                    // Each answer: the trustee's value, its rank, and the sum of the argument.
                    let got = std::rc::Rc::new(std::cell::Cell::new(0u64));
                    for g in 0..skein::num_workers() {
                        let t = skein::trustee(g).entrust_new(g as u64, |x| x);
                        let got = got.clone();
                        t.apply_with_then(
                            vec![g as u64; 3],
                            |c, v: Vec<u64>| (*c, skein::rank() as u64, v.iter().sum::<u64>()),
                            move |(value, at, sum): (u64, u64, u64)| {
                                got.set(got.get() + value * 1000 + at * 100 + sum)
                            },
                        );
                    }
                    skein::wait_quiescent();
                    got.get()
                }),
            );
            report_run(
                rank,
                rt.run(move || {
                    skein::spawn_on(last(), (), |()| {
                        let latch = skein::Latch::new(());
                        let _held = latch.lock();
                        let _again = latch.lock(); // waits for itself
                    })
                    .join();
                }),
            );
            // The last handle of a property on rank 2 dropped on rank 0 with 20,000
            // `apply_then` still on their way: it is dropped once, on its owner, after every
            // request (DROPS, DROPPED_AT); and where every worker is (`rank_of`).
            report_run(
                rank,
                rt.run(move || {
                    let t = skein::trustee(last()).entrust_new(0u64, Counted::new);
                    for _ in 0..20_000 {
                        t.apply_then(1u64, |c, d| c.add(d), |_| {});
                    }
                    drop(t);
                    skein::wait_quiescent();
                    (0..skein::num_workers()).map(skein::rank_of).collect::<Vec<_>>()
                }),
            );
            println!(
                "DROPS rank={rank} n={} at={}",
                DROPS.load(std::sync::atomic::Ordering::SeqCst),
                DROPPED_AT.load(std::sync::atomic::Ordering::SeqCst)
            );
        }
        "property" => {
            // Properties on every worker of every rank: made by main (rank 0) and by a driver
            // fiber on every worker, used with every call kind, dropped; each is dropped
            // exactly once, on its owner (counted per process in DROPS).
            let rt = skein::Runtime::builder().workers(2).build().expect("build");
            let r = rt.run(|| {
                let n = skein::num_workers();
                let props: Vec<skein::Trust<Counted>> = (0..n)
                    .map(|g| skein::trustee(g).entrust_new(g as u64 * 100, Counted::new))
                    .collect();
                let mut out = Vec::new();
                for t in &props {
                    for _ in 0..1000 {
                        t.apply_then(1u64, |c, d| c.add(d), |_| ());
                    }
                    let v = t.apply(1u64, |c, d| c.add(d));
                    let w = t.apply_with(vec![1u64, 2, 3], |c, v: Vec<u64>| c.add(v.iter().sum()));
                    let owner = t.apply((), |_, ()| (skein::rank(), skein::current_worker()));
                    out.push((v, w, owner));
                }
                let copies: Vec<_> = props.to_vec();
                drop(props);
                // Every worker makes its own property on every trustee, uses and drops it.
                let drivers: Vec<_> = (0..n)
                    .map(|g| {
                        skein::spawn_on(g, n, |n| {
                            let mine: Vec<_> = (0..n)
                                .map(|t| skein::trustee(t).entrust_new(t as u64, Counted::new))
                                .collect();
                            for t in &mine {
                                for _ in 0..100 {
                                    t.apply_then(1u64, |c, d| c.add(d), |_| ());
                                }
                            }
                            mine.iter().map(|t| t.apply((), |c, ()| c.0)).sum::<u64>()
                        })
                    })
                    .collect();
                let sums: Vec<u64> = drivers.into_iter().map(|h| h.join()).collect();
                drop(copies);
                (out, sums)
            });
            report_run(rank, r);
            println!("DROPS rank={rank} n={}", DROPS.load(std::sync::atomic::Ordering::SeqCst));
        }
        "handles-travel" => {
            // Handles inside messages: main (rank 0) hands the handles of counters on every
            // worker to a latch on the last worker, whose launched fiber adds through each
            // (proxies made there, or the property itself on its own rank); then main reads.
            let rt = skein::Runtime::builder().workers(2).build().expect("build");
            report_run(
                rank,
                rt.run(|| {
                    let n = skein::num_workers();
                    let counters: Vec<skein::Trust<u64>> =
                        (0..n).map(|g| skein::trustee(g).entrust_new(g as u64, |v| v)).collect();
                    let holder = skein::trustee(n - 1)
                        .entrust_new((), |()| skein::Latch::new(Vec::<skein::Trust<u64>>::new()));
                    holder.apply_with(counters.clone(), |l, v: Vec<skein::Trust<u64>>| {
                        if let Some(mine) = l.get_mut() {
                            *mine = v;
                        }
                    });
                    let added = holder.launch(1000u64, |held, k| {
                        for c in held.iter() {
                            c.apply(k, |x, k| *x += k);
                        }
                        held.clear();
                        skein::rank()
                    });
                    let values: Vec<u64> =
                        counters.iter().map(|c| c.apply((), |x, ()| *x)).collect();
                    (added, values)
                }),
            );
        }
        "handles-three" => {
            // A handle of each worker's property travels rank 0 -> rank 1 -> rank 2 inside
            // apply_with messages, each sender dropping its own: rank 2 uses every property
            // (alive until the last handle goes), and each is dropped exactly once, on its
            // trustee (DROPS per process).
            type Relay = Vec<skein::Trust<Counted>>;
            type Next = Option<skein::Trust<skein::Latch<Relay>>>;
            let rt = skein::Runtime::builder().workers(2).build().expect("build");
            report_run(
                rank,
                rt.run(|| {
                    let n = skein::num_workers();
                    let props: Relay = (0..n)
                        .map(|g| skein::trustee(g).entrust_new(g as u64, Counted::new))
                        .collect();
                    let c = skein::trustee(4).entrust_new((), |()| skein::Latch::new(Relay::new()));
                    let b = skein::trustee(2)
                        .entrust_new((), |()| skein::Latch::new((Relay::new(), Next::None)));
                    // Rank 0 keeps no handle of the properties, nor of C's latch.
                    b.apply_with((props, c.clone()), |l, (v, c): (Relay, skein::Trust<_>)| {
                        if let Some(m) = l.get_mut() {
                            *m = (v, Some(c));
                        }
                    });
                    // Rank 1 hands them on to rank 2 and drops its own.
                    let moved = b.launch((), |(v, c), ()| {
                        let v = std::mem::take(v);
                        let k = v.len();
                        if let Some(c) = c.take() {
                            c.apply_with(v, |l, v: Relay| {
                                if let Some(m) = l.get_mut() {
                                    *m = v;
                                }
                            });
                        }
                        (k, skein::rank())
                    });
                    drop(b);
                    // Rank 2 adds through every handle, then drops them.
                    let seen = c.launch(1000u64, |held, k| {
                        let mut out = [0u64; 6];
                        for (o, h) in out.iter_mut().zip(held.iter()) {
                            *o = h.apply(k, |x, k| x.add(k));
                        }
                        let held_len = held.len();
                        held.clear();
                        (out, held_len, skein::rank())
                    });
                    (moved, seen)
                }),
            );
            println!("DROPS rank={rank} n={}", DROPS.load(std::sync::atomic::Ordering::SeqCst));
        }
        "array-across-ranks" => {
            // A TrustArray spans every worker of every rank: each part built and kept on its
            // trustee, every element reachable from main.
            let rt = skein::Runtime::builder().workers(2).build().expect("build");
            report_run(
                rank,
                rt.run(|| {
                    let a = skein::TrustArray::new(21, 100u64, |base, i| base + i as u64);
                    let sum: u64 = (0..21).map(|i| a.apply(i, (), |x, ()| *x)).sum();
                    for i in 0..21 {
                        a.apply_then(i, 1u64, |x, d| *x += d, |()| ());
                    }
                    let last = a.apply(20, 5u64, |x, d| {
                        *x += d;
                        (*x, skein::rank())
                    });
                    (sum, last)
                }),
            );
        }
        "array-travels" => {
            // A TrustArray of counted values built by main travels inside apply_with to a
            // latch on every worker of every rank; a fiber on each adds 1 to every value
            // through the array it received (element requests, its own rank's parts too) and
            // reads them back. Main then sees every value raised once per worker, and each
            // value is dropped exactly once, on its owner.
            let rt = skein::Runtime::builder().workers(2).build().expect("build");
            report_run(
                rank,
                rt.run(|| {
                    type Keeper = skein::Latch<Option<skein::TrustArray<Counted>>>;
                    let n = skein::num_workers();
                    let a =
                        skein::TrustArray::new(21, 100u64, |base, i| Counted::new(base + i as u64));
                    let keepers: Vec<skein::Trust<Keeper>> = (0..n)
                        .map(|g| skein::trustee(g).entrust_new((), |()| skein::Latch::new(None)))
                        .collect();
                    for k in &keepers {
                        k.apply_with(a.clone(), |k, a| {
                            if let Some(k) = k.get_mut() {
                                *k = Some(a);
                            }
                        });
                    }
                    let fibers: Vec<_> = keepers
                        .iter()
                        .map(|k| {
                            let k = k.clone();
                            skein::spawn(move || {
                                k.launch((), |k, ()| {
                                    let a = k.take().expect("the array arrived");
                                    for i in 0..a.len() {
                                        a.apply_then(i, 1u64, |v, d| _ = v.add(d), |()| ());
                                    }
                                    skein::wait_quiescent();
                                    (0..a.len()).map(|i| a.apply(i, (), |v, ()| v.0)).sum::<u64>()
                                })
                            })
                        })
                        .collect();
                    let seen: Vec<u64> = fibers.into_iter().map(|f| f.join()).collect();
                    let sum: u64 = (0..21).map(|i| a.apply(i, (), |v, ()| v.0)).sum();
                    (sum, seen.iter().all(|&s| s >= (0..21).map(|i| 100 + i).sum::<u64>()))
                }),
            );
            println!("DROPS rank={rank} n={}", DROPS.load(std::sync::atomic::Ordering::SeqCst));
        }
        c if c.starts_with("stress") => {
            // Every worker of every rank drives STRESS_REQUESTS / (pairs) apply_then to each
            // worker of the other ranks (all remote pairs), with per-pair sequence numbers:
            // the trustee counts requests out of order, the continuation responses out of
            // order; every count is exact (none lost, none duplicated). `stress-wW`: W
            // workers per rank and a tenth of the requests; the envelopes then carry the
            // segments of several trustees, forwarded by their landing worker (SEGMENTS).
            let (workers, total) = match c.strip_prefix("stress-w") {
                Some(w) => (w.parse().expect("stress-wW"), STRESS_REQUESTS / 10),
                None => (2, STRESS_REQUESTS),
            };
            let rt = skein::Runtime::builder().workers(workers).build().expect("build");
            report_run(
                rank,
                rt.run(move || {
                    let n = skein::num_workers();
                    let w = skein::local_workers();
                    let per_pair = total / (n * (n - w)) as u64;
                    let drivers: Vec<_> = (0..n)
                        .map(|g| skein::spawn_on(g, (n, per_pair), |(n, k)| stress_driver(n, k)))
                        .collect();
                    drivers.into_iter().map(|h| h.join()).collect::<Vec<_>>()
                }),
            );
            println!("DROPS rank={rank} n={}", DROPS.load(std::sync::atomic::Ordering::SeqCst));
            let t = rt.stats().total();
            println!(
                "SEGMENTS rank={rank} envelopes={} segments={} forwarded={} responses={}",
                t.envelopes_sent, t.segments_sent, t.segments_forwarded, t.responses_sent
            );
        }
        c if c.starts_with("forged-") => {
            // A forged envelope (the `forge_envelope` hook: a real MPI message) from worker 0
            // of rank 0 (on 3 ranks: from worker 4 of rank 2) to worker 2 of rank 1; the run
            // must fail on every rank with the refusal, and the process exit non-zero.
            let how = forgery(&c["forged-".len()..]);
            let rt = skein::Runtime::builder().workers(2).build().expect("build");
            let r = rt.run(move || {
                let sender = if skein::ranks() == 3 { 4 } else { 0 };
                skein::spawn_on(sender, how, |how| {
                    skein::forge_envelope(2, forgery_of(how));
                    // Blocks until the refusal stops the run.
                    skein::trustee(2).entrust_new(1u64, |x| x).apply(1u64, |c, k| *c + k)
                })
                .join()
            });
            let failed = r.is_err();
            report_run(rank, r);
            if failed {
                std::process::exit(3);
            }
        }
        "then-across-ranks" => {
            // From delegated context (a continuation on worker 0): `entrust_new_then` on every
            // worker of every rank and `TrustArray::new_then` over them; every value built on
            // its trustee, reachable, dropped exactly once there (DROPS). Then the blocking
            // forms from delegated context: refused, naming the non-blocking ones.
            let rt = skein::Runtime::builder().workers(2).build().expect("build");
            let r = rt.run(|| {
                let n = skein::num_workers();
                let held = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
                let array = std::rc::Rc::new(std::cell::RefCell::new(None));
                let (held2, array2) = (held.clone(), array.clone());
                let hub = skein::trustee(1).entrust(0u8);
                hub.apply_then(
                    (),
                    |_, ()| (),
                    move |()| {
                        for g in 0..n {
                            let held = held2.clone();
                            skein::trustee(g).entrust_new_then(g as u64, Counted::new, move |t| {
                                held.borrow_mut().push(t)
                            });
                        }
                        skein::TrustArray::new_then(
                            21,
                            100u64,
                            |b, i| Counted::new(b + i as u64),
                            move |a| *array2.borrow_mut() = Some(a),
                        );
                    },
                );
                while held.borrow().len() < n || array.borrow().is_none() {
                    skein::yield_now();
                }
                let mut owners: Vec<(u64, usize, usize)> = held
                    .borrow()
                    .iter()
                    .map(|t| {
                        t.apply(1u64, |c, d| (c.add(d), skein::rank(), skein::current_worker()))
                    })
                    .collect();
                owners.sort_unstable();
                let a = array.borrow_mut().take().expect("the array");
                let sum: u64 = (0..21).map(|i| a.apply(i, (), |c, ()| c.0)).sum();
                let last = a.apply(20, (), |_, ()| (skein::rank(), skein::current_worker()));
                held.borrow_mut().clear();
                (owners, sum, last)
            });
            report_run(rank, r);
            let blocking = rt.run(|| {
                let far = skein::num_workers() - 1;
                let hub = skein::trustee(1).entrust(0u8);
                hub.apply_then(
                    (),
                    |_, ()| (),
                    move |()| {
                        skein::trustee(far).entrust_new(1u64, |v| v);
                    },
                );
                skein::wait_quiescent();
            });
            report_run(rank, blocking);
            let blocking = rt.run(|| {
                let hub = skein::trustee(1).entrust(0u8);
                hub.apply_then(
                    (),
                    |_, ()| (),
                    |()| {
                        skein::TrustArray::new(9, (), |(), i| i as u64);
                    },
                );
                skein::wait_quiescent();
            });
            report_run(rank, blocking);
            println!("DROPS rank={rank} n={}", DROPS.load(std::sync::atomic::Ordering::SeqCst));
        }
        "job" => {
            let rt = skein::Runtime::builder().workers(2).build().expect("build");
            let total = rt
                .run(|| {
                    let counter = skein::trustee(1).entrust(0u64);
                    let hs: Vec<_> = (0..8)
                        .map(|_| {
                            let c = counter.clone();
                            skein::spawn(move || {
                                for _ in 0..100 {
                                    c.apply((), |x, ()| *x += 1)
                                }
                            })
                        })
                        .collect();
                    hs.into_iter().for_each(|h| h.join());
                    counter.apply((), |x, ()| *x)
                })
                .expect("run on one rank");
            let token = skein::rack::job_token().is_some();
            println!("JOB rank={rank} ranks={ranks} total={total} token={token}");
        }
        "bench-empty-run" => {
            // A measurement, not a test (not in the harness's list): the cost of an empty
            // `Runtime::run` over the ranks, and of the start-of-run shape agreement alone (an
            // all-gather of two words, as `rack::mpi::agree_shape` does). Run by hand:
            // mpirun ... -np 2 target/release/deps/rack-* --rack-case bench-empty-run /tmp
            use mpi::traits::*;
            let rt = skein::Runtime::builder().workers(1).build().expect("build");
            let world = mpi::topology::SimpleCommunicator::world();
            let median = |mut v: Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            for round in 0..3 {
                let mut runs = Vec::new();
                for _ in 0..1000 {
                    let t = Instant::now();
                    rt.run(|| ()).expect("empty run");
                    runs.push(t.elapsed().as_secs_f64() * 1e6);
                }
                let mut gathers = Vec::new();
                let mut all = vec![0u64; 2 * skein::ranks()];
                for _ in 0..1000 {
                    world.barrier();
                    let t = Instant::now();
                    world.all_gather_into(&[1u64, 1u64][..], &mut all[..]);
                    gathers.push(t.elapsed().as_secs_f64() * 1e6);
                }
                if rank == 0 {
                    println!(
                        "BENCH round {round}: empty run median {:.1} us; all-gather of 2 words \
                         median {:.2} us",
                        median(runs),
                        median(gathers)
                    );
                }
            }
        }
        other => {
            eprintln!("unknown rack case {other:?}");
            std::process::exit(2);
        }
    }
}

/// The forgeries of the `forged-*` cases, by name, as a `Plain` index for [`forgery_of`].
fn forgery(name: &str) -> u8 {
    match name {
        "token" => 0,
        "code-id" => 1,
        "record-size" => 2,
        "count" => 3,
        "stale-target" => 4,
        "job-run" => 5,
        other => {
            eprintln!("unknown forgery {other:?}");
            std::process::exit(2);
        }
    }
}

fn forgery_of(i: u8) -> skein::Forgery {
    use skein::Forgery::*;
    [Token, CodeId, RecordSize, Count, StaleTarget, JobRun][i as usize]
}

/// Properties dropped in this process.
static DROPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The value of the property dropped last in this process.
static DROPPED_AT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A property that counts its drops in [`DROPS`] (and leaves its value in [`DROPPED_AT`]).
struct Counted(u64);

impl Counted {
    fn new(v: u64) -> Counted {
        Counted(v)
    }
    fn add(&mut self, d: u64) -> u64 {
        self.0 += d;
        self.0
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        DROPPED_AT.store(self.0, std::sync::atomic::Ordering::SeqCst);
        DROPS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Remote `apply_then` requests of the stress case, over all its pairs together.
const STRESS_REQUESTS: u64 = 10_000_000;

/// What one (client, trustee) pair's requests looked like on the trustee.
#[derive(Default)]
struct PairLog {
    next: u64,
    count: u64,
    out_of_order: u64,
}

impl PairLog {
    fn record(&mut self, seq: u64) -> u64 {
        self.out_of_order += u64::from(seq != self.next);
        self.next = seq + 1;
        self.count += 1;
        seq
    }
}

impl Drop for PairLog {
    fn drop(&mut self) {
        DROPS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The stress case's driver on one worker: `per_pair` numbered `apply_then` to a property of
/// its own on every worker of the other ranks, issued in chunks (a blocking round trip to
/// each target after each chunk bounds what is in flight). Returns (requests sent, answers,
/// answers out of order, requests served, requests served out of order), summed over its
/// targets.
fn stress_driver(n: usize, per_pair: u64) -> (u64, u64, u64, u64, u64) {
    use std::cell::Cell;
    use std::rc::Rc;
    const CHUNK: u64 = 4096;
    let here = skein::rank();
    let logs: Vec<skein::Trust<PairLog>> = (0..n)
        .filter(|&t| skein::rank_of(t) != here)
        .map(|t| skein::trustee(t).entrust_new((), |()| PairLog::default()))
        .collect();
    // Per target: the next answer expected, and the answers out of order.
    let answers: Vec<Rc<Cell<(u64, u64)>>> = logs.iter().map(|_| Rc::default()).collect();
    let mut seq = 0;
    while seq < per_pair {
        let end = (seq + CHUNK).min(per_pair);
        for (log, got) in logs.iter().zip(&answers) {
            for s in seq..end {
                let got = Rc::clone(got);
                log.apply_then(
                    s,
                    |l, s| l.record(s),
                    move |s| {
                        let (next, bad) = got.get();
                        got.set((next + 1, bad + u64::from(s != next)));
                    },
                );
            }
        }
        for log in &logs {
            log.apply((), |_, ()| ());
        }
        seq = end;
    }
    let mut totals = (per_pair * logs.len() as u64, 0, 0, 0, 0);
    for (log, got) in logs.iter().zip(&answers) {
        let (count, out_of_order) = log.apply((), |l, ()| (l.count, l.out_of_order));
        let (answered, bad) = got.get();
        totals.1 += answered;
        totals.2 += bad;
        totals.3 += count;
        totals.4 += out_of_order;
    }
    totals
}

/// Prints a run's outcome as one `RUN-OK rank=R <value>` or `RUN-ERROR rank=R: <error>` line.
fn report_run<V: std::fmt::Debug>(rank: usize, r: Result<V, skein::Error>) {
    match r {
        Ok(v) => println!("RUN-OK rank={rank} {v:?}"),
        Err(e) => println!("RUN-ERROR rank={rank}: {e}"),
    }
}

fn write_file(path: &Path, content: &str) {
    // Written under a temporary name and renamed, so the harness never reads half a file.
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, content).expect("write to the case's directory");
    std::fs::rename(&tmp, path).expect("rename in the case's directory");
}

// ---------------------------------------------------------------------------------------
// The harness.
// ---------------------------------------------------------------------------------------

type Case = (&'static str, fn(&Path) -> Result<(), String>);

fn harness(args: &[String]) {
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let cases: [Case; 48] = [
        ("rank_and_ranks_on_2_ranks", |d| info_case(d, 2)),
        ("rank_and_ranks_on_3_ranks", |d| info_case(d, 3)),
        ("foreign_binary_is_refused_on_every_rank", foreign_case),
        ("panic_on_rank_1_ends_every_rank", |d| panic_case_of(d, "panic")),
        ("panic_on_rank_1_while_rank_0_finalizes_ends_every_rank", |d| {
            panic_case_of(d, "panic-while-0-finalizes")
        }),
        ("abort_on_rank_1_ends_every_rank", abort_case),
        ("an_error_on_rank_1_alone_ends_every_rank", exit_within_case),
        ("kill_9_of_rank_1_ends_every_rank", kill_case),
        ("run_on_2_ranks_returns_main_on_every_rank", |d| run_case(d, 2)),
        ("run_on_3_ranks_returns_main_on_every_rank", |d| run_case(d, 3)),
        ("verbs_without_a_device_fails_on_every_rank", verbs_case),
        ("spawn_on_every_worker_of_2_ranks", |d| spawn_case(d, 2)),
        ("spawn_on_every_worker_of_3_ranks", |d| spawn_case(d, 3)),
        ("rings_within_nodes_and_mpi_between_on_4_ranks", mixed_case),
        ("stats_show_every_ranks_workers_on_3_ranks", stats_case),
        ("wait_quiescent_across_3_ranks", quiescent_case),
        ("larger_rack_batches_carry_more_requests_per_envelope", batch_bytes_case),
        ("rings_serve_the_next_run_of_their_shape_on_2_ranks", |d| many_runs_case(d, 2)),
        ("rings_serve_the_next_run_of_their_shape_on_3_ranks", |d| many_runs_case(d, 3)),
        ("blocked_ranks_are_woken_on_2_ranks_of_2_workers", |d| wake_case(d, 2, 2)),
        ("blocked_ranks_are_woken_on_3_ranks_of_1_worker", |d| wake_case(d, 3, 1)),
        ("more_ranks_than_cores_4_ranks", |d| wake_case(d, 4, 1)),
        ("more_ranks_than_cores_8_ranks", |d| wake_case(d, 8, 1)),
        ("a_stuck_run_explains_itself_on_every_rank", stall_case),
        ("a_stopped_rank_is_named_silent", silent_case),
        ("remote_panics_are_named_on_every_rank", remote_panic_case),
        ("remote_apply_panics_and_deadlocks_are_reported_on_every_rank_of_3", faults_case),
        ("properties_on_every_worker_of_2_ranks", |d| property_case(d, 2)),
        ("properties_on_every_worker_of_3_ranks", |d| property_case(d, 3)),
        ("handles_travel_inside_messages_between_ranks", handles_case),
        ("handles_travel_through_3_ranks_and_drop_once", handles_three_case),
        ("trust_array_over_2_ranks", |d| array_case(d, 2)),
        ("trust_array_over_3_ranks", |d| array_case(d, 3)),
        ("trust_array_travels_to_every_worker_of_3_ranks", array_travels_case),
        ("ten_million_remote_apply_then_exact_and_in_order_on_3_ranks", stress_case),
        ("remote_apply_then_in_envelopes_per_rank_on_2_ranks_of_2_workers", |d| {
            stress_workers_case(d, 2)
        }),
        ("remote_apply_then_in_envelopes_per_rank_on_2_ranks_of_4_workers", |d| {
            stress_workers_case(d, 4)
        }),
        ("forged_token_is_refused_on_every_rank", |d| forged_case(d, 2, "token", "job token 0x")),
        ("forged_job_run_is_refused_on_every_rank", |d| {
            forged_case(d, 2, "job-run", ", this is run ")
        }),
        ("forged_code_id_is_refused_on_every_rank", |d| {
            forged_case(d, 2, "code-id", "is outside the executable's RELRO range")
        }),
        ("forged_record_size_is_refused_on_every_rank", |d| {
            forged_case(d, 2, "record-size", "1 record(s) in 32 bytes (expected 24)")
        }),
        ("forged_record_count_is_refused_on_every_rank", |d| {
            forged_case(d, 2, "count", "1000000 record(s) in 24 bytes")
        }),
        ("forged_stale_export_target_is_refused_on_every_rank", |d| {
            forged_case(d, 2, "stale-target", "export slot")
        }),
        ("forged_batch_from_rank_2_is_refused_on_every_rank_of_3", |d| {
            forged_case(d, 3, "stale-target", "export slot")
        }),
        ("non_blocking_entrust_from_delegated_context_on_2_ranks", |d| then_case(d, 2)),
        ("non_blocking_entrust_from_delegated_context_on_3_ranks", |d| then_case(d, 3)),
        ("one_rank_under_mpirun_runs_a_job", job_case),
        ("outside_mpirun_is_rank_0_of_1", |_| outside_case()),
    ];
    let selected: Vec<&Case> = cases
        .iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect();
    let filtered_out = cases.len() - selected.len();
    let start = Instant::now();
    println!("\nrunning {} tests", selected.len());
    if selected.iter().any(|(n, _)| *n != "outside_mpirun_is_rank_0_of_1") && !have_mpirun() {
        eprintln!(
            "error: `mpirun` not found on PATH: the rack tests launch ranks with it; install \
             Open MPI with scripts/install-mpi.sh"
        );
        std::process::exit(1);
    }
    let mut failures = Vec::new();
    for (name, case) in &selected {
        // Under the target folder (CARGO_TARGET_TMPDIR), not /tmp, which may be mounted noexec:
        // the foreign-binary case runs a copy of this binary from there.
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("skein-rack-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        let t = Instant::now();
        let mut result = case(&dir);
        if let Err(left) = reap_leftover_ranks(&dir) {
            result = result.and(Err(left));
        }
        let _ = std::fs::remove_dir_all(&dir);
        match result {
            Ok(()) => println!("test {name} ... ok ({:.1}s)", t.elapsed().as_secs_f64()),
            Err(e) => {
                println!("test {name} ... FAILED");
                failures.push((name, e));
            }
        }
    }
    if !failures.is_empty() {
        println!("\nfailures:\n");
        for (name, e) in &failures {
            println!("---- {name} ----\n{e}\n");
        }
    }
    println!(
        "\ntest result: {}. {} passed; {} failed; 0 ignored; 0 measured; {filtered_out} filtered \
         out; finished in {:.2}s\n",
        if failures.is_empty() { "ok" } else { "FAILED" },
        selected.len() - failures.len(),
        failures.len(),
        start.elapsed().as_secs_f64()
    );
    if !failures.is_empty() {
        std::process::exit(101);
    }
}

fn have_mpirun() -> bool {
    Command::new("mpirun")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What a launch did.
struct Launch {
    /// `None` when the harness had to kill it at [`HARD_LIMIT`].
    status: Option<ExitStatus>,
    /// When it ended, or was killed.
    ended: Instant,
    stdout: String,
    stderr: String,
}

impl Launch {
    fn output(&self) -> String {
        format!(
            "status: {:?}\n--- stdout ---\n{}--- stderr ---\n{}",
            self.status, self.stdout, self.stderr
        )
    }
    fn lines(&self, prefix: &str) -> Vec<&str> {
        self.stdout.lines().filter(|l| l.starts_with(prefix)).collect()
    }
}

/// `mpirun FLAGS` followed by `apps` (each: ranks, executable, case) joined with `:` (MPMD
/// form); `during` runs while it is up (it gets the case directory).
fn launch(
    dir: &Path,
    case: &str,
    apps: &[(usize, &Path)],
    during: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<Launch, String> {
    let mut cmd = Command::new("mpirun");
    cmd.args(MPIRUN_FLAGS);
    for (i, (np, exe)) in apps.iter().enumerate() {
        if i > 0 {
            cmd.arg(":");
        }
        cmd.arg("-np").arg(np.to_string()).arg(exe).arg("--rack-case").arg(case).arg(dir);
    }
    // A loopback split cannot run under mpirun (the run refuses it): the cases run unsplit.
    cmd.env_remove("SKEIN_LOOPBACK_RANKS");
    // When a rank exits non-zero, Open MPI ends the job's other processes and then waits
    // this many seconds (default 1) before it exits itself, even when they have all ended:
    // a second per failing case. No case runs a signal handler that the wait would let finish.
    cmd.env("OMPI_MCA_odls_base_sigkill_timeout", "0");
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // Its own process group, so a launch that outlives the deadline is killed whole.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().map_err(|e| format!("cannot start mpirun: {e}"))?;
    let pgid = child.id() as i32;
    let out = reader(child.stdout.take().expect("piped stdout"));
    let err = reader(child.stderr.take().expect("piped stderr"));
    let start = Instant::now();
    let during_result = during(dir);
    let mut status = None;
    while start.elapsed() < HARD_LIMIT {
        if let Some(s) = child.try_wait().map_err(|e| format!("waiting for mpirun: {e}"))? {
            status = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let ended = Instant::now();
    if status.is_none() {
        // SAFETY: kill(2) with a negative pid signals the process group of the mpirun we
        // started (its own group, made above); it touches no memory of ours.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = child.wait();
    }
    let launch = Launch {
        status,
        ended,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    };
    during_result.map_err(|e| format!("{e}\n{}", launch.output()))?;
    if launch.status.is_none() {
        return Err(format!(
            "mpirun still running after {HARD_LIMIT:?}; killed\n{}",
            launch.output()
        ));
    }
    Ok(launch)
}

fn reader(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = r.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Waits until `path` exists (written by a rank), at most [`HARD_LIMIT`].
fn wait_for_file(path: &Path) -> Result<Instant, String> {
    let start = Instant::now();
    while start.elapsed() < HARD_LIMIT {
        if path.exists() {
            return Ok(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(format!("{} never appeared", path.display()))
}

fn pid_of(dir: &Path, rank: usize) -> Result<i32, String> {
    let p = dir.join(format!("pid.{rank}"));
    std::fs::read_to_string(&p)
        .map_err(|e| format!("no pid file for rank {rank}: {e}"))?
        .trim()
        .parse()
        .map_err(|e| format!("bad pid file for rank {rank}: {e}"))
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat.rsplit(')').next().and_then(|s| s.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X"))
        }
    }
}

/// After a launch: every rank that wrote its pid must be gone (within a short grace for the
/// reaping of orphans). Survivors are killed and reported.
fn reap_leftover_ranks(dir: &Path) -> Result<(), String> {
    let mut pids = Vec::new();
    for rank in 0..16 {
        if let Ok(pid) = pid_of(dir, rank) {
            pids.push((rank, pid));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while pids.iter().any(|&(_, p)| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survivors: Vec<_> = pids.iter().filter(|&&(_, p)| alive(p)).collect();
    for &&(_, pid) in &survivors {
        // SAFETY: kill(2) on a pid a rank of our own launch wrote; it touches no memory.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    if survivors.is_empty() {
        Ok(())
    } else {
        Err(format!("rank(s) (rank, pid) {survivors:?} outlived mpirun; killed"))
    }
}

fn check(cond: bool, what: &str, launch: &Launch) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(format!("{what}\n{}", launch.output()))
    }
}

fn own_exe() -> PathBuf {
    std::env::current_exe().expect("the test binary's path")
}

// ---------------------------------------------------------------------------------------
// The cases.
// ---------------------------------------------------------------------------------------

fn info_case(dir: &Path, n: usize) -> Result<(), String> {
    let l = launch(dir, "info", &[(n, &own_exe())], |_| Ok(()))?;
    check(l.status.is_some_and(|s| s.success()), "mpirun must exit 0 (every rank finalised)", &l)?;
    let lines = l.lines("INFO ");
    check(lines.len() == n, &format!("expected {n} INFO lines"), &l)?;
    let mut ranks_seen = Vec::new();
    let mut tokens = Vec::new();
    for line in &lines {
        let field =
            |k: &str| line.split_whitespace().find_map(|f| f.strip_prefix(k)).map(str::to_string);
        let rank: usize = field("rank=").and_then(|v| v.parse().ok()).ok_or("no rank")?;
        check(field("ranks=") == Some(n.to_string()), "ranks() must be the -np", &l)?;
        ranks_seen.push(rank);
        tokens.push(field("token=").ok_or("no token")?);
    }
    ranks_seen.sort_unstable();
    check(ranks_seen == (0..n).collect::<Vec<_>>(), "each rank 0..n exactly once", &l)?;
    check(tokens.iter().all(|t| *t == tokens[0]), "the same job token on every rank", &l)?;
    // A second job draws another token.
    let l2 = launch(dir, "info", &[(n, &own_exe())], |_| Ok(()))?;
    let other =
        l2.lines("INFO ").first().and_then(|s| s.split("token=").nth(1)).map(str::to_string);
    check(other.is_some_and(|t| t != tokens[0]), "another job must draw another token", &l2)
}

fn foreign_case(dir: &Path) -> Result<(), String> {
    // A different executable: the test binary with one more byte at the end (it runs the
    // same code, so it takes part in the bootstrap, but its file differs).
    let foreign = dir.join("foreign-rack-binary");
    std::fs::copy(own_exe(), &foreign).map_err(|e| format!("copy the test binary: {e}"))?;
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&foreign)
            .map_err(|e| format!("open the copy: {e}"))?;
        f.write_all(&[0]).map_err(|e| format!("append to the copy: {e}"))?;
    }
    let l = launch(dir, "foreign", &[(1, &own_exe()), (1, &foreign)], |_| Ok(()))?;
    check(l.status.is_some_and(|s| !s.success()), "mpirun must exit non-zero", &l)?;
    let refused = l.lines("REFUSED ");
    check(refused.len() == 2, "both ranks must refuse the job", &l)?;
    for r in 0..2 {
        check(
            refused.iter().any(|s| {
                s.starts_with(&format!("REFUSED rank={r}: skein rack mode, rank {r}: "))
                    && s.contains("rank(s) 1 run a different executable than rank 0")
            }),
            &format!("rank {r} must refuse, naming rank 1 as the foreign one"),
            &l,
        )?;
    }
    check(l.lines("ACCEPTED").is_empty(), "no rank may accept", &l)
}

/// Rank 1 panics (on its main thread) while rank 0 sleeps for 30 s, or waits in
/// `MPI_Finalize`: both must end within [`FATE_LIMIT`].
fn panic_case_of(dir: &Path, case: &str) -> Result<(), String> {
    let mut panicked_at = None;
    let l = launch(dir, case, &[(2, &own_exe())], |d| {
        panicked_at = Some(wait_for_file(&d.join("panicking"))?);
        Ok(())
    })?;
    let took = l.ended.duration_since(panicked_at.expect("set by `during`"));
    check(
        took < FATE_LIMIT,
        &format!("the job must end within {FATE_LIMIT:?} of the panic, took {took:?}"),
        &l,
    )?;
    check(l.status.is_some_and(|s| !s.success()), "mpirun must exit non-zero", &l)?;
    check(
        l.stderr.contains("skein: rank 1: thread 'main' panicked"),
        "the message names rank 1",
        &l,
    )?;
    check(l.stderr.contains("deliberate panic on rank 1"), "the panic's own message is shown", &l)?;
    check(l.lines("SURVIVED").is_empty(), "rank 0 must not finish", &l)
}

fn exit_within_case(dir: &Path) -> Result<(), String> {
    let mut failed_at = None;
    let l = launch(dir, "exit-within", &[(2, &own_exe())], |d| {
        failed_at = Some(wait_for_file(&d.join("panicking"))?);
        Ok(())
    })?;
    let took = l.ended.duration_since(failed_at.expect("set by `during`"));
    check(
        took < FATE_LIMIT,
        &format!("the job must end within {FATE_LIMIT:?} of the error, took {took:?}"),
        &l,
    )?;
    check(l.status.is_some_and(|s| !s.success()), "mpirun must exit non-zero", &l)?;
    check(l.stderr.contains("skein: rank 1: still not finished"), "rank 1 says why", &l)?;
    check(l.lines("SURVIVED").is_empty(), "rank 0 must not finish", &l)
}

fn abort_case(dir: &Path) -> Result<(), String> {
    let mut aborted_at = None;
    let l = launch(dir, "abort", &[(2, &own_exe())], |d| {
        aborted_at = Some(wait_for_file(&d.join("panicking"))?);
        Ok(())
    })?;
    let took = l.ended.duration_since(aborted_at.expect("set by `during`"));
    check(
        took < FATE_LIMIT,
        &format!("the job must end within {FATE_LIMIT:?} of abort, took {took:?}"),
        &l,
    )?;
    // mpirun exits with the code given to MPI_Abort. (Its own "MPI_ABORT was invoked on rank
    // 1" notice is not checked: Open MPI 4.1 sometimes loses it, logging an ORTE_ERROR_LOG
    // from show_help.c instead.)
    check(l.status.and_then(|s| s.code()) == Some(7), "mpirun must exit with code 7", &l)?;
    check(l.stderr.contains("skein: rank 1: deliberate abort"), "the message names rank 1", &l)?;
    check(l.lines("SURVIVED").is_empty(), "rank 0 must not finish", &l)
}

fn kill_case(dir: &Path) -> Result<(), String> {
    let mut killed_at = None;
    let l = launch(dir, "kill", &[(2, &own_exe())], |d| {
        wait_for_file(&d.join("ready.0"))?;
        wait_for_file(&d.join("ready.1"))?;
        let pid = pid_of(d, 1)?;
        // SAFETY: kill(2) on the pid rank 1 of our own launch wrote; it touches no memory.
        if unsafe { libc::kill(pid, libc::SIGKILL) } != 0 {
            return Err(format!("kill -9 {pid}: {}", std::io::Error::last_os_error()));
        }
        killed_at = Some(Instant::now());
        Ok(())
    })?;
    let took = l.ended.duration_since(killed_at.expect("set by `during`"));
    check(
        took < FATE_LIMIT,
        &format!("the job must end within {FATE_LIMIT:?} of kill -9, took {took:?}"),
        &l,
    )?;
    check(l.status.is_some_and(|s| !s.success()), "mpirun must exit non-zero", &l)?;
    check(l.lines("SURVIVED").is_empty(), "rank 0 must not finish", &l)?;
    check(l.stderr.contains("rank 1"), "mpirun's message names rank 1", &l)
}

/// main (rank 0) starts a fiber on every global worker; each answers with where it ran,
/// and starts one more on the next rank, joined before it answers (2 workers per rank).
fn spawn_everywhere(rank: usize) {
    let rt = skein::Runtime::builder().workers(2).build().expect("build");
    report_run(
        rank,
        rt.run(|| {
            let n = skein::num_workers();
            let hs: Vec<_> = (0..n)
                .map(|g| {
                    skein::spawn_on(g, (g, n), |(g, n)| {
                        let next = (g + skein::local_workers()) % n;
                        let inner = skein::spawn_on(next, g as u64, |from| {
                            from * 1000 + skein::current_worker() as u64
                        });
                        let here = (skein::current_worker(), skein::rank());
                        (here, inner.join())
                    })
                })
                .map(|h| h.join())
                .collect::<Vec<_>>();
            hs.into_iter().map(|((g, r), i)| format!("{g}@{r}:{i}")).collect::<Vec<_>>()
        }),
    );
}

/// Launches `case` on `ranks` ranks; checks that mpirun exits 0 and that every rank printed
/// the same outcome lines (`RUN-OK`/`RUN-ERROR`, without the rank); returns rank 0's.
fn same_on_every_rank(
    dir: &Path,
    case: &str,
    ranks: usize,
) -> Result<(Launch, Vec<String>), String> {
    let l = launch(dir, case, &[(ranks, &own_exe())], |_| Ok(()))?;
    check(l.status.is_some_and(|s| s.success()), "mpirun must exit 0", &l)?;
    let per_rank = |r: usize| -> Vec<String> {
        let ok = format!("RUN-OK rank={r} ");
        let err = format!("RUN-ERROR rank={r}: ");
        l.stdout
            .lines()
            .filter_map(|x| {
                x.strip_prefix(&ok)
                    .map(|v| format!("ok {v}"))
                    .or_else(|| x.strip_prefix(&err).map(|e| format!("err {e}")))
            })
            .collect()
    };
    let first = per_rank(0);
    check(!first.is_empty(), "rank 0 must report its runs", &l)?;
    for r in 1..ranks {
        check(per_rank(r) == first, &format!("rank {r} must return what rank 0 returns"), &l)?;
    }
    Ok((l, first))
}

fn run_case(dir: &Path, ranks: usize) -> Result<(), String> {
    let (l, out) = same_on_every_rank(dir, "run", ranks)?;
    let want = format!("ok (42, {ranks}, {})", 2 * ranks);
    check(out == [want], "main's value, ranks and global workers", &l)?;
    // On one node `auto` takes the shared-memory rings; SKEIN_TRANSPORT may ask otherwise.
    let asked = std::env::var("SKEIN_TRANSPORT").unwrap_or_default();
    // SKEIN_RANKS_PER_NODE below the ranks makes the job span nodes: `auto` then takes the
    // rings within each node and MPI between them, a different transport per rank (MPI for
    // all when every node holds one rank).
    let per_node = std::env::var("SKEIN_RANKS_PER_NODE").ok().and_then(|v| v.trim().parse().ok());
    let expect = match (asked.trim(), per_node) {
        ("" | "auto", Some(1)) => "mpi",
        ("" | "auto", _) => "shm",
        (other, _) => other,
    };
    if let Some(k) = per_node.filter(|&k: &usize| k > 1 && k < ranks && expect == "shm") {
        for r in 0..ranks {
            let per: Vec<&str> =
                (0..ranks).map(|j| if j / k == r / k { "shm" } else { "mpi" }).collect();
            check(
                l.lines(&format!("USED rank={r} ")) == [format!("USED rank={r} none")]
                    && l.lines(&format!("PER rank={r} "))
                        == [format!("PER rank={r} {}", per.join(","))],
                &format!("rank {r} must say it reached its node by shm and the others by mpi"),
                &l,
            )?;
        }
        return check(
            l.stderr
                .matches("skein: rack transport: shm within each node, mpi between nodes")
                .count()
                == 1,
            "rank 0 (alone) must print the transports at the start",
            &l,
        );
    }
    for r in 0..ranks {
        check(
            l.lines(&format!("USED rank={r} ")) == [format!("USED rank={r} {expect}")],
            &format!("rank {r} must say the run used {expect}"),
            &l,
        )?;
    }
    check(
        l.stderr
            .matches(&format!("skein: rack transport: {expect} between all {ranks} ranks"))
            .count()
            == 1,
        "rank 0 (alone) must print the transport at the start",
        &l,
    )
}

/// `SKEIN_TRANSPORT=verbs` (asked through the builder) on these machines, which have no
/// RDMA device: every rank's run fails with the reason (the verbs call and errno, or the
/// missing feature), none hangs, and mpirun exits normally (the error is a value).
fn verbs_case(dir: &Path) -> Result<(), String> {
    let l = launch(dir, "verbs", &[(2, &own_exe())], |_| Ok(()))?;
    check(l.status.is_some_and(|s| s.success()), "mpirun must exit 0", &l)?;
    let why = if cfg!(feature = "rdma") { "ibv_" } else { "built without the `rdma` feature" };
    for r in 0..2 {
        let errs = l.lines(&format!("RUN-ERROR rank={r}: "));
        let ok = l.lines(&format!("RUN-OK rank={r} "));
        if cfg!(feature = "rdma") && !ok.is_empty() {
            // A machine with an active RDMA port on every rank: the run went through.
            check(ok == [format!("RUN-OK rank={r} (42, 2, 4)")], "main's value over verbs", &l)?;
            continue;
        }
        check(errs.len() == 1, &format!("rank {r} must report one error"), &l)?;
        check(
            errs[0].contains(&format!("skein rack mode, rank {r}: ")) && errs[0].contains(why),
            &format!("rank {r}'s error must name itself and say {why:?}"),
            &l,
        )?;
        if cfg!(feature = "rdma") {
            check(
                errs[0].contains("RDMA verbs transport, finding an RDMA device: ")
                    && (errs[0].contains("ibv_get_device_list: no RDMA device (")
                        || errs[0].contains("no active RDMA port")),
                &format!("rank {r} must name the verbs call and the errno"),
                &l,
            )?;
        }
    }
    Ok(())
}

fn spawn_case(dir: &Path, ranks: usize) -> Result<(), String> {
    spawn_case_of(dir, "spawn", ranks).map(|_| ())
}

fn spawn_case_of(dir: &Path, case: &str, ranks: usize) -> Result<Launch, String> {
    let (l, out) = same_on_every_rank(dir, case, ranks)?;
    let n = 2 * ranks;
    let want: Vec<String> = (0..n)
        .map(|g| {
            let next = (g + 2) % n;
            format!("{g}@{}:{}", g / 2, g * 1000 + next)
        })
        .collect();
    check(out == [format!("ok {want:?}")], "every fiber ran where it was sent", &l)?;
    Ok(l)
}

/// 4 ranks on 2 nodes of 2 (`SKEIN_RANKS_PER_NODE=2` splits this host): every fiber runs
/// where it was sent, over the rings within a node and MPI between nodes, and each rank says
/// which transport reached which rank (unless `SKEIN_TRANSPORT` names one: then that one).
fn mixed_case(dir: &Path) -> Result<(), String> {
    let l = spawn_case_of(dir, "spawn-mixed", 4)?;
    let asked = std::env::var("SKEIN_TRANSPORT").unwrap_or_default();
    let mixed = matches!(asked.trim(), "" | "auto");
    for r in 0..4 {
        let want = if mixed {
            let (near, far) = ("shm shm", "mpi mpi");
            if r < 2 {
                format!("{near} {far}")
            } else {
                format!("{far} {near}")
            }
        } else {
            [asked.trim(); 4].join(" ")
        };
        check(
            l.lines(&format!("TRANSPORTS rank={r} ")) == [format!("TRANSPORTS rank={r} {want}")],
            &format!("rank {r} must say it reached the ranks over {want}"),
            &l,
        )?;
    }
    if mixed {
        check(
            l.stderr.contains(
                "skein: rack transport: shm within each node, mpi between nodes (nodes: [0, 1], \
                 [2, 3]; asked: auto)",
            ),
            "rank 0 must print the mix at the start",
            &l,
        )?;
    }
    Ok(())
}

fn stats_case(dir: &Path) -> Result<(), String> {
    let (l, out) = same_on_every_rank(dir, "stats", 3)?;
    // Six workers; main is a fiber of worker 0 besides the one spawned there.
    check(
        out == ["ok (21, [2, 1, 1, 1, 1, 1], true, true)"],
        "every rank's workers counted, the same on every rank, with their round ends and the \
         rank's time around the run",
        &l,
    )
}

/// The stall case's folder, for the fiber that waits for rank 0's dump.
static STALL_DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

fn stall_case(dir: &Path) -> Result<(), String> {
    let (l, out) = same_on_every_rank(dir, "stall", 2)?;
    check(out == ["ok 1"], "the stuck run finishes once dumped, unchanged", &l)?;
    for want in [
        "skein dump [rank 0 of 2",
        "skein dump [rank 1 of 2",
        "no task started or finished for",
        "[rank 1 worker 3]",
        "waits for a latch (Latch::lock",
        "waits for a join: the end of a fiber or launch on worker 3 (rank 1)",
        "quiescence across ranks: round",
    ] {
        check(l.stderr.contains(want), &format!("the dumps say {want:?}"), &l)?;
    }
    // The transport's own words: MPI's queues, or the shared-memory rings'.
    check(
        l.stderr.contains("transport: MPI sends incomplete")
            || l.stderr.contains("transport: shared-memory rings:"),
        "the dumps describe the transport",
        &l,
    )
}

fn silent_case(dir: &Path) -> Result<(), String> {
    let l = launch(dir, "silent", &[(2, &own_exe())], |dir| {
        wait_for_file(&dir.join("dumped.0"))?;
        let pid = pid_of(dir, 1)?;
        // SAFETY: kill(2) on the pid rank 1 wrote; it touches no memory of ours.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        Ok(())
    })?;
    check(l.status.is_some_and(|s| s.success()), "mpirun must exit 0", &l)?;
    check(l.stdout.contains("RUN-OK rank=0 7"), "the run ends normally once continued", &l)?;
    check(l.stderr.contains("skein dump [rank 0 of 2"), "rank 0 dumps", &l)?;
    check(l.stderr.contains("rank 1: last heard from"), "rank 0 says when it heard rank 1", &l)?;
    check(l.stderr.contains("SILENT for more than"), "rank 1 is named silent", &l)?;
    check(
        l.stderr.contains("outstanding, waiting for the part of rank(s) [1]"),
        "rank 0's detector waits for rank 1's part of its round",
        &l,
    )
}

fn quiescent_case(dir: &Path) -> Result<(), String> {
    let (l, out) = same_on_every_rank(dir, "quiescent", 3)?;
    // 3 ranks of 2 workers: 6 drivers, senders 0 + 1 + ... + 5 = 15.
    let want = "ok \"quiescent three times, totals [6, 15, 6, 0], minima [10, 95], agreed true\"";
    check(out == [want], "wait_quiescent and wait_quiescent_sum across ranks", &l)
}

/// `ranks` ranks of `w` workers (4 and 8 ranks: more than the cores of a 2-core machine):
/// exact results on every rank, and no lost wake-up (`park_timeouts_useful` summed over every
/// rank's workers is 0).
fn wake_case(dir: &Path, ranks: usize, w: usize) -> Result<(), String> {
    let (l, out) = same_on_every_rank(dir, &format!("wake-{w}"), ranks)?;
    let n = (ranks * w) as u64;
    // Property g: g, plus every round's number (0 + 1 + ... + 19 = 190), plus 1 per round
    // from main's `apply_then`. The sum adds each value after each round's `apply`.
    let finals: Vec<u64> = (0..n).map(|g| g + 190 + 20).collect();
    let sum: u64 = (0..20u64)
        .map(|round| (0..n).map(|g| g + round * (round + 1) / 2 + round).sum::<u64>())
        .sum();
    let want = format!("ok (({sum}, {finals:?}), 0)");
    check(out == [want], "exact results and no safety-net timeout that found work", &l)
}

/// "batch-bytes": every request served, and more per envelope with larger batches.
fn batch_bytes_case(dir: &Path) -> Result<(), String> {
    let (l, out) = same_on_every_rank(dir, "batch-bytes", 2)?;
    let sum = 20_000u64 * 19_999 / 2;
    let ok = |rings: bool| format!("ok ({sum}, {sum}, {rings}, true)");
    check(
        out == [ok(true)] || out == [ok(false)],
        "every request served once with either batch size, and more requests per envelope \
         with 16384 bytes over the rings",
        &l,
    )
}

/// The runs of "many-runs" on `ranks` ranks: exact sums, a failed run among them, and the
/// rings set up once per change of shape (over the rings; over MPI messages, never).
fn many_runs_case(dir: &Path, ranks: usize) -> Result<(), String> {
    let (l, out) = same_on_every_rank(dir, "many-runs", ranks)?;
    // Property g starts at g and gains 5 k + 10 over a run's 5 rounds.
    let sum = |w: usize, k: u64| -> u64 {
        let n = (ranks * w) as u64;
        (0..n).map(|g| g + 5 * k + 10).sum()
    };
    let mut sums: Vec<u64> = (0..4).map(|k| sum(1, k)).collect();
    sums.push(0);
    sums.extend((0..2).map(|k| sum(1, k)));
    sums.extend((0..3).map(|k| sum(2, k)));
    sums.extend((0..2).map(|k| sum(1, k)));
    let want = |rings: bool| {
        let setups = if rings { "[1, 1, 1, 2, 3]" } else { "[0, 0, 0, 0, 0]" };
        format!("ok ({sums:?}, {rings}, {setups}, 0)")
    };
    // Over the rings by default; over MPI messages (SKEIN_TRANSPORT=mpi, a rank per node)
    // there are no rings to keep.
    check(
        out == [want(true)] || out == [want(false)],
        "exact sums, and rings set up once per shape when the run used rings",
        &l,
    )
}

fn remote_panic_case(dir: &Path) -> Result<(), String> {
    let (l, out) = same_on_every_rank(dir, "remote-panic", 2)?;
    check(out.len() == 4, "four runs", &l)?;
    check(
        out[0] == "ok \"rank 1 worker 3: deliberate remote panic\"",
        "join resumes the remote panic, naming rank and worker",
        &l,
    )?;
    check(
        out[1].starts_with("err 1 panic during the skein job; first: ")
            && out[1].contains("rank 1")
            && out[1].contains("deliberate detached panic"),
        "a detached remote panic fails the run on every rank, naming the rank",
        &l,
    )?;
    check(
        out[2] == "ok (true, 1)",
        "a run with a long panic fails with its whole message on every rank",
        &l,
    )?;
    check(out[3] == "ok (5000, 12497500)", "a long value of main reaches every rank", &l)
}

fn faults_case(dir: &Path) -> Result<(), String> {
    let (l, out) = same_on_every_rank(dir, "faults", 3)?;
    check(out.len() == 5, "five runs", &l)?;
    check(
        out[0] == "ok (Some(\"rank 2 worker 5: deliberate panic in apply 7\"), 1)",
        "a remote apply's panic resumes in the caller, naming rank and worker; the trustee serves on",
        &l,
    )?;
    check(
        out[1].starts_with("err 1 panic during the skein job; first: ")
            && out[1].contains("rank 2 worker 5: deliberate panic in apply_then"),
        "a panic in a remote apply_then fails the run on every rank, naming rank and worker",
        &l,
    )?;
    // Trustee g holds g and is on rank g / 2: the sum of g·1000 + (g / 2)·100 + 3g, g < 6.
    check(out[2] == "ok 15645", "apply_with_then reaches every trustee of every rank", &l)?;
    check(
        out[3].starts_with("err skein deadlock: 2 fibers blocked forever")
            && out[3].contains("main fiber finished: false"),
        "a fiber blocked forever on rank 2 is a deadlock on every rank",
        &l,
    )?;
    check(out[4] == "ok [0, 0, 1, 1, 2, 2]", "rank_of every worker", &l)?;
    // The property on rank 2 is the only one this case counts (the others hold no Counted).
    for (r, line) in ["DROPS rank=0 n=0 at=0", "DROPS rank=1 n=0 at=0", "DROPS rank=2 n=1 at=20000"]
        .iter()
        .enumerate()
    {
        check(l.lines(line).len() == 1, &format!("rank {r}: {line}"), &l)?;
    }
    Ok(())
}

fn property_case(dir: &Path, ranks: usize) -> Result<(), String> {
    let (l, out) = same_on_every_rank(dir, "property", ranks)?;
    let n = 2 * ranks;
    let first: Vec<String> = (0..n)
        .map(|g| {
            let v = g * 100 + 1001;
            format!("({v}, {}, ({}, {g}))", v + 6, g / 2)
        })
        .collect();
    let sums: Vec<String> = (0..n).map(|_| (n * (n - 1) / 2 + 100 * n).to_string()).collect();
    let want = format!("ok ([{}], [{}])", first.join(", "), sums.join(", "));
    check(out == [want], "every call kind on properties of every rank", &l)?;
    // Each rank owns 2 of main's properties and 2 of every driver's: each dropped exactly
    // once, on its owner.
    for r in 0..ranks {
        let line = format!("DROPS rank={r} n={}", 2 * (1 + n));
        check(l.lines(&line).len() == 1, &format!("rank {r}: {line}"), &l)?;
    }
    Ok(())
}

fn handles_case(dir: &Path) -> Result<(), String> {
    let (l, out) = same_on_every_rank(dir, "handles-travel", 2)?;
    let values: Vec<String> = (0..4).map(|g| (1000 + g).to_string()).collect();
    let want = format!("ok (1, [{}])", values.join(", "));
    check(out == [want], "handles travel from rank 0 to rank 1 inside apply_with", &l)
}

fn handles_three_case(dir: &Path) -> Result<(), String> {
    let (l, out) = same_on_every_rank(dir, "handles-three", 3)?;
    let want = "ok ((6, 1), ([1000, 1001, 1002, 1003, 1004, 1005], 6, 2))";
    check(out == [want], "handles forwarded 0 -> 1 -> 2 reach live properties", &l)?;
    // Each rank owns 2 of the 6 properties: each dropped exactly once, on its owner.
    for r in 0..3 {
        let line = format!("DROPS rank={r} n=2");
        check(l.lines(&line).len() == 1, &format!("rank {r}: {line}"), &l)?;
    }
    Ok(())
}

fn array_case(dir: &Path, ranks: usize) -> Result<(), String> {
    let (l, out) = same_on_every_rank(dir, "array-across-ranks", ranks)?;
    // Element 20 of 21 over 2·R workers lives on worker 20 mod 2R.
    let owner_rank = (20 % (2 * ranks)) / 2;
    let want = format!("ok ({}, (126, {owner_rank}))", (0..21).map(|i| 100 + i).sum::<u64>());
    check(out == [want], "a TrustArray over every worker of every rank", &l)
}

fn array_travels_case(dir: &Path) -> Result<(), String> {
    let (l, out) = same_on_every_rank(dir, "array-travels", 3)?;
    // 21 values from 100, each raised by 1 by each of the 6 workers' fibers.
    let want = format!("ok ({}, true)", (0..21).map(|i| 100 + i + 6).sum::<u64>());
    check(out == [want], "a TrustArray received on every worker of 3 ranks", &l)?;
    // Worker g holds the values i with i mod 6 = g: 4, 4, 4, 3, 3, 3 for workers 0..6, so
    // ranks hold 8, 7 and 6 values, each dropped exactly once, on its owner.
    for (r, n) in [(0, 8), (1, 7), (2, 6)] {
        let line = format!("DROPS rank={r} n={n}");
        check(l.lines(&line).len() == 1, &format!("rank {r}: {line}"), &l)?;
    }
    Ok(())
}

fn stress_case(dir: &Path) -> Result<(), String> {
    let (l, out) = same_on_every_rank(dir, "stress", 3)?;
    // 6 workers, each driving its 4 remote pairs.
    let k = STRESS_REQUESTS / 24;
    let one = format!("({n}, {n}, 0, {n}, 0)", n = 4 * k);
    let want = format!("ok [{}]", vec![one; 6].join(", "));
    check(out == [want], "every request served and answered once, in order per pair", &l)?;
    // Each rank's 2 workers hold one property of each of the 4 drivers of other ranks.
    for r in 0..3 {
        let line = format!("DROPS rank={r} n=8");
        check(l.lines(&line).len() == 1, &format!("rank {r}: {line}"), &l)?;
    }
    Ok(())
}

/// The stress case on 2 ranks of `w` workers: every pair's requests exact and in order,
/// and the envelopes carry the segments of several trustees of a rank (some forwarded by
/// their landing worker), each answered by its trustee.
fn stress_workers_case(dir: &Path, w: usize) -> Result<(), String> {
    let (l, out) = same_on_every_rank(dir, &format!("stress-w{w}"), 2)?;
    let n = 2 * w;
    let k = STRESS_REQUESTS / 10 / (n * w) as u64;
    let one = format!("({n}, {n}, 0, {n}, 0)", n = w as u64 * k);
    let want = format!("ok [{}]", vec![one; n].join(", "));
    check(out == [want], "every request served and answered once, in order per pair", &l)?;
    for r in 0..2 {
        let line = format!("DROPS rank={r} n={}", w * w);
        check(l.lines(&line).len() == 1, &format!("rank {r}: {line}"), &l)?;
    }
    let seg = l.lines("SEGMENTS rank=0");
    let field = |name: &str| -> Option<u64> {
        let s = seg.first()?;
        let at = s.find(&format!(" {name}="))? + name.len() + 2;
        s[at..].split(' ').next()?.parse().ok()
    };
    let (env, segs, fwd, resp) =
        (field("envelopes"), field("segments"), field("forwarded"), field("responses"));
    let (Some(env), Some(segs), Some(fwd), Some(resp)) = (env, segs, fwd, resp) else {
        return Err(format!("no SEGMENTS line from rank 0\n{}", l.output()));
    };
    check(segs > env, "envelopes of several segments", &l)?;
    check(fwd > 0 && fwd < segs, "segments forwarded by their landing worker", &l)?;
    check(resp == segs, "one response envelope per segment", &l)?;
    Ok(())
}

fn then_case(dir: &Path, ranks: usize) -> Result<(), String> {
    let (l, out) = same_on_every_rank(dir, "then-across-ranks", ranks)?;
    let n = 2 * ranks;
    check(out.len() == 3, "three runs", &l)?;
    let owners: Vec<String> = (0..n).map(|g| format!("({}, {}, {g})", g + 1, g / 2)).collect();
    let sum: usize = (0..21).map(|i| 100 + i).sum();
    let last = 20 % n;
    let want = format!("ok ([{}], {sum}, ({}, {last}))", owners.join(", "), last / 2);
    check(out[0] == want, "built on every trustee, from delegated context", &l)?;
    check(
        out[1].contains("`entrust_new` on worker")
            && out[1].contains("from delegated context")
            && out[1].contains("use `entrust_new_then`"),
        "blocking entrust_new from delegated context names entrust_new_then",
        &l,
    )?;
    check(
        out[2].contains("`TrustArray::new` on worker")
            && out[2].contains("use `TrustArray::new_then`"),
        "blocking TrustArray::new from delegated context names TrustArray::new_then",
        &l,
    )?;
    // Each rank owns 1 property per worker and the array's values of its workers: each
    // dropped exactly once, on its owner.
    for r in 0..ranks {
        let values = (0..21).filter(|i| (i % n) / 2 == r).count();
        let line = format!("DROPS rank={r} n={}", 2 + values);
        check(l.lines(&line).len() == 1, &format!("rank {r}: {line}"), &l)?;
    }
    Ok(())
}

/// A forged envelope sent over MPI to worker 2 (rank 1): every rank reports the same run
/// error, which names the receiving worker, the sending rank and `what` is wrong; mpirun exits
/// non-zero, within [`FATE_LIMIT`] of its start.
fn forged_case(dir: &Path, ranks: usize, forgery: &str, what: &str) -> Result<(), String> {
    let start = Instant::now();
    let l = launch(dir, &format!("forged-{forgery}"), &[(ranks, &own_exe())], |_| Ok(()))?;
    let took = l.ended.duration_since(start);
    check(
        took < FATE_LIMIT,
        &format!("the job must end within {FATE_LIMIT:?}, took {took:?}"),
        &l,
    )?;
    check(l.status.is_some_and(|s| !s.success()), "mpirun must exit non-zero", &l)?;
    let from = if ranks == 3 { 2 } else { 0 };
    let want = format!("rank 1 worker 2: bad batch from rank {from}: ");
    let mut errors = Vec::new();
    for r in 0..ranks {
        let prefix = format!("RUN-ERROR rank={r}: ");
        let e: Vec<&str> = l.stdout.lines().filter_map(|x| x.strip_prefix(&prefix)).collect();
        check(e.len() == 1, &format!("rank {r} must report one run error"), &l)?;
        check(e[0].contains(&want), &format!("rank {r}: the error names {want:?}"), &l)?;
        check(e[0].contains(what), &format!("rank {r}: the error says {what:?}"), &l)?;
        errors.push(e[0]);
    }
    check(errors.iter().all(|e| *e == errors[0]), "the same error on every rank", &l)?;
    check(l.lines("RUN-OK").is_empty(), "no rank may succeed", &l)
}

fn job_case(dir: &Path) -> Result<(), String> {
    let l = launch(dir, "job", &[(1, &own_exe())], |_| Ok(()))?;
    check(l.status.is_some_and(|s| s.success()), "mpirun must exit 0", &l)?;
    check(l.lines("JOB ") == ["JOB rank=0 ranks=1 total=800 token=true"], "the job's result", &l)
}

fn outside_case() -> Result<(), String> {
    // The harness itself runs outside mpirun: rank 0 of 1, no token, runs work as ever
    // (unsplit: `entrust` is local only, and a loopback split in the environment would make
    // worker 1 another fake rank's).
    let rt = skein::Runtime::builder()
        .workers(2)
        .loopback_ranks(1)
        .build()
        .map_err(|e| e.to_string())?;
    let v = rt
        .run(|| skein::trustee(1).entrust(40).apply((), |x, ()| *x + 2))
        .map_err(|e| e.to_string())?;
    if (skein::rank(), skein::ranks(), skein::rack::job_token(), v) == (0, 1, None, 42) {
        Ok(())
    } else {
        Err(format!(
            "outside mpirun: rank {} of {}, token {:?}, value {v}",
            skein::rank(),
            skein::ranks(),
            skein::rack::job_token()
        ))
    }
}
