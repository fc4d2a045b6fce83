//! `skein run` and `skein sssp|bfs` across MPI ranks (feature `mpi`; needs `mpirun`, which
//! `scripts/install-mpi.sh` installs): every rank runs the job, rank 0 prints and writes.

#![cfg(feature = "mpi")]

use std::process::{Command, Output};

/// The launch line that works as root and on a 2-core machine.
fn mpirun(ranks: usize, args: &[&str]) -> Output {
    Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np"])
        .arg(ranks.to_string())
        .arg(env!("CARGO_BIN_EXE_skein"))
        .args(args)
        .env_remove("SKEIN_LOOPBACK_RANKS")
        .output()
        .expect("mpirun runs (install Open MPI with scripts/install-mpi.sh)")
}

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
    let dir = std::env::temp_dir().join(format!("skein-rack-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let job = dir.join("job.toml");
    std::fs::write(
        &job,
        "[graph]\ngenerator = \"kronecker\"\nscale = 9\n[job]\nkernel = \"bfs\"\nroots = 4\n\
         [report]\njson = \"r.json\"\n",
    )
    .unwrap();
    let chart = dir.join("c.png");
    let out = one_process(&[
        "compare",
        job.to_str().unwrap(),
        "--engines",
        "seq,skein,skein-rack",
        "--ranks",
        "2",
        "--chart",
        chart.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{text}", String::from_utf8_lossy(&out.stderr));
    let rack: Vec<&str> = text.lines().filter(|l| l.starts_with("skein-rack")).collect();
    assert_eq!(rack.len(), 1, "{text}");
    assert!(rack[0].contains(" 2r ") && rack[0].ends_with("passed"), "{text}");
    let json = std::fs::read_to_string(dir.join("r.compare.json")).unwrap();
    assert!(json.contains("\"skein\"") && json.contains("harmonic_mean_teps"), "{json}");
    let _ = std::fs::remove_dir_all(&dir);
}
