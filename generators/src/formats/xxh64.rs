//! XXH64 (Yann Collet's xxHash, 64-bit variant), streaming, written from the published
//! algorithm. It guards the Skein binary format: fast enough (several GB/s on one core)
//! that checking a SCALE 22 file costs a fraction of reading it.

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

/// Streaming XXH64 state.
#[derive(Debug, Clone)]
pub(crate) struct Xxh64 {
    seed: u64,
    acc: [u64; 4],
    buf: [u8; 32],
    buf_len: usize,
    total: u64,
}

#[inline(always)]
fn round(acc: u64, input: u64) -> u64 {
    acc.wrapping_add(input.wrapping_mul(P2)).rotate_left(31).wrapping_mul(P1)
}

#[inline(always)]
fn merge_round(acc: u64, val: u64) -> u64 {
    (acc ^ round(0, val)).wrapping_mul(P1).wrapping_add(P4)
}

#[inline(always)]
fn le64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

#[inline(always)]
fn le32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_le_bytes(a)
}

impl Xxh64 {
    /// A fresh hasher with the given seed.
    pub(crate) fn new(seed: u64) -> Xxh64 {
        Xxh64 {
            seed,
            acc: [
                seed.wrapping_add(P1).wrapping_add(P2),
                seed.wrapping_add(P2),
                seed,
                seed.wrapping_sub(P1),
            ],
            buf: [0; 32],
            buf_len: 0,
            total: 0,
        }
    }

    #[inline(always)]
    fn stripe(acc: &mut [u64; 4], s: &[u8]) {
        acc[0] = round(acc[0], le64(&s[0..]));
        acc[1] = round(acc[1], le64(&s[8..]));
        acc[2] = round(acc[2], le64(&s[16..]));
        acc[3] = round(acc[3], le64(&s[24..]));
    }

    /// Feeds `data`.
    pub(crate) fn update(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if self.buf_len > 0 {
            let take = (32 - self.buf_len).min(data.len());
            self.buf[self.buf_len..self.buf_len + take].copy_from_slice(&data[..take]);
            self.buf_len += take;
            data = &data[take..];
            if self.buf_len < 32 {
                return;
            }
            let buf = self.buf;
            Self::stripe(&mut self.acc, &buf);
            self.buf_len = 0;
        }
        let mut chunks = data.chunks_exact(32);
        let mut acc = self.acc;
        for s in &mut chunks {
            Self::stripe(&mut acc, s);
        }
        self.acc = acc;
        let rest = chunks.remainder();
        self.buf[..rest.len()].copy_from_slice(rest);
        self.buf_len = rest.len();
    }

    /// The hash of everything fed so far.
    pub(crate) fn finish(&self) -> u64 {
        let [v1, v2, v3, v4] = self.acc;
        let mut h = if self.total >= 32 {
            let mut h = v1
                .rotate_left(1)
                .wrapping_add(v2.rotate_left(7))
                .wrapping_add(v3.rotate_left(12))
                .wrapping_add(v4.rotate_left(18));
            h = merge_round(h, v1);
            h = merge_round(h, v2);
            h = merge_round(h, v3);
            merge_round(h, v4)
        } else {
            self.seed.wrapping_add(P5)
        };
        h = h.wrapping_add(self.total);
        let mut tail = &self.buf[..self.buf_len];
        while tail.len() >= 8 {
            h ^= round(0, le64(tail));
            h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
            tail = &tail[8..];
        }
        if tail.len() >= 4 {
            h ^= u64::from(le32(tail)).wrapping_mul(P1);
            h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
            tail = &tail[4..];
        }
        for &b in tail {
            h ^= u64::from(b).wrapping_mul(P5);
            h = h.rotate_left(11).wrapping_mul(P1);
        }
        h ^= h >> 33;
        h = h.wrapping_mul(P2);
        h ^= h >> 29;
        h = h.wrapping_mul(P3);
        h ^= h >> 32;
        h
    }
}

#[cfg(test)]
mod tests {
    use super::Xxh64;

    fn xxh(data: &[u8]) -> u64 {
        let mut h = Xxh64::new(0);
        h.update(data);
        h.finish()
    }

    /// Reference values from the `xxhash` Python package (`xxhash.xxh64(s).intdigest()`).
    #[test]
    fn known_vectors() {
        assert_eq!(xxh(b""), 0xef46db3751d8e999);
        assert_eq!(xxh(b"a"), 0xd24ec4f1a98c6e5b);
        assert_eq!(xxh(b"abc"), 0x44bc2cf5ad770999);
        let r37: Vec<u8> = (0..37).collect();
        assert_eq!(xxh(&r37), 0xd93fa2dfee5c24c9);
        let r768: Vec<u8> = (0..768).map(|i| (i % 256) as u8).collect();
        assert_eq!(xxh(&r768), 0x8e03c838c596036f);
    }

    #[test]
    fn streaming_equals_one_shot() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let whole = xxh(&data);
        for split in [1, 5, 31, 32, 33, 64, 100, 999] {
            let mut h = Xxh64::new(0);
            for part in data.chunks(split) {
                h.update(part);
            }
            assert_eq!(h.finish(), whole, "chunks of {split}");
        }
    }
}
