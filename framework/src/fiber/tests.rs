use super::*;
use std::rc::Rc;

#[test]
fn resume_suspend_finish_and_reuse() {
    let mut pool = StackPool::new(64 * 1024, 1).unwrap();
    let log = Rc::new(Cell::new(0));
    let l2 = log.clone();
    let mut f = Fiber::new(pool.take(), move || {
        assert!(in_fiber());
        l2.set(1);
        suspend();
        l2.set(2);
        suspend();
        l2.set(3);
    });
    assert!(!in_fiber());
    assert!(!f.resume());
    assert_eq!(log.get(), 1);
    assert!(!f.resume());
    assert_eq!(log.get(), 2);
    assert!(f.resume());
    assert_eq!(log.get(), 3);
    pool.put(f.into_stack());
    let mut g = Fiber::new(pool.take(), || {});
    assert!(g.resume());
}
