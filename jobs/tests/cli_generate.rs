//! `skein generate`, `skein convert` and `skein info`, run as a user would run them.

mod common;

use common::Scratch;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use skein_generators::formats::{read_edges, Format};
use skein_generators::kronecker::{self, KroneckerParams};

/// The Graph500 reference's SCALE 8 facts (`summary_by_scale.txt`).
const S8_FNV: &str = "c11f498169319a6b";
const S8_SELFLOOPS: &str = "85";
const S8_NONISOLATED: &str = "241";

fn skein(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skein"))
        .args(args)
        .env_remove("SKEIN_PROGRESS")
        .output()
        .expect("run skein")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `skein` expecting success; returns (stdout, stderr).
fn ok(args: &[&str]) -> (String, String) {
    let out = skein(args);
    let (o, e) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "skein {args:?} failed:\n{e}");
    (o, e)
}

/// Runs `skein` expecting failure; returns stderr, checked to be a clean error.
fn fails(args: &[&str]) -> String {
    let out = skein(args);
    let e = text(&out.stderr);
    assert!(!out.status.success(), "skein {args:?} succeeded:\n{}", text(&out.stdout));
    assert_ne!(out.status.code(), None, "killed by a signal");
    assert!(!e.contains("panicked"), "skein {args:?} panicked:\n{e}");
    e
}

/// The value of `key` in `skein info` output.
fn field<'a>(info: &'a str, key: &str) -> &'a str {
    info.lines()
        .find_map(|l| l.strip_prefix(key).filter(|r| r.starts_with(' ')))
        .unwrap_or_else(|| panic!("no `{key}` in:\n{info}"))
        .trim()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn every_format_reproduces_the_reference_graph() {
    let dir = Scratch::new("formats");
    let reference = kronecker::generate(&KroneckerParams::new(8, 16, 2, 3).unwrap());
    for format in ["bin", "el", "wel", "mtx"] {
        let out = dir.path(&format!("s8.{format}"));
        let (_, err) = ok(&["generate", "--scale", "8", "--format", format, "-o", p(&out)]);
        assert!(err.contains("4096 edges"), "{err}");
        assert!(err.contains("edges/s"), "{err}");
        // Progress bars stay off when stderr is not a terminal.
        assert!(!err.contains('\r') && !err.contains('\u{1b}'), "{err:?}");

        let (info, _) = ok(&["info", p(&out)]);
        assert_eq!(field(&info, "vertices"), "256");
        assert_eq!(field(&info, "edges"), "4096");
        assert_eq!(field(&info, "self-loops"), S8_SELFLOOPS);
        assert_eq!(field(&info, "non-isolated"), S8_NONISOLATED);
        assert!(field(&info, "degree").starts_with("min 0 median "), "{info}");

        let back = read_edges(&out).unwrap();
        assert_eq!((&back.src, &back.dst), (&reference.src, &reference.dst));
        if format == "el" {
            assert_eq!(back.weights, None);
            assert_ne!(field(&info, "fnv1a64"), S8_FNV); // hashed with weight 1.0
        } else {
            assert_eq!(back, reference, "{format}");
            assert_eq!(field(&info, "fnv1a64"), S8_FNV, "{format}");
        }
    }
}

#[test]
fn wel_is_raw_edges_in_generator_order_with_comments_on_top() {
    let dir = Scratch::new("wel");
    let out = dir.path("g.wel");
    ok(&["generate", "-s", "4", "-e", "4", "--seed", "7,9", "-o", p(&out)]);
    let body = fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = body.lines().collect();
    let first = lines.iter().position(|l| !l.starts_with('#')).unwrap();
    assert!(lines[..first].contains(&"# vertices 16"));
    assert!(lines[..first].contains(&"# edges 64"));
    let reference = kronecker::generate(&KroneckerParams::new(4, 4, 7, 9).unwrap());
    assert_eq!(lines.len() - first, 64);
    for (k, line) in lines[first..].iter().enumerate() {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 3, "{line}");
        assert_eq!(f[0].parse::<u64>().unwrap(), reference.src[k]);
        assert_eq!(f[1].parse::<u64>().unwrap(), reference.dst[k]);
        assert_eq!(f[2].parse::<f32>().unwrap().to_bits(), reference.weight(k).to_bits());
    }
}

#[test]
fn format_defaults_to_extension_then_binary() {
    let dir = Scratch::new("default");
    let named = dir.path("g.mtx");
    ok(&["generate", "--scale", "3", "-o", p(&named)]);
    assert!(fs::read_to_string(&named).unwrap().starts_with("%%MatrixMarket"));
    let bare = dir.path("graph");
    ok(&["generate", "--scale", "3", "-o", p(&bare)]);
    let (info, _) = ok(&["info", p(&bare)]);
    assert_eq!(field(&info, "format"), Format::Binary.to_string());
    let e = fails(&["generate", "--scale", "3", "--format", "el", "-o", p(&named)]);
    assert!(e.contains("--format el contradicts the extension"), "{e}");
}

#[test]
fn bad_arguments_name_the_range() {
    let dir = Scratch::new("args");
    let out = dir.path("g.skg");
    for scale in ["0", "41"] {
        let e = fails(&["generate", "--scale", scale, "-o", p(&out)]);
        assert!(e.contains(&format!("SCALE {scale} is out of range")), "{e}");
        assert!(e.contains("1 to 40"), "{e}");
    }
    let e = fails(&["generate", "--scale", "4", "--edgefactor", "0", "-o", p(&out)]);
    assert!(e.contains("edgefactor 0 is out of range") && e.contains("1 to 1024"), "{e}");
    let e = fails(&["generate", "--scale", "4", "--seed", "1", "-o", p(&out)]);
    assert!(e.contains("expected two unsigned integers"), "{e}");
    let e = fails(&["generate", "--scale", "-3", "-o", p(&out)]);
    assert!(e.contains("--scale"), "{e}");
    let e = fails(&["generate", "--scale", "4", "--format", "csv", "-o", p(&out)]);
    assert!(e.contains("possible values: bin, el, wel, mtx"), "{e}");
    let e = fails(&["generate", "--scale", "4"]);
    assert!(e.contains("--output"), "{e}");
    let e = fails(&["generate", "--scale", "36", "-o", p(&out)]);
    assert!(e.contains("GiB") && e.contains("available"), "{e}");
    assert!(!out.exists(), "nothing is written for refused arguments");
}

#[test]
fn unwritable_output_is_an_error() {
    let dir = Scratch::new("unwritable");
    let out = dir.path("no/such/dir/g.skg");
    let e = fails(&["generate", "--scale", "3", "-o", p(&out)]);
    assert!(e.contains(&format!("cannot create {}", out.display())), "{e}");
    assert!(e.contains("No such file or directory"), "{e}");
    let e = fails(&["generate", "--scale", "3", "-o", p(dir.dir())]);
    assert!(e.contains(p(dir.dir())), "{e}");
    if Path::new("/dev/full").exists() {
        let e = fails(&["generate", "--scale", "3", "--format", "wel", "-o", "/dev/full"]);
        assert!(e.contains("/dev/full: cannot write"), "{e}");
    }
}

#[test]
fn corrupt_and_missing_files_are_refused() {
    let dir = Scratch::new("corrupt");
    let good = dir.path("g.skg");
    ok(&["generate", "--scale", "5", "-o", p(&good)]);
    let bytes = fs::read(&good).unwrap();

    let flipped = dir.path("flipped.skg");
    let mut b = bytes.clone();
    b[100] ^= 0x10;
    fs::write(&flipped, &b).unwrap();
    let e = fails(&["info", p(&flipped)]);
    assert!(e.contains(&format!("{}: checksum mismatch", flipped.display())), "{e}");

    let cut = dir.path("cut.skg");
    fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let e = fails(&["info", p(&cut)]);
    assert!(e.contains(&format!("{}: truncated", cut.display())), "{e}");

    let foreign = dir.path("foreign.skg");
    fs::write(&foreign, "hello, world\n").unwrap();
    let e = fails(&["info", p(&foreign)]);
    assert!(e.contains("not a Skein binary graph"), "{e}");

    let text = dir.path("bad.wel");
    fs::write(&text, "# vertices 10\n0 1 0.5\n2 3 x\n").unwrap();
    let e = fails(&["info", p(&text)]);
    assert!(e.contains(&format!("{}:3: expected a weight", text.display())), "{e}");
    fs::write(&text, "# vertices 10\n0 1 0.5\n2 30 1\n").unwrap();
    let e = fails(&["info", p(&text)]);
    assert!(e.contains(&format!("{}:3: vertex 30 is out of range", text.display())), "{e}");
    fs::write(&text, "0 1 NaN\n").unwrap();
    let e = fails(&["info", p(&text)]);
    assert!(e.contains(":1: weight NaN is not allowed"), "{e}");

    let missing = dir.path("missing.el");
    let e = fails(&["info", p(&missing)]);
    assert!(e.contains(&format!("{}: cannot open", missing.display())), "{e}");
    assert!(e.contains("No such file or directory"), "{e}");

    let unknown = dir.path("graph.txt");
    fs::write(&unknown, "0 1\n").unwrap();
    let e = fails(&["info", p(&unknown)]);
    assert!(e.contains("cannot tell the graph format"), "{e}");
}

/// Entries of `dir` that are temporary files of an unfinished write.
fn temporaries(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect()
}

#[test]
fn an_existing_graph_is_replaced_whole_or_not_at_all() {
    let dir = Scratch::new("replace");
    let good = dir.path("g.skg");
    ok(&["generate", "--scale", "6", "-o", p(&good)]);
    let before = fs::read(&good).unwrap();
    // Refused arguments, whenever they are found, leave the old graph as it was.
    for args in [
        &["--scale", "36"][..],
        &["--scale", "6", "--format", "wel"][..],
        &["--scale", "6", "--edgefactor", "0"][..],
    ] {
        let mut a = vec!["generate", "-o", p(&good)];
        a.extend_from_slice(args);
        fails(&a);
        assert_eq!(fs::read(&good).unwrap(), before, "{args:?}");
    }
    // A new graph replaces it whole, and nothing else is left in the folder.
    ok(&["generate", "--scale", "7", "-o", p(&good)]);
    assert_eq!(read_edges(&good).unwrap().num_vertices, 128);
    assert_eq!(fs::read_dir(dir.dir()).unwrap().count(), 1);
}

#[cfg(unix)]
#[test]
fn an_interrupted_generate_keeps_the_old_graph_and_leaves_no_temporary() {
    use std::os::unix::process::ExitStatusExt;
    let dir = Scratch::new("interrupt");
    let good = dir.path("g.skg");
    ok(&["generate", "--scale", "6", "-o", p(&good)]);
    let before = fs::read(&good).unwrap();
    for (signal, format) in [(libc::SIGINT, "bin"), (libc::SIGTERM, "bin"), (libc::SIGHUP, "bin")] {
        // The commit waits 30 s with the new graph complete in its temporary file.
        let mut child = common::skein_with_default_signal(signal)
            .args(["generate", "--scale", "10", "--format", format, "-o", p(&good)])
            .env_remove("SKEIN_PROGRESS")
            .env("SKEIN_HOLD_OUTPUT_MS", "30000")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let start = std::time::Instant::now();
        while !fs::read_dir(dir.dir()).unwrap().any(|e| {
            let e = e.unwrap();
            e.file_name().to_string_lossy().contains(".tmp") && e.metadata().unwrap().len() > 4096
        }) {
            assert!(start.elapsed().as_secs() < 60, "no temporary file appeared");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let pid = i32::try_from(child.id()).unwrap();
        // SAFETY: kill(2) on the pid of our own child, which has not been waited for yet.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(signal), "{status:?}");
        assert_eq!(fs::read(&good).unwrap(), before, "the old graph is intact");
        assert!(temporaries(dir.dir()).is_empty(), "{:?}", temporaries(dir.dir()));
    }
}

/// Runs `skein` with a file size limit of `limit` bytes: writes past it fail with EFBIG,
/// as on a full disk (SIGXFSZ ignored, so the write returns the error).
#[cfg(unix)]
fn skein_with_file_limit(args: &[&str], limit: u64) -> Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_skein"));
    cmd.args(args).env_remove("SKEIN_PROGRESS");
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (signal, setrlimit) on values it owns.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit { rlim_cur: limit, rlim_max: limit };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    cmd.output().expect("run skein")
}

#[cfg(unix)]
#[test]
fn a_write_that_fails_midway_keeps_the_old_graph() {
    let dir = Scratch::new("full");
    let good = dir.path("graph"); // no extension: any --format
    ok(&["generate", "--scale", "5", "-o", p(&good)]);
    let before = fs::read(&good).unwrap();
    assert!(before.len() < 64 << 10);
    for format in ["bin", "el"] {
        // SCALE 12 is far more than 64 KiB in either format.
        let out = skein_with_file_limit(
            &["generate", "--scale", "12", "--format", format, "-o", p(&good)],
            64 << 10,
        );
        let e = text(&out.stderr);
        assert!(!out.status.success() && out.status.code().is_some(), "{format}: {e}");
        assert!(e.contains("writing the graph failed") && e.contains(p(&good)), "{format}: {e}");
        assert_eq!(fs::read(&good).unwrap(), before, "{format}: the old graph is intact");
        assert!(temporaries(dir.dir()).is_empty(), "{:?}", temporaries(dir.dir()));
    }
}

#[test]
fn convert_keeps_edges_order_and_weights_and_refuses_what_it_cannot_write() {
    let dir = Scratch::new("convert");
    let wel = dir.path("g.wel");
    ok(&["generate", "--scale", "6", "-o", p(&wel)]);
    let original = read_edges(&wel).unwrap();
    let info = |f: &Path| ok(&["info", p(f)]).0;

    // Text to .skg and back: the same edges, in the same order, with the same weights
    // (the checksum `skein info` prints covers all three).
    let skg = dir.path("g.skg");
    let (_, err) = ok(&["convert", p(&wel), p(&skg)]);
    assert!(err.contains(&format!("wrote {} (bin", skg.display())), "{err}");
    assert_eq!(read_edges(&skg).unwrap(), original);
    assert_eq!(field(&info(&skg), "fnv1a64"), field(&info(&wel), "fnv1a64"));
    let mtx = dir.path("back.dat");
    ok(&["convert", p(&skg), p(&mtx), "--format", "mtx"]);
    assert_eq!(read_edges(&mtx).unwrap(), original);

    // .el keeps no weights, and says so.
    let el = dir.path("g.el");
    let (_, err) = ok(&["convert", p(&skg), p(&el)]);
    assert!(err.contains("keeps no weights"), "{err}");
    let unweighted = read_edges(&el).unwrap();
    assert_eq!((&unweighted.src, &unweighted.dst), (&original.src, &original.dst));
    assert_eq!(unweighted.weights, None);

    // Graph500 weights are not whole numbers: .gr refuses them, naming the output, and
    // leaves nothing behind.
    let gr = dir.path("g.gr");
    let e = fails(&["convert", p(&skg), p(&gr)]);
    assert!(e.contains(&gr.display().to_string()) && e.contains("whole numbers"), "{e}");
    assert!(!gr.exists());
    // Whole-number weights go through .gr and back.
    let ints = dir.path("ints.wel");
    fs::write(&ints, "# vertices 4\n0 1 3\n1 2 5\n3 3 1\n").unwrap();
    ok(&["convert", p(&ints), p(&gr)]);
    assert_eq!(read_edges(&gr).unwrap(), read_edges(&ints).unwrap());

    // A file converted in place is replaced whole.
    ok(&["convert", p(&el), p(&el), "--format", "el"]);
    assert_eq!(read_edges(&el).unwrap(), unweighted);

    // Bad input names the file and line; a bad output is refused before reading.
    let bad = dir.path("bad.wel");
    fs::write(&bad, "0 1 0.5\n2 x 1\n").unwrap();
    let e = fails(&["convert", p(&bad), p(&dir.path("out.skg"))]);
    assert!(e.contains(&format!("{}:2:", bad.display())), "{e}");
    let e = fails(&["convert", p(&wel), p(&dir.path("x.el")), "--format", "wel"]);
    assert!(e.contains("contradicts"), "{e}");
    let e = fails(&["convert", p(&wel), "-"]);
    assert!(e.contains("not standard output"), "{e}");
    assert_eq!(temporaries(dir.dir()), Vec::<String>::new());
}
