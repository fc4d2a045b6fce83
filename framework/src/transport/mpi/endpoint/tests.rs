//! The transport on real ranks: each `*_on_N_ranks` test re-launches this unit-test binary
//! under `mpirun -np N`, where every rank runs only the ignored [`rank_side`] test with the
//! case named in an environment variable (so that `cargo test -- --ignored` outside `mpirun`
//! does nothing), and checks that every rank exited 0 and reported. The launches are
//! serialised (one `mpirun` at a time from this module).

use super::*;
use std::time::{Duration, Instant};

const RANK_SIDE: &str = "transport::mpi::endpoint::tests::rank_side";
const CASE: &str = "SKEIN_TRANSPORT_RANK_SIDE_CASE";
/// How long a launch may take before it is killed and the test fails.
const LAUNCH_LIMIT: Duration = Duration::from_secs(90);
/// How long a rank side waits for its envelopes before failing.
const RANK_LIMIT: Duration = Duration::from_secs(60);

/// Runs `np` ranks of this binary on `case`; returns their stdout, or the whole report.
fn mpirun(np: usize, case: &str) -> Result<String, String> {
    crate::rack::relaunch::mpirun_self(np, RANK_SIDE, (CASE, case), LAUNCH_LIMIT)
}

/// Launches `case` on `np` ranks and checks that each rank printed `"{tag}: rank R ok"`.
fn run_case(np: usize, case: &str, tag: &str) -> String {
    let out = mpirun(np, case).unwrap_or_else(|report| panic!("{report}"));
    for rank in 0..np {
        assert!(
            out.contains(&format!("{tag}: rank {rank} ok")),
            "rank {rank} did not report:\n{out}"
        );
    }
    // Shown with --nocapture.
    println!("{out}");
    out
}

#[test]
fn all_to_all_on_2_ranks() {
    run_case(2, "all-to-all", "transport all-to-all");
}

#[test]
fn all_to_all_on_3_ranks() {
    run_case(3, "all-to-all", "transport all-to-all");
}

#[test]
fn flood_beyond_the_posted_receives_keeps_order_on_2_ranks() {
    run_case(2, "flood", "transport flood");
}

#[test]
fn full_window_blocks_then_drains_on_2_ranks() {
    run_case(2, "window", "transport window");
}

/// The figures of the module docs' measurement: `cargo test --release -p skein --features
/// mpi --lib -- --ignored --nocapture measure_on_2_ranks`. Prints, asserts nothing on time.
#[test]
#[ignore = "a measurement (prints figures); run it by name, in release"]
fn measure_on_2_ranks() {
    run_case(2, "measure", "transport measure");
}

#[test]
fn announcements_above_the_envelope_limit_are_refused() {
    // The runtime's limit is 1 GiB: an announcement of up to 2 GiB would have the receiver
    // allocate it.
    let gib = 1 << 30;
    assert_eq!(parse_announcement(&announcement(gib, 0), gib), Some((gib, 0)));
    assert_eq!(parse_announcement(&announcement(gib + 1, 0), gib), None);
    assert_eq!(parse_announcement(&announcement(i32::MAX as usize, 0), gib), None);
    assert_eq!(parse_announcement(&announcement(POSTED_BYTES + 1, 0), POSTED_BYTES), None);
}

#[test]
fn a_long_body_that_never_comes_ends_the_job_naming_its_sender() {
    let report = mpirun(2, "missing-body").expect_err("the job must end with an error");
    assert!(
        report.contains("announced by rank 1: it never came"),
        "the receiver names the sender:\n{report}"
    );
}

#[test]
fn open_outside_mpirun_says_mpi_is_needed() {
    // The unit tests themselves never run under mpirun (only the rank sides do).
    if std::env::var_os(CASE).is_some() {
        return;
    }
    let e = open(2, Config::default()).unwrap_err();
    assert!(e.contains("needs MPI initialised by the rack bootstrap"), "{e}");
}

#[test]
fn send_errors_say_what_is_wrong() {
    let e = SendError::NoSuchEndpoint { rank: 3, worker: 1, ranks: 2, workers_there: 0 };
    assert_eq!(e.to_string(), "no endpoint (rank 3, worker 1): 2 ranks, 0 workers on that rank");
    let e = SendError::TooLong { len: 5000, max: 4032 };
    assert_eq!(e.to_string(), "envelope of 5000 bytes is longer than the maximum 4032");
}

#[test]
fn announcements_round_trip_and_malformed_ones_are_refused() {
    /// The envelope limit the announcements are checked against here.
    const M: usize = i32::MAX as usize;
    let long = POSTED_BYTES + 10_000;
    let a = announcement(long, 3);
    assert_eq!(a.len(), ANNOUNCEMENT_BYTES);
    assert_eq!(parse_announcement(&a, M), Some((long, 3)));
    // Not 16 bytes, a length that fits a posted receive or is not an MPI count, a sender
    // beyond the tag bound: refused (the receiver ends the job, naming the rank).
    assert_eq!(parse_announcement(&a[..15], M), None);
    assert_eq!(parse_announcement(&[a.clone(), vec![0]].concat(), M), None);
    assert_eq!(parse_announcement(&announcement(POSTED_BYTES, 0), M), None);
    assert_eq!(parse_announcement(&announcement(100, 0), M), None);
    assert_eq!(
        parse_announcement(&announcement(POSTED_BYTES + 1, 0), M),
        Some((POSTED_BYTES + 1, 0))
    );
    assert_eq!(parse_announcement(&announcement(i32::MAX as usize + 1, 0), M), None);
    assert_eq!(parse_announcement(&announcement(long, MAX_WORKERS), M), None);
    assert_eq!(
        parse_announcement(&announcement(long, MAX_WORKERS - 1), M),
        Some((long, MAX_WORKERS - 1))
    );
}

#[test]
#[ignore = "rank side of the *_on_N_ranks tests; runs under mpirun only"]
fn rank_side() {
    let Some(case) = std::env::var_os(CASE) else {
        eprintln!("not under the mpirun of a transport test: nothing to do");
        return;
    };
    crate::rack::init().expect("rack bootstrap");
    match case.to_str() {
        Some("all-to-all") => all_to_all(),
        Some("window") => window(),
        Some("flood") => flood(),
        Some("measure") => measure(),
        Some("missing-body") => missing_body(),
        other => panic!("unknown transport case {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// Envelope contents: a 16-byte header (from rank, from worker, to rank, to worker: u16
// each; seq: u32; length: u32) and a pattern of the sender and sequence number.
// ---------------------------------------------------------------------------------------

const HEADER: usize = 16;

/// splitmix64: a seeded, stateless mix for sizes that sender and receiver both compute.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The size of envelope `seq` from `from` to `to` ((rank, worker) each): 16 B .. 64 KiB,
/// a quarter of them within 64 bytes of the 4096-byte eager limit, some at the extremes
/// (and at the size of a posted receive, the last one that is not announced).
fn size_of(from: (usize, usize), to: (usize, usize), seq: u32) -> usize {
    let key =
        ((from.0 as u64) << 48) | ((from.1 as u64) << 32) | ((to.0 as u64) << 16) | to.1 as u64;
    let r = mix(key ^ mix(u64::from(seq)));
    let pick = r >> 8;
    match r % 8 {
        0 | 1 => 4096 - 64 + (pick % 129) as usize, // 4032 ..= 4160
        2 => 16 + (pick % 497) as usize,            // small
        3 => {
            [16, 4032, 4095, 4096, 4097, POSTED_BYTES, POSTED_BYTES + 1, 65536][(pick % 8) as usize]
        }
        _ => 16 + (pick % (65536 - 16 + 1)) as usize,
    }
}

fn pattern(from: (usize, usize), seq: u32, i: usize) -> u8 {
    (i as u64)
        .wrapping_mul(31)
        .wrapping_add(u64::from(seq) * 7 + from.0 as u64 * 13 + from.1 as u64 * 17) as u8
        ^ (i >> 8) as u8
}

fn fill(buf: &mut Vec<u8>, from: (usize, usize), to: (usize, usize), seq: u32, len: usize) {
    buf.clear();
    for v in [from.0, from.1, to.0, to.1] {
        buf.extend_from_slice(&(v as u16).to_le_bytes());
    }
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.extend_from_slice(&(len as u32).to_le_bytes());
    buf.extend((HEADER..len).map(|i| pattern(from, seq, i)));
}

/// Checks a received envelope addressed to `me`; returns (sender, seq).
fn check_envelope(r: &Received, me: (usize, usize)) -> ((usize, usize), u32) {
    let b = r.bytes();
    assert!(b.len() >= HEADER, "envelope of {} bytes from rank {}", b.len(), r.source_rank());
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    let from = (u16_at(0), u16_at(2));
    let (to, seq, len) = ((u16_at(4), u16_at(6)), u32_at(8), u32_at(12) as usize);
    assert_eq!(from.0, r.source_rank(), "the MPI source is the rank written by the sender");
    assert_eq!(to, me, "delivered to the endpoint it was sent to");
    assert_eq!(len, b.len(), "whole message: length {len} sent, {} received", b.len());
    assert_eq!(len, size_of(from, me, seq), "size of envelope {seq} from {from:?}");
    if let Some(i) = (HEADER..len).find(|&i| b[i] != pattern(from, seq, i)) {
        panic!("envelope {seq} from {from:?} to {me:?}: byte {i} of {len} differs");
    }
    (from, seq)
}

// ---------------------------------------------------------------------------------------
// Rank sides.
// ---------------------------------------------------------------------------------------

/// Envelopes per ordered pair of endpoints in the all-to-all case.
const K: u32 = 40;
/// Worker threads (endpoints) per rank.
const W: usize = 2;

/// Every (rank, worker) sends `K` envelopes of varied sizes to every other (rank, worker),
/// its own rank's other worker included, with a window of 3, through `claim`/`publish`
/// (even seq) and `send` (odd); every endpoint checks each envelope it gets, that it got
/// each exactly once, and that each sender's envelopes came in the order they were sent
/// (short ones and announced long ones mixed: module docs, ordering).
/// Rank 1 sends rank 0 an announcement and never its body; rank 0 (body timeout 200 ms)
/// must end the job, naming rank 1, instead of waiting forever.
fn missing_body() {
    let rank = crate::rack::rank();
    let config = Config {
        max_envelope_bytes: 64 * 1024,
        body_timeout: Duration::from_millis(200),
        ..Config::default()
    };
    let (_transport, mut endpoints) = open(1, config).expect("open the transport");
    let mut ep = endpoints.pop().expect("one endpoint");
    if rank == 1 {
        ep.isend(announcement(POSTED_BYTES + 100, 0), 0, 0, ANNOUNCE_TAG, false);
    }
    let start = Instant::now();
    while start.elapsed() < RANK_LIMIT {
        ep.progress();
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("rank {rank}: still running after {RANK_LIMIT:?}");
}

fn all_to_all() {
    let (rank, ranks) = (crate::rack::rank(), crate::rack::ranks());
    let config = Config { max_envelope_bytes: 64 * 1024, window: 3, ..Config::default() };
    let (transport, endpoints) = open(W, config).expect("open the transport");
    assert_eq!(endpoints.len(), W);
    let threads: Vec<_> = endpoints
        .into_iter()
        .map(|ep| {
            std::thread::Builder::new()
                .name(format!("endpoint {rank}.{}", ep.worker()))
                .spawn(move || all_to_all_worker(ep))
                .expect("spawn an endpoint thread")
        })
        .collect();
    let mut back = Vec::new();
    let (mut received, mut blocked) = (0, 0);
    for t in threads {
        let (ep, n) = t.join().expect("endpoint thread");
        received += n;
        blocked += ep.stats().would_block;
        back.push(ep);
    }
    back.reverse(); // any order
    let left = transport.close(back).expect("close the transport");
    assert_eq!(left, Leftovers::default(), "nothing left over");
    println!(
        "transport all-to-all: rank {rank} ok, {received} envelopes received from {ranks} ranks, \
         claims refused for a full window: {blocked}"
    );
}

fn all_to_all_worker(mut ep: Endpoint) -> (Endpoint, usize) {
    let me = (ep.rank(), ep.worker());
    let dests: Vec<(usize, usize)> = (0..ep.ranks())
        .flat_map(|r| (0..ep.workers_of(r)).map(move |w| (r, w)))
        .filter(|&d| d != me)
        .collect();
    let sends: Vec<((usize, usize), u32)> =
        (0..K).flat_map(|seq| dests.iter().map(move |&d| (d, seq))).collect();
    let expected = dests.len() * K as usize;
    let mut seen = std::collections::HashMap::<(usize, usize), Vec<bool>>::new();
    let (mut next, mut got, mut blocked) = (0, 0, 0u64);
    let mut scratch = Vec::new();
    let start = Instant::now();
    while next < sends.len() || got < expected || ep.sends_in_flight() > 0 {
        assert!(
            start.elapsed() < RANK_LIMIT,
            "endpoint {me:?}: sent {next} of {}, received {got} of {expected}, {} sends in flight",
            sends.len(),
            ep.sends_in_flight()
        );
        if let Some(&(to, seq)) = sends.get(next) {
            let len = size_of(me, to, seq);
            let result = if seq % 2 == 0 {
                match ep.claim(to.0, to.1) {
                    Ok(mut buf) => {
                        assert_eq!(buf.capacity(), 64 * 1024, "a pooled buffer of size B");
                        assert!(buf.is_empty(), "a claimed buffer is empty");
                        fill(&mut buf, me, to, seq, len);
                        ep.publish(buf)
                    }
                    Err(e) => Err(e),
                }
            } else {
                fill(&mut scratch, me, to, seq, len);
                ep.send(to.0, to.1, &scratch)
            };
            match result {
                Ok(()) => next += 1,
                Err(SendError::WouldBlock) => blocked += 1,
                Err(e) => panic!("endpoint {me:?}: {e}"),
            }
            assert!(ep.in_flight(to.0) <= 3, "the window holds");
        }
        ep.progress();
        while let Some(r) = ep.poll_recv() {
            let (from, seq) = check_envelope(&r, me);
            let s = seen.entry(from).or_insert_with(|| vec![false; K as usize]);
            assert!((seq as usize) < s.len(), "seq {seq} from {from:?} beyond {K}");
            assert!(!s[seq as usize], "envelope {seq} from {from:?} delivered twice");
            assert!(
                s[..seq as usize].iter().all(|&b| b),
                "envelope {seq} from {from:?} ({} bytes) overtook an earlier one",
                r.bytes().len()
            );
            s[seq as usize] = true;
            got += 1;
            ep.release(r);
        }
        std::thread::yield_now();
    }
    assert_eq!(seen.len(), dests.len(), "envelopes from every other endpoint");
    assert!(seen.values().all(|s| s.iter().all(|&b| b)), "every envelope");
    let stats = ep.stats();
    assert_eq!(stats.sent, sends.len() as u64);
    assert_eq!(stats.received, expected as u64);
    assert_eq!(stats.would_block, blocked);
    assert_eq!((0..ep.ranks()).map(|r| ep.in_flight(r)).sum::<usize>(), 0);
    assert!(!ep.busy(), "nothing under way");
    // Everything addressed to this endpoint has arrived: nothing more can happen.
    assert!(!ep.progress(), "progress with nothing to do");
    assert!(ep.poll_recv().is_none());
    (ep, got)
}

/// Rank 0 fills its window of 3 to rank 1 with envelopes above the eager limit while rank 1
/// does not receive: the next claim would block, and stays blocked however often rank 0
/// progresses (a rendezvous send completes only once the receiver matched it). After a
/// barrier rank 1 receives, and rank 0's remaining envelopes all go through.
fn window() {
    let (rank, ranks) = (crate::rack::rank(), crate::rack::ranks());
    assert_eq!(ranks, 2);
    // Refused on every rank, alike.
    let e = open(0, Config::default()).unwrap_err();
    assert!(e.contains("rank(s) 0, 1 refused to open the rack transport"), "{e}");
    assert!(
        e.contains(&format!("rank {rank}: the rack transport needs 1..=32767 workers, got 0")),
        "{e}"
    );
    let e = open(1, Config { window: 0, ..Config::default() }).unwrap_err();
    assert!(e.contains("window must be at least 1"), "{e}");
    let e = open(1, Config { max_envelope_bytes: 0, ..Config::default() }).unwrap_err();
    assert!(e.contains("envelope size must be 1..="), "{e}");
    // Refused by rank 1 only: rank 0 is told too, instead of waiting.
    let window = if rank == 1 { 0 } else { 4 };
    let e = open(1, Config { window, ..Config::default() }).unwrap_err();
    assert!(e.starts_with("rank(s) 1 refused to open the rack transport"), "{e}");
    assert_eq!(e.contains("window must be at least 1"), rank == 1, "{e}");

    const P: usize = 3;
    const TOTAL: u32 = 12;
    let big = 64 * 1024;
    let (transport, mut eps) =
        open(1, Config { max_envelope_bytes: big, window: P, ..Config::default() }).expect("open");
    let mut ep = eps.pop().expect("one endpoint");
    let world = mpi::topology::SimpleCommunicator::world();
    let me = (rank, 0);
    let size = |seq: u32| if seq < P as u32 { big } else { size_of((0, 0), (1, 0), seq) };
    if rank == 0 {
        assert_eq!(
            ep.claim(1, 1).unwrap_err(),
            SendError::NoSuchEndpoint { rank: 1, worker: 1, ranks: 2, workers_there: 1 }
        );
        assert!(matches!(ep.claim(2, 0), Err(SendError::NoSuchEndpoint { .. })));
        // A claim takes a place; abandoning gives it back.
        let mut claimed: Vec<SendBuf> = (0..P).map(|_| ep.claim(1, 0).expect("a place")).collect();
        assert_eq!(ep.in_flight(1), P);
        assert_eq!(ep.claim(1, 0).unwrap_err(), SendError::WouldBlock);
        ep.abandon(claimed.pop().expect("claimed")).expect("own buffer");
        assert_eq!(ep.in_flight(1), P - 1);
        claimed.push(ep.claim(1, 0).expect("the place abandoned"));
        // Too long: refused, nothing sent, the place freed.
        let mut long = claimed.pop().expect("claimed");
        long.resize(big + 1, 0);
        assert_eq!(ep.publish(long).unwrap_err(), SendError::TooLong { len: big + 1, max: big });
        assert_eq!(ep.in_flight(1), P - 1);
        claimed.push(ep.claim(1, 0).expect("the place freed"));
        for (seq, mut buf) in claimed.into_iter().enumerate() {
            fill(&mut buf, me, (1, 0), seq as u32, size(seq as u32));
            ep.publish(buf).expect("publish");
        }
        assert_eq!(ep.stats().sent, P as u64);
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(300) {
            ep.progress();
            assert_eq!(ep.claim(1, 0).unwrap_err(), SendError::WouldBlock, "window full");
            std::thread::yield_now();
        }
        assert_eq!((ep.in_flight(1), ep.sends_in_flight()), (P, P), "no send completed");
        assert!(ep.busy());
        assert!(ep.stats().would_block >= 2);
        world.barrier();
        let mut seq = P as u32;
        let start = Instant::now();
        while seq < TOTAL || ep.sends_in_flight() > 0 {
            assert!(start.elapsed() < RANK_LIMIT, "rank 0: sent {seq} of {TOTAL}");
            if seq < TOTAL {
                let mut buf = Vec::new();
                fill(&mut buf, me, (1, 0), seq, size(seq));
                match ep.send(1, 0, &buf) {
                    Ok(()) => seq += 1,
                    Err(SendError::WouldBlock) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            ep.progress();
            std::thread::yield_now();
        }
        assert_eq!(ep.in_flight(1), 0, "every place back once the sends completed");
        println!("transport window: rank 0 refused {} claims", ep.stats().would_block);
    } else {
        world.barrier();
        let mut seen = vec![false; TOTAL as usize];
        let start = Instant::now();
        while seen.iter().any(|s| !s) {
            assert!(start.elapsed() < RANK_LIMIT, "rank 1: received {seen:?}");
            // poll_recv alone (no progress call) must receive.
            if let Some(r) = ep.poll_recv() {
                let b = r.bytes();
                let seq = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
                assert!(seq < TOTAL, "seq {seq}");
                assert_eq!(b.len(), size(seq), "envelope {seq} whole");
                assert_eq!(r.source_rank(), 0);
                let from = (0, 0);
                if let Some(i) = (HEADER..b.len()).find(|&i| b[i] != pattern(from, seq, i)) {
                    panic!("envelope {seq}: byte {i} differs");
                }
                assert!(!seen[seq as usize], "envelope {seq} twice");
                seen[seq as usize] = true;
                ep.release(r);
            }
            std::thread::yield_now();
        }
        assert!(ep.poll_recv().is_none(), "nothing more");
    }
    let left = transport.close(vec![ep]).expect("close");
    assert_eq!(left, Leftovers::default());
    misuse_and_leftovers(rank);
    println!("transport window: rank {rank} ok");
}

/// A buffer of one transport's endpoint refused by another's; `close` refusing a wrong set of
/// endpoints; and `close` reporting an envelope sent and never received (rank 0: a
/// rendezvous send in flight; rank 1: the envelope arrived, not taken) and an eager one
/// received and never taken.
fn misuse_and_leftovers(rank: usize) {
    let world = mpi::topology::SimpleCommunicator::world();
    let config = Config { max_envelope_bytes: 64 * 1024, window: 2, ..Config::default() };
    let (ta, mut a) = open(1, config).expect("open a");
    let (tb, mut b) = open(1, config).expect("open b");
    let (mut a, mut b) = (a.pop().expect("a"), b.pop().expect("b"));
    let peer = 1 - rank;
    let buf = a.claim(peer, 0).expect("claim on a");
    assert_eq!(b.publish(buf).unwrap_err(), SendError::ForeignBuffer);
    assert_eq!(a.in_flight(peer), 1, "a's place stays taken: the buffer was dropped");
    let buf = a.claim(peer, 0).expect("claim on a");
    assert_eq!(b.abandon(buf).unwrap_err(), SendError::ForeignBuffer);
    assert_eq!(a.claim(peer, 0).unwrap_err(), SendError::WouldBlock);
    let e = ta.close(vec![b]).unwrap_err();
    assert!(e.contains("endpoint of another transport"), "{e}");
    let e = tb.close(Vec::new()).unwrap_err();
    assert!(e.contains("needs all 1 endpoints back, got 0"), "{e}");
    // Both transports' communicators leak (sound), alike on every rank.
    drop(a);

    // Envelope sizes may differ between ranks: rank 1's buffers hold 4032 bytes, and it
    // receives rank 0's 10000-byte envelope whole all the same.
    let sized = Config {
        max_envelope_bytes: if rank == 0 { 64 * 1024 } else { 4032 },
        window: 2,
        ..Config::default()
    };
    let (t, mut eps) = open(1, sized).expect("open");
    let mut ep = eps.pop().expect("one endpoint");
    let long: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let start = Instant::now();
    if rank == 0 {
        send_spin(&mut ep, 1, &long);
        while ep.sends_in_flight() > 0 {
            assert!(start.elapsed() < RANK_LIMIT, "a send never completed");
            ep.progress();
        }
    } else {
        let r = loop {
            assert!(start.elapsed() < RANK_LIMIT, "a 10000-byte envelope never came");
            if let Some(r) = ep.poll_recv() {
                break r;
            }
        };
        assert_eq!(r.bytes(), &long[..], "whole, though longer than this rank's buffers");
        ep.release(r); // not pooled: its capacity is not 4032
    }
    assert_eq!(t.close(vec![ep]).expect("close"), Leftovers::default());

    let (t, mut eps) = open(1, config).expect("open");
    let mut ep = eps.pop().expect("one endpoint");
    if rank == 0 {
        ep.send(1, 0, &[1u8; 16]).expect("an eager envelope");
        let start = Instant::now();
        while ep.sends_in_flight() > 0 {
            assert!(start.elapsed() < RANK_LIMIT, "an eager send never completed");
            ep.progress();
        }
        ep.send(1, 0, &vec![2u8; 64 * 1024]).expect("a rendezvous envelope");
        ep.progress();
        assert_eq!(ep.sends_in_flight(), 1, "rank 1 does not receive before closing");
    }
    world.barrier();
    if rank == 0 {
        let left = t.close(vec![ep]).expect("close");
        assert_eq!(left, Leftovers { sends_in_flight: 1, ..Leftovers::default() });
        world.barrier();
    } else {
        world.barrier();
        // Rank 0 has closed: both envelopes are here, unreceived.
        let left = t.close(vec![ep]).expect("close");
        assert_eq!(left.sends_in_flight, 0);
        assert_eq!(left.receives_in_flight + left.undelivered, 2, "{left:?}");
    }
}

/// Rank 0 sends `5 · RING` envelopes, short and long mixed (every third one above
/// [`POSTED_BYTES`]), to rank 1 while rank 1 waits in a barrier without receiving: most find
/// no posted receive and wait in MPI's unexpected queue, and the ring wraps several times
/// while rank 1 takes them. Rank 1 gets each one whole, in the order sent; `close` then finds
/// nothing left over (its posted receives cancelled).
fn flood() {
    let rank = crate::rack::rank();
    const N: u32 = 5 * RING as u32;
    let config = Config { max_envelope_bytes: 64 * 1024, window: 8 * RING, ..Config::default() };
    let (transport, mut eps) = open(1, config).expect("open");
    let mut ep = eps.pop().expect("one endpoint");
    let world = mpi::topology::SimpleCommunicator::world();
    let (from, to) = ((0, 0), (1, 0));
    let size = |seq: u32| {
        if seq % 3 == 2 {
            POSTED_BYTES + 1 + 97 * seq as usize
        } else {
            16 + seq as usize
        }
    };
    let start = Instant::now();
    if rank == 0 {
        let mut buf = Vec::new();
        for seq in 0..N {
            fill(&mut buf, from, to, seq, size(seq));
            ep.send(1, 0, &buf).expect("the window holds them all");
        }
        world.barrier();
        while ep.sends_in_flight() > 0 {
            assert!(start.elapsed() < RANK_LIMIT, "rank 0: sends never completed");
            ep.progress();
            std::thread::yield_now();
        }
    } else {
        world.barrier();
        let mut next = 0;
        while next < N {
            assert!(start.elapsed() < RANK_LIMIT, "rank 1: received {next} of {N}");
            if let Some(r) = ep.poll_recv() {
                let b = r.bytes();
                let seq = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
                assert_eq!(seq, next, "envelopes in the order sent");
                assert_eq!(b.len(), size(seq), "envelope {seq} whole");
                if let Some(i) = (HEADER..b.len()).find(|&i| b[i] != pattern(from, seq, i)) {
                    panic!("envelope {seq}: byte {i} differs");
                }
                next += 1;
                ep.release(r);
            }
        }
        assert!(ep.poll_recv().is_none(), "nothing more");
    }
    world.barrier();
    assert_eq!(transport.close(vec![ep]).expect("close"), Leftovers::default());
    println!("transport flood: rank {rank} ok");
}

/// Sends to worker 0 of `to`, progressing while the window is full.
fn send_spin(ep: &mut Endpoint, to: usize, bytes: &[u8]) {
    loop {
        match ep.send(to, 0, bytes) {
            Ok(()) => return,
            Err(SendError::WouldBlock) => {
                ep.progress();
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// Ping-pong of 8 B, 4032 B and 4 KiB through the transport and through rsmpi's blocking
/// send/receive on `MPI_COMM_WORLD`, alternated; then one-way throughput of 4032-byte
/// envelopes with windows of 1, 4 and 16. Rank 0 prints; nothing is asserted on time.
fn measure() {
    use mpi::point_to_point::{Destination, Source};
    let (rank, ranks) = (crate::rack::rank(), crate::rack::ranks());
    assert_eq!(ranks, 2);
    let world = mpi::topology::SimpleCommunicator::world();
    let peer = 1 - rank;
    let iters: u32 =
        std::env::var("SKEIN_TRANSPORT_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(20_000);
    // Envelopes up to 4 KiB for the ping-pong (4096 B is above the eager limit).
    let config = Config { max_envelope_bytes: 4096, ..Config::default() };
    let (transport, mut eps) = open(1, config).expect("open");
    let mut ep = eps.pop().expect("one endpoint");
    let layer_round = |ep: &mut Endpoint, bytes: &[u8], n: u32| -> f64 {
        let start = Instant::now();
        for _ in 0..n {
            if rank == 0 {
                send_spin(ep, peer, bytes);
            }
            let r = loop {
                if let Some(r) = ep.poll_recv() {
                    break r;
                }
                ep.progress();
            };
            assert_eq!(r.bytes().len(), bytes.len());
            ep.release(r);
            if rank == 1 {
                send_spin(ep, peer, bytes);
            }
        }
        while ep.sends_in_flight() > 0 {
            ep.progress();
        }
        start.elapsed().as_secs_f64() * 1e6 / f64::from(n)
    };
    let raw_round = |bytes: &mut [u8], n: u32| -> f64 {
        let p = world.process_at_rank(peer as i32);
        let start = Instant::now();
        for _ in 0..n {
            if rank == 0 {
                p.send(&bytes[..]);
                p.receive_into(&mut bytes[..]);
            } else {
                p.receive_into(&mut bytes[..]);
                p.send(&bytes[..]);
            }
        }
        start.elapsed().as_secs_f64() * 1e6 / f64::from(n)
    };
    for len in [8usize, 4032, 4096] {
        let mut bytes = vec![7u8; len];
        layer_round(&mut ep, &bytes, iters / 10); // warm-up
        raw_round(&mut bytes, iters / 10);
        let (mut layer, mut raw) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            world.barrier();
            layer.push(layer_round(&mut ep, &bytes, iters));
            world.barrier();
            raw.push(raw_round(&mut bytes, iters));
        }
        let best = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
        let median = |v: &[f64]| {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        if rank == 0 {
            println!(
                "MEASURE ping-pong {len} B: transport min {:.2} median {:.2} us/round trip, \
                 rsmpi blocking min {:.2} median {:.2} us; ratio of mins {:.2}, of medians {:.2} \
                 (runs: {:?} vs {:?})",
                best(&layer),
                median(&layer),
                best(&raw),
                median(&raw),
                best(&layer) / best(&raw),
                median(&layer) / median(&raw),
                layer.iter().map(|x| (x * 100.0).round() / 100.0).collect::<Vec<_>>(),
                raw.iter().map(|x| (x * 100.0).round() / 100.0).collect::<Vec<_>>(),
            );
        }
    }
    // The cost of a progress pass with nothing to do (what every loop pass of an idle worker
    // pays): one MPI_Test of the oldest posted receive.
    world.barrier();
    let calls = iters * 50;
    let start = Instant::now();
    for _ in 0..calls {
        ep.progress();
    }
    let idle_ns = start.elapsed().as_secs_f64() * 1e9 / f64::from(calls);
    if rank == 0 {
        println!("MEASURE idle progress(): {idle_ns:.0} ns per call");
    }
    let left = transport.close(vec![ep]).expect("close");
    assert_eq!(left, Leftovers::default());

    // One-way throughput: rank 0 sends `n` envelopes of 4032 B, rank 1 answers with one 8-byte
    // envelope when it has them all; rank 0 times the whole.
    let n = iters * 5;
    for round in 0..2 {
        for window in [1usize, 4, 16] {
            let (transport, mut eps) = open(
                1,
                Config { max_envelope_bytes: DEFAULT_ENVELOPE_BYTES, window, ..Config::default() },
            )
            .expect("open");
            let mut ep = eps.pop().expect("one endpoint");
            world.barrier();
            let start = Instant::now();
            if rank == 0 {
                let bytes = vec![3u8; DEFAULT_ENVELOPE_BYTES];
                let mut sent = 0;
                while sent < n {
                    match ep.send(1, 0, &bytes) {
                        Ok(()) => sent += 1,
                        Err(SendError::WouldBlock) => {
                            ep.progress();
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                let ack = loop {
                    if let Some(r) = ep.poll_recv() {
                        break r;
                    }
                    ep.progress();
                };
                assert_eq!(ack.bytes(), &u64::from(n).to_le_bytes());
                ep.release(ack);
                let s = start.elapsed().as_secs_f64();
                println!(
                    "MEASURE one-way 4032 B, P = {window:2} (round {round}): {:.0} envelopes/s, \
                     {:.0} MB/s, would_block {}",
                    f64::from(n) / s,
                    f64::from(n) * DEFAULT_ENVELOPE_BYTES as f64 / s / 1e6,
                    ep.stats().would_block
                );
            } else {
                let mut got = 0u32;
                while got < n {
                    if let Some(r) = ep.poll_recv() {
                        assert_eq!(r.bytes().len(), DEFAULT_ENVELOPE_BYTES);
                        got += 1;
                        ep.release(r);
                    } else {
                        ep.progress();
                    }
                }
                send_spin(&mut ep, 0, &u64::from(n).to_le_bytes());
            }
            while ep.sends_in_flight() > 0 {
                ep.progress();
            }
            let left = transport.close(vec![ep]).expect("close");
            assert_eq!(left, Leftovers::default());
        }
    }
    println!("transport measure: rank {rank} ok");
}
