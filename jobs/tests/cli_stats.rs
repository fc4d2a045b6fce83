//! `skein sssp|bfs|pagerank|cc --stats`: the runtime's round anatomy in the printed report,
//! and its counters in the JSON report (issue 30, item 1). Counts and the shape of the breakdown
//! only, never times.

mod common;

use common::{check, Scratch};
use std::process::{Command, Output};

fn workers(json: &std::path::Path) -> Vec<serde_json::Value> {
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    j["trustees"]["workers"].as_array().expect("trustees.workers").clone()
}

/// The parts of a worker's anatomy: present, and summing to its total.
fn parts_sum(w: &serde_json::Value) -> (u64, u64) {
    let a = &w["anatomy"];
    let names =
        ["serving", "issuing", "transport", "detector", "wait_response", "wait_quiescence", "idle"];
    let sum = names.iter().map(|n| a[format!("{n}_ns")].as_u64().expect(n)).sum();
    (sum, a["total_ns"].as_u64().unwrap())
}

/// Split into two fake ranks in one process (`SKEIN_LOOPBACK_RANKS`): the requests between
/// them travel as envelopes, which the counters see.
fn loopback(kernel: &str, stats: bool, json: &std::path::Path) -> Output {
    let mut args = vec![kernel, "--engine", "skein", "-t", "2", "--roots", "2"];
    if stats {
        args.push("--stats");
    }
    args.extend(["--json", json.to_str().unwrap(), "kron:9"]);
    Command::new(env!("CARGO_BIN_EXE_skein"))
        .args(&args)
        .env("SKEIN_LOOPBACK_RANKS", "2")
        .env("SKEIN_PROGRESS", "0")
        .env_remove("SKEIN_ANATOMY")
        .output()
        .expect("skein runs")
}

#[test]
fn stats_prints_the_anatomy_and_the_json_has_its_counters() {
    let dir = Scratch::new("anatomy");
    for kernel in ["sssp", "bfs"] {
        let json = dir.path(&format!("{kernel}.json"));
        let out = check(&loopback(kernel, true, &json), kernel);
        assert!(out.contains("validation:") && out.contains("passed"), "{out}");
        // Two fake ranks of one worker, each on a thread of its own.
        assert!(
            out.contains("anatomy (per worker") && out.contains("2 workers on 2 threads"),
            "{out}"
        );
        for part in ["serving", "issuing", "transport", "detector", "wait_response", "idle"] {
            assert!(out.contains(part), "{part} missing:\n{out}");
        }
        assert!(out.contains("to rank 1:") && out.contains("to rank 0:"), "{out}");
        assert!(out.contains("all-reduces"), "{out}");
        assert!(out.contains(" parks (") && out.contains("context switches"), "{out}");
        assert!(out.contains("skein run per search:           set-up "), "{out}");
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        // One run per search (2 roots), its workers timed on the reporting rank.
        assert_eq!(j["trustees"]["run"]["runs"].as_u64(), Some(2), "{j}");
        assert!(j["trustees"]["run"]["workers_ns"].as_u64().unwrap() > 0, "{j}");
        let ws = workers(&json);
        assert_eq!(ws.len(), 2);
        for w in &ws {
            for k in [
                "parks",
                "park_timeouts",
                "yields",
                "switches_voluntary",
                "on_core_ns",
                "runnable_ns",
                "thread_workers",
            ] {
                assert!(w[k].as_u64().is_some(), "{k} missing: {w}");
            }
            assert!(w["thread_workers"].as_u64().unwrap() >= 1, "{w}");
            // The thread's times are printed where the kernel counted them.
            if w["on_core_ns"].as_u64().unwrap() > 0 {
                assert!(out.contains("% of the loop's time, waiting for a core"), "{out}");
            }
            let (sum, total) = parts_sum(w);
            assert_eq!(sum, total, "{w}");
            assert!(w["anatomy"]["passes"].as_u64().unwrap() > 0, "{w}");
            assert!(total > 0);
            let env = w["envelopes_sent"].as_u64().unwrap();
            assert!(env > 0, "{w}");
            let segments = w["segments_sent"].as_u64().unwrap();
            assert!(segments >= env, "{w}");
            assert!(w["remote_requests_sent"].as_u64().unwrap() >= segments);
            assert!(w["segments_per_envelope"].as_f64().unwrap() >= 1.0, "{w}");
            assert_eq!(w["to_ranks"].as_array().unwrap().len(), 2);
            assert!(w["detector_steps"].as_u64().unwrap() > 0, "{w}");
        }
        // Every request segment has its response (one envelope per segment and trustee).
        let sum = |k: &str| ws.iter().map(|w| w[k].as_u64().unwrap()).sum::<u64>();
        assert_eq!(sum("segments_sent"), sum("responses_sent"));
        // Timed, each rank's detector counted how long its rounds took to end: at most once
        // per quiescent verdict, with a median wherever it counted one.
        for w in &ws {
            let r = &w["round_ends"];
            let count = r["count"].as_u64().expect("round_ends.count");
            assert!(count <= w["quiescent_verdicts"].as_u64().unwrap(), "{w}");
            assert_eq!(r["median_ns"].is_u64(), count > 0, "{w}");
            assert_eq!(r["max_ns"].is_u64(), count > 0, "{w}");
        }
        let ends: u64 = ws.iter().map(|w| w["round_ends"]["count"].as_u64().unwrap()).sum();
        assert!(ends > 0, "{ws:?}");
        assert!(out.contains("round ends (last work to verdict): median"), "{out}");
    }
}

#[test]
fn stats_of_the_kernels_without_roots_sum_over_their_runs() {
    let dir = Scratch::new("no-roots");
    for (kernel, messages) in [("pagerank", true), ("cc", false)] {
        let json = dir.path(&format!("{kernel}.json"));
        let out = Command::new(env!("CARGO_BIN_EXE_skein"))
            .args([kernel, "--engine", "skein", "-t", "2", "--repeat", "2", "--stats", "--json"])
            .arg(&json)
            .arg("kron:9")
            .env("SKEIN_LOOPBACK_RANKS", "2")
            .env("SKEIN_PROGRESS", "0")
            .env_remove("SKEIN_ANATOMY")
            .output()
            .expect("skein runs");
        let out = check(&out, kernel);
        assert!(out.contains("validation:") && out.contains("passed"), "{out}");
        assert!(
            out.contains(
                "anatomy (per worker; times summed over 2 run(s); 2 workers on 2 threads)"
            ),
            "{out}"
        );
        assert!(out.contains("wait_quiescence") && out.contains("quiescent verdicts"), "{out}");
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let ws = j["skein_workers"].as_array().expect("skein_workers");
        assert_eq!(ws.len(), 2, "{j}");
        for w in ws {
            let (sum, total) = parts_sum(w);
            assert_eq!(sum, total, "{w}");
            assert!(total > 0, "{w}");
            assert!(w["quiescent_verdicts"].as_u64().unwrap() > 0, "{w}");
        }
        if messages {
            // PageRank shares its slice with the other (fake) rank every iteration.
            assert!(ws.iter().all(|w| w["envelopes_sent"].as_u64().unwrap() > 0), "{j}");
        }
    }
}

/// `skein sssp` on `kron:9`, 2 roots, `workers` workers split into two fake ranks, with
/// `stats` (`--stats` or `--stats=...`): its stdout.
fn split_stats(workers: &str, stats: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_skein"))
        .args(["sssp", "--engine", "skein", "-t", workers, "--roots", "2", stats, "kron:9"])
        .env("SKEIN_LOOPBACK_RANKS", "2")
        .env("SKEIN_PROGRESS", "0")
        .env_remove("SKEIN_ANATOMY")
        .output()
        .expect("skein runs");
    check(&out, &format!("sssp -t {workers} {stats}"))
}

#[test]
fn stats_beyond_eight_workers_summarize_them_unless_asked_for_every_worker() {
    // 10 workers (2 fake ranks of 5): min / median / max across them, no line per worker.
    let out = split_stats("10", "--stats");
    for line in [
        "anatomy (across workers; times summed over 2 search(es)",
        "  min / median / max over the 10 workers of 2 ranks:",
        "    loop: ",
        "wait_quiescence ",
        " requests served per batch",
        " parks, ",
        "  all workers: ",
        "  from one rank to another (2 pairs, min / median / max): ",
        "  detectors (2, min / median / max): ",
        "  (every worker's lines: --stats=workers; every counter: the JSON report, --json)",
    ] {
        assert!(out.contains(line), "{line:?} missing:\n{out}");
    }
    assert!(!out.contains("anatomy (per worker") && !out.contains("  worker 0:"), "{out}");
    // The kernels' report still has a line per worker up to 16 of them.
    assert!(out.contains("skein worker 9:"), "{out}");
    // Asked for: every worker's lines, and no summary.
    let out = split_stats("10", "--stats=workers");
    assert!(out.contains("anatomy (per worker") && out.contains("  worker 9: "), "{out}");
    assert!(!out.contains("anatomy (across workers"), "{out}");
    // The summary of a few workers, when asked for, without the hint.
    let out = split_stats("2", "--stats=summary");
    assert!(out.contains("min / median / max over the 2 workers of 2 ranks:"), "{out}");
    assert!(!out.contains("(every worker's lines"), "{out}");
}

#[test]
fn the_kernels_report_summarizes_more_than_sixteen_workers() {
    let out = split_stats("18", "--stats");
    let line = "skein workers (18):             busy ";
    assert!(out.contains(line) && out.contains("(min / median / max)"), "{out}");
    assert!(!out.contains("skein worker 0:"), "{out}");
}

#[test]
fn a_stats_detail_that_does_not_exist_is_refused_with_the_ones_that_do() {
    let out = Command::new(env!("CARGO_BIN_EXE_skein"))
        .args(["bfs", "--engine", "skein", "--stats=every", "kron:9"])
        .output()
        .expect("skein runs");
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("--stats") && e.contains("auto, workers, summary"), "{e}");
}

#[test]
fn without_stats_the_counters_are_there_and_the_loop_is_not_timed() {
    let dir = Scratch::new("plain");
    let json = dir.path("plain.json");
    let out = check(&loopback("sssp", false, &json), "sssp");
    assert!(!out.contains("anatomy (per worker"), "{out}");
    for w in workers(&json) {
        assert_eq!(w["anatomy"]["passes"].as_u64(), Some(0), "{w}");
        // Not timed: no round end counted.
        assert_eq!(w["round_ends"]["count"].as_u64(), Some(0), "{w}");
        assert_eq!(parts_sum(&w), (0, 0));
        assert!(w["envelopes_sent"].as_u64().unwrap() > 0, "{w}");
    }
}

#[cfg(feature = "mpi")]
#[test]
fn stats_across_two_mpi_ranks_counts_envelopes_per_rank() {
    let dir = Scratch::new("rack");
    let json = dir.path("rack.json");
    let out = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2"])
        .arg(env!("CARGO_BIN_EXE_skein"))
        .args(["sssp", "--engine", "skein", "-t", "1", "--roots", "2", "--stats", "--json"])
        .arg(&json)
        .arg("kron:9")
        .env_remove("SKEIN_LOOPBACK_RANKS")
        .env("SKEIN_PROGRESS", "0")
        .output()
        .expect("mpirun runs (install Open MPI with scripts/install-mpi.sh)");
    let out = check(&out, "mpirun sssp --stats");
    assert!(out.contains("passed"), "{out}");
    assert!(out.contains("to rank 1:") && out.contains("to rank 0:"), "{out}");
    let ws = workers(&json);
    assert_eq!(ws.len(), 2);
    for (r, w) in ws.iter().enumerate() {
        let (sum, total) = parts_sum(w);
        assert_eq!(sum, total);
        assert!(total > 0, "{w}");
        // Each rank's one worker sent envelopes to the other rank only.
        let to = w["to_ranks"].as_array().unwrap();
        assert_eq!(to[r]["envelopes"].as_u64(), Some(0));
        assert!(to[1 - r]["envelopes"].as_u64().unwrap() > 0, "{w}");
        assert!(w["all_reduces_completed"].as_u64().unwrap() > 0, "{w}");
        // Posts the detector held back while a task of the rank was open (how many depends
        // on timing; the count is there).
        assert!(w["posts_held"].is_u64(), "{w}");
    }
    assert!(out.contains("posts held (a task of the rank open)"), "{out}");
}
