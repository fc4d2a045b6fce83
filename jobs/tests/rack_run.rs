//! `skein run` and `skein sssp|bfs` across MPI ranks (feature `mpi`; needs `mpirun`, which
//! `scripts/install-mpi.sh` installs): every rank runs the job, rank 0 prints and writes.

#![cfg(feature = "mpi")]

mod common;
mod launch;

use common::Scratch;
use launch::mpirun;
use std::process::{Command, Output};

fn one_process(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skein")).args(args).output().expect("skein runs")
}

/// The lines of a report that do not depend on timing.
fn stable(report: &str) -> Vec<&str> {
    report
        .lines()
        .filter(|l| {
            ["nedge", "validation", "graph:", "roots", "kernel"].iter().any(|k| l.contains(k))
                && !l.contains("time")
                && !l.contains("TEPS")
        })
        .collect()
}

#[test]
fn shipped_rack_jobs_run_on_2_ranks_with_the_one_process_statistics() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/");
    for name in ["sssp-s20-rack.toml", "bfs-s20-rack.toml"] {
        let path = format!("{dir}{name}");
        let tiny =
            ["--set", "graph.scale=9", "--set", "job.roots=4", "--set", "report.json=/dev/null"];
        let rack = mpirun(2, &[&["run", path.as_str()][..], &tiny[..]].concat());
        let out = String::from_utf8_lossy(&rack.stdout);
        let err = String::from_utf8_lossy(&rack.stderr);
        assert!(rack.status.success(), "{name} on 2 ranks: {err}\n{out}");
        // Rank 0 prints the report once.
        assert_eq!(out.matches("validation:").count(), 1, "{name}: {out}");
        assert!(out.contains("passed"), "{name}: {out}");
        let single =
            one_process(
                &[
                    &[
                        "run",
                        path.as_str(),
                        "--set",
                        "runtime.ranks=1",
                        "--set",
                        "runtime.workers=2",
                    ][..],
                    &tiny[..],
                ]
                .concat(),
            );
        let single_out = String::from_utf8_lossy(&single.stdout);
        assert!(single.status.success(), "{name}: {}", String::from_utf8_lossy(&single.stderr));
        assert_eq!(stable(&out), stable(&single_out), "{name}: same graph, roots and nedge");
    }
}

#[test]
fn a_rank_count_the_job_does_not_expect_is_refused_on_every_rank() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/");
    let path = format!("{dir}sssp-s20-rack.toml");
    let r = mpirun(3, &["run", &path, "--set", "graph.scale=6", "--set", "report.json=/dev/null"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success(), "ran on 3 ranks");
    assert!(err.contains("expects 2 rank(s) but runs on 3"), "{err}");
}

#[test]
fn echo_to_remote_workers_counts_the_workers_of_every_rank() {
    // One worker per rank: 2 workers in all, each sending to the other rank's (the
    // one-process refusal of a single worker is in `cli_bench.rs`). 4096 bytes travel as
    // `apply_with` arguments (a `skein::codec::Raw` byte string), the others inline.
    let scratch = Scratch::new("echo");
    let dir = scratch.dir();
    let json = dir.join("echo.json");
    let args = ["bench", "echo", "--workers", "1", "--dest", "remote", "--sizes", "8,32,4096"];
    let r = mpirun(
        2,
        &[&args[..], &["--requests", "20000", "--json", json.to_str().unwrap()]].concat(),
    );
    let out = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "{out}{}", String::from_utf8_lossy(&r.stderr));
    assert!(out.contains("uniformly random other workers"), "{out}");
    assert_eq!(out.matches("skein (2 ranks x 1 workers)").count(), 3, "{out}");
    assert!(out.contains("req/env"), "{out}");
    // Every request went to the other rank, in envelopes of at least one request each.
    let rows = read_json(&json);
    let rows = rows.as_array().expect("an array of rows");
    assert_eq!(rows.len(), 3, "{rows:?}");
    for row in rows {
        let per = row["requests_per_envelope"].as_f64();
        assert!(per.is_some_and(|p| (1.0..=40_000.0).contains(&p)), "{row}");
    }
}

#[test]
fn rounds_across_3_ranks_take_two_all_reduces_each_at_least() {
    // Between two quiescent verdicts the detector completes at least two all-reduces (the
    // waves of one detection; the one after a wake-up cannot be quiescent): a round across
    // ranks that took fewer would have skipped a wave.
    let scratch = Scratch::new("rounds");
    let dir = scratch.dir();
    let json = dir.join("rounds.json");
    let args = ["bench", "rounds", "--rounds", "40", "--repeat", "2"];
    let r = mpirun(3, &[&args[..], &["--json", json.to_str().unwrap()]].concat());
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let rows = read_json(&json);
    let rows = rows.as_array().expect("an array of rows");
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in rows {
        assert_eq!(row["ranks"], 3, "{row}");
        assert!(row["us_per_round"].as_f64().is_some_and(|v| v > 0.0), "{row}");
        assert!(row["all_reduces"].as_f64().is_some_and(|a| a >= 2.0), "{row}");
    }
}

#[test]
fn fetch_add_baselines_check_themselves_on_3_ranks() {
    // The 7 counters dealt unevenly over 3 ranks (3, 2, 2); a rate for every (dist, K,
    // implementation). Each is checked by the command, which fails on a mismatch: the MPI
    // baselines compare counter sums and sums weighted by counter number on every rank,
    // Skein's forms their counters' sum (`array` hands its TrustArray to every worker of every
    // rank). The echo and ping baselines run in
    // `the_rack_bench_script_runs_every_benchmark_beside_mpi`.
    let scratch = Scratch::new("fetch-add-mpi");
    let dir = scratch.dir();
    let json = dir.join("rows.json");
    let r = mpirun(
        3,
        &[
            "bench",
            "fetch-add",
            "--mpi",
            "--workers",
            "1",
            "--impls",
            "apply_then,array",
            "--objects",
            "1,7",
            "--dist",
            "both",
            "--ops",
            "5000",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let rows = read_json(&json);
    let rows = rows.as_array().expect("an array of rows");
    assert_eq!(rows.len(), 2 * 2 * 4, "{rows:?}");
    for imp in ["apply_then", "array", "mpi aggregated", "mpi rma"] {
        let of: Vec<_> = rows.iter().filter(|r| r["impl"] == imp).collect();
        assert_eq!(of.len(), 4, "{imp}: {rows:?}");
        assert!(of.iter().all(|r| r["mops"].as_f64().is_some_and(|m| m > 0.0)), "{rows:?}");
    }
}

/// `jobs/scripts/rack-bench.sh`, as its header says, with tiny sizes (`QUICK=1`) and this
/// build's binary: every benchmark runs and writes its rows.
#[test]
fn the_rack_bench_script_runs_every_benchmark_beside_mpi() {
    let scratch = Scratch::new("rack-bench-script");
    let dir = scratch.dir();
    let r = std::process::Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/rack-bench.sh"))
        .args(["2", dir.to_str().unwrap()])
        .env("SKEIN", env!("CARGO_BIN_EXE_skein"))
        .env("QUICK", "1")
        .env_remove("SKEIN_LOOPBACK_RANKS")
        .output()
        .expect("bash runs");
    let out = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "{out}{}", String::from_utf8_lossy(&r.stderr));
    for (file, imp) in [
        ("echo.json", "mpi aggregated"),
        ("ping.json", "mpi ping-pong"),
        ("fetch-add.json", "mpi rma"),
    ] {
        let rows = read_json(&dir.join(file));
        let rows = rows.as_array().expect("an array of rows");
        assert!(
            rows.iter().any(|r| r["impl"].as_str().is_some_and(|i| i.starts_with(imp))),
            "{file}"
        );
        assert!(
            rows.iter().any(|r| r["impl"]
                .as_str()
                .is_some_and(|i| i.starts_with("skein") || i == "array")),
            "{file}"
        );
    }
    let rounds = read_json(&dir.join("rounds.json"));
    let shapes: Vec<_> = rounds.as_array().expect("rows").iter().map(|r| &r["shape"]).collect();
    assert_eq!(shapes, ["superstep", "quiescence"], "{rounds}");
}

#[test]
fn other_engines_are_refused_across_ranks() {
    let r = mpirun(2, &["sssp", "--engine", "rayon", "kron:6"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success() && err.contains("only the skein engine runs across"), "{err}");
    let r = mpirun(2, &["sssp", "--engine", "skein", "--threads", "1", "--roots", "2", "kron:8"]);
    let out = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(out.matches("validation:").count(), 1, "{out}");
}

#[test]
fn compare_puts_skein_rack_beside_the_one_process_engines() {
    let scratch = Scratch::new("compare");
    let dir = scratch.dir();
    let job = dir.join("job.toml");
    std::fs::write(
        &job,
        "[graph]\ngenerator = \"kronecker\"\nscale = 9\n[job]\nkernel = \"bfs\"\nroots = 4\n\
         [report]\njson = \"r.json\"\n",
    )
    .unwrap();
    let chart = dir.join("c.png");
    // BFS beside seq and the one-process skein; PageRank and components too, the rack row
    // validated across the ranks.
    for (kernel, engines) in
        [("bfs", "seq,skein,skein-rack"), ("pagerank", "seq,skein-rack"), ("cc", "seq,skein-rack")]
    {
        let set = format!("job.kernel={kernel}");
        let job = job.to_str().unwrap();
        let chart = chart.to_str().unwrap();
        let args = ["compare", job, "--set", &set, "--engines", engines, "--ranks", "2"];
        let out = one_process(&[&args[..], &["--chart", chart]].concat());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}\n{text}", String::from_utf8_lossy(&out.stderr));
        let rack: Vec<&str> = text.lines().filter(|l| l.starts_with("skein-rack")).collect();
        assert_eq!(rack.len(), 1, "{kernel}: {text}");
        assert!(rack[0].contains(" 2r ") && rack[0].ends_with("passed"), "{kernel}: {text}");
        let json = std::fs::read_to_string(dir.join("r.compare.json")).unwrap();
        let rate = if kernel == "bfs" { "harmonic_mean_teps" } else { "arcs_per_second_hmean" };
        assert!(json.contains("\"skein-rack\"") && json.contains(rate), "{kernel}: {json}");
    }
}

/// What must not depend on how the ranks split the graph: the graph's size, the roots, each
/// root's nedge and reached count, the validation, and the nedge statistics.
fn invariant_parts(json: &serde_json::Value) -> serde_json::Value {
    let runs: Vec<serde_json::Value> = json["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| serde_json::json!([r["root"], r["nedge"], r["reached"]]))
        .collect();
    serde_json::json!({
        "graph": json["graph"],
        "runs": runs,
        "validation": json["validation"],
        "engine": json["engine"],
        "settings": json["settings"],
    })
}

fn read_json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn run_on_2_and_3_ranks_gives_the_one_process_roots_nedge_validation_and_dump() {
    let scratch = Scratch::new("split");
    let dir = scratch.dir();
    for kernel in ["sssp", "bfs"] {
        let job = dir.join(format!("{kernel}.toml"));
        std::fs::write(
            &job,
            format!(
                "[graph]\ngenerator = \"kronecker\"\nscale = 10\n[job]\nkernel = \"{kernel}\"\n\
                 roots = 4\nengine = \"skein\"\n[runtime]\nworkers = 1\n"
            ),
        )
        .unwrap();
        let job = job.to_str().unwrap();
        for ranks in [2usize, 3] {
            let files = |tag: &str| {
                (
                    dir.join(format!("{kernel}-{tag}{ranks}.json")),
                    dir.join(format!("{kernel}-{tag}{ranks}.dump")),
                )
            };
            let (rack_json, rack_dump) = files("rack");
            let (one_json, one_dump) = files("one");
            let sets = |json: &std::path::Path, dump: &std::path::Path| {
                vec![
                    "--set".to_string(),
                    format!("report.json={}", json.display()),
                    "--set".to_string(),
                    format!("report.dump={}", dump.display()),
                ]
            };
            let rack_sets = sets(&rack_json, &rack_dump);
            let mut args = vec!["run", job];
            args.extend(rack_sets.iter().map(String::as_str));
            let rack = mpirun(ranks, &args);
            let out = String::from_utf8_lossy(&rack.stdout);
            let err = String::from_utf8_lossy(&rack.stderr);
            assert!(rack.status.success(), "{kernel} on {ranks} ranks: {err}\n{out}");
            assert_eq!(out.matches("validation:").count(), 1, "{out}");
            // The graph was split: each rank built only its own rows.
            assert!(err.contains(&format!("across {ranks} ranks")), "{err}");
            for r in 0..ranks {
                assert!(out.contains(&format!("skein rank {r} peak memory:")), "{out}");
                assert!(out.contains(&format!("skein rank {r} build peak:")), "{out}");
            }
            // One process of as many workers as the job's ranks have: the same partition.
            let workers = format!("runtime.workers={ranks}");
            let one_sets = sets(&one_json, &one_dump);
            let mut args = vec!["run", job, "--set", workers.as_str()];
            args.extend(one_sets.iter().map(String::as_str));
            let single = one_process(&args);
            let single_out = String::from_utf8_lossy(&single.stdout);
            assert!(single.status.success(), "{}", String::from_utf8_lossy(&single.stderr));
            let (rack_report, one_report) = (read_json(&rack_json), read_json(&one_json));
            assert_eq!(rack_report["validation"], "passed", "{rack_report}");
            assert_eq!(
                invariant_parts(&rack_report),
                invariant_parts(&one_report),
                "{kernel} on {ranks} ranks"
            );
            assert_eq!(stable(&out), stable(&single_out), "{kernel} on {ranks} ranks");
            assert_eq!(
                rack_report["trustees"]["rank_peak_rss_bytes"].as_array().map(Vec::len),
                Some(ranks),
                "{rack_report}"
            );
            let (a, b) = (std::fs::read(&rack_dump).unwrap(), std::fs::read(&one_dump).unwrap());
            assert_eq!(b.iter().filter(|&&c| c == b'\n').count(), 1024);
            if kernel == "sssp" {
                assert!(a == b, "{kernel} on {ranks} ranks: the dumps differ");
            } else {
                // A BFS parent among several of the level above is whichever visit came
                // first, in one process too: the levels must be equal, the parents valid
                // (validation passed above).
                let levels = |d: &[u8]| -> Vec<String> {
                    String::from_utf8_lossy(d)
                        .lines()
                        .map(|l| l.rsplit_once(' ').map_or(l, |(head, _)| head).to_string())
                        .collect()
                };
                assert!(levels(&a) == levels(&b), "{kernel} on {ranks} ranks: the levels differ");
            }
        }
    }
}

#[test]
fn explicit_roots_and_bad_dump_paths_are_clear_errors_on_every_rank() {
    // Explicit roots: the same results as one process; a root past n refused.
    let args = ["bfs", "--engine", "skein", "-t", "1", "--root", "5", "--root", "1000", "kron:10"];
    let rack = mpirun(2, &args);
    assert!(rack.status.success(), "{}", String::from_utf8_lossy(&rack.stderr));
    let single = one_process(&[&args[..4], &["2"], &args[5..]].concat());
    assert!(single.status.success(), "{}", String::from_utf8_lossy(&single.stderr));
    assert_eq!(
        stable(&String::from_utf8_lossy(&rack.stdout)),
        stable(&String::from_utf8_lossy(&single.stdout))
    );
    let r = mpirun(2, &["bfs", "--engine", "skein", "-t", "1", "--root", "1024", "kron:10"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success(), "root 1024 of 1024 vertices ran");
    assert!(err.contains("root 1024 is not a vertex") && err.contains("0..1024"), "{err}");
    // A dump rank 0 cannot write: an error, not a hang (every rank stops).
    let r = mpirun(
        2,
        &[
            "sssp",
            "--engine",
            "skein",
            "-t",
            "1",
            "--roots",
            "1",
            "--dump",
            "/dev/null/x",
            "kron:8",
        ],
    );
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success(), "wrote under /dev/null");
    assert!(err.contains("/dev/null/x"), "{err}");
}

#[test]
fn graph_files_are_split_across_2_and_3_ranks_with_the_one_process_dump() {
    let scratch = Scratch::new("file");
    let dir = scratch.dir();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    for name in ["g.skg", "g.el", "g.wel"] {
        let made = one_process(&["generate", "--scale", "9", "--output", &path(name)]);
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    }
    // SSSP dumps byte for byte on weighted graphs (on unweighted .el, ties make its parents
    // depend on timing, in one process too).
    for (kernel, name) in [("sssp", "g.skg"), ("bfs", "g.skg"), ("bfs", "g.el"), ("sssp", "g.wel")]
    {
        for ranks in [2usize, 3] {
            let (rack_dump, one_dump) = (path("rack.dump"), path("one.dump"));
            let args = |dump: &str, t: usize| {
                let t = t.to_string();
                let v = [kernel, "--engine", "skein", "--roots", "4", "-t", &t, "--dump", dump];
                let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
                v.push(path(name));
                v
            };
            let rack_args = args(&rack_dump, 1);
            let rack = mpirun(ranks, &rack_args.iter().map(String::as_str).collect::<Vec<_>>());
            let out = String::from_utf8_lossy(&rack.stdout);
            let err = String::from_utf8_lossy(&rack.stderr);
            assert!(rack.status.success(), "{kernel} {name} on {ranks} ranks: {err}\n{out}");
            assert!(out.contains("validation:                     passed"), "{out}");
            // Split: each rank built its own rows.
            assert!(err.contains(&format!("across {ranks} ranks")), "{err}");
            assert!(!err.contains("not split"), "{err}");
            let one_args = args(&one_dump, ranks);
            let single = one_process(&one_args.iter().map(String::as_str).collect::<Vec<_>>());
            assert!(single.status.success(), "{}", String::from_utf8_lossy(&single.stderr));
            assert_eq!(
                stable(&out),
                stable(&String::from_utf8_lossy(&single.stdout)),
                "{kernel} {name} on {ranks} ranks"
            );
            let (a, b) = (std::fs::read(&rack_dump).unwrap(), std::fs::read(&one_dump).unwrap());
            assert_eq!(b.iter().filter(|&&c| c == b'\n').count(), 512);
            if kernel == "sssp" {
                assert!(a == b, "{kernel} {name} on {ranks} ranks: the dumps differ");
            } else {
                // BFS parents among equal levels depend on timing, in one process too:
                // the levels must agree, and both trees passed validation.
                assert_eq!(levels(&a), levels(&b), "{kernel} {name} on {ranks} ranks");
            }
        }
    }
    // A job file's `[graph] file` (relative to the job file) is split the same way.
    let job = dir.join("job.toml");
    std::fs::write(
        &job,
        "[graph]\nfile = \"g.skg\"\n[job]\nkernel = \"sssp\"\nroots = 2\nengine = \"skein\"\n\
         [runtime]\nworkers = 1\n[report]\njson = \"/dev/null\"\n",
    )
    .unwrap();
    let r = mpirun(2, &["run", job.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{err}");
    assert!(err.contains("across 2 ranks"), "{err}");
}

/// `vertex value` of every line of a dump (its parents left out).
fn levels(dump: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(dump)
        .lines()
        .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn corrupt_and_bad_graph_files_are_errors_on_every_rank() {
    let scratch = Scratch::new("badfile");
    let dir = scratch.dir();
    let skg = dir.join("g.skg");
    let made = one_process(&["generate", "--scale", "8", "--output", skg.to_str().unwrap()]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let mut bytes = std::fs::read(&skg).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&skg, &bytes).unwrap();
    let wel = dir.join("g.wel");
    std::fs::write(&wel, "# vertices 4\n0 1 0.5\n1 2 1\n2 3 -1\n").unwrap();
    let cases = [(&skg, "checksum mismatch"), (&wel, "g.wel:4: weight -1 is not allowed")];
    for (graph, what) in cases {
        for ranks in [2usize, 3] {
            let g = graph.to_str().unwrap();
            let r = mpirun(ranks, &["sssp", "--engine", "skein", "-t", "1", "--roots", "2", g]);
            let err = String::from_utf8_lossy(&r.stderr);
            assert!(!r.status.success(), "{g} ran on {ranks} ranks");
            // Every rank reports the same error and stops (no hang, no panic).
            assert_eq!(err.matches(what).count(), ranks, "{err}");
            assert!(err.contains(&format!("cannot load the graph file {g}")), "{err}");
            assert!(!err.contains("panicked"), "{err}");
            let one = one_process(&["sssp", "--engine", "skein", "--roots", "2", g]);
            assert!(String::from_utf8_lossy(&one.stderr).contains(what));
        }
    }
}

#[test]
fn graphs_too_big_for_the_ranks_are_refused_on_every_rank_before_building() {
    // SCALE 32: a rank's rows take far more than this machine has.
    let r = mpirun(2, &["sssp", "--engine", "skein", "-t", "1", "--roots", "1", "kron:32"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success(), "SCALE 32 ran");
    assert!(err.contains("rank 0's rows of SCALE 32") && err.contains("available"), "{err}");
    // SCALE 40 on 2 workers in all: 2^39 vertices each, past 32-bit local indices.
    let r = mpirun(2, &["bfs", "--engine", "skein", "-t", "1", "--roots", "1", "kron:40"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success(), "SCALE 40 ran");
    assert!(err.contains("more than 2^32 - 1"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// An MPMD launch (`mpirun -np 1 -wdir D0 skein A... : -np 1 -wdir D1 skein B...`): one rank
/// per `(working directory, arguments)`. Killed after 120 s, so that a hang fails the test.
fn mpmd(apps: &[(&std::path::Path, Vec<&str>)]) -> Output {
    let mut cmd = Command::new("mpirun");
    cmd.args(["--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]);
    for (i, (dir, args)) in apps.iter().enumerate() {
        if i > 0 {
            cmd.arg(":");
        }
        cmd.args(["-np", "1", "-wdir"]).arg(dir).arg(env!("CARGO_BIN_EXE_skein")).args(args);
    }
    cmd.env_remove("SKEIN_LOOPBACK_RANKS")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().expect("mpirun runs");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    match rx.recv_timeout(std::time::Duration::from_secs(120)) {
        Ok(out) => out.expect("mpirun ends"),
        Err(_) => {
            // SAFETY: kill only sends a signal to the mpirun this test started.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            panic!("the MPMD job hung: {apps:?}");
        }
    }
}

/// Ranks started with different arguments, or reading different copies of one graph file
/// path, refuse the job on every rank, naming the field and the ranks, instead of running a
/// mixed graph (or hanging in collectives that do not match).
#[test]
fn ranks_that_disagree_on_their_job_refuse_it_naming_the_field() {
    let scratch = Scratch::new("mpmd");
    let dir = scratch.dir();
    let (a, b) = (dir.join("a"), dir.join("b"));
    let sssp = |graph| vec!["sssp", "--engine", "skein", "-t", "1", "--roots", "2", graph];
    let err_of = |r: &Output| {
        assert!(!r.status.success(), "ran: {}", String::from_utf8_lossy(&r.stdout));
        String::from_utf8_lossy(&r.stderr).into_owned()
    };
    // Another edge factor on rank 1.
    let r = mpmd(&[(dir, sssp("kron:8:16")), (dir, sssp("kron:8:8"))]);
    let err = err_of(&r);
    assert_eq!(err.matches("the 2 ranks do not agree on their job").count(), 2, "{err}");
    assert!(err.contains(r#"`graph`: rank 0 has "kron:8:16", rank 1 has "kron:8:8""#), "{err}");
    // Root counts, warmups and a dump on one rank only: fields of their own, no hang.
    let mut other = sssp("kron:8");
    other[6] = "3";
    other.extend(["--warmup", "1", "--dump", "/dev/null"]);
    let err = err_of(&mpmd(&[(dir, sssp("kron:8")), (dir, other)]));
    for f in ["`--roots`", "`--warmup`", "`--dump`"] {
        assert!(err.contains(f), "{f}: {err}");
    }
    // Another command on rank 1.
    let mut bfs = sssp("kron:8");
    bfs[0] = "bfs";
    let err = err_of(&mpmd(&[(dir, sssp("kron:8")), (dir, bfs)]));
    assert!(err.contains(r#"`command`: rank 0 has "sssp", rank 1 has "bfs""#), "{err}");
    // A job file with another override on rank 1: the loaded job's keys differ.
    let job = concat!(env!("CARGO_MANIFEST_DIR"), "/sssp-s20-rack.toml");
    let run = |scale| vec!["run", job, "--set", scale, "--set", "report.json=/dev/null"];
    let err = err_of(&mpmd(&[(dir, run("graph.scale=8")), (dir, run("graph.scale=9"))]));
    assert!(err.contains("`job.graph`: rank 0 has"), "{err}");
    // One path, two files of the same size (node-local copies that differ): each rank
    // reads `g.skg` in its own working directory.
    for (d, seed) in [(&a, "2,3"), (&b, "5,7")] {
        std::fs::create_dir_all(d).unwrap();
        let g = d.join("g.skg");
        let made = one_process(&["generate", "-s", "8", "--seed", seed, "-o", g.to_str().unwrap()]);
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    }
    let size = |d: &std::path::Path| std::fs::metadata(d.join("g.skg")).unwrap().len();
    assert_eq!(size(&a), size(&b));
    let err = err_of(&mpmd(&[(&a, sssp("g.skg")), (&b, sssp("g.skg"))]));
    assert!(err.contains("`graph file content`: rank 0 has"), "{err}");
    assert!(!err.contains("`graph`:"), "{err}");
    // The same file on both ranks runs.
    let r = mpmd(&[(&a, sssp("g.skg")), (&a, sssp("g.skg"))]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
}

/// The JSON report names the transport the ranks used: the job file's `[runtime] transport`
/// when it gives one, else what `auto` chose (on one node: the shared-memory rings, unless
/// `SKEIN_TRANSPORT` asks otherwise).
#[test]
fn the_report_names_the_transport_the_ranks_used() {
    let scratch = Scratch::new("transport");
    let dir = scratch.dir();
    let default = match std::env::var("SKEIN_TRANSPORT").as_deref().map(str::trim) {
        Err(_) | Ok("") | Ok("auto") => "shm".to_string(),
        Ok(other) => other.to_string(),
    };
    for (key, want) in [("", default.as_str()), ("transport = \"mpi\"\n", "mpi")] {
        let job = dir.join("job.toml");
        std::fs::write(
            &job,
            format!(
                "[graph]\ngenerator = \"kronecker\"\nscale = 8\n[job]\nkernel = \"bfs\"\n\
                 roots = 2\n[runtime]\nranks = 2\n{key}[report]\njson = \"r.json\"\n"
            ),
        )
        .unwrap();
        let r = mpirun(2, &["run", job.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(r.status.success(), "{key:?}: {err}");
        assert!(
            err.contains(&format!("skein: rack transport: {want} between all 2 ranks")),
            "{err}"
        );
        let json = read_json(&dir.join("r.json"));
        assert_eq!(json["transport"], want, "{key:?}: {json}");
        let asked = if key.is_empty() { serde_json::Value::Null } else { want.into() };
        assert_eq!(json["job"]["transport"], asked, "{key:?}: {json}");
    }
}

/// Ranks on several nodes, some sharing one (made here by `SKEIN_RANKS_PER_NODE=2`: ranks 0
/// and 1 one node, rank 2 another): `auto` mixes, the rings within the node and MPI
/// between, says so at the start and per rank in the report, and the run validates.
#[test]
fn auto_mixes_the_rings_within_a_node_and_mpi_between_nodes() {
    if std::env::var("SKEIN_TRANSPORT").is_ok_and(|t| !matches!(t.trim(), "" | "auto")) {
        return; // A transport asked for by name does not mix.
    }
    let scratch = Scratch::new("mixed");
    let dir = scratch.dir();
    let job = dir.join("job.toml");
    std::fs::write(
        &job,
        "[graph]\ngenerator = \"kronecker\"\nscale = 9\n[job]\nkernel = \"sssp\"\nroots = 4\n\
         [runtime]\nranks = 3\nworkers = 2\n[report]\njson = \"r.json\"\n",
    )
    .unwrap();
    let r =
        launch::mpirun_env(3, &["run", job.to_str().unwrap()], &[("SKEIN_RANKS_PER_NODE", "2")]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{err}");
    assert!(
        err.contains(
            "skein: rack transport: shm within each node, mpi between nodes (nodes: [0, 1], [2]; \
             asked: auto)"
        ),
        "{err}"
    );
    let json = read_json(&dir.join("r.json"));
    assert_eq!(json["transport"], "shm+mpi", "{json}");
    assert_eq!(json["transport_per_rank"], serde_json::json!(["shm", "shm", "mpi"]), "{json}");
    assert_eq!(json["validated"], true, "{json}");
}
