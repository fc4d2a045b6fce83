//! `skein pagerank`, `skein cc` and job files with those kernels, end to end: every engine
//! validates, the dumps of every engine (and of a loopback split) are identical, `skein
//! compare` runs them with every one-process engine, and what is not supported (the MPI
//! engines in `skein compare`) says so.

mod common;

use common::{ok_env as ok, skein_env as skein, text, Scratch};

#[test]
fn every_engine_validates_and_dumps_the_same_result() {
    let dir = Scratch::new("engines");
    for kernel in ["pagerank", "cc"] {
        let mut dumps = Vec::new();
        let runs: [(&str, &[(&str, &str)]); 4] = [
            ("seq", &[]),
            ("rayon", &[]),
            ("skein", &[]),
            ("skein", &[("SKEIN_LOOPBACK_RANKS", "2")]),
        ];
        for (i, (engine, env)) in runs.iter().enumerate() {
            let dump = dir.path(&format!("{kernel}-{i}.txt"));
            let json = dir.path(&format!("{kernel}-{i}.json"));
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
fn job_files_run_the_kernels() {
    let dir = Scratch::new("job-files");
    let job = dir.path("pagerank.toml");
    std::fs::write(
        &job,
        "[graph]\ngenerator = \"kronecker\"\nscale = 9\n[job]\nkernel = \"pagerank\"\nengine = \"skein\"\niterations = 5\n\
         tolerance = 0.0\n[runtime]\nworkers = 2\n",
    )
    .unwrap();
    let out = ok(&["run", job.to_str().unwrap()], &[]);
    assert!(out.contains("iterations:") && out.contains("5 (last"), "{out}");
    // With a JSON report, `skein run` says where it went, as for the searches' jobs.
    let json = dir.path("pagerank.json");
    let report = format!("--set=report.json={}", json.to_str().unwrap());
    let o = skein(&["run", job.to_str().unwrap(), &report], &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let e = text(&o.stderr);
    assert!(e.contains(&format!("report written to {}", json.display())), "{e}");
    assert!(json.exists());
    let out = ok(&["run", job.to_str().unwrap(), "--set", "job.kernel=cc"], &[]);
    assert!(out.contains("passed"), "{out}");
    std::fs::write(&job, "[graph]\ngenerator = \"kronecker\"\nscale = 9\n[job]\nkernel = \"pagerank\"\niterations = 0\n")
        .unwrap();
    let bad = skein(&["run", job.to_str().unwrap()], &[]);
    assert!(!bad.status.success());
    assert!(text(&bad.stderr).contains("job.iterations"), "{}", text(&bad.stderr));
}

#[test]
fn compare_runs_the_kernels_with_every_one_process_engine() {
    let dir = Scratch::new("compare");
    let job = dir.path("compare.toml");
    let json = dir.path("compare.json");
    std::fs::write(
        &job,
        format!(
            "[graph]\ngenerator = \"kronecker\"\nscale = 10\n[job]\nkernel = \"pagerank\"\n\
             iterations = 5\ntolerance = 0.0\n[runtime]\nworkers = 2\n[report]\njson = {:?}\n",
            json.to_str().unwrap()
        ),
    )
    .unwrap();
    for kernel in ["pagerank", "cc"] {
        let chart = dir.path(&format!("compare-{kernel}.png"));
        let out = ok(
            &[
                "compare",
                job.to_str().unwrap(),
                "--set",
                &format!("job.kernel={kernel}"),
                "--chart",
                chart.to_str().unwrap(),
            ],
            &[],
        );
        assert!(out.starts_with(&format!("{kernel} on kron:10")), "{out}");
        assert!(out.contains("hmean Marcs/s") && out.contains("vs seq"), "{out}");
        for engine in ["seq", "rayon", "skein"] {
            assert!(
                out.lines().any(|l| l.starts_with(engine) && l.contains("x  passed")),
                "{kernel}, {engine}: {out}"
            );
        }
        assert!(out.lines().any(|l| l.starts_with("seq") && l.contains(" 1.00x ")), "{out}");
        let png = std::fs::read(&chart).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let report: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(json.with_extension("compare.json")).unwrap(),
        )
        .unwrap();
        let engines = report["engines"].as_array().unwrap();
        assert_eq!(engines.len(), 3);
        for e in engines {
            assert_eq!(e["kernel"], kernel);
            assert_eq!(e["validated"], true);
        }
    }
    // The Graph500 reference refuses these kernels before building the graph, saying why.
    let g500 = skein(&["compare", job.to_str().unwrap(), "--engines", "seq,graph500-mpi"], &[]);
    assert!(!g500.status.success());
    let e = text(&g500.stderr);
    assert!(e.contains("graph500-mpi cannot run pagerank") && e.contains("no PageRank"), "{e}");
    // skein-rack runs them under mpirun (`tests/rack_run.rs`); without MPI it says how to
    // build it.
    if !cfg!(feature = "mpi") {
        let rack = skein(
            &[
                "compare",
                job.to_str().unwrap(),
                "--set",
                "job.kernel=cc",
                "--engines",
                "skein-rack",
            ],
            &[],
        );
        assert!(!rack.status.success());
        let e = text(&rack.stderr);
        assert!(e.contains("skein-rack: this skein is built without MPI"), "{e}");
    }
}
