//! `skein pagerank` and `skein cc` across MPI ranks (feature `mpi`; needs `mpirun`): each
//! rank builds only its own rows, rank 0 prints and writes, the result is validated on the
//! ranks' slices, and the dumps equal the one-process sequential engine's, byte for byte.

#![cfg(feature = "mpi")]

mod common;
mod launch;

use common::Scratch;
use launch::mpirun;
use std::process::{Command, Output};

fn one_process(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_skein")).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Checks a run across `ranks` ranks: success, one report, validation passed, each rank
/// holding only its own rows, and the dump equal to `want`.
fn check(out: &Output, ranks: usize, got: &std::path::Path, want: &std::path::Path, what: &str) {
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: {text}\n{err}");
    assert_eq!(text.matches("validation:").count(), 1, "{what}: rank 0 prints once: {text}");
    assert!(text.contains("passed"), "{what}: {text}");
    for r in 0..ranks {
        assert!(err.contains(&format!("rank {r}: ")), "{what}: no rows of rank {r}: {err}");
    }
    assert!(err.contains(&format!("across {ranks} ranks")), "{what}: {err}");
    assert_eq!(
        std::fs::read_to_string(got).unwrap(),
        std::fs::read_to_string(want).unwrap(),
        "{what} differs from the sequential engine"
    );
}

#[test]
fn pagerank_and_components_on_2_and_3_ranks_dump_the_sequential_results() {
    let scratch = Scratch::new("pagerank-cc");
    let dir = scratch.dir();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let skg = path("g.skg");
    one_process(&["generate", "--scale", "9", "--output", &skg]);
    for kernel in ["pagerank", "cc"] {
        for graph in ["kron:10", skg.as_str()] {
            let want = dir.join(format!("{kernel}-seq.txt"));
            let args = [kernel, "--engine", "seq", "--repeat", "1", "--dump"];
            one_process(&[&args[..], &[want.to_str().unwrap(), graph]].concat());
            for (ranks, workers) in [(2, "1"), (3, "1"), (2, "2")] {
                let got = dir.join(format!("{kernel}-{ranks}-{workers}.txt"));
                let args = [kernel, "--engine", "skein", "-t", workers, "--repeat", "1", "--dump"];
                let out = mpirun(ranks, &[&args[..], &[got.to_str().unwrap(), graph]].concat());
                check(&out, ranks, &got, &want, &format!("{kernel} {graph} {ranks}x{workers}"));
            }
        }
        // A job file across the ranks, with a JSON report from rank 0.
        let job = dir.join(format!("{kernel}.toml"));
        let got = dir.join(format!("{kernel}-job.txt"));
        let json = dir.join(format!("{kernel}-job.json"));
        std::fs::write(
            &job,
            format!(
                "[graph]\ngenerator = \"kronecker\"\nscale = 10\n[job]\nkernel = \"{kernel}\"\n\
                 engine = \"skein\"\n[runtime]\nworkers = 1\n[report]\njson = {json:?}\n\
                 dump = {got:?}\n"
            ),
        )
        .unwrap();
        let want = dir.join(format!("{kernel}-seq.txt"));
        one_process(&[
            kernel,
            "--engine",
            "seq",
            "--repeat",
            "1",
            "--dump",
            want.to_str().unwrap(),
            "kron:10",
        ]);
        let out = mpirun(2, &["run", job.to_str().unwrap()]);
        check(&out, 2, &got, &want, &format!("{kernel} job file"));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(report["validated"], true, "{report}");
        assert_eq!(report["vertices"], 1024, "{report}");
    }
}

#[test]
fn a_bad_dump_path_is_an_error_on_every_rank() {
    for kernel in ["pagerank", "cc"] {
        let out = mpirun(
            2,
            &[
                kernel,
                "--engine",
                "skein",
                "-t",
                "1",
                "--repeat",
                "1",
                "--dump",
                "/dev/null/x",
                "kron:8",
            ],
        );
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("/dev/null/x"), "{kernel}: {err}");
    }
}
