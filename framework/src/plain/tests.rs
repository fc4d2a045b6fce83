use super::Plain;

fn is_plain<T: Plain>() {}

#[test]
fn numbers_arrays_and_tuples_are_plain() {
    is_plain::<u64>();
    is_plain::<f32>();
    is_plain::<()>();
    is_plain::<[u32; 4]>();
    is_plain::<(u32, f32, [u64; 2])>();
    is_plain::<(u8, u8, u8, u8, u8, u8, u8, u8)>();
}
