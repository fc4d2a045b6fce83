//! A stuck run explains itself (`runtime/stall.rs`): after `SKEIN_STALL_SECS` with no task
//! started or finished, or on `SIGQUIT`, every worker prints its fibers and what each waits
//! on, and the run's outcome does not change.
//!
//! Each test re-runs this binary as a child (`SKEIN_STALL_CHILD` set, the one test selected)
//! and reads the child's stderr: the dump goes to the real stderr, which only another process
//! can read. The child's run gets stuck on purpose: a fiber holds a latch and yields until the
//! process has printed a whole dump ([`skein::stall_dumps`]), while a second fiber waits for
//! the latch. Without dumps the child would never finish: the parent kills it at a deadline
//! and fails.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a child may take (it needs about one stall limit, 1 s, when dumps work).
const DEADLINE: Duration = Duration::from_secs(60);

/// Set by the fiber that holds the latch, once it does.
static HELD: AtomicBool = AtomicBool::new(false);

/// The stuck job: the latch lives on worker `on`; a fiber holds it until this process has
/// printed a dump, and `main` waits for it meanwhile (a launch: it joins the fiber that waits
/// for the latch). Returns what the latch holds at the end (1).
fn stuck_job(on: usize) -> u32 {
    let l = skein::trustee(on).entrust_new((), |()| skein::Latch::new(0u32));
    let holder = l.clone();
    let h = skein::spawn_local_on(0, move || {
        holder.launch((), |_, ()| {
            HELD.store(true, Ordering::Release);
            println!("HOLDING");
            while skein::stall_dumps() == 0 {
                skein::yield_now();
            }
        })
    });
    while !HELD.load(Ordering::Acquire) {
        skein::yield_now();
    }
    // Waits for the latch, which the holder opens only after a dump.
    let v = l.launch((), |x, ()| {
        *x += 1;
        *x
    });
    h.join();
    v
}

/// The child side: runs the stuck job on `workers` workers split into `ranks` fake ranks.
fn child(ranks: usize) {
    let rt = skein::Runtime::builder().workers(2).loopback_ranks(ranks).build().expect("build");
    let r = rt.run(|| stuck_job(1));
    println!("RESULT {r:?}");
}

/// How the child is asked for its dump.
#[derive(Clone, Copy, PartialEq)]
enum Quit {
    /// Not by a signal (the stall limit).
    No,
    /// `SIGQUIT` once it holds the latch.
    Signal,
    /// `SIGQUIT`, to a child that inherited the signal ignored (a background job of a
    /// non-interactive shell).
    SignalIgnored,
}

/// Runs `test` in a child with `env`, optionally sending it `SIGQUIT` once it holds the latch;
/// returns its stdout and stderr.
fn run_child(test: &str, env: &[(&str, &str)], quit: Quit) -> (String, String) {
    let mut cmd = Command::new(std::env::current_exe().expect("own path"));
    if quit == Quit::SignalIgnored {
        // SAFETY: between fork and exec the closure calls only `signal`, which is
        // async-signal-safe, and allocates nothing.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                libc::signal(libc::SIGQUIT, libc::SIG_IGN);
                Ok(())
            });
        }
    }
    let quit = quit != Quit::No;
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("SKEIN_STALL_CHILD", "1")
        .env_remove("SKEIN_LOOPBACK_RANKS")
        .env_remove("SKEIN_STALL_SECS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut c = cmd.spawn().expect("start the child");
    let pid = c.id();
    let stdout = c.stdout.take().expect("stdout");
    let mut stderr = c.stderr.take().expect("stderr");
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let out = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if quit && line.ends_with("HOLDING") {
                let ok = Command::new("kill").args(["-QUIT", &pid.to_string()]).status();
                assert!(ok.is_ok_and(|s| s.success()), "kill -QUIT {pid}");
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let start = Instant::now();
    loop {
        if c.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > DEADLINE {
            let _ = c.kill();
            let _ = c.wait();
            let (o, e) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
            panic!("the stuck child never finished (no dump?)\nstdout:\n{o}\nstderr:\n{e}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (out.join().unwrap_or_default(), err.join().unwrap_or_default())
}

fn is_child() -> bool {
    std::env::var_os("SKEIN_STALL_CHILD").is_some()
}

/// The checks every dump of the stuck job passes.
fn check_dump(out: &str, err: &str) {
    let ctx = format!("stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("RESULT Ok(1)"), "the run's outcome is unchanged\n{ctx}");
    assert!(err.contains("skein dump ["), "a dump header\n{ctx}");
    assert!(err.contains("worker 1]"), "worker 1's section\n{ctx}");
    assert!(err.contains("waits for a latch (Latch::lock"), "the latch wait is named\n{ctx}");
    assert!(
        err.contains("waits for a join: the end of a fiber or launch on worker 1 (rank "),
        "the joins are named, with the worker they wait on\n{ctx}"
    );
    assert!(err.contains("ready to run"), "the holder is ready (it yields)\n{ctx}");
}

#[test]
fn a_fiber_stuck_on_a_latch_is_named_after_the_stall_limit() {
    if is_child() {
        return child(1);
    }
    let (out, err) = run_child(
        "a_fiber_stuck_on_a_latch_is_named_after_the_stall_limit",
        &[("SKEIN_STALL_SECS", "1")],
        Quit::No,
    );
    check_dump(&out, &err);
    assert!(err.contains("no task started or finished for"), "the reason\n{err}");
}

#[test]
fn a_fiber_stuck_on_a_latch_across_2_fake_ranks_is_named() {
    if is_child() {
        return child(2);
    }
    let (out, err) = run_child(
        "a_fiber_stuck_on_a_latch_across_2_fake_ranks_is_named",
        &[("SKEIN_STALL_SECS", "1")],
        Quit::No,
    );
    check_dump(&out, &err);
    // The latch is on worker 1, fake rank 1: its section, and the ranks' lines.
    assert!(err.contains("[rank 1 worker 1]"), "rank 1's worker\n{err}");
    assert!(err.contains("2 fake ranks"), "the split is named\n{err}");
    assert!(err.contains("quiescence across ranks:"), "the detector's state\n{err}");
}

#[test]
fn sigquit_asks_for_a_dump_without_a_stall_limit() {
    if is_child() {
        return child(1);
    }
    let (out, err) = run_child(
        "sigquit_asks_for_a_dump_without_a_stall_limit",
        &[("SKEIN_STALL_SECS", "0")],
        Quit::Signal,
    );
    check_dump(&out, &err);
    assert!(err.contains("]: SIGQUIT"), "the reason\n{err}");
}

#[test]
fn sigquit_asks_for_a_dump_when_inherited_ignored() {
    if is_child() {
        return child(1);
    }
    let (out, err) = run_child(
        "sigquit_asks_for_a_dump_when_inherited_ignored",
        &[("SKEIN_STALL_SECS", "0")],
        Quit::SignalIgnored,
    );
    check_dump(&out, &err);
    assert!(err.contains("]: SIGQUIT"), "the reason\n{err}");
}

#[test]
fn a_bad_stall_setting_is_refused() {
    if is_child() {
        let e = skein::Runtime::builder().workers(1).build().expect_err("a bad value");
        println!("RESULT {e}");
        return;
    }
    let (out, _) =
        run_child("a_bad_stall_setting_is_refused", &[("SKEIN_STALL_SECS", "soon")], Quit::No);
    assert!(out.contains("SKEIN_STALL_SECS must be a number of seconds"), "{out}");
}
