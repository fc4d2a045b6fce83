use super::*;

fn temp_file(name: &str, content: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("skein-exe-hash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

#[test]
fn same_content_same_fingerprint_one_byte_differs() {
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let a = of_file(&temp_file("a", &big)).unwrap();
    let b = of_file(&temp_file("b", &big)).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len, 3_000_000);
    let mut other = big.clone();
    other[2_500_000] ^= 1; // in the third block
    let c = of_file(&temp_file("c", &other)).unwrap();
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
