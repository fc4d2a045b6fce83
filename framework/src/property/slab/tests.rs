use super::*;
use std::collections::HashSet;

#[test]
fn classes() {
    assert_eq!(class_of(16, 8), Some(0));
    assert_eq!(class_of(17, 8), Some(1));
    assert_eq!(class_of(16, 32), Some(1));
    assert_eq!(class_of(64, 64), Some(2));
    assert_eq!(class_of(65, 8), None);
    assert_eq!(class_of(8, 128), None);
}

#[test]
fn slots_are_distinct_aligned_and_reused() {
    // A pool no other test uses.
    let trustee = 41;
    let n = 3 * FIRST_BLOCK / 16; // spans several blocks
    let slots: Vec<_> = (0..n).map(|_| alloc(0, trustee)).collect();
    let set: HashSet<usize> = slots.iter().map(|p| p.as_ptr() as usize).collect();
    assert_eq!(set.len(), n);
    assert!(set.iter().all(|a| a % 16 == 0));
    // Writing every slot whole must not disturb its neighbours.
    for (i, p) in slots.iter().enumerate() {
        // SAFETY: each slot is 16 bytes, ours.
        unsafe { ptr::write(p.as_ptr() as *mut [u64; 2], [i as u64, !(i as u64)]) };
    }
    for (i, p) in slots.iter().enumerate() {
        // SAFETY: as above; written in the loop before.
        let back = unsafe { ptr::read(p.as_ptr() as *const [u64; 2]) };
        assert_eq!(back, [i as u64, !(i as u64)]);
    }
    for p in &slots[..100] {
        // SAFETY: from alloc with class 0, not used again.
        unsafe { free(*p, 0, trustee) };
    }
    let again: HashSet<usize> = (0..100).map(|_| alloc(0, trustee).as_ptr() as usize).collect();
    let freed: HashSet<usize> = slots[..100].iter().map(|p| p.as_ptr() as usize).collect();
    assert_eq!(again, freed);
}

#[test]
fn pools_are_per_trustee_and_thread_safe() {
    let (a, b) = (alloc(2, 42), alloc(2, 43));
    assert_ne!(a.as_ptr() as usize / FIRST_BLOCK, b.as_ptr() as usize / FIRST_BLOCK);
    assert_eq!(a.as_ptr() as usize % 64, 0);
    let hs: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                let v: Vec<usize> = (0..10_000).map(|_| alloc(1, 44).as_ptr() as usize).collect();
                for &p in &v[..5_000] {
                    // SAFETY: from alloc(1, 44), used nowhere else.
                    unsafe { free(NonNull::new(p as *mut u8).unwrap(), 1, 44) };
                }
                v[5_000..].to_vec()
            })
        })
        .collect();
    let kept: Vec<usize> = hs.into_iter().flat_map(|h| h.join().unwrap()).collect();
    let set: HashSet<usize> = kept.iter().copied().collect();
    assert_eq!(set.len(), kept.len(), "a live slot was handed out twice");
}
