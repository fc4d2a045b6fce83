use super::*;

/// A test's scratch folder, `<tmp>/skein-exe-hash-<pid>-<name>`, removed when dropped (also
/// while a failing test unwinds).
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("skein-exe-hash-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// Writes `content` to the file `name` in the folder; returns its path.
    fn file(&self, name: &str, content: &[u8]) -> std::path::PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, content).unwrap();
        p
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn same_content_same_fingerprint_one_byte_differs() {
    let dir = Scratch::new("fingerprint");
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let a = of_file(&dir.file("a", &big)).unwrap();
    let b = of_file(&dir.file("b", &big)).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len, 3_000_000);
    let mut other = big.clone();
    other[2_500_000] ^= 1; // in the third block
    let c = of_file(&dir.file("c", &other)).unwrap();
    assert_eq!(c.len, a.len);
    assert_ne!(c.hash, a.hash);
}

#[test]
fn own_executable_is_readable_and_stable() {
    let a = own_executable().unwrap();
    assert!(a.len > 0);
    assert_eq!(own_executable().unwrap(), a);
}

#[test]
fn missing_file_names_the_path() {
    let e = of_file(Path::new("/nonexistent/skein-exe")).unwrap_err();
    assert!(e.contains("/nonexistent/skein-exe"), "{e}");
}
