use super::*;
use std::mem::offset_of;

/// A resolver for the tests' uniform segments: word `k` names the `u64` at `base + k`
/// (`wrapping_add`: an address inside the caller's array for the words it uses), and
/// every word asked for is recorded in `seen`.
fn recording(
    base: *mut u64,
    seen: &mut Vec<u64>,
) -> impl FnMut(u64) -> Result<*mut u8, String> + '_ {
    move |word| {
        seen.push(word);
        Ok(base.wrapping_add(word as usize) as *mut u8)
    }
}

#[test]
fn field_offsets_are_the_validators() {
    assert_eq!(offset_of!(RemoteVTable, magic), 0);
    assert_eq!(offset_of!(RemoteVTable, arg_bytes), OFFSET_ARG_BYTES);
    assert_eq!(offset_of!(RemoteVTable, result_bytes), OFFSET_RESULT_BYTES);
    assert_eq!(offset_of!(RemoteVTable, kind), OFFSET_KIND);
    assert_eq!(offset_of!(RemoteVTable, run), OFFSET_RUN);
    assert_eq!(size_of::<RemoteVTable>(), 48);
}

#[test]
fn option_of_uninhabited_is_zero_sized() {
    // The inhabitedness check of `check_closure` relies on this layout.
    fn size_of_option_of<F>(_: &F) -> usize {
        size_of::<Option<F>>()
    }
    let g = |_: &mut u64, (): ()| 1u64;
    assert_eq!(size_of_option_of(&g), 1);
    assert_eq!(size_of::<Option<std::convert::Infallible>>(), 0);
    #[derive(Clone, Copy)]
    #[allow(dead_code)]
    struct Captures(std::convert::Infallible);
    assert_eq!(size_of::<Option<Captures>>(), 0);
}

#[test]
fn tables_describe_their_sizes() {
    let vt = RemoteVTable::of(&|c: &mut u64, a: u32| *c + a as u64);
    assert_eq!(
        (vt.magic, vt.arg_bytes, vt.result_bytes, vt.kind),
        (REMOTE_MAGIC, 8, 8, KIND_PROPERTY)
    );
    let vt = RemoteVTable::of(&|_: &mut u64, (): ()| [0u8; 20]);
    assert_eq!((vt.arg_bytes, vt.result_bytes), (0, 24));
    let vt = RemoteVTable::of_element(&|c: &mut u32, a: (u8, u64)| (*c, a.0));
    assert_eq!((vt.arg_bytes, vt.result_bytes, vt.kind), (24, 8, KIND_ELEMENT));
    let vt = RemoteVTable::of_spawn(&|a: u128| a as u8);
    assert_eq!((vt.arg_bytes, vt.result_bytes, vt.kind), (16, 8, KIND_SPAWN));
    let vt = RemoteVTable::of_with(&|c: &mut String, s: String| c.len() + s.len());
    assert!(vt.arg_prefixed() && vt.result_prefixed());
    // One constant per type: the same closure type gives the same table.
    fn table_of<F: FnOnce(&mut u64, u64) -> u64 + Copy + Send + 'static>(f: F) -> usize {
        RemoteVTable::of(&f) as *const RemoteVTable as usize
    }
    let f = |c: &mut u64, a: u64| *c * a;
    assert_eq!(table_of(f), table_of(f));
    assert_ne!(table_of(f), table_of(|c: &mut u64, a: u64| *c + a));
}

#[test]
fn run_reads_the_argument_and_writes_the_result() {
    let vt = RemoteVTable::of(&|c: &mut u64, (a, b): (u32, u16)| {
        *c += a as u64;
        (*c, b as u8)
    });
    let mut target = 10u64;
    let mut arg = Vec::new();
    push_plain(&mut arg, (5u32, 300u16));
    let mut out = vec![0xee]; // results are appended
                              // SAFETY: `target` is a live u64 used by nothing else; `arg` is the argument's bytes.
    let r = unsafe { vt.run(&mut target as *mut u64 as *mut u8, &arg, &mut out) };
    assert_eq!(r, Ok(()));
    assert_eq!(target, 15);
    assert_eq!(out.len(), 1 + 16);
    assert_eq!(read_plain::<(u64, u8)>(&out[1..]), (15, 44));
}

#[test]
fn a_panic_becomes_its_message_and_leaves_zeros() {
    let mut target = 1u64;
    let mut out = Vec::new();
    let vt = RemoteVTable::of(&|_: &mut u64, a: u64| -> u64 { panic!("bad {a}") });
    // SAFETY: as above.
    let r = unsafe { vt.run(&mut target as *mut u64 as *mut u8, &7u64.to_ne_bytes(), &mut out) };
    assert_eq!(r, Err(RunError::Panicked("bad 7".into())));
    assert_eq!(out, [0; 8]);
    let vt = RemoteVTable::of(&|_: &mut u64, (): ()| -> u32 { panic!("static str") });
    // SAFETY: as above.
    let r = unsafe { vt.run(&mut target as *mut u64 as *mut u8, &[], &mut out) };
    assert_eq!(r, Err(RunError::Panicked("static str".into())));
    let vt = RemoteVTable::of(&|_: &mut u64, (): ()| -> u32 { std::panic::panic_any(3u8) });
    // SAFETY: as above.
    let r = unsafe { vt.run(&mut target as *mut u64 as *mut u8, &[], &mut out) };
    assert_eq!(r, Err(RunError::Panicked("<non-string panic>".into())));
    assert_eq!(out.len(), 8 + 8 + 8);
}

/// A record whose target word equals the previous record's reuses its value: the
/// resolver is called once per run of equal words, and each record still runs on it.
#[test]
fn a_uniform_segment_resolves_a_repeated_word_once() {
    let vt = RemoteVTable::of(&|c: &mut u64, a: u64| -> u64 {
        *c += a;
        *c
    });
    // Target words 0 0 1 1 1 0: three runs of one word each.
    let words = [0u64, 0, 1, 1, 1, 0];
    let mut body = Vec::new();
    for (k, &w) in words.iter().enumerate() {
        body.extend_from_slice(&w.to_le_bytes());
        push_plain(&mut body, k as u64 + 1);
    }
    let mut values = [0u64, 100];
    let mut seen = Vec::new();
    let mut resolve = recording(values.as_mut_ptr(), &mut seen);
    let (mut out, mut panics) = (Vec::new(), Vec::new());
    // SAFETY: the resolver's pointers are live u64s used by nothing else, the same for the
    // same word; `body` is whole records of this table.
    let r = unsafe { vt.run_uniform(&body, &mut resolve, &mut out, &mut panics) };
    drop(resolve); // (it borrows `seen`)
    assert_eq!(r, Some(Ok(())));
    assert_eq!(seen, [0, 1, 0]);
    assert_eq!(values, [1 + 2 + 6, 100 + 3 + 4 + 5]);
    let results: Vec<u64> =
        out.chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(results, [1, 3, 103, 107, 112, 9]);
}

/// A uniform segment run in one call (`run_uniform`) gives what running its records one
/// by one with `run` gives: the same results in order, zeros and a message for a record
/// that panics (the records after it still run), each target resolved from its own word
/// (the words alternate between two values); a word the resolver refuses stops the
/// segment there, the records before it having run.
#[test]
fn a_uniform_segment_runs_as_its_records_one_by_one() {
    // A result without padding bytes: the outputs are compared byte for byte, and a
    // typed copy leaves a result's padding bytes unspecified.
    let vt = RemoteVTable::of(&|c: &mut u64, a: u32| -> (u64, u64) {
        assert!(a % 5 != 3, "record with {a}");
        *c += u64::from(a);
        (*c, u64::from(a))
    });
    let args: Vec<u32> = (0..12).collect();
    // Per record: target word (0 or 1: which value), then the argument.
    let mut body = Vec::new();
    for &a in &args {
        body.extend_from_slice(&u64::from(a % 2).to_le_bytes());
        push_plain(&mut body, a);
    }
    let one_by_one = {
        let mut values = [100u64, 200];
        let (mut out, mut panics) = (Vec::new(), Vec::new());
        for (k, rec) in body.chunks(16).enumerate() {
            let t = &mut values[rec[0] as usize] as *mut u64 as *mut u8;
            // SAFETY: `t` is a live u64 used by nothing else; `rec[8..]` is the argument.
            match unsafe { vt.run(t, &rec[8..], &mut out) } {
                Ok(()) => {}
                Err(RunError::Panicked(m)) => panics.push((k as u32, m)),
                Err(e) => panic!("{e:?}"),
            }
        }
        (values, out, panics)
    };
    let mut values = [100u64, 200];
    let mut seen = Vec::new();
    let mut resolve = recording(values.as_mut_ptr(), &mut seen);
    let (mut out, mut panics) = (vec![0xee], Vec::new());
    // SAFETY: the resolver's pointers are live u64s used by nothing else; `body` is whole
    // records of this table.
    let r = unsafe { vt.run_uniform(&body, &mut resolve, &mut out, &mut panics) };
    drop(resolve); // (it borrows `seen`)
    assert_eq!(r, Some(Ok(())));
    assert_eq!(seen, args.iter().map(|&a| u64::from(a % 2)).collect::<Vec<_>>());
    assert_eq!((values, &out[1..], &panics), (one_by_one.0, &one_by_one.1[..], &one_by_one.2));
    assert_eq!(panics.iter().map(|p| p.0).collect::<Vec<_>>(), [3, 8]);
    // A refused word: records 0..5 run (3 panics), then record 5 stops the segment.
    let mut values = [0u64, 0];
    let base = values.as_mut_ptr();
    let mut calls = 0;
    let mut resolve = |word: u64| {
        calls += 1;
        match calls {
            6 => Err("no".to_string()),
            _ => Ok(base.wrapping_add(word as usize) as *mut u8),
        }
    };
    let (mut out, mut panics) = (Vec::new(), Vec::new());
    // SAFETY: as above.
    let r = unsafe { vt.run_uniform(&body, &mut resolve, &mut out, &mut panics) };
    assert_eq!(r, Some(Err((5, "no".to_string()))));
    assert_eq!(values, [2 + 4, 1]);
    assert_eq!(panics.iter().map(|p| p.0).collect::<Vec<_>>(), [3]);
    // Tables without a loop of their own answer `None` and run nothing.
    let spawn = RemoteVTable::of_spawn(&|a: u64| a);
    let mut resolve = |_: u64| -> Result<*mut u8, String> { panic!("not called") };
    // SAFETY: nothing runs.
    let r = unsafe { spawn.run_uniform(&body, &mut resolve, &mut out, &mut panics) };
    assert_eq!(r, None);
}

/// A uniform segment of element records runs as its records one by one: each record's
/// index picks the element of the part its word names, a panicking record leaves zeros
/// and its message, and an index outside its part refuses the segment at that record
/// (as `run` refuses the record), the records before it having run.
#[test]
fn a_uniform_element_segment_runs_as_its_records_one_by_one() {
    let vt = RemoteVTable::of_element(&|v: &mut u64, a: u64| -> u64 {
        assert!(a != 7, "record with {a}");
        *v += a;
        *v
    });
    // (word, index, argument): parts 0 and 1, a panic at record 3, index 9 of part 1
    // (3 values) out of bounds at record 5.
    let recs = [(0u64, 0u64, 1u64), (1, 2, 2), (1, 2, 3), (0, 1, 7), (0, 1, 5), (1, 9, 1)];
    let mut body = Vec::new();
    for &(w, i, a) in &recs {
        body.extend_from_slice(&w.to_le_bytes());
        push_plain(&mut body, i);
        push_plain(&mut body, a);
    }
    let fresh = || [vec![10u64, 20], vec![30u64, 40, 50]];
    let one_by_one = {
        let mut parts = fresh();
        let (mut out, mut panics, mut refused) = (Vec::new(), Vec::new(), None);
        for (k, rec) in body.chunks(24).enumerate() {
            let t = &mut parts[rec[0] as usize] as *mut Vec<u64> as *mut u8;
            // SAFETY: `t` is a live Vec<u64> used by nothing else; `rec[8..]` the argument.
            match unsafe { vt.run(t, &rec[8..], &mut out) } {
                Ok(()) => {}
                Err(RunError::Panicked(m)) => panics.push((k as u32, m)),
                Err(RunError::Refused(m)) => {
                    refused = Some((k as u32, m));
                    break;
                }
            }
        }
        out.truncate(5 * 8); // the refused record's zeros are not the segment's
        (parts, out, panics, refused)
    };
    let mut parts = fresh();
    let base = parts.as_mut_ptr();
    let mut resolve = |word: u64| Ok(base.wrapping_add(word as usize) as *mut u8);
    let (mut out, mut panics) = (Vec::new(), Vec::new());
    // SAFETY: the resolver's pointers are live Vec<u64>s used by nothing else; `body` is
    // whole records of this table.
    let r = unsafe { vt.run_uniform(&body, &mut resolve, &mut out, &mut panics) };
    assert_eq!(r.clone().and_then(Result::err), one_by_one.3);
    assert_eq!(r, Some(Err((5, "element index 9 out of a part of 3".to_string()))));
    assert_eq!(parts, one_by_one.0);
    assert_eq!(parts, [vec![11, 25], vec![30, 40, 55]]);
    assert_eq!(&out[..5 * 8], &one_by_one.1[..]);
    assert_eq!(panics, one_by_one.2);
    assert_eq!(panics.iter().map(|p| p.0).collect::<Vec<_>>(), [3]);
}

#[test]
fn elements_spawns_and_serialized_requests_run() {
    let mut part = vec![1u32, 2, 3];
    let vt = RemoteVTable::of_element(&|v: &mut u32, a: u32| {
        *v *= a;
        *v
    });
    let mut arg = Vec::new();
    push_plain(&mut arg, 2u64);
    push_plain(&mut arg, 10u32);
    let mut out = Vec::new();
    let p = &mut part as *mut Vec<u32> as *mut u8;
    // SAFETY: `p` is a live Vec<u32> used by nothing else.
    assert_eq!(unsafe { vt.run(p, &arg, &mut out) }, Ok(()));
    assert_eq!((part[2], read_plain::<u32>(&out)), (30, 30));
    arg[..8].copy_from_slice(&3u64.to_ne_bytes());
    // SAFETY: as above.
    let r = unsafe { vt.run(p, &arg, &mut out) };
    assert_eq!(r, Err(RunError::Refused("element index 3 out of a part of 3".into())));
    assert_eq!(out.len(), 16);

    let vt = RemoteVTable::of_spawn(&|a: [u8; 3]| a.iter().map(|&b| b as u64).sum::<u64>());
    let mut out = Vec::new();
    // SAFETY: spawns have no target.
    assert_eq!(unsafe { vt.run(ptr::null_mut(), &[1, 2, 3, 0, 0, 0, 0, 0], &mut out) }, Ok(()));
    assert_eq!(read_plain::<u64>(&out), 6);

    let vt = RemoteVTable::of_with(&|c: &mut String, s: String| {
        c.push_str(&s);
        c.clone()
    });
    let mut target = "ab".to_string();
    let arg = codec::encode(&"cd".to_string()).unwrap();
    let mut out = Vec::new();
    let t = &mut target as *mut String as *mut u8;
    // SAFETY: `t` is a live String used by nothing else.
    assert_eq!(unsafe { vt.run(t, &arg, &mut out) }, Ok(()));
    let len = u32::from_le_bytes(out[..4].try_into().unwrap()) as usize;
    assert_eq!(out.len(), 8 + len.div_ceil(8) * 8);
    assert_eq!(codec::decode::<String>(&out[8..8 + len]).unwrap(), "abcd");
    // An argument that does not decode is refused, the closure does not run.
    let mut out = Vec::new();
    // SAFETY: as above.
    let r = unsafe { vt.run(t, &[0xff, 0xff], &mut out) };
    assert!(matches!(r, Err(RunError::Refused(_))), "{r:?}");
    assert_eq!((target.as_str(), out.as_slice()), ("abcd", &[0u8; 8][..]));
}
