//! Fuzz target: the `gr` (DIMACS) reader never panics, and whatever it accepts is written and
//! read back unchanged (weights compared bit for bit).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
#[allow(unused_imports)]
use skein_generators::formats::{read_gr, write_gr, WriteOptions};

fuzz_target!(|data: &[u8]| {
    let name = Path::new("fuzz.gr");
    let Ok(el) = read_gr(data, name) else { return };
    assert!(el.src.iter().chain(&el.dst).all(|&v| v < el.num_vertices));
    let mut out = Vec::new();
    write_gr(&mut out, &el, &WriteOptions::default(), name)
        .expect("an accepted graph must be writable");
    let back = read_gr(&out[..], name).expect("a written graph must be readable");
    assert_eq!((back.num_vertices, &back.src, &back.dst), (el.num_vertices, &el.src, &el.dst));
    let bits = |w: &Option<Vec<f32>>| {
        w.as_ref().map(|w| w.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
    };
    assert_eq!(bits(&back.weights), bits(&el.weights));
});
