//! Readers for the Graph500 reference test vectors in `testdata/graph500/`.
#![allow(dead_code)]

use std::collections::HashMap;

use skein_generators::{BfsResult, SsspResult, NO_PARENT, UNREACHED_LEVEL};

/// The vectors' folder, `testdata/graph500/` at the repository root.
pub(crate) const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/graph500/");

pub(crate) fn read(name: &str) -> String {
    let path = format!("{DIR}{name}");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

fn data_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty())
}

/// `(u, v, weight bits)` of every edge of `kron_sNN_ef16_edges.txt`.
pub(crate) fn edges(scale: u32) -> Vec<(u64, u64, u32)> {
    let text = read(&format!("kron_s{scale:02}_ef16_edges.txt"));
    data_lines(&text)
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 4, "bad line {l:?}");
            (f[0].parse().unwrap(), f[1].parse().unwrap(), u32::from_str_radix(f[2], 16).unwrap())
        })
        .collect()
}

/// The 64 roots and the final candidate counter of `kron_sNN_ef16_roots.txt`.
pub(crate) fn roots(scale: u32) -> (Vec<u64>, u64) {
    let text = read(&format!("kron_s{scale:02}_ef16_roots.txt"));
    let marker = "candidate counter at the end of selection = ";
    let counter = text
        .lines()
        .find_map(|l| l.split_once(marker).map(|(_, r)| r))
        .and_then(|r| r.split_whitespace().next())
        .expect("counter comment")
        .parse()
        .unwrap();
    (data_lines(&text).map(|l| l.trim().parse().unwrap()).collect(), counter)
}

/// The root-0 BFS and SSSP results of `kron_sNN_ef16_root0.txt`.
pub(crate) fn root0(scale: u32, root: u64) -> (BfsResult, SsspResult) {
    let text = read(&format!("kron_s{scale:02}_ef16_root0.txt"));
    let n = 1usize << scale;
    let mut bfs = BfsResult { root, level: vec![0; n], parent: vec![0; n] };
    let mut sssp = SsspResult { root, dist: vec![0.0; n], parent: vec![0; n] };
    let mut count = 0;
    for l in data_lines(&text) {
        let f: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(f.len(), 6, "bad line {l:?}");
        let v: usize = f[0].parse().unwrap();
        assert_eq!(v, count, "vertices in order");
        count += 1;
        let level: i64 = f[1].parse().unwrap();
        bfs.level[v] = if level < 0 { UNREACHED_LEVEL } else { level as u32 };
        let bits = u32::from_str_radix(f[2], 16).unwrap();
        sssp.dist[v] = if bits == 0xbf80_0000 { f32::INFINITY } else { f32::from_bits(bits) };
        let parent = |s: &str| -> u64 {
            let p: i64 = s.parse().unwrap();
            if p < 0 {
                NO_PARENT
            } else {
                p as u64
            }
        };
        bfs.parent[v] = parent(f[4]);
        sssp.parent[v] = parent(f[5]);
    }
    assert_eq!(count, n);
    (bfs, sssp)
}

/// One SCALE's block of `summary_by_scale.txt`.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    pub(crate) scale: u32,
    /// `key -> value` of the `edges ...` line and single-value lines.
    pub(crate) fields: HashMap<String, String>,
    pub(crate) roots: Vec<u64>,
    /// `key -> value` of the `bfs root ...` line (`root` included).
    pub(crate) bfs: HashMap<String, String>,
    /// `key -> value(s)` of the `sssp root ...` line (`max_dist` is `BITS`).
    pub(crate) sssp: HashMap<String, String>,
}

impl Summary {
    pub(crate) fn get<T: std::str::FromStr>(&self, key: &str) -> T
    where
        T::Err: std::fmt::Debug,
    {
        self.fields.get(key).unwrap_or_else(|| panic!("no {key}")).parse().unwrap()
    }
}

fn pairs(words: &[&str]) -> HashMap<String, String> {
    words.chunks(2).map(|c| (c[0].to_string(), c[1].to_string())).collect()
}

pub(crate) fn summaries() -> Vec<Summary> {
    let text = read("summary_by_scale.txt");
    let mut out: Vec<Summary> = Vec::new();
    for l in data_lines(&text) {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w[0] == "SCALE" {
            out.push(Summary { scale: w[1].parse().unwrap(), ..Default::default() });
            continue;
        }
        let s = out.last_mut().expect("SCALE line first");
        match w[0] {
            "roots" => s.roots = w[1..].iter().map(|x| x.parse().unwrap()).collect(),
            "bfs" => s.bfs = pairs(&w[1..]),
            "sssp" => {
                // max_dist carries two values (bits, decimal): drop the decimal.
                let i = w.iter().position(|&x| x == "max_dist").unwrap();
                let mut ws = w[1..].to_vec();
                ws.remove(i + 1); // decimal after the bits (index shifted by one)
                s.sssp = pairs(&ws);
            }
            _ => s.fields.extend(pairs(&w)),
        }
    }
    out
}

pub(crate) fn summary(scale: u32) -> Summary {
    summaries().into_iter().find(|s| s.scale == scale).expect("SCALE in summary_by_scale.txt")
}

/// The rank boundaries a job of `ranks` ranks of `workers` workers uses: the first vertex
/// of every `workers`-th block of the partition of `n` vertices into `ranks · workers`
/// contiguous blocks, owner `(v · m) >> 64` with `m = floor(2^64 · parts / n)` (the
/// engine's partition owner function, restated here: this crate does not depend on it).
pub(crate) fn bounds(n: u64, ranks: usize, workers: usize) -> Vec<u64> {
    let parts = ranks * workers;
    let m = ((parts as u128) << 64) / n as u128;
    let owner = |v: u64| ((v as u128 * m) >> 64) as usize;
    let mut b: Vec<u64> =
        (0..ranks).map(|r| (0..n).find(|&v| owner(v) >= r * workers).unwrap_or(n)).collect();
    b.push(n);
    b
}
