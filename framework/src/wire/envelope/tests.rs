//! Tests of `envelope`: round trips, a batch run in one process, refusals, and the fuzz test.

use super::*;
use crate::runtime::latch::Latch;
use crate::wire::code_id::CONTROL_IDS;
use crate::wire::codec;
use crate::wire::remote::{read_plain, KIND_ELEMENT, KIND_PROPERTY, KIND_SPAWN};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

/// W = 2 workers per rank, R = 3 ranks. The client is worker 1 (rank 0); the landing
/// worker and the trustees are on rank 1 (workers 2 and 3).
const W: u32 = 2;
const R: u32 = 3;
const TOKEN: u64 = 0x1234_5678_9abc_def0;
const RUN: u32 = 4;
const CLIENT: u32 = 1;
const LANDING: u32 = 2;

fn job(me: u32) -> Job {
    Job { token: TOKEN, job_run: RUN, me, workers: W, ranks: R }
}

fn request_head() -> Head {
    Head { token: TOKEN, job_run: RUN, from: CLIENT, to_rank: 1, to: LANDING, seq: 77 }
}

fn response_head(from: u32) -> Head {
    Head { token: TOKEN, job_run: RUN, from, to_rank: 0, to: CLIENT, seq: 78 }
}

/// Next pair seq from the client: 5 to trustee 2, 0 to trustee 3 (100 from other clients).
/// (A validator that knows every trustee's numbers, as these tests' do, checks them all.)
fn next_seq(from: u32, trustee: u32) -> Option<u64> {
    Some(match (from, trustee) {
        (CLIENT, 2) => 5,
        (CLIENT, _) => 0,
        _ => 100,
    })
}

/// The landing worker's view (worker 2): its own numbers only; trustee 3's segment is
/// forwarded to it, which checks its number.
fn landing_seq(from: u32, trustee: u32) -> Option<u64> {
    (trustee == LANDING).then(|| next_seq(from, trustee).unwrap_or(0))
}

fn expect() -> Expect<'static> {
    Expect {
        job: job(LANDING),
        max_response_bytes: 4096,
        next_seq: &next_seq,
        seq_window: 1,
        loopback: false,
    }
}

// The test closures (each `fn` returns its table).
fn add() -> &'static RemoteVTable {
    RemoteVTable::of(&|c: &mut u64, a: u64| {
        *c += a;
        *c
    })
}
fn pair() -> &'static RemoteVTable {
    RemoteVTable::of(&|c: &mut u64, (a, b): (u8, u32)| (a as u64 * *c, b))
}
fn wide() -> &'static RemoteVTable {
    RemoteVTable::of(&|c: &mut u64, a: [u32; 10]| [a.iter().sum::<u32>() as u16 + *c as u16; 5])
}
fn unit() -> &'static RemoteVTable {
    RemoteVTable::of(&|c: &mut u64, (): ()| *c *= 2)
}
fn boom() -> &'static RemoteVTable {
    RemoteVTable::of(&|_: &mut u64, a: u32| -> u64 { panic!("boom {a}") })
}
fn elem() -> &'static RemoteVTable {
    RemoteVTable::of_element(&|v: &mut u32, a: u32| {
        *v += a;
        *v
    })
}
fn elem_wide() -> &'static RemoteVTable {
    RemoteVTable::of_element(&|v: &mut u32, a: u128| {
        *v = (a >> 100) as u32;
        a as u8
    })
}
fn spawn() -> &'static RemoteVTable {
    RemoteVTable::of_spawn(&|a: (u32, u32)| a.0 as u64 * a.1 as u64)
}
fn with() -> &'static RemoteVTable {
    RemoteVTable::of_with(&|c: &mut u64, s: String| {
        *c += s.len() as u64;
        format!("{s}{c}")
    })
}

/// The closures the fuzz envelopes are made of count their runs: the fuzz test checks that
/// none ever runs.
static FUZZ_RUNS: AtomicUsize = AtomicUsize::new(0);
fn fuzz_add() -> &'static RemoteVTable {
    RemoteVTable::of(&|c: &mut u64, a: u64| {
        FUZZ_RUNS.fetch_add(1, Ordering::Relaxed);
        *c + a
    })
}
fn fuzz_with() -> &'static RemoteVTable {
    RemoteVTable::of_with(&|_: &mut u64, s: Vec<u16>| {
        FUZZ_RUNS.fetch_add(1, Ordering::Relaxed);
        s.len() as u32
    })
}
fn fuzz_spawn() -> &'static RemoteVTable {
    RemoteVTable::of_spawn(&|a: [u8; 3]| {
        FUZZ_RUNS.fetch_add(1, Ordering::Relaxed);
        a
    })
}

/// A batch as the client keeps it: trustee, pair seq, the tables of its records.
type Batch = (u32, u64, Vec<&'static RemoteVTable>);

/// A request envelope and, per segment, `(trustee, pair seq, tables)` as the client keeps
/// them.
struct Built {
    bytes: Vec<u8>,
    batches: Vec<Batch>,
}

/// The envelope of the loopback test: every kind, a panic, a uniform segment.
fn build_requests() -> Built {
    let mut w = RequestWriter::new(&request_head());
    let mut batches = Vec::new();
    w.begin_segment(2, 5, None);
    w.push_plain(add(), 0, 7u64);
    w.push_plain(pair(), 1, (3u8, 9u32));
    w.push_plain(boom(), 0, 4u32);
    w.push(with(), 1, &codec::encode(&"xy".to_string()).unwrap());
    w.push_element(elem(), 0, 1, 5u32);
    w.push_plain(spawn(), 0, (6u32, 7u32));
    w.push_plain(wide(), 1, [1u32; 10]);
    w.push_plain(unit(), 1, ());
    w.push_element(elem_wide(), 0, 3, (9u128 << 100) | 0x1ff);
    w.end_segment();
    let tables = vec![add(), pair(), boom(), with(), elem(), spawn(), wide(), unit(), elem_wide()];
    batches.push((2, 5, tables));
    w.begin_segment(3, 0, Some(add()));
    for i in 0..3u64 {
        w.push_plain(add(), 2, i + 1);
    }
    w.end_segment();
    batches.push((3, 0, vec![add(); 3]));
    Built { bytes: w.finish(), batches }
}

fn reencode(env: &Envelope<'_>) -> Vec<u8> {
    let mut w = RequestWriter::new(&env.head);
    for seg in env.segments() {
        w.begin_segment(seg.trustee, seg.pair_seq, seg.uniform);
        for r in seg.records() {
            w.push(r.vt, r.target, r.arg);
        }
        w.end_segment();
    }
    w.finish()
}

fn reencode_response(resp: &Response<'_, '_>) -> Vec<u8> {
    let mut w = ResponseWriter::new(&resp.head);
    for seg in resp.segments() {
        w.begin_segment(seg.trustee, seg.pair_seq);
        for (vt, r) in seg.tables.iter().zip(seg.results()) {
            w.push_result(vt, r);
        }
        for (i, msg) in seg.panics() {
            w.push_panic(i, msg);
        }
        w.end_segment();
    }
    w.finish()
}

/// Looks batches up by `(trustee, pair seq)`, as a client would.
struct InFlightTable(HashMap<(u32, u64), Vec<&'static RemoteVTable>>);

impl InFlightTable {
    fn of(batches: &[Batch]) -> Self {
        InFlightTable(batches.iter().map(|(t, s, v)| ((*t, *s), v.clone())).collect())
    }
    fn get(&self, trustee: u32, seq: u64) -> Option<&[&'static RemoteVTable]> {
        self.0.get(&(trustee, seq)).map(|v| v.as_slice())
    }
}

/// Serves an accepted request envelope in this process, the way a trustee will: targets
/// are translated by the test (slot = index into `props`, or `parts` for elements).
fn serve(env: &Envelope<'_>, props: &mut [u64], parts: &mut [Vec<u32>]) -> Vec<u8> {
    let mut w = ResponseWriter::new(&response_head(env.segments().last().unwrap().trustee));
    for seg in env.segments() {
        w.begin_segment(seg.trustee, seg.pair_seq);
        for rec in seg.records() {
            let slot = (rec.target & 0xffff_ffff) as usize;
            let target = match rec.vt.kind {
                KIND_PROPERTY => &mut props[slot] as *mut u64 as *mut u8,
                KIND_ELEMENT => &mut parts[slot] as *mut Vec<u32> as *mut u8,
                KIND_SPAWN => std::ptr::null_mut(),
                k => panic!("kind {k}"),
            };
            // SAFETY: `target` is a live value of the table's target type (every property
            // closure here works on a u64, every element closure on a Vec<u32>), used by
            // nothing else during the call.
            unsafe { w.run(&rec, target) }.unwrap();
        }
        w.end_segment();
    }
    w.finish()
}

#[test]
fn a_request_batch_runs_in_one_process() {
    let built = build_requests();
    let env = validate(&built.bytes, 0, &expect()).unwrap();
    assert_eq!(reencode(&env), built.bytes);
    assert_eq!(env.segments().count(), 2);
    let tables: Vec<Vec<_>> = env.segments().map(|s| s.tables().collect()).collect();
    assert!(tables.iter().zip(&built.batches).all(|(a, b)| {
        a.len() == b.2.len() && a.iter().zip(&b.2).all(|(x, y)| std::ptr::eq(*x, *y))
    }));

    let mut props = vec![10u64, 20, 100];
    let mut parts = vec![vec![1u32, 2, 3, 4]];
    let response = serve(&env, &mut props, &mut parts);
    // The fixed part, plus what it leaves out: one panic entry (8 bytes and "boom 4" padded
    // to 8) and the serialized result of `with` ("xy22": 5 bytes and the codec's 4-byte
    // handle count, padded to 16).
    assert_eq!(response.len() as u64, env.response_bytes + 16 + 16);

    let in_flight = InFlightTable::of(&built.batches);
    let lookup = |t, s| in_flight.get(t, s);
    let exp = ExpectResponse { job: job(CLIENT), in_flight: &lookup };
    let resp = validate_response(&response, 1, &exp).unwrap();
    assert_eq!(reencode_response(&resp), response);
    let segs: Vec<_> = resp.segments().collect();
    assert_eq!(segs.len(), 2);

    let r: Vec<&[u8]> = segs[0].results().collect();
    assert_eq!(r.len(), 9);
    assert_eq!(read_plain::<u64>(r[0]), 17); // add: 10 + 7
    assert_eq!(read_plain::<(u64, u32)>(r[1]), (60, 9)); // pair: 3 · 20, 9
    assert_eq!(r[2], &[0; 8]); // boom: panicked, zeros
    assert_eq!(codec::decode::<String>(r[3]).unwrap(), "xy22"); // with: 20 + 2
    assert_eq!(read_plain::<u32>(r[4]), 7); // elem: part[1] = 2 + 5
    assert_eq!(read_plain::<u64>(r[5]), 42); // spawn
    assert_eq!(read_plain::<[u16; 5]>(r[6]), [32; 5]); // wide: 10 + 22
    assert!(r[7].is_empty()); // unit: no result bytes
    assert_eq!(read_plain::<u8>(r[8]), 0xff); // elem_wide: a u128 argument after the index
    let panics: Vec<_> = segs[0].panics().collect();
    assert_eq!(panics, [(2, "boom 4")]);
    let r: Vec<u64> = segs[1].results().map(read_plain::<u64>).collect();
    assert_eq!(r, [101, 103, 106]);
    assert_eq!(segs[1].panics().count(), 0);
    assert_eq!(props, [17, 44, 106]);
    assert_eq!(parts, [vec![1, 7, 3, 9]]);
}

/// A segment for another worker of the rank: the landing worker checks everything but its
/// pair sequence number and cuts it out as an envelope of its own; that trustee validates
/// it in full (its number included) and finds the client's bytes unchanged.
#[test]
fn a_segment_for_another_trustee_is_forwarded_and_checked_there() {
    let built = build_requests();
    let mut bytes = built.bytes.clone();
    // Trustee 3's segment starts after the header and trustee 2's segment.
    let seg1 = HEADER_BYTES + SEGMENT_HEADER_BYTES + le32(&bytes, HEADER_BYTES + 20) as usize;
    assert_eq!(le32(&bytes, seg1), 3);
    // A number the landing worker cannot check (trustee 3 expects 0).
    bytes[seg1 + 8..seg1 + 16].copy_from_slice(&9u64.to_le_bytes());
    let landing = Expect { next_seq: &landing_seq, ..expect() };
    let env = validate(&bytes, 0, &landing).unwrap();
    // Its own segment's number it does check.
    let mut own = bytes.clone();
    own[HEADER_BYTES + 8..HEADER_BYTES + 16].copy_from_slice(&6u64.to_le_bytes());
    assert!(matches!(reason(&own, 0, &landing), Reason::PairSeq { got: 6, want: 5, .. }));

    let segs: Vec<_> = env.segments().collect();
    let fwd = env.forward(&segs[1], Vec::new());
    assert_eq!(fwd.len(), HEADER_BYTES + (bytes.len() - seg1));
    assert_eq!(&fwd[HEADER_BYTES..], &bytes[seg1..]);
    // The trustee's validator: every number checked, `to` must be trustee 3.
    let at_trustee = Expect { job: job(3), ..expect() };
    assert!(matches!(
        reason(&fwd, 0, &at_trustee),
        Reason::PairSeq { got: 9, want: 0, trustee: 3, .. }
    ));
    assert!(matches!(reason(&fwd, 0, &expect()), Reason::To { to: 3, me: LANDING, .. }));
    // With the right number it is accepted, and re-encodes to itself.
    let good = env.forward(
        &validate(&built.bytes, 0, &expect()).unwrap().segments().nth(1).unwrap(),
        Vec::new(),
    );
    let env3 = validate(&good, 0, &at_trustee).unwrap();
    assert_eq!(reencode(&env3), good);
    assert_eq!(env3.head, Head { to: 3, ..request_head() });
    let seg: Vec<_> = env3.segments().collect();
    assert_eq!((seg.len(), seg[0].trustee, seg[0].pair_seq, seg[0].records), (1, 3, 0, 3));
    // A corrupted forwarded segment is refused by its trustee as any envelope would be.
    let mut bad = good.clone();
    set32(&mut bad, HEADER_BYTES + 16, 4);
    assert!(matches!(reason(&bad, 0, &at_trustee), Reason::Records { records: 4, .. }));
}

#[test]
fn empty_and_long_serialized_values_round_trip() {
    let mut w = RequestWriter::new(&request_head());
    w.begin_segment(3, 0, None);
    for s in ["", "a", "abcdefg", "abcdefgh", &"z".repeat(1000)] {
        w.push(with(), 0, &codec::encode(&s.to_string()).unwrap());
    }
    w.end_segment();
    let bytes = w.finish();
    let env = validate(&bytes, 0, &expect()).unwrap();
    assert_eq!(reencode(&env), bytes);
    let args: Vec<String> = env
        .segments()
        .flat_map(|s| {
            s.records().map(|r| codec::decode::<String>(r.arg).unwrap()).collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(args[4].len(), 1000);
    assert_eq!(args[..4], ["", "a", "abcdefg", "abcdefgh"]);
}

fn reason(bytes: &[u8], from_rank: usize, e: &Expect<'_>) -> Reason {
    let err = validate(bytes, from_rank, e).unwrap_err();
    assert_eq!(err.rank, from_rank);
    err.reason
}

fn set32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn set64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn forged_requests_are_refused_naming_the_rank() {
    let good = build_requests().bytes;
    let e = expect();
    let with_mut = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        f(&mut b);
        b
    };
    assert_eq!(reason(&good[..63], 0, &e), Reason::Short(63));
    assert!(matches!(reason(&with_mut(&|b| b[12] = 2), 0, &e), Reason::Kind { got: 2, .. }));
    assert_eq!(reason(&with_mut(&|b| b[50] = 1), 0, &e), Reason::Reserved(50));
    assert_eq!(reason(&with_mut(&|b| set64(b, 0, 1)), 0, &e), Reason::Token(1));
    assert_eq!(reason(&with_mut(&|b| set32(b, 8, 3)), 0, &e), Reason::JobRun { got: 3, want: RUN });
    // The MPI source says rank 2: worker 1 is not one of its workers.
    assert_eq!(reason(&good, 2, &e), Reason::From(CLIENT));
    assert_eq!(reason(&with_mut(&|b| set32(b, 16, 6)), 0, &e), Reason::From(6)); // no such worker
    assert!(matches!(reason(&with_mut(&|b| set32(b, 20, 2)), 0, &e), Reason::To { rank: 2, .. }));
    assert!(matches!(reason(&with_mut(&|b| set32(b, 40, 3)), 0, &e), Reason::To { to: 3, .. }));
    let longer = with_mut(&|b| b.extend_from_slice(&[0; 8]));
    assert!(matches!(reason(&longer, 0, &e), Reason::Total { .. }));
    let longer = with_mut(&|b| {
        b.extend_from_slice(&[0; 8]);
        let n = b.len() as u32;
        set32(b, 36, n);
    });
    assert_eq!(reason(&longer, 0, &e), Reason::Trailing(8));
    assert_eq!(reason(&with_mut(&|b| set32(b, 32, 0)), 0, &e), Reason::NoSegments);
    let mut empty = RequestWriter::new(&request_head());
    empty.begin_segment(2, 5, None);
    empty.end_segment();
    assert_eq!(reason(&empty.finish(), 0, &e), Reason::EmptySegment(0));
    // First segment header at 64: trustee, flags, pair seq, records, bytes.
    assert!(matches!(
        reason(&with_mut(&|b| set32(b, 64, 4)), 0, &e),
        Reason::Trustee { trustee: 4, what: "this rank", .. }
    ));
    assert!(matches!(
        reason(&with_mut(&|b| set32(b, 68, 2)), 0, &e),
        Reason::Flags { flags: 2, .. }
    ));
    assert!(matches!(
        reason(&with_mut(&|b| set64(b, 72, 6)), 0, &e),
        Reason::PairSeq { got: 6, want: 5, .. }
    ));
    let window2 = Expect { seq_window: 2, ..expect() };
    assert!(validate(&with_mut(&|b| set64(b, 72, 6)), 0, &window2).is_ok());
    assert!(matches!(
        reason(&with_mut(&|b| set64(b, 72, 4)), 0, &window2),
        Reason::PairSeq { got: 4, .. }
    ));
    // A count that overflows the segment, and one that leaves records over.
    assert!(matches!(
        reason(&with_mut(&|b| set32(b, 80, 10)), 0, &e),
        Reason::Record { record: 9, .. }
    ));
    assert!(matches!(reason(&with_mut(&|b| set32(b, 80, 1 << 30)), 0, &e), Reason::Records { .. }));
    assert!(matches!(
        reason(&with_mut(&|b| set32(b, 80, 8)), 0, &e),
        Reason::Record { record: 8, fault: Fault::Overrun, .. }
    ));
    assert!(matches!(
        reason(&with_mut(&|b| set32(b, 84, 1 << 20)), 0, &e),
        Reason::SegmentOverrun { segment: 0, .. }
    ));
    // Records of segment 0 start at 88: a bad code id, a control id, another table whose
    // size does not fit.
    assert!(matches!(
        reason(&with_mut(&|b| set64(b, 88, code_id(add()) + 4)), 0, &e),
        Reason::Record { record: 0, fault: Fault::Code(BadCode::Misaligned(_)), .. }
    ));
    assert!(matches!(
        reason(&with_mut(&|b| set64(b, 88, CONTROL_IDS - 1)), 0, &e),
        Reason::Record { fault: Fault::Code(BadCode::Control(_)), .. }
    ));
    // The loopback control id, outside a loopback run.
    assert!(matches!(
        reason(&with_mut(&|b| set64(b, 88, LOOPBACK_CONTROL)), 0, &e),
        Reason::Record { fault: Fault::LoopbackOnly, .. }
    ));
    // `unit` takes no argument: add's argument 7 is then read as the next code id.
    assert!(matches!(
        reason(&with_mut(&|b| set64(b, 88, code_id(unit()))), 0, &e),
        Reason::Record { record: 1, fault: Fault::Code(BadCode::Control(7)), .. }
    ));
    // The trustees must increase: segment 1 (trustee 3) renamed 2.
    let seg1 = 64 + 24 + le32(&good, 84) as usize;
    assert!(matches!(
        reason(&with_mut(&|b| set32(b, seg1, 2)), 0, &e),
        Reason::Trustee { what: "increasing order", .. }
    ));
    // Uniform segment 1: one more record than its bytes hold; a code id of a table with
    // another argument size. (One with the same size, `pair`, is accepted: the validator
    // checks sizes, and which closure runs is the sender's choice.)
    assert!(validate(&with_mut(&|b| set64(b, seg1 + 24, code_id(pair()))), 0, &e).is_ok());
    assert!(matches!(
        reason(&with_mut(&|b| set32(b, seg1 + 16, 4)), 0, &e),
        Reason::Records { records: 4, expected: 72, .. }
    ));
    assert!(matches!(
        reason(&with_mut(&|b| set64(b, seg1 + 24, code_id(unit()))), 0, &e),
        Reason::Records { expected: 32, .. }
    ));
    assert!(matches!(
        reason(&with_mut(&|b| set64(b, seg1 + 24, code_id(with()))), 0, &e),
        Reason::UniformPrefixed(1)
    ));
    let small = Expect { max_response_bytes: 200, ..expect() };
    assert!(matches!(reason(&good, 0, &small), Reason::ResponseSpace { max: 200, .. }));
    // The Display names the rank.
    let err = validate(&good, 2, &e).unwrap_err();
    assert_eq!(
        err.to_string(),
        "bad batch from rank 2: sending worker 1 is not a worker of the source rank"
    );
}

#[test]
fn forged_serialized_arguments_are_refused() {
    let mut w = RequestWriter::new(&request_head());
    w.begin_segment(2, 5, None);
    // 4 bytes: "abc" and its length, as bincode writes them (without the codec's handle
    // trailer: the validator checks sizes and padding, it does not decode).
    w.push(with(), 0, &[3, b'a', b'b', b'c']);
    w.end_segment();
    let good = w.finish();
    let e = expect();
    assert!(validate(&good, 0, &e).is_ok());
    // Argument prefix at 88 + 16 = 104: len, zero; bytes at 112, padding at 116..120.
    let mut b = good.clone();
    set32(&mut b, 104, 9);
    assert!(matches!(reason(&b, 0, &e), Reason::Record { fault: Fault::Overrun, .. }));
    let mut b = good.clone();
    set32(&mut b, 104, u32::MAX);
    assert!(matches!(reason(&b, 0, &e), Reason::Record { fault: Fault::Length(u32::MAX), .. }));
    let mut b = good.clone();
    b[108] = 1;
    assert!(matches!(reason(&b, 0, &e), Reason::Record { fault: Fault::Padding, .. }));
    let mut b = good.clone();
    b[118] = 1;
    assert!(matches!(reason(&b, 0, &e), Reason::Record { fault: Fault::Padding, .. }));
}

fn response_of(built: &Built) -> Vec<u8> {
    let env = validate(&built.bytes, 0, &expect()).unwrap();
    serve(&env, &mut [1, 2, 3], &mut [vec![0; 4]])
}

#[test]
fn forged_responses_are_refused() {
    let built = build_requests();
    let good = response_of(&built);
    let in_flight = InFlightTable::of(&built.batches);
    let lookup = |t, s| in_flight.get(t, s);
    let exp = ExpectResponse { job: job(CLIENT), in_flight: &lookup };
    let reason = |b: &[u8], rank| {
        let e = validate_response(b, rank, &exp).unwrap_err();
        assert_eq!(e.rank, rank);
        e.reason
    };
    assert!(validate_response(&good, 1, &exp).is_ok());
    // A request envelope is not a response.
    assert!(matches!(reason(&built.bytes, 1), Reason::Kind { got: 1, want: 2 }));
    // Trustees must be of the source rank.
    assert!(matches!(reason(&good, 2), Reason::From(_)));
    let mut b = good.clone();
    set64(&mut b, 72, 6); // no batch 6 to trustee 2
    assert!(matches!(reason(&b, 1), Reason::NotInFlight { trustee: 2, seq: 6, .. }));
    let mut b = good.clone();
    set32(&mut b, 80, 8); // 8 results for a batch of 9
    assert!(matches!(reason(&b, 1), Reason::Records { records: 8, expected: 9, .. }));
    let mut b = good.clone();
    set32(&mut b, 68, 1); // uniform is for requests
    assert!(matches!(reason(&b, 1), Reason::Flags { .. }));
    // One result byte too few: the segment's bytes shrink by 8 and the envelope with them.
    let mut b = good.clone();
    let seg_bytes = le32(&b, 84);
    set32(&mut b, 84, seg_bytes - 8);
    b.drain(88..96);
    let n = b.len() as u32;
    set32(&mut b, 36, n);
    assert!(matches!(reason(&b, 1), Reason::Record { .. } | Reason::Panics { .. }));
    // The panic list: segment 0's body ends with `1, 0, index 2, len 6, "boom 4", 0, 0`.
    let list = 88 + seg_bytes as usize - 24;
    assert_eq!(&good[list + 16..list + 22], b"boom 4");
    let mut b = good.clone();
    b[list + 16] = 0xff;
    assert!(matches!(reason(&b, 1), Reason::Panics { what: "message is not UTF-8", .. }));
    let mut b = good.clone();
    set32(&mut b, list + 8, 9); // 9 records: 0..=8
    assert!(matches!(
        reason(&b, 1),
        Reason::Panics { what: "record index out of order or range", .. }
    ));
    let mut b = good.clone();
    set32(&mut b, list, 2);
    assert!(matches!(reason(&b, 1), Reason::Panics { .. }));
    let mut b = good.clone();
    b[list + 23] = 1;
    assert!(matches!(reason(&b, 1), Reason::Panics { what: "non-zero padding", .. }));
}

/// The name of a refusal's variant.
fn variant(r: &Reason) -> String {
    let d = format!("{r:?}");
    d.split([' ', '(', '{']).next().unwrap_or("").to_string()
}

/// xorshift64: the fuzz test's seeded generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Valid envelopes built by the real encoders: requests, and responses to them.
fn fuzz_bases() -> (Vec<Vec<u8>>, Vec<Batch>) {
    let mut bases = Vec::new();
    let mut batches = Vec::new();
    // Mixed segment to trustee 2, uniform segment to trustee 3.
    let mut w = RequestWriter::new(&request_head());
    w.begin_segment(2, 5, None);
    w.push_plain(fuzz_add(), 0x0000_0001_0000_0002, 9u64);
    w.push(fuzz_with(), 3, &codec::encode(&vec![1u16, 500, 7]).unwrap());
    w.push_plain(fuzz_spawn(), 0, [1u8, 2, 3]);
    w.push(fuzz_with(), 4, &codec::encode(&Vec::<u16>::new()).unwrap());
    w.end_segment();
    w.begin_segment(3, 0, Some(fuzz_add()));
    for i in 0..4u64 {
        w.push_plain(fuzz_add(), i, i * 3);
    }
    w.end_segment();
    bases.push(w.finish());
    batches.push((2, 5, vec![fuzz_add(), fuzz_with(), fuzz_spawn(), fuzz_with()]));
    batches.push((3, 0, vec![fuzz_add(); 4]));
    // One non-uniform segment of plain records.
    let mut w = RequestWriter::new(&request_head());
    w.begin_segment(3, 0, None);
    for i in 0..5u64 {
        w.push_plain(fuzz_add(), i, i);
    }
    w.end_segment();
    bases.push(w.finish());
    // Responses to the first envelope's batches, written as a trustee would (results by
    // hand: running them would count as runs).
    let mut w = ResponseWriter::new(&response_head(3));
    w.begin_segment(2, 5);
    w.push_result(fuzz_add(), &11u64.to_le_bytes());
    w.push_result(fuzz_with(), &codec::encode(&3u32).unwrap());
    w.push_result(fuzz_spawn(), &[1, 2, 3, 0, 0, 0, 0, 0]);
    w.push_result(fuzz_with(), &[]);
    w.push_panic(1, "bad ünïcode-free? no: ünïcode");
    w.push_panic(3, "boom");
    w.end_segment();
    w.begin_segment(3, 0);
    for i in 0..4u64 {
        w.push_result(fuzz_add(), &i.to_le_bytes());
    }
    w.end_segment();
    bases.push(w.finish());
    // Control records (any validator accepts them): spawns and joins, with a plain record.
    let mut w = RequestWriter::new(&request_head());
    w.begin_segment(3, 0, None);
    w.push(&SPAWN_TABLE, 41, &spawn_body(fuzz_spawn(), &[4, 5, 6, 0, 0, 0, 0, 0]));
    w.push(&JOINED_TABLE, 41, &joined_body(Ok(&9u64.to_le_bytes())));
    w.push_plain(fuzz_add(), 7, 1u64);
    w.push(&JOINED_TABLE, 3, &joined_body(Err("rank 0 worker 1: ünïcode boom")));
    w.push(&JOINED_TABLE, 5, &joined_body(Ok(&[1, 2, 3])));
    w.push(&RELEASE_TABLE, 0x0000_0003_0000_0009, &release_body(1 << 40, &[6, 0, 2]));
    w.push(&GRANT_TABLE, 0x0000_0003_0000_0009, &[]);
    w.end_segment();
    bases.push(w.finish());
    // Export targets at the top generation, and an address target (refused here: a seed for
    // that refusal, one bit away from an accepted target) in a plain and a uniform segment.
    let top = u64::from(crate::runtime::export::MAX_GEN) << 32 | 0xffff_ffff;
    let mut w = RequestWriter::new(&request_head());
    w.begin_segment(2, 5, None);
    w.push_plain(fuzz_add(), top, 1u64);
    w.push_plain(fuzz_add(), ADDR_TARGET | 0x7f00_dead_bee8, 2u64);
    w.end_segment();
    w.begin_segment(3, 0, Some(fuzz_add()));
    w.push_plain(fuzz_add(), top, 3u64);
    w.push_plain(fuzz_add(), ADDR_TARGET | 0x10, 4u64);
    w.end_segment();
    bases.push(w.finish());
    (bases, batches)
}

/// The fields of a `Spawn` record after its target: the spawn table's code id, the argument.
fn spawn_body(vt: &'static RemoteVTable, arg: &[u8]) -> Vec<u8> {
    let mut b = code_id(vt).to_le_bytes().to_vec();
    b.extend_from_slice(arg);
    b
}

/// Control records are real wire records: accepted by a validator that is not in loopback
/// mode, handed out under their stand-in tables with their fields, answered with empty
/// results; every fixed field is checked.
#[test]
fn control_records_validate_without_loopback() {
    let build = |f: &dyn Fn(&mut RequestWriter)| {
        let mut w = RequestWriter::new(&request_head());
        w.begin_segment(2, 5, None);
        f(&mut w);
        w.end_segment();
        w.finish()
    };
    let good = build(&|w| {
        w.push(&SPAWN_TABLE, 17, &spawn_body(spawn(), &[3, 0, 0, 0, 5, 0, 0, 0]));
        w.push(&JOINED_TABLE, 18, &joined_body(Ok(&[9; 16])));
        w.push(&JOINED_TABLE, 19, &joined_body(Err("rank 1 worker 3: no")));
    });
    let env = validate(&good, 0, &expect()).unwrap();
    assert_eq!(reencode(&env), good);
    let recs: Vec<_> = env.segments().next().unwrap().records().collect();
    assert_eq!(recs.len(), 3);
    assert_eq!(control_id(recs[0].vt), Some(CONTROL_SPAWN));
    let (vt, arg) = spawn_parts(recs[0].arg).unwrap();
    assert!(std::ptr::eq(vt, spawn()) && arg == [3, 0, 0, 0, 5, 0, 0, 0] && recs[0].target == 17);
    assert_eq!(control_id(recs[1].vt), Some(CONTROL_JOINED));
    assert_eq!(joined_parts(recs[1].arg), Ok(&[9u8; 16][..]));
    assert_eq!(joined_parts(recs[2].arg), Err("rank 1 worker 3: no"));
    // Empty results: the header, one segment header and its empty panic list.
    assert_eq!(env.response_bytes, (HEADER_BYTES + SEGMENT_HEADER_BYTES + 8) as u64);

    let fault = |bytes: &[u8]| match validate(bytes, 0, &expect()).unwrap_err().reason {
        Reason::Record { fault, .. } => fault,
        r => panic!("not a record fault: {r:?}"),
    };
    // A spawn naming a property's table, or a table that does not exist.
    let not_spawn = build(&|w| w.push(&SPAWN_TABLE, 1, &spawn_body(add(), &[0; 8])));
    assert!(matches!(fault(&not_spawn), Fault::Control(m) if m.contains("not a spawn")));
    let mut no_table = good.clone();
    no_table[HEADER_BYTES + SEGMENT_HEADER_BYTES + 16 + 6] ^= 0x40;
    assert!(matches!(fault(&no_table), Fault::Code(_)));
    // An argument of the wrong size for the spawn table.
    let short = build(&|w| w.push(&SPAWN_TABLE, 1, &spawn_body(spawn(), &[])));
    assert!(matches!(fault(&short), Fault::Overrun));
    // Joined: unknown status, too long a result, a panic message that is not UTF-8, padding.
    let joined_at = HEADER_BYTES + SEGMENT_HEADER_BYTES + 16;
    let one = build(&|w| w.push(&JOINED_TABLE, 1, &joined_body(Ok(&[1, 2, 3]))));
    let mut bad = one.clone();
    bad[joined_at] = 2;
    assert!(matches!(fault(&bad), Fault::Control(m) if m.contains("status")));
    let mut bad = one.clone();
    bad[joined_at + 4..joined_at + 8].copy_from_slice(&257u32.to_le_bytes());
    assert_eq!(fault(&bad), Fault::Length(257));
    let mut bad = one.clone();
    bad[joined_at] = 1;
    bad[joined_at + 8] = 0xff;
    assert!(matches!(fault(&bad), Fault::Control(m) if m.contains("UTF-8")));
    let mut bad = one.clone();
    bad[joined_at + 12] = 1;
    assert_eq!(fault(&bad), Fault::Padding);
    // The other reserved ids stay refused.
    let mut bad = one.clone();
    bad[HEADER_BYTES + SEGMENT_HEADER_BYTES] = 6;
    assert_eq!(fault(&bad), Fault::Code(BadCode::Control(6)));
    // Launch: a launch table with the property's target word; a launch table is refused in
    // any other record, and a launch record refuses any other table.
    let launch =
        || RemoteVTable::of_launch::<Latch<u64>, _, _, _>(&|x: &mut u64, k: u32| *x + k as u64);
    let mut body = code_id(launch()).to_le_bytes().to_vec();
    body.extend_from_slice(&0x0000_0002_0000_0007u64.to_le_bytes());
    body.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 0]);
    let good = build(&|w| w.push(&LAUNCH_TABLE, 33, &body));
    let env = validate(&good, 0, &expect()).unwrap();
    assert_eq!(reencode(&env), good);
    let rec = env.segments().next().unwrap().records().next().unwrap();
    assert_eq!((control_id(rec.vt), rec.target), (Some(CONTROL_LAUNCH), 33));
    let (vt, target, arg) = launch_parts(rec.arg).unwrap();
    assert!(std::ptr::eq(vt, launch()));
    assert_eq!((target, arg), (0x0000_0002_0000_0007, &[6u8, 0, 0, 0, 0, 0, 0, 0][..]));
    let plain = build(&|w| w.push_plain(launch(), 1, 6u32));
    assert!(matches!(fault(&plain), Fault::Control(m) if m.contains("outside a launch")));
    let mut wrong = code_id(spawn()).to_le_bytes().to_vec();
    wrong.extend_from_slice(&[0; 16]);
    let wrong = build(&|w| w.push(&LAUNCH_TABLE, 1, &wrong));
    assert!(matches!(fault(&wrong), Fault::Control(m) if m.contains("not a launch")));
}

/// Applies one random mutation.
fn mutate(rng: &mut Rng, b: &mut Vec<u8>, bases: &[Vec<u8>]) {
    const INTERESTING: [u8; 9] = [0, 1, 2, 3, 8, 16, 24, 0x7f, 0xff];
    match rng.below(8) {
        0 | 1 => {
            if !b.is_empty() {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
        }
        2 => {
            if !b.is_empty() {
                let i = rng.below(b.len());
                b[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
        }
        3 => {
            let n = rng.below(b.len() + 1);
            b.truncate(n);
        }
        4 => {
            for _ in 0..rng.below(40) {
                b.push(rng.next() as u8);
            }
        }
        5 => {
            // A u32 field at an 8-aligned or 4-aligned offset set to a small number.
            if b.len() >= 8 {
                let at = rng.below(b.len() / 4) * 4;
                let v = rng.below(70) as u32;
                b[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
        6 => {
            // Splice: 8..40 bytes of another base (header or segment) over or into this one.
            let src = &bases[rng.below(bases.len())];
            let n = 8 * (1 + rng.below(5));
            let from = rng.below(src.len().saturating_sub(n) / 8 + 1) * 8;
            let piece = src[from..(from + n).min(src.len())].to_vec();
            let at = rng.below(b.len() / 8 + 1) * 8;
            if rng.below(2) == 0 {
                let end = (at + piece.len()).min(b.len());
                b.splice(at..end, piece);
            } else {
                b.splice(at..at, piece);
            }
        }
        _ => {
            // Cut or duplicate an aligned word (a record one word shorter or longer).
            if b.len() >= 8 {
                let at = rng.below(b.len() / 8) * 8;
                if rng.below(2) == 0 {
                    b.drain(at..at + 8);
                } else {
                    let w: Vec<u8> = b[at..at + 8].to_vec();
                    b.splice(at..at, w);
                }
            }
        }
    }
}

#[test]
fn fuzz_validate_never_panics_and_accepts_only_what_reencodes() {
    let (bases, batches) = fuzz_bases();
    let in_flight = InFlightTable::of(&batches);
    let lookup = |t, s| in_flight.get(t, s);
    let exp_resp = ExpectResponse { job: job(CLIENT), in_flight: &lookup };
    let exp_req = expect();
    for b in &bases[..2] {
        assert_eq!(reencode(&validate(b, 0, &exp_req).unwrap()), *b);
    }
    assert_eq!(reencode_response(&validate_response(&bases[2], 1, &exp_resp).unwrap()), bases[2]);
    assert_eq!(reencode(&validate(&bases[3], 0, &exp_req).unwrap()), bases[3]);

    let runs_before = FUZZ_RUNS.load(Ordering::Relaxed);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut accepted = 0;
    let mut reasons = HashMap::new();
    let mut b = Vec::new();
    for _ in 0..100_000 {
        let base = rng.below(bases.len());
        b.clear();
        b.extend_from_slice(&bases[base]);
        for _ in 0..1 + rng.below(3) {
            mutate(&mut rng, &mut b, &bases);
        }
        // Most of the time, keep the total-bytes field right, so that the mutation is seen
        // by the deeper checks.
        if b.len() >= 40 && rng.below(4) != 0 {
            let n = b.len() as u32;
            b[36..40].copy_from_slice(&n.to_le_bytes());
        }
        match validate(&b, 0, &exp_req) {
            Ok(env) => {
                accepted += 1;
                assert_eq!(reencode(&env), b, "accepted request does not re-encode");
                let n: usize = env.segments().map(|s| s.records().count()).sum();
                let want: u32 = env.segments().map(|s| s.records).sum();
                assert_eq!(n as u32, want);
            }
            Err(e) => {
                assert_eq!(e.rank, 0);
                *reasons.entry(variant(&e.reason)).or_insert(0) += 1;
            }
        }
        match validate_response(&b, 1, &exp_resp) {
            Ok(resp) => {
                accepted += 1;
                assert_eq!(reencode_response(&resp), b, "accepted response does not re-encode");
            }
            Err(e) => {
                *reasons.entry(variant(&e.reason)).or_insert(0) += 1;
            }
        }
    }
    assert_eq!(FUZZ_RUNS.load(Ordering::Relaxed), runs_before, "validation ran a record");
    // The mutator reaches past the header: some mutants are accepted (a changed argument,
    // target or envelope seq), and the refusals come from many different checks.
    eprintln!("fuzz: {accepted} accepted, {} kinds of refusal: {reasons:?}", reasons.len());
    assert!(accepted > 1_000, "{accepted} accepted");
    assert!(reasons.len() >= 15, "only {} kinds of refusal: {reasons:?}", reasons.len());
}

/// A loopback control record is accepted only by a loopback validator, and hands out its
/// bytes and target unchanged, under the stand-in table.
#[test]
fn loopback_records_only_in_loopback_mode() {
    let mut w = RequestWriter::new(&request_head());
    w.begin_segment(2, 5, None);
    w.push_loopback(0xabc0, &[7u8; 24]);
    w.push_plain(add(), 9, 3u64);
    w.end_segment();
    let bytes = w.finish();
    let err = validate(&bytes, 0, &expect()).unwrap_err();
    assert!(matches!(err.reason, Reason::Record { record: 0, fault: Fault::LoopbackOnly, .. }));
    assert!(err.to_string().contains("only a loopback run accepts it"), "{err}");
    let lb = Expect { loopback: true, ..expect() };
    let env = validate(&bytes, 0, &lb).unwrap();
    let seg = env.segments().next().unwrap();
    let recs: Vec<_> = seg.records().collect();
    assert_eq!(recs.len(), 2);
    assert!(is_loopback_table(recs[0].vt) && !is_loopback_table(recs[1].vt));
    assert_eq!((recs[0].target, recs[0].arg), (0xabc0, &[7u8; 24][..]));
    assert_eq!(env.response_bytes, (HEADER_BYTES + SEGMENT_HEADER_BYTES + 8 + 8) as u64);
}

/// An address target (`ADDR_TARGET`: a loopback run's handle shared through memory) is
/// accepted only in loopback mode, in a plain record, a uniform segment (checked per record
/// there) and a launch record; a release always names an export. Export targets are accepted
/// by both.
#[test]
fn address_targets_only_in_loopback_mode() {
    let lb = Expect { loopback: true, ..expect() };
    let addr = ADDR_TARGET | 0x7f12_3456_7890;
    let export = u64::from(crate::runtime::export::MAX_GEN) << 32 | 7;
    let envelope = |uniform: bool, targets: &[u64]| {
        let mut w = RequestWriter::new(&request_head());
        w.begin_segment(2, 5, uniform.then(add));
        for (i, &t) in targets.iter().enumerate() {
            w.push_plain(add(), t, i as u64);
        }
        w.end_segment();
        w.finish()
    };
    for uniform in [false, true] {
        let good = envelope(uniform, &[export, 0, export]);
        assert_eq!(reencode(&validate(&good, 0, &expect()).unwrap()), good);
        let bytes = envelope(uniform, &[export, addr, export]);
        let env = validate(&bytes, 0, &lb).unwrap();
        assert_eq!(reencode(&env), bytes);
        let targets: Vec<u64> = env
            .segments()
            .flat_map(|s| s.records().map(|r| r.target).collect::<Vec<_>>())
            .collect();
        assert_eq!(targets, [export, addr, export]);
        let err = validate(&bytes, 0, &expect()).unwrap_err();
        assert!(
            matches!(err.reason, Reason::Record { record: 1, fault: Fault::AddressTarget(t), .. } if t == addr),
            "uniform {uniform}: {err:?}"
        );
        assert!(err.to_string().contains("only a loopback run accepts one"), "{err}");
    }
    let launch =
        RemoteVTable::of_launch::<Latch<u64>, _, _, _>(&|x: &mut u64, k: u32| *x + k as u64);
    let launch_with = |target: u64| {
        let mut body = code_id(launch).to_le_bytes().to_vec();
        body.extend_from_slice(&target.to_le_bytes());
        body.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 0]);
        let mut w = RequestWriter::new(&request_head());
        w.begin_segment(2, 5, None);
        w.push(&LAUNCH_TABLE, 33, &body);
        w.end_segment();
        w.finish()
    };
    assert!(validate(&launch_with(export), 0, &expect()).is_ok());
    assert!(validate(&launch_with(addr), 0, &lb).is_ok());
    let err = validate(&launch_with(addr), 0, &expect()).unwrap_err();
    assert!(matches!(err.reason, Reason::Record { fault: Fault::AddressTarget(_), .. }), "{err:?}");
    let mut w = RequestWriter::new(&request_head());
    w.begin_segment(2, 5, None);
    w.push(&RELEASE_TABLE, addr, &release_body(1, &[]));
    w.end_segment();
    let release = w.finish();
    for e in [expect(), Expect { loopback: true, ..expect() }] {
        let err = validate(&release, 0, &e).unwrap_err();
        assert!(matches!(err.reason, Reason::Record { fault: Fault::AddressTarget(_), .. }));
    }
}

/// `Grant` records (control id 5) are real wire records: a target and nothing else, answered
/// with an 8-byte result; an address target is refused in any mode.
#[test]
fn grant_records_validate_without_loopback() {
    let target = 0x0000_0007_0000_0002u64;
    let mut w = RequestWriter::new(&request_head());
    w.begin_segment(2, 5, None);
    w.push(&GRANT_TABLE, target, &[]);
    w.push_plain(add(), 1, 2u64);
    w.end_segment();
    let good = w.finish();
    let env = validate(&good, 0, &expect()).unwrap();
    assert_eq!(reencode(&env), good);
    let recs: Vec<_> = env.segments().next().unwrap().records().collect();
    assert_eq!((control_id(recs[0].vt), recs[0].target), (Some(CONTROL_GRANT), target));
    assert!(recs[0].arg.is_empty());
    // Its result takes 8 bytes of the response.
    let fixed = (HEADER_BYTES + SEGMENT_HEADER_BYTES + 8 + 8 + 8) as u64;
    assert_eq!(env.response_bytes, fixed);
    let mut bad = good.clone();
    let at = HEADER_BYTES + SEGMENT_HEADER_BYTES + 8;
    bad[at + 7] = 0x80;
    let err = validate(&bad, 0, &Expect { loopback: true, ..expect() }).unwrap_err();
    assert!(matches!(err.reason, Reason::Record { fault: Fault::AddressTarget(_), .. }), "{err:?}");
}

/// `Release` records (control id 4) are real wire records: accepted without loopback mode,
/// handed out with their target, weight and `issued` counts; a zero weight, too many
/// clients, a non-zero reserved word and a short list are refused.
#[test]
fn release_records_validate_without_loopback() {
    let build = |f: &dyn Fn(&mut RequestWriter)| {
        let mut w = RequestWriter::new(&request_head());
        w.begin_segment(2, 5, None);
        f(&mut w);
        w.end_segment();
        w.finish()
    };
    let target = 0x0000_0007_0000_0002u64;
    let good = build(&|w| {
        w.push(&RELEASE_TABLE, target, &release_body(1 << 61, &[10_000, 0, 3]));
        w.push(&RELEASE_TABLE, 1, &release_body(1, &[]));
    });
    let env = validate(&good, 0, &expect()).unwrap();
    assert_eq!(reencode(&env), good);
    let recs: Vec<_> = env.segments().next().unwrap().records().collect();
    assert_eq!(recs.len(), 2);
    assert_eq!((control_id(recs[0].vt), recs[0].target), (Some(CONTROL_RELEASE), target));
    let (weight, issued) = release_parts(recs[0].arg);
    assert_eq!((weight, issued.collect::<Vec<_>>()), (1 << 61, vec![10_000, 0, 3]));
    let (weight, issued) = release_parts(recs[1].arg);
    assert_eq!((weight, issued.count()), (1, 0));

    let fault = |bytes: &[u8]| match validate(bytes, 0, &expect()).unwrap_err().reason {
        Reason::Record { fault, .. } => fault,
        r => panic!("not a record fault: {r:?}"),
    };
    let one = build(&|w| w.push(&RELEASE_TABLE, target, &release_body(5, &[1, 2])));
    let at = HEADER_BYTES + SEGMENT_HEADER_BYTES + 16;
    let mut bad = one.clone();
    bad[at..at + 8].copy_from_slice(&0u64.to_le_bytes());
    assert!(matches!(fault(&bad), Fault::Control(m) if m.contains("zero weight")));
    let mut bad = one.clone();
    bad[at + 12] = 1;
    assert_eq!(fault(&bad), Fault::Padding);
    let mut bad = one.clone();
    bad[at + 8..at + 12].copy_from_slice(&(MAX_RELEASE_CLIENTS as u32 + 1).to_le_bytes());
    assert!(matches!(fault(&bad), Fault::Control(m) if m.contains("too many clients")));
    // A count larger than the list: the record runs past its segment.
    let mut bad = one.clone();
    bad[at + 8..at + 12].copy_from_slice(&3u32.to_le_bytes());
    assert!(validate(&bad, 0, &expect()).is_err());
}
