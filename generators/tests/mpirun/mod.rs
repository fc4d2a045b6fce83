//! The harness shared by the tests that run on real MPI ranks (feature `mpi`,
//! `harness = false`).
//!
//! Run by `cargo test` without `mpirun`, such a test binary is the *harness*: it re-launches
//! itself under `mpirun -np R` (MPI can be initialised only once per process) with
//! `FLAG CASE`, where every rank runs the named case and prints lines the harness checks.
//! Each launch must exit successfully within [`HARD_LIMIT`], or it is killed and the case
//! fails. Arguments that are not flags filter the cases by name, as with libtest, and the
//! summary line is libtest's.
#![allow(dead_code)]

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The launch line that works as root and on a 2-core machine.
pub(crate) const MPIRUN_FLAGS: [&str; 4] =
    ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none"];

/// How long a launch may take before the harness kills it and fails the case.
pub(crate) const HARD_LIMIT: Duration = Duration::from_secs(60);

/// A named case of the harness side: `Err` holds why it failed.
pub(crate) type Case = (&'static str, fn() -> Result<(), String>);

/// The test binary's `main`: with `flag CASE` on the command line (a rank launched by
/// [`launch`]) exits with `rank_side(CASE)`; otherwise runs `cases` as the harness.
pub(crate) fn main(flag: &str, rank_side: fn(&str) -> i32, cases: &[Case]) {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == flag) {
        let case = args.get(i + 1).cloned().unwrap_or_default();
        std::process::exit(rank_side(&case));
    }
    harness(&args[1..], cases);
}

/// Runs the `cases` selected by the non-flag `args`, prints libtest's lines, and exits
/// with status 101 when one failed.
fn harness(args: &[String], cases: &[Case]) {
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let selected: Vec<&Case> = cases
        .iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect();
    let start = Instant::now();
    println!("\nrunning {} tests", selected.len());
    let mut failures = Vec::new();
    for (name, case) in &selected {
        let t = Instant::now();
        match case() {
            Ok(()) => println!("test {name} ... ok ({:.1}s)", t.elapsed().as_secs_f64()),
            Err(e) => {
                println!("test {name} ... FAILED");
                failures.push((name, e));
            }
        }
    }
    for (name, e) in &failures {
        println!("\n---- {name} ----\n{e}");
    }
    println!(
        "\ntest result: {}. {} passed; {} failed; 0 ignored; 0 measured; {} filtered out; \
         finished in {:.2}s\n",
        if failures.is_empty() { "ok" } else { "FAILED" },
        selected.len() - failures.len(),
        failures.len(),
        cases.len() - selected.len(),
        start.elapsed().as_secs_f64()
    );
    if !failures.is_empty() {
        std::process::exit(101);
    }
}

/// Runs `mpirun -np ranks THIS flag case`; its stdout, or why it failed.
pub(crate) fn launch(ranks: usize, flag: &str, case: &str) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut cmd = Command::new("mpirun");
    cmd.args(MPIRUN_FLAGS).arg("-np").arg(ranks.to_string()).arg(&exe);
    cmd.arg(flag).arg(case);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // Its own process group, so a launch that outlives the deadline is killed whole.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().map_err(|e| format!("cannot start mpirun: {e}"))?;
    let pgid = child.id() as i32;
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(child.stdout.take().expect("piped")));
    let err = read(Box::new(child.stderr.take().expect("piped")));
    let start = Instant::now();
    let mut status = None;
    while start.elapsed() < HARD_LIMIT {
        if let Some(s) = child.try_wait().map_err(|e| format!("waiting for mpirun: {e}"))? {
            status = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if status.is_none() {
        // SAFETY: kill(2) with a negative pid signals the process group of the mpirun we
        // started (its own group, made above); it touches no memory of ours.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = child.wait();
    }
    let (stdout, stderr) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
    let report = format!("status {status:?}\n--- stdout ---\n{stdout}--- stderr ---\n{stderr}");
    match status {
        Some(s) if s.success() => Ok(stdout),
        Some(_) => Err(format!("mpirun failed\n{report}")),
        None => Err(format!("mpirun still running after {HARD_LIMIT:?}; killed\n{report}")),
    }
}
