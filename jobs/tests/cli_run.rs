//! `skein run` and `skein compare` on job files.

mod common;

use common::{s, skein, Scratch};
use std::path::{Path, PathBuf};

/// A job file `name` in `dir` holding `text`.
fn job(dir: &Scratch, name: &str, text: &str) -> PathBuf {
    let p = dir.path(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn run_writes_a_validated_report_with_trustee_stats() {
    let dir = Scratch::new("run");
    let report = dir.path("r.json");
    let j = job(
        &dir,
        "run.toml",
        &format!(
            "[graph]\ngenerator = \"kronecker\"\nscale = 9\n[job]\nkernel = \"sssp\"\nroots = 3\n\
             [runtime]\nworkers = 2\n[report]\njson = \"{}\"\n",
            s(&report)
        ),
    );
    let out = skein(&["run", s(&j)]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("validation:") && stdout.contains("passed"), "{stdout}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["engine"], "skein");
    assert_eq!(r["validated"], true);
    assert_eq!(r["runs"].as_array().unwrap().len(), 3);
    assert_eq!(r["job"]["graph"]["kronecker"]["scale"], 9);
    assert_eq!(r["trustees"]["workers"].as_array().unwrap().len(), 2);
    assert!(r["construction_seconds"].as_f64().unwrap() >= 0.0);
}

#[test]
fn set_overrides_and_bfs_with_every_engine() {
    let dir = Scratch::new("set");
    let j = job(
        &dir,
        "bfs.toml",
        "[graph]\ngenerator = \"kronecker\"\nscale = 8\n[job]\nkernel = \"bfs\"\n",
    );
    for engine in ["seq", "rayon", "skein"] {
        let out = skein(&[
            "run",
            s(&j),
            "--set",
            &format!("job.engine={engine}"),
            "--set",
            "job.roots=2",
        ]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{engine}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(&format!("engine:                         {engine}")), "{stdout}");
        assert!(stdout.contains("bfs  harmonic_mean_TEPS"), "{stdout}");
    }
}

#[test]
fn compare_prints_one_table_and_draws_a_chart() {
    let dir = Scratch::new("compare");
    let chart = dir.path("c.png");
    let j =
        job(&dir, "cmp.toml", "[graph]\ngenerator = \"kronecker\"\nscale = 8\n[job]\nroots = 2\n");
    let out = skein(&["compare", s(&j), "--chart", s(&chart)]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for engine in ["seq", "rayon", "skein"] {
        assert!(stdout.lines().any(|l| l.starts_with(engine) && l.ends_with("passed")), "{stdout}");
    }
    let png = std::fs::read(&chart).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

#[test]
fn bad_job_files_name_file_key_and_line() {
    let dir = Scratch::new("bad");
    let j = job(
        &dir,
        "bad.toml",
        "[graph]\ngenerator = \"kronecker\"\nscale = 8\n[runtime]\nworkers = 0\n",
    );
    let out = skein(&["run", s(&j)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("bad.toml:line 5") && err.contains("runtime.workers"), "{err}");
    let out = skein(&["run", s(&dir.path("missing.toml"))]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read the job file"));
    let j = job(
        &dir,
        "badroot.toml",
        "[graph]\ngenerator = \"kronecker\"\nscale = 4\n[job]\nroots = [99]\n",
    );
    let out = skein(&["run", s(&j)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("job.roots") && err.contains("99"), "{err}");
    let j = job(&dir, "nofile.toml", "[graph]\nfile = \"does-not-exist.wel\"\n");
    let out = skein(&["run", s(&j)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("does-not-exist.wel"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn shipped_jobs_parse() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/");
    for name in ["quick.toml", "sssp-s20.toml", "bfs-s20.toml"] {
        // Run each shipped job at a tiny scale: the file must be valid as shipped.
        let out = skein(&[
            "run",
            &format!("{dir}{name}"),
            "--set",
            "graph.scale=6",
            "--set",
            "job.roots=1",
            "--set",
            "report.json=/dev/null",
        ]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let out = skein(&["run", &format!("{dir}file-sssp.toml"), "--set", "report.json=/dev/null"]);
    assert!(out.status.success(), "file-sssp.toml: {}", String::from_utf8_lossy(&out.stderr));
    for name in ["sssp-s20-rack.toml", "bfs-s20-rack.toml"] {
        let path = format!("{dir}{name}");
        let tiny =
            ["--set", "graph.scale=6", "--set", "job.roots=1", "--set", "report.json=/dev/null"];
        // Outside mpirun: the rank count it asks for is refused, naming the key and the launch.
        let out = skein(&[&["run", path.as_str()][..], &tiny[..]].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} ran on 1 rank");
        assert!(err.contains("runtime.ranks") && err.contains("mpirun"), "{name}: {err}");
        // The rest of the file is valid: with the key overridden it runs here.
        let one = [&["run", path.as_str(), "--set", "runtime.ranks=1"][..], &tiny[..]].concat();
        let out = skein(&one);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn job_files_are_bounded_and_checked_whole() {
    let fails = |args: &[&str], want: &str| {
        let out = skein(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(out.status.code().is_some() && !err.contains("panicked"), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    };
    if Path::new("/dev/zero").exists() {
        // Refused after reading 1 MiB, instead of reading forever.
        fails(&["run", "/dev/zero"], "larger than 1024 KiB");
    }
    let dir = Scratch::new("bounded");
    let base = "[graph]\ngenerator = \"kronecker\"\nscale = 8\n";
    let j = job(&dir, "seeds.toml", &format!("{base}seeds = [7, 8, 9, 10, 11]\n"));
    fails(&["run", s(&j)], "seeds.toml:line 4: key `graph.seeds`: expected two seeds");
    let j = job(&dir, "seeds-x.toml", &format!("{base}seeds = [7, 8, \"x\"]\n"));
    fails(&["run", s(&j)], "seeds-x.toml:line 4: key `graph.seeds`: invalid type");
    let j = job(&dir, "workers.toml", &format!("{base}[runtime]\nworkers = 2000\n"));
    fails(&["run", s(&j)], "workers.toml:line 5: key `runtime.workers`");
    fails(&["run", s(&j)], "GiB, but only");
    let j = job(&dir, "fibers.toml", base);
    fails(&["run", s(&j), "--set", "runtime.fibers=2000000"], "--set runtime.fibers");
    fails(&["compare", s(&j), "--set", "runtime.workers=5000"], "more than 4096");
    // `compare` runs skein too: its limits apply whatever engine the job names.
    fails(
        &["compare", s(&j), "--set", "job.engine=rayon", "--set", "runtime.fibers=1000000"],
        "2 workers with 1000000 fibers each",
    );
    let out = skein(&["run", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("seeds = [2, 3]") && help.contains("bf800000"), "{help}");
}

/// A build without the `mpi` feature started by an MPI launcher as one of several ranks
/// refuses (it would run one independent copy per rank), naming the build command.
#[cfg(not(feature = "mpi"))]
#[test]
fn a_build_without_mpi_refuses_to_run_as_one_of_several_ranks() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_skein"))
        .args(["sssp", "--engine", "seq", "--roots", "1", "kron:6"])
        .env("OMPI_COMM_WORLD_SIZE", "2")
        .env("OMPI_COMM_WORLD_RANK", "1")
        .output()
        .expect("skein runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("built without the `mpi` feature") && err.contains("--features mpi"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}
