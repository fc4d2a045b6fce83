//! `skein bench`, run as a user would run it (tiny sizes: these check behaviour, not speed).

mod common;

use common::Scratch;
use std::process::{Command, Output};

fn skein(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skein")).args(args).output().expect("running skein")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn fetch_add_writes_one_row_per_measurement() {
    let dir = Scratch::new("fetch-add");
    let json = dir.path("fa.json");
    let o = skein(&[
        "bench",
        "fetch-add",
        "--ops",
        "3000",
        "--objects",
        "1,16,5000",
        "--dist",
        "both",
        "--prefetch",
        "4",
        "--stats",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("apply_then/best-lock") && out.contains("array/best-lock"), "{out}");
    assert!(out.contains("[apply_then K=16] worker 1: served"), "{out}");
    assert!(out.contains("[array K=5000] worker 0: served"), "{out}");
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(rows.len(), 3 * 2 * 6, "3 K x 2 distributions x 6 implementations");
    let array_rows = rows.iter().filter(|r| r["impl"] == "array").count();
    assert_eq!(array_rows, 3 * 2, "{rows:?}");
    for r in &rows {
        assert!(r["mops"].as_f64().unwrap() > 0.0, "{r}");
        assert!(["uniform", "zipf"].contains(&r["dist"].as_str().unwrap()), "{r}");
    }
}

#[test]
fn fetch_add_refuses_bad_arguments() {
    for (args, want) in [
        (&["--objects", "0"][..], "--objects: every K must be in"),
        (&["--impls", "apply,rwlock"][..], "unknown implementation `rwlock`"),
        (&["--dist", "normal"][..], "expected uniform, zipf or both"),
        (&["--workers", "0"][..], "--workers: must be at least 1"),
        // Every count is bounded by what the machine can hold, with the reason.
        (&["--workers", "5000"][..], "--workers: 5000 is more than 4096"),
        (&["--objects", "4294967295"][..], "GiB, but only"),
        (&["--fibers", "2000000"][..], "--fibers: 2000000 is more than"),
        (&["--workers", "64", "--slot-size", "16777216"][..], "GiB, but only"),
        (&["--slot-size", "100"][..], "--slot-size: 100 is outside"),
        (&["--fibers", "1000000"][..], "2 workers with 1000001 fibers each"),
        (&["--repeat", "0"][..], "--repeat: must be at least 1"),
        (&["--repeat", "1000000"][..], "--repeat: 1000000 is more than 10000"),
        (&["--prefetch", "11"][..], "--prefetch: 11 is more than --ops 10"),
        (&["--mpi-buffer", "3"][..], "--mpi-buffer: 3 bytes must hold at least one"),
        (&["--mpi-buffers", "0"][..], "--mpi-buffers: must be at least 1"),
    ] {
        let mut a = vec!["bench", "fetch-add", "--ops", "10"];
        a.extend_from_slice(args);
        let o = skein(&a);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
        assert!(!text(&o).contains("panicked"), "{args:?}: {}", text(&o));
    }
    let o = skein(&["bench", "fetch-add", "--ops", "0"]);
    assert!(!o.status.success() && text(&o).contains("--ops: must be at least 1"), "{}", text(&o));
    for (args, want) in [
        (&["--iters", "0"][..], "--iters: must be at least 1"),
        (&["--iters", "18446744073709551615"][..], "--iters: 18446744073709551615 is more than"),
        (&["--slot-size", "1"][..], "--slot-size: slot size 1 is outside"),
    ] {
        let mut a = vec!["bench", "micro"];
        a.extend_from_slice(args);
        let o = skein(&a);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
    }
}

/// The rows of `skein bench echo|ping --json`.
fn json_rows(path: &std::path::Path) -> Vec<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn echo_answers_requests_for_a_time() {
    let dir = Scratch::new("time");
    let json = dir.path("echo.json");
    let o = skein(&[
        "bench",
        "echo",
        "--seconds",
        "0.2",
        "--sizes",
        "8,32,4096",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("M req/s") && out.contains("MB/s"), "{out}");
    // Sizes above what a record holds inline are named as boxed.
    assert!(out.contains("above that (sizes 4096) it boxes them"), "{out}");
    let rows = json_rows(&json);
    assert_eq!(rows.len(), 3, "{rows:?}");
    for (r, size) in rows.iter().zip([8, 32, 4096]) {
        assert_eq!(r["impl"], "skein (1 process, 2 workers)", "{r}");
        assert_eq!(r["size"], size, "{r}");
        assert!(r["answered"].as_u64().unwrap() > 0, "{r}");
        assert!(r["requests_per_sec"].as_f64().unwrap() > 0.0, "{r}");
        let secs = r["seconds"].as_f64().unwrap();
        assert!(secs >= 0.2, "{r}");
        let line = format!(
            "skein (1 process, 2 workers) {size:>6} {:>12}",
            r["answered"].as_u64().unwrap()
        );
        assert!(out.contains(&line), "{line:?} not in {out}");
    }
}

#[test]
fn echo_with_a_request_budget_answers_exactly_that_many() {
    let dir = Scratch::new("budget");
    let json = dir.path("echo.json");
    let o = skein(&[
        "bench",
        "echo",
        "--workers",
        "3",
        "--fibers",
        "3",
        "--window",
        "7",
        "--requests",
        "1000",
        "--dest",
        "remote",
        "--sizes",
        "16,512",
        "--repeat",
        "3",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("uniformly random other workers"), "{}", text(&o));
    assert!(text(&o).contains("median of 3 interleaved repetitions"), "{}", text(&o));
    let rows = json_rows(&json);
    assert_eq!(rows.len(), 2, "{rows:?}");
    for r in &rows {
        assert_eq!(r["answered"], 3000, "3 workers x 1000 requests: {r}");
        // On fewer cores than workers, the runtime shares threads and the label says so.
        let label = r["impl"].as_str().unwrap();
        assert!(label.starts_with("skein (1 process, 3 workers"), "{r}");
    }
    // On one thread: the same answers, and the label says so.
    let o = skein(&[
        "bench",
        "echo",
        "--workers",
        "3",
        "--worker-threads",
        "1",
        "--requests",
        "500",
        "--sizes",
        "8",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let rows = json_rows(&json);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["answered"], 1500, "{rows:?}");
    assert_eq!(rows[0]["impl"], "skein (1 process, 3 workers on 1 thread)", "{rows:?}");
}

#[test]
fn ping_times_round_trips() {
    let dir = Scratch::new("ping");
    let json = dir.path("ping.json");
    let o = skein(&["bench", "ping", "--iters", "300", "--json", json.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("median µs") && out.contains("mean µs"), "{out}");
    let rows = json_rows(&json);
    assert_eq!(rows.len(), 2, "8 B and 4 KiB: {rows:?}");
    for (r, size) in rows.iter().zip([8, 4096]) {
        assert_eq!(r["size"], size, "{r}");
        assert_eq!(r["iters"], 300, "{r}");
        assert!(r["median_us"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["mean_us"].as_f64().unwrap() > 0.0, "{r}");
    }
}

#[test]
fn echo_and_ping_refuse_bad_arguments() {
    for (args, want) in [
        (&["echo", "--sizes", "100"][..], "--sizes: 100 is not a supported payload size"),
        (&["echo", "--seconds", "0"][..], "--seconds: 0 is outside"),
        (&["echo", "--seconds", "NaN"][..], "--seconds: NaN is outside"),
        (&["echo", "--dest", "near"][..], "--dest: expected `all` or `remote`"),
        (&["echo", "--dest", "remote", "--workers", "1"][..], "needs at least 2 workers"),
        (&["echo", "--window", "0"][..], "--window: must be at least 1"),
        (&["echo", "--fibers", "0"][..], "--fibers: must be at least 1"),
        (&["echo", "--requests", "0"][..], "--requests: must be at least 1"),
        (&["echo", "--mpi-buffer", "1000"][..], "--mpi-buffer: 1000 bytes must hold"),
        (&["ping", "--sizes", "7"][..], "--sizes: 7 is not a supported payload size"),
        (&["ping", "--iters", "0"][..], "--iters: must be at least 1"),
        (&["echo", "--repeat", "0"][..], "--repeat: must be at least 1"),
        (&["ping", "--repeat", "100000"][..], "--repeat: 100000 is more than 10000"),
        (
            &["echo", "--workers", "2", "--worker-threads", "3"][..],
            "--worker-threads: 3 threads for 2 workers: at most one thread per worker",
        ),
    ] {
        let mut a = vec!["bench"];
        a.extend_from_slice(args);
        let o = skein(&a);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
        assert!(!text(&o).contains("panicked"), "{args:?}: {}", text(&o));
    }
    // --mpi: without the feature, the build is named; with it but outside mpirun, the ranks.
    let want = if cfg!(feature = "mpi") {
        "--mpi needs at least 2 ranks"
    } else {
        "built without the `mpi` feature"
    };
    for args in [
        &["echo", "--mpi", "--seconds", "0.1"][..],
        &["ping", "--mpi"],
        &["fetch-add", "--mpi", "--ops", "10"],
    ] {
        let o = skein(&[&["bench"][..], args].concat());
        assert!(!o.status.success() && text(&o).contains(want), "{args:?}: {}", text(&o));
        assert!(!text(&o).contains("panicked"), "{args:?}: {}", text(&o));
    }
}

#[test]
fn repeated_fetch_add_prints_every_ratio_with_its_spread() {
    let dir = Scratch::new("spread");
    let json = dir.path("fa.json");
    let o = skein(&[
        "bench",
        "fetch-add",
        "--ops",
        "2000",
        "--objects",
        "16",
        "--dist",
        "uniform",
        "--impls",
        "apply_then,mutex,spin",
        "--repeat",
        "3",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    // The ratio column holds the median ratio and the range of the three repetitions'.
    let row = out.lines().find(|l| l.trim_start().starts_with("uniform")).expect(&out);
    let ratio = row.split_whitespace().skip(5).collect::<Vec<_>>().join(" ");
    assert!(ratio.contains("x (") && ratio.ends_with(')') && ratio.contains('-'), "{out}");
    for r in &json_rows(&json) {
        let (min, med, max) = (r["mops_min"].as_f64(), r["mops"].as_f64(), r["mops_max"].as_f64());
        let (min, med, max) = (min.unwrap(), med.unwrap(), max.unwrap());
        assert!(0.0 < min && min <= med && med <= max, "{r}");
    }
}

#[test]
fn rounds_time_empty_rounds_in_one_process() {
    let dir = Scratch::new("rounds");
    let json = dir.path("rounds.json");
    let args = ["bench", "rounds", "--workers", "2", "--rounds", "50", "--repeat", "1"];
    let o = skein(&[&args[..], &["--json", json.to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("µs/round"), "{}", text(&o));
    let rows = json_rows(&json);
    assert_eq!(rows.len(), 2, "{rows:?}");
    for (r, shape) in rows.iter().zip(["superstep", "quiescence"]) {
        assert_eq!(r["shape"], shape, "{r}");
        assert_eq!((r["ranks"].as_u64(), r["workers_per_rank"].as_u64()), (Some(1), Some(2)));
        assert!(r["us_per_round"].as_f64().is_some_and(|v| v > 0.0), "{r}");
        // One process: worker 0 detects quiescence from the counters, no all-reduce.
        assert_eq!(r["all_reduces"].as_f64(), Some(0.0), "{r}");
    }
    // The workers on the threads asked for, counted by the runtime.
    let o =
        skein(&[&args[..], &["--worker-threads", "1", "--json", json.to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("2 worker(s) on 1 thread(s) in all"), "{}", text(&o));
    assert!(json_rows(&json).iter().all(|r| r["threads"] == 1), "{:?}", json_rows(&json));
    for (args, want) in [
        (
            &["--workers", "2", "--worker-threads", "3"][..],
            "--worker-threads: 3 threads for 2 workers",
        ),
        (&["--rounds", "0"][..], "--rounds: must be at least 1"),
        (&["--workers", "0"][..], "--workers: must be at least 1"),
        (&["--repeat", "0"][..], "--repeat: must be at least 1"),
    ] {
        let o = skein(&[&["bench", "rounds"][..], args].concat());
        assert!(!o.status.success() && text(&o).contains(want), "{args:?}: {}", text(&o));
        assert!(!text(&o).contains("panicked"), "{args:?}: {}", text(&o));
    }
}

#[test]
fn micro_reports_switches_round_trips_and_empty_runs() {
    let dir = Scratch::new("micro");
    let json = dir.path("micro.json");
    let o = skein(&["bench", "micro", "--iters", "2000", "--json", json.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("empty run, 2 workers:"), "{}", text(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for key in [
        "fiber_yield_ns",
        "apply_round_trip_ns",
        "trustee_serves_per_sec",
        "empty_run_1_worker_us",
        "empty_run_2_workers_us",
    ] {
        let v = r[key].as_f64().unwrap_or_else(|| panic!("{key} missing: {r}"));
        assert!(v.is_finite() && v > 0.0, "{key}: {v}");
    }
}

#[test]
fn a_rack_batch_size_out_of_range_is_refused_by_name() {
    for bad in ["12", "1000000", "lots"] {
        let o = Command::new(env!("CARGO_BIN_EXE_skein"))
            .args(["bench", "micro", "--iters", "10"])
            .env("SKEIN_RACK_BATCH_BYTES", bad)
            .output()
            .expect("running skein");
        assert!(!o.status.success(), "{bad}: {}", text(&o));
        assert!(
            text(&o)
                .contains("SKEIN_RACK_BATCH_BYTES must be a number of bytes from 1024 to 65536"),
            "{bad}: {}",
            text(&o)
        );
        assert!(!text(&o).contains("panicked"), "{bad}: {}", text(&o));
    }
    let o = Command::new(env!("CARGO_BIN_EXE_skein"))
        .args(["bench", "micro", "--iters", "10"])
        .env("SKEIN_RACK_BATCH_BYTES", "8192")
        .output()
        .expect("running skein");
    assert!(o.status.success(), "{}", text(&o));
}
