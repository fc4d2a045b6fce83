//! `skein compare --engines ...,graph500-mpi` and `skein-rack`.
//!
//! * With `GRAPH500_SRC` set (a source tree of the Graph500 reference 3.0.1, see
//!   `jobs/scripts/graph500-reference.sh`), [`real_reference_at_scale_10_with_2_ranks`]
//!   builds and runs the real reference under `mpirun -np 2` at SCALE 10 and checks its
//!   report and the same-inputs (nedge) check. Without it, that test prints that it skipped.
//! * The other tests need no MPI: the wiring (script, parsing, JSON, table, the nedge
//!   check failing loudly) runs against a stand-in tree whose Makefile "builds" a shell
//!   script printing a captured real output (`tests/data/graph500-s10-ef16-np2.txt`), and a
//!   stand-in `mpirun`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const CAPTURED: &str = include_str!("data/graph500-s10-ef16-np2.txt");

fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("skein-graph500-ref-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A SCALE 10 SSSP job with the reference's 64 roots and a JSON report.
fn job(name: &str, extra: &str) -> (PathBuf, PathBuf) {
    let report = tmp(&format!("{name}.json"));
    let j = tmp(&format!("{name}.toml"));
    std::fs::write(
        &j,
        format!(
            "[graph]\ngenerator = \"kronecker\"\nscale = 10\nedgefactor = 16\n{extra}\
             [job]\nkernel = \"sssp\"\nroots = 64\n[runtime]\nworkers = 2\n\
             [report]\njson = \"{}\"\n",
            s(&report)
        ),
    )
    .unwrap();
    (j, report.with_extension("compare.json"))
}

fn skein(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_skein"));
    // A stable cache, so that reruns reuse the reference's build.
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("graph500-cache");
    cmd.args(args).env("SKEIN_CACHE", s(&cache));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("skein runs")
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

fn have(tool: &str) -> bool {
    Command::new("bash")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A stand-in reference tree whose binary prints `output`, and a stand-in `mpirun` that
/// runs the binary once (as rank 0). Returns (GRAPH500_SRC, MPIRUN).
fn stand_in(name: &str, output: &str) -> (PathBuf, PathBuf) {
    let root = tmp(name);
    for d in ["src", "generator", "aml"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(root.join("src/main.c"), "/* stand-in */\n").unwrap();
    std::fs::write(root.join("generator/make_graph.c"), "/* stand-in */\n").unwrap();
    std::fs::write(root.join("aml/aml.c"), "/* stand-in */\n").unwrap();
    std::fs::write(root.join("src/output.txt"), output).unwrap();
    std::fs::write(
        root.join("src/Makefile"),
        "graph500_reference_bfs_sssp:\n\tprintf '#!/bin/sh\\ncat \"$$(dirname \"$$0\")/output.txt\"\\n' \
         > $@ && chmod +x $@\n",
    )
    .unwrap();
    let mpirun = root.join("mpirun");
    std::fs::write(
        &mpirun,
        "#!/bin/sh\n[ \"$1\" = --version ] && { echo stand-in; exit 0; }\n\
         while [ \"$1\" != -np ]; do shift; done\nshift 2\nexec \"$@\"\n",
    )
    .unwrap();
    Command::new("chmod").arg("+x").arg(&mpirun).status().unwrap();
    (root, mpirun)
}

#[test]
fn skein_rack_runs_only_under_compare_in_an_mpi_build() {
    let (j, _) = job("rack", "");
    if !cfg!(feature = "mpi") {
        let out = skein(&["compare", s(&j), "--engines", "seq,skein-rack", "--ranks", "2"], &[]);
        let (_, err) = text(&out);
        assert!(!out.status.success());
        assert!(err.contains("skein-rack") && err.contains("--features mpi"), "{err}");
    }
    // `skein run` refuses it, and graph500-mpi outside `compare`.
    let out = skein(&["run", s(&j), "--set", "job.engine=skein-rack"], &[]);
    assert!(text(&out).1.contains("runs only under `skein compare`"), "{}", text(&out).1);
    let out = skein(&["run", s(&j), "--set", "job.engine=graph500-mpi"], &[]);
    assert!(text(&out).1.contains("runs only under `skein compare`"), "{}", text(&out).1);
}

#[test]
fn graph500_mpi_refuses_inputs_the_reference_cannot_run() {
    let (j, _) = job("refuse", "");
    let cases = [
        (
            vec!["--set", "job.roots=16"],
            "runs the reference's 64 Graph500 roots, the job asks for 16",
        ),
        (vec!["--set", "graph.seeds=[5, 7]"], "always uses the Graph500 seeds [2, 3]"),
    ];
    for (set, expect) in cases {
        let mut args = vec!["compare", s(&j), "--engines", "graph500-mpi"];
        args.extend(set);
        let out = skein(&args, &[]);
        let (_, err) = text(&out);
        assert!(!out.status.success() && err.contains(expect), "{err}");
        assert!(err.contains("graph500-mpi"), "{err}");
    }
    let out = skein(&["compare", s(&j), "--engines", "seq,graph500-mpi", "--ranks", "3"], &[]);
    let (_, err) = text(&out);
    assert!(
        !out.status.success() && err.contains("--ranks 3") && err.contains("power of two"),
        "{err}"
    );
    let file = tmp("g.el");
    std::fs::write(&file, "0 1\n1 2\n").unwrap();
    let fj = tmp("file.toml");
    std::fs::write(&fj, format!("[graph]\nfile = \"{}\"\n[job]\nroots = 64\n", s(&file))).unwrap();
    let out = skein(&["compare", s(&fj), "--engines", "graph500-mpi"], &[]);
    let (_, err) = text(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("graph500-mpi engine") && err.contains("g.el"), "{err}");
}

#[test]
fn stand_in_reference_goes_into_the_table_and_json() {
    if !have("make") {
        eprintln!("skipped: no `make`");
        return;
    }
    let (src, mpirun) = stand_in("same", CAPTURED);
    let (j, json) = job("same", "");
    let out = skein(
        &["compare", s(&j), "--engines", "seq,graph500-mpi", "--ranks", "2"],
        &[("GRAPH500_SRC", s(&src)), ("MPIRUN", s(&mpirun)), ("MPICC", "true")],
    );
    let (stdout, err) = text(&out);
    assert!(out.status.success(), "{err}");
    let row = stdout.lines().find(|l| l.starts_with("graph500-mpi")).expect(&stdout);
    assert!(row.contains("2r") && row.contains("6.75"), "{row}");
    assert!(row.contains("same nedge as Skein"), "{row}");
    // The script's notes are printed as they come (the first build, then the mpirun line).
    assert!(err.contains("graph500-reference: running"), "{err}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let engines = r["engines"].as_array().unwrap();
    assert_eq!(engines.len(), 2);
    assert_eq!(engines[1]["engine"], "graph500-mpi");
    assert_eq!(engines[1]["ranks"], 2);
    assert_eq!(engines[1]["harmonic_mean_teps"], 6.74598e+06);
    assert_eq!(engines[1]["same_inputs_check"], "passed");
    assert_eq!(engines[1]["nedge"]["min"], 16239.0);
    // The chart beside the JSON: `same.compare.png`.
    assert!(json.with_extension("png").exists());
}

#[test]
fn different_nedge_fails_loudly_naming_both_figures() {
    if !have("make") {
        eprintln!("skipped: no `make`");
        return;
    }
    let wrong = CAPTURED
        .replace("firstquartile_nedge:            16239", "firstquartile_nedge:            16200");
    assert_ne!(wrong, CAPTURED);
    let (src, mpirun) = stand_in("wrong", &wrong);
    let (j, json) = job("wrong", "");
    let out = skein(
        &["compare", s(&j), "--engines", "graph500-mpi", "--ranks", "2"],
        &[("GRAPH500_SRC", s(&src)), ("MPIRUN", s(&mpirun)), ("MPICC", "true")],
    );
    let (stdout, err) = text(&out);
    assert!(!out.status.success(), "{stdout}");
    assert!(err.contains("firstquartile_nedge is 16200") && err.contains("is 16239"), "{err}");
    assert!(stdout.contains("SAME-INPUTS CHECK FAILED"), "{stdout}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(r["engines"][0]["same_inputs_check"].as_str().unwrap().starts_with("FAILED"));
}

#[test]
fn real_reference_at_scale_10_with_2_ranks() {
    let Some(src) = std::env::var_os("GRAPH500_SRC") else {
        eprintln!("skipped: GRAPH500_SRC is not set (a Graph500 reference 3.0.1 source tree)");
        return;
    };
    // With the `mpi` feature, Skein's kernel across the same 2 ranks runs in the same table.
    let engines =
        if cfg!(feature = "mpi") { "seq,skein-rack,graph500-mpi" } else { "seq,graph500-mpi" };
    for kernel in ["sssp", "bfs"] {
        let (j, json) = job(&format!("real-{kernel}"), "");
        let set = format!("job.kernel={kernel}");
        let out = skein(
            &["compare", s(&j), "--set", &set, "--engines", engines, "--ranks", "2"],
            &[("GRAPH500_SRC", src.to_str().unwrap())],
        );
        let (stdout, err) = text(&out);
        assert!(out.status.success(), "{stdout}\n{err}");
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let by_name = |name: &str| {
            r["engines"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["engine"] == name)
                .unwrap_or_else(|| panic!("no {name} in {r}"))
                .clone()
        };
        if cfg!(feature = "mpi") {
            let rack = by_name("skein-rack");
            assert_eq!(rack["ranks"], 2);
            assert_eq!(rack["validation"], "passed", "{rack}");
            assert_eq!(rack["runs"].as_array().unwrap().len(), 64, "{rack}");
            // The same inputs as the reference: every root's TEPS edge count.
            for run in rack["runs"].as_array().unwrap() {
                assert_eq!(run["nedge"], 16239, "{run}");
            }
            assert!(stdout.lines().any(|l| l.starts_with("skein-rack") && l.contains("2r")));
        }
        let g = by_name("graph500-mpi");
        assert_eq!(g["engine"], "graph500-mpi");
        assert_eq!(g["kernel"], kernel);
        assert_eq!(g["ranks"], 2);
        assert_eq!(g["validation"], "passed");
        assert_eq!(g["same_inputs_check"], "passed");
        // testdata/graph500/README.md: every SCALE 10 root reaches 16 239 TEPS edges.
        assert_eq!(g["nedge"]["min"], 16239.0);
        assert_eq!(g["nedge"]["max"], 16239.0);
        assert_eq!(g["graph"]["scale"], 10);
        assert!(g["harmonic_mean_teps"].as_f64().unwrap() > 0.0);
        assert!(g["time"]["median"].as_f64().unwrap() > 0.0);
        assert!(g["construction_seconds"].as_f64().unwrap() > 0.0);
        assert!(stdout.lines().any(|l| l.starts_with("graph500-mpi") && l.contains("2r")));
    }
}

/// The script stops at its first error (a `die` inside a command substitution used to end
/// only that subshell: `cp: cannot stat '/src'` and a make failure followed), and `compare`
/// checks every engine's prerequisites, and the chart's path, before it runs any engine.
#[test]
fn prerequisites_are_checked_before_any_engine_runs() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/graph500-reference.sh");
    let missing = tmp("no-such-tree");
    let cache = tmp("script-cache");
    for args in [&["build"][..], &["run", "4", "16", "1"][..]] {
        let out = Command::new("bash")
            .arg(script)
            .args(args)
            .env("GRAPH500_SRC", s(&missing))
            .env("SKEIN_CACHE", s(&cache))
            .output()
            .expect("bash runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains("is not a folder"), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: more than the first error: {err}");
    }
    let (j, _) = job("prereq", "");
    let out = skein(
        &["compare", s(&j), "--engines", "seq,graph500-mpi"],
        &[("GRAPH500_SRC", s(&missing))],
    );
    let (_, err) = text(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("building the Graph500 reference failed"), "{err}");
    assert!(err.contains("is not a folder") && !err.contains("running"), "{err}");
    let chart = tmp("chart.txt");
    let out = skein(&["compare", s(&j), "--engines", "seq", "--chart", s(&chart)], &[]);
    let (_, err) = text(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("--chart") && err.contains(".png") && !err.contains("running"), "{err}");
    assert!(!chart.exists());
}
