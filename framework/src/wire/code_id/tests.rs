use super::*;

fn tables() -> Vec<&'static RemoteVTable> {
    vec![
        RemoteVTable::of(&|c: &mut u64, a: u64| *c + a),
        RemoteVTable::of(&|_: &mut String, (): ()| 0u8),
        RemoteVTable::of_element(&|c: &mut u32, a: [u64; 3]| (*c, a[0])),
        RemoteVTable::of_spawn(&|a: u16| a),
        RemoteVTable::of_with(&|c: &mut Vec<u8>, v: Vec<u8>| c.len() + v.len()),
    ]
}

#[test]
fn ids_of_tables_resolve_to_them() {
    for vt in tables() {
        let c = code_id(vt);
        assert!(c > CONTROL_IDS);
        assert!(std::ptr::eq(resolve(c).unwrap(), vt));
    }
}

/// Prints the code id of a table and where ANCHOR is (read by the next test, from
/// another process).
#[test]
fn print_code_id() {
    println!("code id {} anchor {:#x}", code_id(tables()[2]), &ANCHOR as *const u8 as usize);
}

#[test]
fn code_ids_are_the_same_in_another_process() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--exact", "wire::code_id::tests::print_code_id", "--nocapture", "--test-threads=1"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // libtest may print "test ... " before the test's own output on the same line.
    let at = text.find("code id ").expect("no code id printed");
    let mut words = text[at..].lines().next().unwrap_or("").split(' ');
    let theirs: u64 = words.nth(2).unwrap().parse().unwrap();
    let their_anchor = words.nth(1).unwrap().to_string();
    assert_eq!(theirs, code_id(tables()[2]));
    assert!(std::ptr::eq(resolve(theirs).unwrap(), tables()[2]));
    // The other process was placed elsewhere (ASLR), yet the offset is the same. Where
    // ASLR is off, the addresses are equal and the test shows only the offsets' equality.
    let mine = format!("{:#x}", &ANCHOR as *const u8 as usize);
    if mine == their_anchor {
        eprintln!("note: ASLR seems off: both processes have ANCHOR at {mine}");
    }
}

#[test]
fn every_magic_in_relro_is_a_table() {
    let tables = tables(); // the scan must see these at least
    let segs = segments();
    let relro = segs.relro.clone().expect("the test binary is a PIE with RELRO");
    let mut hits = 0;
    let mut at = relro.start.next_multiple_of(8);
    while at + 8 <= relro.end {
        // SAFETY: `at` is 8-aligned and inside RELRO, which is mapped and initialised.
        let word = unsafe { *(at as *const u64) };
        if word == REMOTE_MAGIC {
            hits += 1;
            assert!(at + size_of::<RemoteVTable>() <= relro.end, "magic at the end of RELRO");
            // SAFETY: as above; the whole table is inside RELRO (just checked).
            let vt = unsafe { &*(at as *const RemoteVTable) };
            assert!(sane_sizes(vt.arg_bytes, vt.result_bytes, vt.kind), "{vt:?}");
            assert!(segs.in_text(vt.run as usize), "run of {vt:?} outside the text");
            let code = code_id(vt);
            assert!(std::ptr::eq(resolve(code).unwrap(), vt));
        }
        at += 8;
    }
    assert!(hits >= tables.len(), "{hits} hits");
    for vt in tables {
        let a = vt as *const RemoteVTable as usize;
        assert!(relro.contains(&a), "a table outside RELRO");
    }
}

#[test]
fn resolve_refuses_what_is_not_a_table() {
    assert_eq!(resolve(0).err(), Some(BadCode::Zero));
    assert_eq!(resolve(3).err(), Some(BadCode::Control(3)));
    let good = code_id(tables()[0]);
    for d in 1..8 {
        assert_eq!(resolve(good + d).err(), Some(BadCode::Misaligned(good + d)));
    }
    // The middle of a table: aligned, in range, no magic.
    assert_eq!(resolve(good + 8).err(), Some(BadCode::NotATable(good + 8, "no magic")));
    let relro = segments().relro.clone().unwrap();
    let anchor = &ANCHOR as *const u8 as usize;
    let to = |a: usize| a.wrapping_sub(anchor) as u64;
    for a in [relro.start - 8, relro.end, relro.end - 8, relro.end + 4096, 0, usize::MAX - 7] {
        let a = a & !7;
        let c = to(a);
        if c == 0 || c <= CONTROL_IDS {
            continue;
        }
        let r = resolve(c);
        assert!(
            matches!(r, Err(BadCode::OutOfRange(_)) | Err(BadCode::Misaligned(_))),
            "{a:#x}: {r:?}"
        );
    }
    assert!(resolve(!7).is_err());
    // An aligned word of RELRO that is not a table (some other constant): the first
    // aligned words of the range.
    let mut refused = 0;
    let mut at = relro.start.next_multiple_of(8);
    while at + size_of::<RemoteVTable>() <= relro.end && refused < 64 {
        // SAFETY: `at` is aligned and inside RELRO.
        if unsafe { *(at as *const u64) } != REMOTE_MAGIC {
            assert!(matches!(resolve(to(at)), Err(BadCode::NotATable(_, "no magic"))));
            refused += 1;
        }
        at += 8;
    }
    assert_eq!(refused, 64);
    // The magic alone is not enough: a forged table with a bad kind, copied to the heap,
    // is refused because it is not in RELRO.
    let forged = Box::new([REMOTE_MAGIC, 0, 0, 0]);
    assert!(matches!(resolve(to(forged.as_ptr() as usize)), Err(BadCode::OutOfRange(_))));
}
