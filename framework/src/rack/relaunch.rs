//! For unit tests of rack code: re-launching this unit-test binary under `mpirun`.
//!
//! MPI initialises once per process, so a unit test that needs several ranks starts
//! `mpirun -np N` on its own executable, asking every rank to run one `#[ignore]`d
//! *rank side* test, which does its part only when an environment variable says so (so that
//! `cargo test -- --ignored` outside `mpirun` does nothing). Launches are serialised (one
//! `mpirun` at a time from this binary), and a launch that outlives its limit is killed whole
//! (its own process group) and reported, never left hanging.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ONE_LAUNCH_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs the test `rank_side` (its full path in this binary) on `np` ranks of this binary
/// under `mpirun`, with `env` set in every rank. Returns the ranks' stdout when every rank
/// exited 0, else a report with the status, stdout and stderr.
pub(crate) fn mpirun_self(
    np: usize,
    rank_side: &str,
    env: (&str, &str),
    limit: Duration,
) -> Result<String, String> {
    let _one = ONE_LAUNCH_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let exe = std::env::current_exe().expect("own executable");
    let mut cmd = Command::new("mpirun");
    cmd.args(["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np"])
        .arg(np.to_string())
        .arg(exe)
        .args(["--ignored", "--exact", rank_side, "--nocapture", "--test-threads", "1"])
        .env(env.0, env.1)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group, so that a launch that hangs is killed whole.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().unwrap_or_else(|e| {
        panic!("cannot start mpirun ({e}); install Open MPI with scripts/install-mpi.sh")
    });
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
    let status = loop {
        if let Some(s) = child.try_wait().expect("waiting for mpirun") {
            break Some(s);
        }
        if start.elapsed() > limit {
            // SAFETY: kill(2) with a negative pid signals the process group of the mpirun
            // started above (its own group); it touches no memory of ours.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (out, err) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
    if status.is_some_and(|s| s.success()) {
        Ok(out)
    } else {
        Err(format!(
            "mpirun -np {np} ({rank_side}, {}={}): status {status:?} (None: killed after \
             {limit:?})\n--- stdout\n{out}--- stderr\n{err}",
            env.0, env.1
        ))
    }
}
