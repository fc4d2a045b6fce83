//! Write your own algorithm: connected components on Skein's public API.
//!
//! A complete delegation program in one file, as a template for new kernels:
//!
//! 1. split the vertices over the workers with [`Partitioning`];
//! 2. entrust each partition's state (here: a component label per vertex) to its worker;
//! 3. run rounds: every worker's fiber works on its own partition (`apply` on a local
//!    trustee runs inline), and updates for vertices owned elsewhere are delegated to
//!    their trustee with `apply_then` (batched by the runtime);
//! 4. end each round with `skein::wait_quiescent()`: when it returns, every request of
//!    the round has been applied — no timeouts, no counting by hand.
//!
//! The algorithm is min-label propagation: every vertex starts with its own id as
//! label; a vertex whose label dropped tells its neighbours; a component's vertices all
//! end with its smallest id. It is checked against a union-find at the end.
//!
//! ```sh
//! cargo run --release -p skein-algorithms --example components -- 16 2
//! ```
//! (arguments: SCALE of the Graph500 Kronecker graph, workers)

use std::sync::Arc;

use skein::{Runtime, Trust};
use skein_algorithms::Partitioning;
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::Csr;

/// One partition's state: labels of its vertices and which of them changed last round.
struct Part {
    first: u64,
    label: Vec<u64>,
    changed: Vec<u32>,
    next: Vec<u32>,
}

impl Part {
    /// Offers `label` to local vertex `local`; a smaller label wins and is passed on.
    fn offer(&mut self, local: u32, label: u64) {
        if label < self.label[local as usize] {
            self.label[local as usize] = label;
            self.next.push(local);
        }
    }
}

fn components(graph: Arc<Csr>, workers: usize) -> Result<Vec<u64>, skein::Error> {
    let rt = Runtime::builder().workers(workers).slot_size(32 * 1024).build()?;
    rt.run(move || {
        let np = skein::num_workers();
        let parts = Arc::new(Partitioning::new(graph.num_vertices(), np));
        // Step 2: entrust one partition to each worker. Every vertex starts "changed".
        let trusts: Arc<Vec<Trust<Part>>> = Arc::new(
            (0..np)
                .map(|p| {
                    let range = parts.range(p);
                    skein::trustee(p).entrust(Part {
                        first: range.start,
                        label: range.clone().collect(),
                        changed: (0..parts.len(p)).collect(),
                        next: Vec::new(),
                    })
                })
                .collect(),
        );
        loop {
            // Step 3: one fiber per worker propagates its changed vertices' labels.
            let fibers: Vec<_> = (0..np)
                .map(|p| {
                    let (graph, parts, trusts) = (graph.clone(), parts.clone(), trusts.clone());
                    skein::spawn_local_on(p, move || {
                        let all = trusts.clone();
                        trusts[p].apply_local(move |s| {
                            let changed = std::mem::take(&mut s.changed);
                            for &u in &changed {
                                let (gu, label) = (s.first + u as u64, s.label[u as usize]);
                                for &v in graph.neighbors(gu) {
                                    let (owner, local) = parts.locate(v);
                                    if owner == p {
                                        s.offer(local, label);
                                    } else {
                                        // Delegate: runs on v's trustee, later.
                                        all[owner].apply_then_local(
                                            move |t| t.offer(local, label),
                                            |_| (),
                                        );
                                    }
                                }
                            }
                        });
                    })
                })
                .collect();
            fibers.into_iter().for_each(|f| f.join());
            // Step 4: every delegated offer of this round has been applied.
            skein::wait_quiescent();
            // Next round: the vertices whose label dropped (each once).
            let mut active = 0;
            for t in trusts.iter() {
                active += t.apply((), |s, ()| {
                    let mut next = std::mem::take(&mut s.next);
                    next.sort_unstable();
                    next.dedup();
                    s.changed = next;
                    s.changed.len()
                });
            }
            if active == 0 {
                break;
            }
        }
        let mut labels = Vec::with_capacity(graph.num_vertices() as usize);
        for t in trusts.iter() {
            labels.extend(t.apply_with((), |s, ()| std::mem::take(&mut s.label)));
        }
        labels
    })
}

/// Union-find oracle: the smallest vertex id of each vertex's component.
fn oracle(g: &Csr) -> Vec<u64> {
    fn find(p: &mut [u64], mut x: u64) -> u64 {
        while p[x as usize] != x {
            p[x as usize] = p[p[x as usize] as usize];
            x = p[x as usize];
        }
        x
    }
    let n = g.num_vertices();
    let mut p: Vec<u64> = (0..n).collect();
    for u in 0..n {
        for &v in g.neighbors(u) {
            let (a, b) = (find(&mut p, u), find(&mut p, v));
            // Keep the smaller id as the root, so roots are component minima.
            if a < b {
                p[b as usize] = a;
            } else if b < a {
                p[a as usize] = b;
            }
        }
    }
    (0..n).map(|v| find(&mut p, v)).collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let scale: u32 = args.get(1).map_or(Ok(12), |s| s.parse())?;
    let workers: usize = args.get(2).map_or(Ok(2), |s| s.parse())?;
    let params = KroneckerParams::new(scale, 16, 2, 3)?;
    let graph = Arc::new(Csr::from_edge_list(&kronecker::generate(&params)));
    let start = std::time::Instant::now();
    let labels = components(graph.clone(), workers)?;
    let seconds = start.elapsed().as_secs_f64();
    let mut roots: Vec<u64> = labels.clone();
    roots.sort_unstable();
    roots.dedup();
    let largest = {
        let mut counts = std::collections::HashMap::new();
        labels.iter().for_each(|&l| *counts.entry(l).or_insert(0u64) += 1);
        counts.into_values().max().unwrap_or(0)
    };
    println!(
        "SCALE {scale}, {workers} workers: {} components, the largest has {largest} vertices ({seconds:.3} s)",
        roots.len()
    );
    if labels != oracle(&graph) {
        return Err("labels differ from the union-find oracle".into());
    }
    println!("checked against union-find: identical");
    Ok(())
}
