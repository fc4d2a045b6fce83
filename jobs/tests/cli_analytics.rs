//! `skein pagerank`, `skein cc` and job files with those kernels, end to end: every engine
//! validates, the dumps of every engine (and of a loopback split) are identical, and what is
//! not supported yet (`skein compare`) says so.

use std::path::PathBuf;
use std::process::{Command, Output};

fn skein(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_skein"));
    c.args(args).env("SKEIN_PROGRESS", "0");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run skein")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = skein(args, env);
    assert!(
        out.status.success(),
        "skein {args:?} failed\nstdout:\n{}\nstderr:\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("skein-cli-analytics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn every_engine_validates_and_dumps_the_same_result() {
    for kernel in ["pagerank", "cc"] {
        let mut dumps = Vec::new();
        let runs: [(&str, &[(&str, &str)]); 4] = [
            ("seq", &[]),
            ("rayon", &[]),
            ("skein", &[]),
            ("skein", &[("SKEIN_LOOPBACK_RANKS", "2")]),
        ];
        for (i, (engine, env)) in runs.iter().enumerate() {
            let dump = tmp(&format!("{kernel}-{i}.txt"));
            let json = tmp(&format!("{kernel}-{i}.json"));
            let out = ok(
                &[
                    kernel,
                    "--engine",
                    engine,
                    "-t",
                    "2",
                    "--repeat",
                    "1",
                    "--dump",
                    dump.to_str().unwrap(),
                    "--json",
                    json.to_str().unwrap(),
                    "kron:10",
                ],
                env,
            );
            assert!(out.contains("validation:") && out.contains("passed"), "{out}");
            let report: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            assert_eq!(report["kernel"], kernel);
            assert_eq!(report["validated"], true);
            let text = std::fs::read_to_string(&dump).unwrap();
            assert_eq!(text.lines().count(), 1024);
            dumps.push(text);
        }
        assert!(dumps.windows(2).all(|w| w[0] == w[1]), "{kernel}: the engines' dumps differ");
    }
}

#[test]
fn job_files_run_the_kernels_and_compare_refuses_them() {
    let job = tmp("pagerank.toml");
    std::fs::write(
        &job,
        "[graph]\ngenerator = \"kronecker\"\nscale = 9\n[job]\nkernel = \"pagerank\"\nengine = \"skein\"\niterations = 5\n\
         tolerance = 0.0\n[runtime]\nworkers = 2\n",
    )
    .unwrap();
    let out = ok(&["run", job.to_str().unwrap()], &[]);
    assert!(out.contains("iterations:") && out.contains("5 (last"), "{out}");
    let out = ok(&["run", job.to_str().unwrap(), "--set", "job.kernel=cc"], &[]);
    assert!(out.contains("passed"), "{out}");
    let cmp = skein(&["compare", job.to_str().unwrap()], &[]);
    assert!(!cmp.status.success());
    let e = text(&cmp.stderr);
    assert!(e.contains("not yet supported for pagerank"), "{e}");
    std::fs::write(&job, "[graph]\ngenerator = \"kronecker\"\nscale = 9\n[job]\nkernel = \"pagerank\"\niterations = 0\n")
        .unwrap();
    let bad = skein(&["run", job.to_str().unwrap()], &[]);
    assert!(!bad.status.success());
    assert!(text(&bad.stderr).contains("job.iterations"), "{}", text(&bad.stderr));
}
