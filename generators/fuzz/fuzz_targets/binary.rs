//! Fuzz target: the binary reader never panics, and whatever it accepts is written and
//! read back unchanged (weights compared bit for bit).
//!
//! Random bytes almost never carry a valid checksum, so each input is tried twice: as
//! given, and with its last 8 bytes replaced by the checksum of the rest, which lets the
//! fuzzer reach the array and validation code behind the checksum.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use skein_generators::formats::{binary_checksum, read_binary, write_binary};

fn check(data: &[u8]) {
    let name = Path::new("fuzz.skg");
    let Ok(el) = read_binary(data, name) else { return };
    assert!(el.src.iter().chain(&el.dst).all(|&v| v < el.num_vertices));
    let mut out = Vec::new();
    write_binary(&mut out, &el, name).expect("an accepted graph must be writable");
    let back = read_binary(&out[..], name).expect("a written graph must be readable");
    assert_eq!((back.num_vertices, &back.src, &back.dst), (el.num_vertices, &el.src, &el.dst));
    let bits = |w: &Option<Vec<f32>>| {
        w.as_ref().map(|w| w.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
    };
    assert_eq!(bits(&back.weights), bits(&el.weights));
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if data.len() >= 8 {
        let mut fixed = data.to_vec();
        let body = fixed.len() - 8;
        let sum = binary_checksum(&fixed[..body]);
        fixed[body..].copy_from_slice(&sum.to_le_bytes());
        check(&fixed);
    }
});
