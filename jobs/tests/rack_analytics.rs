//! `skein pagerank` and `skein cc` across MPI ranks (feature `mpi`; needs `mpirun`): every
//! rank runs the kernel, rank 0 prints and writes, and the dumps equal the one-process
//! sequential engine's, byte for byte.

#![cfg(feature = "mpi")]

mod launch;

use launch::mpirun;
use std::process::Command;

#[test]
fn pagerank_and_components_on_2_and_3_ranks_dump_the_sequential_results() {
    let dir = std::env::temp_dir().join(format!("skein-rack-analytics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for kernel in ["pagerank", "cc"] {
        let want = dir.join(format!("{kernel}-seq.txt"));
        let seq = Command::new(env!("CARGO_BIN_EXE_skein"))
            .args([kernel, "--engine", "seq", "--repeat", "1", "--dump"])
            .arg(&want)
            .arg("kron:10")
            .output()
            .unwrap();
        assert!(seq.status.success(), "{}", String::from_utf8_lossy(&seq.stderr));
        for ranks in [2, 3] {
            let got = dir.join(format!("{kernel}-{ranks}.txt"));
            let args =
                [kernel, "--engine", "skein", "-t", "1", "--repeat", "1", "--dump", "", "kron:10"];
            let mut args: Vec<&str> = args.to_vec();
            args[8] = got.to_str().unwrap();
            let out = mpirun(ranks, &args);
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{kernel} on {ranks} ranks: {}", text);
            assert_eq!(text.matches("validation:").count(), 1, "rank 0 prints once: {text}");
            assert!(text.contains("passed"), "{text}");
            assert_eq!(
                std::fs::read_to_string(&got).unwrap(),
                std::fs::read_to_string(&want).unwrap(),
                "{kernel} on {ranks} ranks differs from the sequential engine"
            );
        }
    }
}
