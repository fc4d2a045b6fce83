//! SSSP and BFS across MPI ranks (feature `mpi`; `harness = false`).
//!
//! `cargo test -p skein-algorithms --features mpi --test rack` runs this binary without
//! `mpirun`: it is then the harness, and re-launches itself under
//! `mpirun --allow-run-as-root --oversubscribe --bind-to none -np R` once per case with
//! `--rack-case WORKERS` (MPI can be initialised only once per process). Every rank builds
//! the same SCALE 9 Kronecker graph and the same engine, runs SSSP and BFS from several roots
//! (collectively), checks each result against the sequential baselines (binary32 Dijkstra
//! bit for bit, queue BFS levels) and that the `*_on_rank0` variants keep the result on rank
//! 0 only, then builds a second engine on its own rows only (`Engine::from_local`) and
//! checks the slices of `sssp_local` / `bfs_local` against the baselines (see
//! `local_checks`), runs PageRank and components (equal to the sequential baselines bit for
//! bit), and prints one `RESULT` line with a digest of the results.
//! The harness checks that every rank reported, that every check held, and that every rank
//! returned the same results. Arguments that are not flags filter the cases by name.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use skein_algorithms::{rank_bounds, Engine, EngineError, EngineOptions};
use skein_generators::distributed::LocalCsr;
use skein_generators::kronecker::{self, KroneckerParams};
use skein_generators::{Csr, NO_PARENT, UNREACHED_LEVEL};

/// The launch line that works as root and on a 2-core machine.
const MPIRUN_FLAGS: [&str; 4] = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none"];

/// How long a launch may take before the harness kills it and fails the case.
const HARD_LIMIT: Duration = Duration::from_secs(120);

const SCALE: u32 = 9;
const ROOTS: usize = 3;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--rack-case") {
        let workers = args.get(i + 1).and_then(|w| w.parse().ok()).unwrap_or_else(|| {
            eprintln!("usage: rack --rack-case WORKERS");
            std::process::exit(2);
        });
        rank_side(workers);
        return;
    }
    harness(&args[1..]);
}

/// FNV-1a over 32-bit words.
fn digest(words: impl Iterator<Item = u32>, mut h: u64) -> u64 {
    for w in words {
        h = (h ^ u64::from(w)).wrapping_mul(0x100_0000_01b3);
    }
    h
}

fn rank_side(workers: usize) {
    let p = KroneckerParams::new(SCALE, 16, 2, 3).expect("params");
    let graph = Arc::new(Csr::from_edge_list(&kronecker::generate(&p)));
    let roots = kronecker::search_roots(&p, &graph, ROOTS);
    let opts = EngineOptions { workers, chunk: 16, ..EngineOptions::default() };
    let engine = Engine::new(Arc::clone(&graph), opts).expect("engine");
    let seq = skein_baselines::Options::with_threads(1);
    let (mut h, mut ok, mut messages) = (0xcbf2_9ce4_8422_2325u64, true, 0);
    for &root in &roots {
        let (r, stats) = engine.sssp(root).expect("sssp");
        let want = skein_baselines::sssp(skein_baselines::Engine::Seq, &graph, root, &seq)
            .expect("dijkstra")
            .dist;
        ok &= r.dist.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits())
            && r.dist.len() == want.len();
        messages += stats.messages;
        h = digest(r.dist.iter().map(|d| d.to_bits()), h);
        let (b, stats) = engine.bfs(root).expect("bfs");
        let want = skein_baselines::bfs(skein_baselines::Engine::Seq, &graph, root, &seq)
            .expect("queue bfs")
            .level;
        ok &= b.level == want;
        messages += stats.messages;
        h = digest(b.level.iter().copied(), h);
    }
    // PageRank and components (the kernels on the public building blocks): bit for bit the
    // sequential baseline's ranks, the union-find's labels, on every rank.
    let pr = skein_generators::analytics::PageRankParams {
        damping: 0.85,
        tolerance: 1e-6,
        max_iterations: 30,
    };
    let solver =
        skein_baselines::Solver::new(skein_baselines::Engine::Seq, &graph, &seq).expect("solver");
    let want = solver.pagerank(&pr).expect("seq pagerank");
    let (got, _) = engine.pagerank(pr).expect("pagerank");
    ok &= got.iterations == want.iterations
        && got.rank.len() == want.rank.len()
        && got.rank.iter().zip(&want.rank).all(|(a, b)| a.to_bits() == b.to_bits());
    h = digest(got.rank.iter().map(|r| r.to_bits() as u32), h);
    let (cc, _) = engine.components().expect("components");
    ok &= cc.label == skein_generators::analytics::components_union_find(&graph);
    h = digest(cc.label.iter().map(|&l| l as u32), h);
    // The variants that keep the result on rank 0: `Some` there, equal to the above;
    // `None` on the other ranks.
    let root = roots[0];
    let (s0, _) = engine.sssp_on_rank0(root).expect("sssp on rank 0");
    let (b0, _) = engine.bfs_on_rank0(root).expect("bfs on rank 0");
    let kept = if skein::rank() == 0 {
        let (s, _) = engine.sssp(root).expect("sssp");
        let (b, _) = engine.bfs(root).expect("bfs");
        s0.is_some_and(|r| r.dist.iter().zip(&s.dist).all(|(a, b)| a.to_bits() == b.to_bits()))
            && b0.is_some_and(|r| r.level == b.level)
    } else {
        // Collective: every rank runs the same searches.
        engine.sssp(root).expect("sssp");
        engine.bfs(root).expect("bfs");
        s0.is_none() && b0.is_none()
    };
    let local = local_checks(&graph, &roots, workers, &engine);
    println!(
        "RESULT rank={} ranks={} ok={ok} messages={} kept={kept} local={local} digest={h:016x}",
        skein::rank(),
        skein::ranks(),
        messages > 0
    );
}

/// Each rank's own rows only: `Engine::from_local` on `LocalCsr::from_csr(graph, its
/// range)`, whose `sssp_local` / `bfs_local` slices (and those of the whole-graph `engine`)
/// must equal the baselines' entries of the rank's vertices (distances bit for bit, levels),
/// with parents that are valid tree edges. A rank passing the wrong rows is an error on every
/// rank (no hang).
fn local_checks(graph: &Arc<Csr>, roots: &[u64], workers: usize, engine: &Engine) -> bool {
    let (rank, ranks) = (skein::rank(), skein::ranks());
    let n = graph.num_vertices();
    let bounds = rank_bounds(n, ranks, workers);
    let range = bounds[rank]..bounds[rank + 1];
    let opts = EngineOptions { workers, chunk: 16, ..EngineOptions::default() };
    // Every rank passes every row: rank 0 does not own them all, and every rank says so.
    let wrong = Engine::from_local(Arc::new(LocalCsr::from_csr(graph, 0..n)), opts.clone());
    let mut ok = matches!(&wrong, Err(EngineError::Options(m)) if m.contains("rank 0 of"));
    drop(wrong);
    let rows = Arc::new(LocalCsr::from_csr(graph, range.clone()));
    let local = Engine::from_local(rows, opts).expect("engine on local rows");
    ok &= local.local_range() == range && engine.local_range() == range;
    // The whole result of an engine on local rows still gathers on rank 0.
    let seq = skein_baselines::Options::with_threads(1);
    let root = roots[0];
    let want = skein_baselines::sssp(skein_baselines::Engine::Seq, graph, root, &seq)
        .expect("dijkstra")
        .dist;
    let (whole, _) = local.sssp_on_rank0(root).expect("sssp_on_rank0 on local rows");
    ok &= match whole {
        Some(r) => rank == 0 && r.dist.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
        None => rank != 0,
    };
    let seq = skein_baselines::Options::with_threads(1);
    let (lo, hi) = (range.start as usize, range.end as usize);
    let arc = |p: u64, v: u64| graph.arcs(p).filter(move |&(t, _)| t == v).map(|(_, w)| w);
    for &root in roots {
        let want = skein_baselines::sssp(skein_baselines::Engine::Seq, graph, root, &seq)
            .expect("dijkstra")
            .dist;
        for e in [&local, engine] {
            let (r, stats) = e.sssp_local(root).expect("sssp_local");
            ok &= r.first == range.start && r.dist.len() == hi - lo && stats.rounds > 0;
            ok &= r.dist.iter().zip(&want[lo..hi]).all(|(a, b)| a.to_bits() == b.to_bits());
            ok &= r.parent.iter().zip(range.clone()).all(|(&p, v)| {
                if v == root || p == NO_PARENT {
                    return (p == NO_PARENT) == want[v as usize].is_infinite();
                }
                let d = want[v as usize].to_bits();
                arc(p, v).any(|w| (want[p as usize] + w).to_bits() == d)
            });
        }
        let want = skein_baselines::bfs(skein_baselines::Engine::Seq, graph, root, &seq)
            .expect("queue bfs")
            .level;
        for e in [&local, engine] {
            let (r, _) = e.bfs_local(root).expect("bfs_local");
            ok &= r.first == range.start && r.level == want[lo..hi];
            ok &= r.parent.iter().zip(range.clone()).all(|(&p, v)| {
                if v == root || p == NO_PARENT {
                    return (p == NO_PARENT) == (want[v as usize] == UNREACHED_LEVEL);
                }
                want[p as usize] + 1 == want[v as usize] && arc(p, v).next().is_some()
            });
        }
    }
    ok
}

fn harness(args: &[String]) {
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let cases: [(&str, usize, usize); 3] = [
        ("sssp_and_bfs_on_2_ranks_of_1_worker", 2, 1),
        ("sssp_and_bfs_on_3_ranks_of_1_worker", 3, 1),
        ("sssp_and_bfs_on_2_ranks_of_2_workers", 2, 2),
    ];
    let selected: Vec<_> = cases
        .iter()
        .filter(|(n, _, _)| filters.is_empty() || filters.iter().any(|f| n.contains(f.as_str())))
        .collect();
    println!("\nrunning {} tests", selected.len());
    let start = Instant::now();
    let mut failed = 0;
    for (name, ranks, workers) in &selected {
        let t = Instant::now();
        match launch(*ranks, *workers) {
            Ok(()) => println!("test {name} ... ok ({:.1}s)", t.elapsed().as_secs_f64()),
            Err(e) => {
                failed += 1;
                println!("test {name} ... FAILED\n{e}");
            }
        }
    }
    println!(
        "\ntest result: {}. {} passed; {failed} failed; 0 ignored; 0 measured; {} filtered out; \
         finished in {:.2}s\n",
        if failed == 0 { "ok" } else { "FAILED" },
        selected.len() - failed,
        cases.len() - selected.len(),
        start.elapsed().as_secs_f64()
    );
    if failed > 0 {
        std::process::exit(101);
    }
}

/// Runs the rank side on `ranks` ranks of `workers` workers and checks their lines.
fn launch(ranks: usize, workers: usize) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("no path to this test: {e}"))?;
    let mut child = Command::new("mpirun")
        .args(MPIRUN_FLAGS)
        .arg("-np")
        .arg(ranks.to_string())
        .arg(exe)
        .arg("--rack-case")
        .arg(workers.to_string())
        // A loopback split cannot run under mpirun.
        .env_remove("SKEIN_LOOPBACK_RANKS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start mpirun (install Open MPI): {e}"))?;
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| format!("waiting for mpirun: {e}"))? {
            break Some(s);
        }
        if t.elapsed() > HARD_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (out, err) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
    let show = || format!("status {status:?}\n--- stdout ---\n{out}--- stderr ---\n{err}");
    if !status.is_some_and(|s| s.success()) {
        return Err(format!("mpirun failed or was killed after {HARD_LIMIT:?}\n{}", show()));
    }
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("RESULT ")).collect();
    let mut digests = Vec::new();
    for rank in 0..ranks {
        let prefix = format!("RESULT rank={rank} ranks={ranks} ");
        let line = lines
            .iter()
            .find(|l| l.starts_with(&prefix))
            .ok_or_else(|| format!("no result from rank {rank}\n{}", show()))?;
        if !line.contains("ok=true messages=true kept=true local=true") {
            return Err(format!("rank {rank}: results differ from the baselines\n{}", show()));
        }
        digests.push(line.rsplit("digest=").next().unwrap_or_default().to_string());
    }
    if digests.iter().any(|d| *d != digests[0]) {
        return Err(format!("ranks returned different results {digests:?}\n{}", show()));
    }
    Ok(())
}
