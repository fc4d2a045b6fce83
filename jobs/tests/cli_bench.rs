//! `skein bench`, run as a user would run it (tiny sizes: these check behaviour, not speed).

use std::process::{Command, Output};

fn skein(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skein")).args(args).output().expect("running skein")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn fetch_add_writes_one_row_per_measurement() {
    let dir = std::env::temp_dir().join(format!("skein-cli-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("fa.json");
    let o = skein(&[
        "bench",
        "fetch-add",
        "--ops",
        "3000",
        "--objects",
        "1,16,5000",
        "--dist",
        "both",
        "--prefetch",
        "4",
        "--stats",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("apply_then/best-lock") && out.contains("array/best-lock"), "{out}");
    assert!(out.contains("[apply_then K=16] worker 1: served"), "{out}");
    assert!(out.contains("[array K=5000] worker 0: served"), "{out}");
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(rows.len(), 3 * 2 * 6, "3 K x 2 distributions x 6 implementations");
    let array_rows = rows.iter().filter(|r| r["impl"] == "array").count();
    assert_eq!(array_rows, 3 * 2, "{rows:?}");
    for r in &rows {
        assert!(r["mops"].as_f64().unwrap() > 0.0, "{r}");
        assert!(["uniform", "zipf"].contains(&r["dist"].as_str().unwrap()), "{r}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fetch_add_refuses_bad_arguments() {
    for (args, want) in [
        (&["--objects", "0"][..], "--objects: every K must be in"),
        (&["--impls", "apply,rwlock"][..], "unknown implementation `rwlock`"),
        (&["--dist", "normal"][..], "expected uniform, zipf or both"),
        (&["--workers", "0"][..], "--workers: must be at least 1"),
        // Every count is bounded by what the machine can hold, with the reason.
        (&["--workers", "5000"][..], "--workers: 5000 is more than 4096"),
        (&["--objects", "4294967295"][..], "GiB, but only"),
        (&["--fibers", "2000000"][..], "--fibers: 2000000 is more than"),
        (&["--workers", "64", "--slot-size", "16777216"][..], "GiB, but only"),
        (&["--slot-size", "100"][..], "--slot-size: 100 is outside"),
        (&["--fibers", "1000000"][..], "2 workers with 1000001 fibers each"),
        (&["--repeat", "0"][..], "--repeat: must be at least 1"),
        (&["--repeat", "1000000"][..], "--repeat: 1000000 is more than 10000"),
        (&["--prefetch", "11"][..], "--prefetch: 11 is more than --ops 10"),
    ] {
        let mut a = vec!["bench", "fetch-add", "--ops", "10"];
        a.extend_from_slice(args);
        let o = skein(&a);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
        assert!(!text(&o).contains("panicked"), "{args:?}: {}", text(&o));
    }
    let o = skein(&["bench", "fetch-add", "--ops", "0"]);
    assert!(!o.status.success() && text(&o).contains("--ops: must be at least 1"), "{}", text(&o));
    for (args, want) in [
        (&["--iters", "0"][..], "--iters: must be at least 1"),
        (&["--iters", "18446744073709551615"][..], "--iters: 18446744073709551615 is more than"),
        (&["--slot-size", "1"][..], "--slot-size: slot size 1 is outside"),
    ] {
        let mut a = vec!["bench", "micro"];
        a.extend_from_slice(args);
        let o = skein(&a);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
    }
}
