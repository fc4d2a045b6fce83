use super::compare_fingerprints;

#[test]
fn same_fingerprints_pass() {
    assert_eq!(compare_fingerprints(&[0, 10, 7, 0, 10, 7, 0, 10, 7]), None);
    assert_eq!(compare_fingerprints(&[0, 10, 7]), None);
}

#[test]
fn differing_ranks_are_named() {
    let m = compare_fingerprints(&[0, 10, 7, 0, 10, 8, 0, 10, 7, 0, 11, 7]).unwrap();
    assert!(m.starts_with("rank(s) 1, 3 run a different executable than rank 0"), "{m}");
    assert!(m.contains("rank 1: 10 bytes, hash 0000000000000008"), "{m}");
}

#[test]
fn unreadable_ranks_are_named() {
    let m = compare_fingerprints(&[0, 10, 7, 1, 0, 0]).unwrap();
    assert!(m.contains("rank(s) 1 could not read their own executable"), "{m}");
    assert!(!m.contains("different executable"), "{m}");
    // rank 0 unreadable: nothing to compare with, every rank is told.
    let m = compare_fingerprints(&[1, 0, 0, 0, 10, 7]).unwrap();
    assert!(m.contains("rank(s) 0 could not read"), "{m}");
}
