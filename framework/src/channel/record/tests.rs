use super::*;
use std::cell::Cell as StdCell;

/// Sums the argument into the result space.
struct SumArg;
// SAFETY: a test marker; `run` touches only `out`.
unsafe impl ArgCall<[u32; 3]> for SumArg {
    unsafe fn run(_target: *mut u8, arg: [u32; 3], out: *mut u8) -> Option<PanicPayload> {
        // SAFETY: the test's result space holds 8 bytes.
        unsafe { ptr::write_unaligned(out as *mut u64, arg.iter().map(|&x| u64::from(x)).sum()) };
        None
    }
}

struct Eight;
impl ResultSize for Eight {
    const BYTES: u32 = 8;
}

/// The request half of an argument-first record is the argument's own bytes, right after
/// the target word; running the record in place runs the code its type names.
#[test]
fn arg_record_holds_the_argument_bytes() {
    thread_local!(static GOT: StdCell<u64> = const { StdCell::new(0) });
    let arg = [7u32, 11, 13];
    let req = ArgRequest::<[u32; 3], SumArg>::new(arg);
    let done = |o: Outcome| {
        assert!(o.panic.is_none());
        // SAFETY: the request wrote a u64 there.
        GOT.with(|g| g.set(unsafe { ptr::read_unaligned(o.resp as *const u64) }));
    };
    let vt = vtable_of::<_, _, Eight>(&req, &done);
    // Header, target, 12 bytes of argument in 2 words, no completion bytes.
    assert_eq!(vt.words, 4);
    let mut buf = [0u64; 4];
    let target = 0x1234usize as *mut u8;
    // SAFETY: the vtable is the pair's own, both fit inline, and buf has 4 free words.
    unsafe { write(buf.as_mut_ptr(), vt, target, req, done) };
    assert_eq!(buf[1], 0x1234);
    // SAFETY: reads the 12 argument bytes written just above.
    let bytes: [u32; 3] = unsafe { ptr::read_unaligned(buf.as_ptr().add(2) as *const [u32; 3]) };
    assert_eq!(bytes, arg);
    // SAFETY: a staged record of this type, both halves live, consumed here once.
    unsafe { (vt.run_in_place)(buf.as_mut_ptr().add(HEADER_WORDS) as *mut u8) };
    assert_eq!(GOT.with(|g| g.get()), 31);
}
