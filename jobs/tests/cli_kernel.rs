//! `skein sssp` and `skein bfs` end to end: reports, dumps, JSON, and bad input.

mod common;

use common::{fails, ok, s, text, Scratch};
use std::path::Path;
use std::process::Command;

/// `(value, parent)` columns of a dump, checking the vertex column.
fn read_dump(path: &Path) -> Vec<(String, i64)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 3, "dump line {l:?}");
            assert_eq!(f[0].parse::<usize>().unwrap(), i);
            (f[1].to_owned(), f[2].parse().unwrap())
        })
        .collect()
}

/// Columns (bfs level, sssp distance bits) of the Graph500 reference's SCALE 10 root 0.
fn reference_s10() -> Vec<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/graph500/kron_s10_ef16_root0.txt");
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[1].to_owned(), f[2].to_owned())
        })
        .collect()
}

#[test]
fn sssp_reports_json_and_dumps_the_reference_distances() {
    let dir = Scratch::new("sssp");
    let want = reference_s10();
    for (engine, threads) in [("seq", "1"), ("rayon", "2"), ("skein", "3")] {
        let json = dir.path(&format!("sssp-{engine}.json"));
        let dump = dir.path(&format!("sssp-{engine}.dump"));
        let stdout = ok(&[
            "sssp",
            "--engine",
            engine,
            "--threads",
            threads,
            "--roots",
            "3",
            "--json",
            s(&json),
            "--dump",
            s(&dump),
            "kron:10",
        ]);
        for key in ["SCALE:", "construction_time:", "sssp median_time:", "harmonic_mean_TEPS:"] {
            assert!(stdout.contains(key), "{key} missing in\n{stdout}");
        }
        assert!(stdout.contains("validation:") && stdout.contains("passed"), "{stdout}");
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(j["kernel"], "sssp");
        assert_eq!(j["engine"], engine);
        assert_eq!(j["threads"], threads.parse::<u64>().unwrap());
        assert_eq!(j["graph"]["vertices"], 1024);
        assert_eq!(j["validated"], true);
        assert!(j["harmonic_mean_teps"].as_f64().unwrap() > 0.0);
        let runs = j["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 3);
        // Root 0 of SCALE 10 is 458; its TEPS edge count is 16 239 (reference README).
        assert_eq!(runs[0]["root"], 458);
        assert_eq!(runs[0]["nedge"], 16239);
        assert!(runs.iter().all(|r| r["seconds"].as_f64().unwrap() > 0.0 && r["teps"].is_number()));
        if engine == "skein" {
            // How the arcs spread over the 3 partitions, round by round.
            for key in ["skein round spread:", "skein busiest arcs per search:"] {
                assert!(stdout.contains(key), "{key} missing in\n{stdout}");
            }
            let t = &j["trustees"];
            let spread = &t["round_spread"];
            assert_eq!(spread["partitions"], 3);
            assert_eq!(spread["rounds_with_work"], t["rounds"]);
            let busiest = spread["busiest_arcs"].as_u64().unwrap();
            let arcs = t["arcs_relaxed"].as_u64().unwrap();
            assert!(busiest < arcs && 3 * busiest >= arcs, "{busiest} of {arcs}");
            let critical = spread["critical_over_even"].as_f64().unwrap();
            assert!((critical - (3 * busiest) as f64 / arcs as f64).abs() < 1e-9);
            let mean = spread["mean_max_over_mean"].as_f64().unwrap();
            assert!((1.0..=3.0).contains(&mean), "{mean}");
        } else {
            assert!(j.get("trustees").is_none_or(|t| t.get("round_spread").is_none()));
        }
        let got = read_dump(&dump);
        assert_eq!(got.len(), 1024);
        for (v, ((value, parent), (_, dist_bits))) in got.iter().zip(&want).enumerate() {
            assert_eq!(value, dist_bits, "{engine}: distance of vertex {v}");
            assert_eq!(*parent == -1, dist_bits == "bf800000", "{engine}: parent of {v}");
        }
        assert_eq!(got[458], ("00000000".to_owned(), 458));
    }
}

#[test]
fn bfs_dumps_the_reference_levels() {
    let dir = Scratch::new("bfs");
    let want = reference_s10();
    for engine in ["seq", "rayon", "skein"] {
        let dump = dir.path(&format!("bfs-{engine}.dump"));
        let stdout =
            ok(&["bfs", "--engine", engine, "--roots", "2", "--dump", s(&dump), "kron:10:16:2:3"]);
        assert!(stdout.contains("bfs  harmonic_mean_TEPS:"), "{stdout}");
        let got = read_dump(&dump);
        for (v, ((level, parent), (want_level, _))) in got.iter().zip(&want).enumerate() {
            assert_eq!(level, want_level, "{engine}: level of vertex {v}");
            assert_eq!(*parent == -1, want_level == "-1", "{engine}: parent of {v}");
        }
    }
}

#[test]
fn no_validate_and_explicit_roots() {
    let dir = Scratch::new("no-validate");
    let json = dir.path("novalidate.json");
    let stdout = ok(&[
        "bfs",
        "--engine",
        "rayon",
        "--root",
        "3",
        "--root",
        "17",
        "--no-validate",
        "--json",
        s(&json),
        "kron:8",
    ]);
    assert!(stdout.contains("skipped"), "{stdout}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["validated"], false);
    let roots: Vec<u64> =
        j["runs"].as_array().unwrap().iter().map(|r| r["root"].as_u64().unwrap()).collect();
    assert_eq!(roots, vec![3, 17]);
}

#[test]
fn file_graphs_work() {
    let dir = Scratch::new("file-graphs");
    let g = dir.path("path.wel");
    std::fs::write(&g, "# vertices 5\n0 1 0.5\n1 2 0.25\n2 3 1.5\n3 3 0.1\n").unwrap();
    let dump = dir.path("path.dump");
    ok(&["sssp", "--engine", "seq", "--root", "0", "--dump", s(&dump), s(&g)]);
    let got = read_dump(&dump);
    let bits = |x: f32| format!("{:08x}", x.to_bits());
    assert_eq!(got[0], (bits(0.0), 0));
    assert_eq!(got[2], (bits(0.75), 1));
    assert_eq!(got[3], (bits(0.75 + 1.5), 2));
    assert_eq!(got[4], ("bf800000".to_owned(), -1));
    // Graph500 roots for a file graph: the root sequence with seeds 2 and 3.
    ok(&["bfs", "--engine", "rayon", "--roots", "2", s(&g)]);
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = Scratch::new("bad-input");
    let e = fails(&["sssp", "--engine", "seq", "--root", "5000", "kron:10"]);
    assert!(e.contains("root 5000 is not a vertex"), "{e}");
    let e = fails(&["bfs", "kron:abc"]);
    assert!(e.contains("SCALE `abc`"), "{e}");
    let e = fails(&["bfs", "--roots", "0", "kron:6"]);
    assert!(e.contains("--roots"), "{e}");
    let loops = dir.path("loops.el");
    std::fs::write(&loops, "# vertices 3\n1 1\n2 2\n").unwrap();
    let e = fails(&["bfs", "--engine", "seq", s(&loops)]);
    assert!(e.contains("no edges"), "{e}");
    let empty = dir.path("empty.el");
    std::fs::write(&empty, "").unwrap();
    let e = fails(&["sssp", s(&empty)]);
    assert!(e.contains("empty"), "{e}");
    let negative = dir.path("negative.wel");
    std::fs::write(&negative, "0 1 0.5\n1 2 -1\n").unwrap();
    let e = fails(&["sssp", s(&negative)]);
    assert!(e.contains("negative.wel"), "{e}");
    let e = fails(&["sssp", "does-not-exist.el"]);
    assert!(e.contains("does-not-exist.el"), "{e}");
    let e = fails(&["sssp", "--delta", "0", "kron:6"]);
    assert!(e.contains("delta"), "{e}");
}

#[test]
fn help_explains_the_dump_format() {
    for kernel in ["sssp", "bfs"] {
        let help = ok(&[kernel, "--help"]);
        for word in ["v value parent", "binary32", "bf800000", "-1 when unreached"] {
            assert!(help.contains(word), "{kernel} --help lacks {word}:\n{help}");
        }
    }
}

#[test]
fn counts_and_memory_are_checked_before_anything_is_allocated() {
    // The message `generate` and `run` give, for every kron: argument.
    for graph in ["kron:40", "kron:36:16", "kron:30:1024:5:7"] {
        let e = fails(&["sssp", graph]);
        assert!(e.contains(graph) && e.contains("GiB, but only"), "{graph}: {e}");
        let e = fails(&["bfs", "--engine", "seq", graph]);
        assert!(e.contains("available"), "{graph}: {e}");
    }
    for (args, want) in [
        (&["--engine", "skein", "--workers", "2000"][..], "GiB, but only"),
        (&["--engine", "skein", "--workers", "5000"][..], "workers: 5000 is more than 4096"),
        (&["--engine", "rayon", "--threads", "5000"][..], "threads: 5000 is more than 4096"),
        (&["--engine", "skein", "--fibers", "2000000"][..], "fibers: 2000000 is more than"),
        (
            &["--engine", "skein", "--workers", "2", "--fibers", "1000000"][..],
            "2 workers with 1000000 fibers each",
        ),
        (&["--engine", "skein", "--fibers", "0"][..], "fibers: must be at least 1"),
        (&["--roots", "100000"][..], "--roots: 100000 roots, but the graph has only 256"),
        (&["--warmup", "100000"][..], "--warmup: 100000 is more than 10000"),
    ] {
        let mut a = vec!["sssp"];
        a.extend_from_slice(args);
        a.push("kron:8");
        let e = fails(&a);
        assert!(e.contains(want), "{args:?}: {e}");
    }
}

/// Arguments that used to be accepted silently, or by one engine only, are refused by the
/// command line with the argument's name.
#[test]
fn zero_counts_and_contradicting_roots_are_refused() {
    for engine in ["seq", "rayon", "skein"] {
        let e = fails(&["bfs", "--engine", engine, "--beta", "0", "kron:6"]);
        assert!(e.contains("--beta") && e.contains("0"), "{engine}: {e}");
    }
    let e = fails(&["bfs", "--threads", "0", "kron:6"]);
    assert!(e.contains("--threads"), "{e}");
    let e = fails(&["bfs", "--roots", "3", "--root", "1", "kron:6"]);
    assert!(e.contains("--roots") && e.contains("--root"), "{e}");
    // Vertex 5 of kron:10 has no edge: nothing traversed, no rate.
    let out = ok(&["bfs", "--engine", "seq", "--root", "5", "kron:10"]);
    let line = |k: &str| out.lines().find(|l| l.contains(k)).unwrap_or_default().to_string();
    assert!(line("max_nedge:").ends_with(" 0"), "{out}");
    assert!(line("harmonic_mean_TEPS:").contains("!  0.000000e0"), "{out}");
    assert!(line("harmonic_mean_TEPS:").contains("(!: the Graph500 headline figure)"), "{out}");
}

/// `--worker-threads`: the skein engine's workers share that many threads, with the same
/// results (validated) and the setting in the JSON report; more threads than workers, or
/// the setting for another engine, are refused by name.
#[test]
fn worker_threads_run_the_workers_and_are_checked() {
    let dir = Scratch::new("worker-threads");
    let json = dir.path("bfs-worker-threads.json");
    let out = ok(&[
        "bfs",
        "--engine",
        "skein",
        "--threads",
        "4",
        "--worker-threads",
        "1",
        "--roots",
        "2",
        "--json",
        s(&json),
        "kron:10",
    ]);
    assert!(out.contains("worker_threads:"), "{out}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["settings"]["worker_threads"], 1, "{report}");
    let e = fails(&["bfs", "--engine", "skein", "-t", "2", "--worker-threads", "3", "kron:6"]);
    assert!(e.contains("3 threads for 2 workers: at most one thread per worker"), "{e}");
    for (cmd, engine) in [("bfs", "rayon"), ("cc", "seq")] {
        let e = fails(&[cmd, "--engine", engine, "--worker-threads", "1", "kron:6"]);
        assert!(e.contains("--worker-threads is a setting of the skein engine only"), "{e}");
    }
}

/// The address-space limit (`ulimit -v`) counts in the memory figure: a run that would
/// pass it is refused with the memory message, never aborted in an allocation. A small
/// figure is printed in MiB or KiB, never as `0.0 GiB`.
#[cfg(unix)]
#[test]
fn ulimit_v_and_small_limits_are_refused_in_words() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_skein"));
    cmd.args(["sssp", "--engine", "seq", "--roots", "1", "kron:20"]).env("SKEIN_PROGRESS", "0");
    // SAFETY: between fork and exec the closure calls only `setrlimit`, which is
    // async-signal-safe, and allocates nothing.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            let lim = libc::rlimit { rlim_cur: 300_000 << 10, rlim_max: libc::RLIM_INFINITY };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
    let out = cmd.output().expect("run skein");
    let e = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.contains("SCALE 20") && e.contains("available"), "{e}");
    let out = Command::new(env!("CARGO_BIN_EXE_skein"))
        .args(["sssp", "--engine", "seq", "kron:10"])
        .env("SKEIN_MEMORY_LIMIT", "3K")
        .output()
        .expect("run skein");
    let e = text(&out.stderr);
    assert!(e.contains("needs about 736.0 KiB, but only 3.0 KiB are available"), "{e}");
}

/// Entries of `dir` that are temporary files of an unfinished write.
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect()
}

#[test]
fn concurrent_runs_with_one_report_path_leave_whole_files() {
    let scratch = Scratch::new("concurrent");
    let dir = scratch.dir();
    let (json, dump) = (dir.join("same.json"), dir.join("same.dump"));
    for _ in 0..3 {
        let runs: Vec<_> = (0..4)
            .map(|i| {
                let root = (i * 7).to_string();
                Command::new(env!("CARGO_BIN_EXE_skein"))
                    .args(["bfs", "--engine", "seq", "--root", &root, "--json", s(&json)])
                    .args(["--dump", s(&dump), "kron:9"])
                    .env("SKEIN_PROGRESS", "0")
                    .output()
                    .expect("run skein")
            })
            .collect();
        for out in &runs {
            assert!(out.status.success(), "{}", text(&out.stderr));
        }
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(j["runs"].as_array().unwrap().len(), 1);
        assert_eq!(read_dump(&dump).len(), 512);
        assert!(temporaries(dir).is_empty(), "{:?}", temporaries(dir));
    }
}

#[cfg(unix)]
#[test]
fn an_interrupted_run_keeps_the_old_report_and_leaves_no_temporary() {
    use std::os::unix::process::ExitStatusExt;
    let scratch = Scratch::new("interrupted");
    let dir = scratch.dir();
    let dump = dir.join("keep.dump");
    std::fs::write(&dump, "old dump\n").unwrap();
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // Every commit waits 30 s with its temporary file complete: interrupt it there.
        let mut child = common::skein_with_default_signal(signal)
            .args(["sssp", "--engine", "seq", "--roots", "1", "--dump", s(&dump), "kron:8"])
            .env("SKEIN_PROGRESS", "0")
            .env("SKEIN_HOLD_OUTPUT_MS", "30000")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let start = std::time::Instant::now();
        loop {
            let written = std::fs::read_dir(dir).unwrap().any(|e| {
                let e = e.unwrap();
                e.file_name().to_string_lossy().contains(".tmp")
                    && e.metadata().unwrap().len() > 1000
            });
            if written {
                break;
            }
            assert!(start.elapsed().as_secs() < 60, "no temporary file appeared");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let pid = i32::try_from(child.id()).unwrap();
        // SAFETY: kill(2) on the pid of our own child, which has not been waited for yet.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(signal), "{status:?}");
        assert_eq!(std::fs::read_to_string(&dump).unwrap(), "old dump\n");
        assert!(temporaries(dir).is_empty(), "{:?}", temporaries(dir));
    }
}

#[cfg(unix)]
#[test]
fn an_interrupt_between_the_dump_and_the_report_says_so() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let scratch = Scratch::new("interrupted-after-dump");
    let dir = scratch.dir();
    // Every commit waits `hold` ms with its temporary file complete: the dump's, then the
    // report's, where the run is interrupted. A longer hold if the run got past it first.
    for hold in ["2000", "10000", "30000"] {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        let (dump, json) = (dir.join("first.dump"), dir.join("report.json"));
        let mut child = common::skein_with_default_signal(libc::SIGTERM)
            .args(["sssp", "--engine", "seq", "--roots", "1", "--dump", s(&dump)])
            .args(["--json", s(&json), "kron:8"])
            .env("SKEIN_PROGRESS", "0")
            .env("SKEIN_HOLD_OUTPUT_MS", hold)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let err = std::thread::spawn(move || {
            let mut e = String::new();
            let _ = stderr.read_to_string(&mut e);
            e
        });
        let start = std::time::Instant::now();
        let mut exited = false;
        loop {
            if dump.exists() && !temporaries(dir).is_empty() {
                break;
            }
            if child.try_wait().unwrap().is_some() {
                exited = true;
                break;
            }
            assert!(start.elapsed().as_secs() < 120, "the report's temporary never appeared");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        if exited {
            continue;
        }
        let pid = i32::try_from(child.id()).unwrap();
        // SAFETY: kill(2) on the pid of our own child, which has not been waited for yet.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let status = child.wait().unwrap();
        let err = err.join().unwrap();
        if status.success() {
            continue; // it got past the report's hold before the signal: a longer one
        }
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
        assert!(dump.exists() && !json.exists(), "interrupted between the dump and the report");
        assert!(
            err.contains("interrupted after the first root's dump was written to")
                && err.contains("that dump has no report beside it"),
            "the interrupted run says what it left: {err}"
        );
        return;
    }
    panic!("every run got past the report's hold before its interrupt");
}

#[cfg(unix)]
#[test]
fn a_report_that_cannot_be_written_whole_keeps_the_old_one() {
    use std::os::unix::process::CommandExt;
    let scratch = Scratch::new("full");
    let dir = scratch.dir();
    let (json, dump) = (dir.join("r.json"), dir.join("r.dump"));
    std::fs::write(&json, "{}\n").unwrap();
    std::fs::write(&dump, "old\n").unwrap();
    for (flag, path) in [("--dump", &dump), ("--json", &json)] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_skein"));
        // A dump of 4096 vertices and a JSON report of 64 runs are both past 8 KiB.
        cmd.args(["sssp", "--engine", "seq", flag, s(path), "kron:12"]);
        cmd.env("SKEIN_PROGRESS", "0");
        // SAFETY: the closure runs in the forked child before exec and calls only
        // async-signal-safe functions (signal, setrlimit) on values it owns.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                let lim = libc::rlimit { rlim_cur: 8 << 10, rlim_max: 8 << 10 };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
        let out = cmd.output().unwrap();
        let e = text(&out.stderr);
        assert!(!out.status.success() && out.status.code().is_some(), "{flag}: {e}");
        assert!(e.contains("cannot write the ") && e.contains(s(path)), "{flag}: {e}");
        assert_eq!(std::fs::read_to_string(&json).unwrap(), "{}\n");
        assert_eq!(std::fs::read_to_string(&dump).unwrap(), "old\n");
        assert!(temporaries(dir).is_empty(), "{:?}", temporaries(dir));
    }
    // Where SIGXFSZ keeps its default action, the write kills the process: still nothing
    // partial, and no temporary file.
    use std::os::unix::process::ExitStatusExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_skein"));
    cmd.args(["sssp", "--engine", "seq", "--dump", s(&dump), "kron:12"]);
    cmd.env("SKEIN_PROGRESS", "0");
    // SAFETY: as above: only async-signal-safe calls (signal, setrlimit) in the child.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
            let lim = libc::rlimit { rlim_cur: 8 << 10, rlim_max: 8 << 10 };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let out = cmd.output().unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGXFSZ), "{:?}", out.status);
    assert_eq!(std::fs::read_to_string(&dump).unwrap(), "old\n");
    assert!(temporaries(dir).is_empty(), "{:?}", temporaries(dir));
}
