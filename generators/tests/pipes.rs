//! Inputs that can be read only once: named pipes (FIFOs) and standard input (`-`).
//! Every format is read whole from a FIFO (with and without an extension) and from
//! standard input (a child process: this test binary itself, re-run with one test).

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use skein_generators::formats::{
    detect_format, read_edges, read_edges_as, read_edges_detected, write_binary, write_el,
    write_gr, write_mtx, write_wel, Format, FormatError, WriteOptions,
};
use skein_generators::EdgeList;

mod scratch;
use scratch::Scratch;

/// A graph with integer weights (so that every format, `.gr` included, keeps them) and
/// enough edges that the text forms exceed a pipe's buffer (64 KiB).
fn graph(weighted: bool) -> EdgeList {
    let m = 20_000u64;
    let n = 5_000u64;
    EdgeList {
        num_vertices: n,
        src: (0..m).map(|k| (k * 7919) % n).collect(),
        dst: (0..m).map(|k| (k * k + 3) % n).collect(),
        weights: weighted.then(|| (0..m).map(|k| (k % 1000) as f32).collect()),
    }
}

/// `graph(weighted)` in `format`, as bytes.
fn bytes_of(format: Format, weighted: bool) -> Vec<u8> {
    let el = graph(weighted);
    let (o, name, mut out) = (WriteOptions::default(), Path::new("x"), Vec::new());
    match format {
        Format::Binary => write_binary(&mut out, &el, name),
        Format::El => write_el(&mut out, &el, &o, name),
        Format::Wel => write_wel(&mut out, &el, &o, name),
        Format::Mtx => write_mtx(&mut out, &el, &o, name),
        Format::Gr => write_gr(&mut out, &el, &o, name),
    }
    .unwrap();
    out
}

/// The graph `bytes_of(format, weighted)` reads back as.
fn expected(format: Format, weighted: bool) -> EdgeList {
    let mut el = graph(weighted);
    match format {
        Format::El => el.weights = None,
        Format::Wel | Format::Gr if !weighted => el.weights = Some(vec![1.0; el.len()]),
        _ => {}
    }
    el
}

/// Runs `f` on another thread; fails the test if it does not finish in 30 s (a reader
/// that reopens a FIFO would wait for a writer forever).
fn within_timeout<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{what}: no answer in 30 s (waiting on the pipe?)"))
}

fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo {}: {}", path.display(), std::io::Error::last_os_error());
}

/// Creates a FIFO at `path` and a thread that writes `bytes` into it once a reader
/// opens it, then closes it.
fn fifo_with(path: &Path, bytes: Vec<u8>) {
    mkfifo(path);
    let p = path.to_owned();
    std::thread::spawn(move || {
        // Blocks until the reader opens the FIFO; the reader may stop early (an error),
        // so a failed write is not this thread's business.
        if let Ok(mut f) = fs::OpenOptions::new().write(true).open(&p) {
            let _ = f.write_all(&bytes);
        }
    });
}

#[test]
fn every_format_is_read_whole_from_a_fifo() {
    let dir = Scratch::new("fifo");
    for format in Format::ALL {
        for weighted in [false, true] {
            let want = expected(format, weighted);
            // Named with the extension: read_edges, and detect_format + read_edges_as as
            // the CLI does (detect_format must not open the pipe).
            let path = dir.path(&format!("g-{weighted}.{}", format.extension()));
            fifo_with(&path, bytes_of(format, weighted));
            let p = path.clone();
            let got = within_timeout("read_edges", move || read_edges(&p));
            assert_eq!(got.unwrap(), want, "{format} weighted {weighted}");

            let path = dir.path(&format!("h-{weighted}.{}", format.extension()));
            fifo_with(&path, bytes_of(format, weighted));
            let p = path.clone();
            let got = within_timeout("detect + read_edges_as", move || {
                let f = detect_format(&p)?;
                read_edges_as(&p, f, &|_| {}).map(|el| (f, el))
            });
            assert_eq!(got.unwrap(), (format, want.clone()), "{format} weighted {weighted}");

            // No extension: the format comes from the content.
            let path = dir.path(&format!("noext-{}-{weighted}", format.name()));
            fifo_with(&path, bytes_of(format, weighted));
            let p = path.clone();
            let (f, el) =
                within_timeout("read_edges_detected", move || read_edges_detected(&p, &|_| {}))
                    .unwrap();
            // Text edge lists are told by their columns: `.el` has two, `.wel` three.
            assert_eq!(f, format, "weighted {weighted}");
            assert_eq!(el, want, "{format} weighted {weighted}");
        }
    }
}

#[test]
fn a_fifo_without_extension_is_not_opened_by_detect_format() {
    let dir = Scratch::new("detect");
    let path = dir.path("pipe");
    mkfifo(&path);
    // No writer: opening the FIFO would block; detect_format answers at once.
    let p = path.clone();
    let e = within_timeout("detect_format", move || detect_format(&p)).unwrap_err();
    assert!(matches!(e, FormatError::Undetectable { .. }), "{e:?}");
    assert!(e.to_string().contains("can be read only once"), "{e}");
    let p = dir.path("pipe.wel");
    mkfifo(&p);
    assert_eq!(within_timeout("detect_format", move || detect_format(&p)).unwrap(), Format::Wel);
}

#[test]
fn undetectable_fifo_content_is_a_clear_error() {
    let dir = Scratch::new("garbage");
    let path = dir.path("garbage");
    fifo_with(&path, b"hello world\n".to_vec());
    let p = path.clone();
    let e = within_timeout("read_edges", move || read_edges(&p)).unwrap_err();
    assert!(matches!(e, FormatError::Undetectable { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "{}: cannot tell the graph format: its content is not a Skein binary graph, a \
             Matrix Market file, a DIMACS .gr file nor a text edge list `u v` or `u v w`",
            path.display()
        )
    );
    // Only comments: an edge list without edges.
    let path = dir.path("comments");
    fifo_with(&path, b"# vertices 3\n\n# nothing else\n".to_vec());
    let el = within_timeout("read_edges", move || read_edges(&path)).unwrap();
    assert_eq!((el.num_vertices, el.len(), el.weights), (3, 0, None));
}

/// Child side of [`standard_input_is_read_as_dash`]: reads `-` and prints what it got.
/// Does nothing unless the parent test sets `SKEIN_TEST_STDIN_CHILD`.
#[test]
fn stdin_child() {
    if std::env::var_os("SKEIN_TEST_STDIN_CHILD").is_none() {
        return;
    }
    match read_edges_detected(Path::new("-"), &|_| {}) {
        Ok((format, el)) => println!("RESULT {} {}", format.name(), summary(&el)),
        Err(e) => println!("RESULT error {e}"),
    }
}

/// A one-line digest of an edge list (counts, and sums of ids and weight bits).
fn summary(el: &EdgeList) -> String {
    let ids: u64 = el.src.iter().zip(&el.dst).map(|(&u, &v)| u * 31 + v).sum();
    let w = el.weights.as_ref().map(|w| w.iter().map(|x| u64::from(x.to_bits())).sum::<u64>());
    format!("n={} m={} ids={ids} w={w:?}", el.num_vertices, el.len())
}

fn run_child(input: &[u8]) -> String {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "stdin_child", "--nocapture", "--test-threads=1"])
        .env("SKEIN_TEST_STDIN_CHILD", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let bytes = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&bytes);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().find_map(|l| l.split_once("RESULT ").map(|(_, r)| r));
    line.unwrap_or_else(|| panic!("no RESULT line from the child:\n{text}")).to_owned()
}

#[test]
fn standard_input_is_read_as_dash() {
    for format in Format::ALL {
        for weighted in [false, true] {
            let got = run_child(&bytes_of(format, weighted));
            let want = format!("{} {}", format.name(), summary(&expected(format, weighted)));
            assert_eq!(got, want, "{format} weighted {weighted}");
        }
    }
    assert_eq!(
        run_child(b"%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 3\n"),
        "error <stdin>:3: vertex 2 is out of range: the graph has 2 vertices (ids 0..2)"
    );
    assert_eq!(run_child(b""), "el n=0 m=0 ids=0 w=None");
    assert!(run_child(b"x y\n").starts_with("error <stdin>: cannot tell the graph format"));
}

#[test]
fn long_prefixes_are_bounded() {
    let dir = Scratch::new("long");
    // A megabyte of comments before the first edge: told apart within the first MiB.
    let mut comments = Vec::new();
    while comments.len() < (1 << 20) + 10 {
        comments.extend_from_slice(b"# a long header comment line, repeated many times\n");
    }
    let path = dir.path("comments");
    let mut text = comments.clone();
    text.extend_from_slice(b"0 1\n");
    fifo_with(&path, text);
    let e = within_timeout("read_edges", move || read_edges(&path)).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("its first MiB holds only comments, no edge line (name the format)"),
        "{e}"
    );
    // ... which read_edges_as reads, told the format.
    let path = dir.path("comments2");
    let mut text = comments;
    text.extend_from_slice(b"0 1\n");
    fifo_with(&path, text);
    let el = within_timeout("read_edges_as", move || read_edges_as(&path, Format::El, &|_| {}));
    assert_eq!(el.unwrap().len(), 1);
    // A long binary blob without line ends.
    let path = dir.path("blob");
    fifo_with(&path, vec![0xff; 3 << 20]);
    let e = within_timeout("read_edges", move || read_edges(&path)).unwrap_err();
    assert!(matches!(e, FormatError::Undetectable { .. }), "{e:?}");
}
