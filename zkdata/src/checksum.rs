//! The two checksums ZooKeeper's files use: Adler-32 (`java.util.zip.Adler32`) over
//! snapshot streams and log records, and CRC-32 (`java.util.zip.CRC32`) inside the tree
//! digest.

/// Adler-32, fed incrementally.
#[derive(Debug, Clone, Copy)]
pub struct Adler32 {
    a: u32,
    b: u32,
}

impl Default for Adler32 {
    fn default() -> Self {
        Adler32 { a: 1, b: 0 }
    }
}

const ADLER_MOD: u32 = 65_521;
/// The most bytes that can be summed before `b` could overflow a u32.
const ADLER_NMAX: usize = 5_552;

impl Adler32 {
    pub fn update(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(ADLER_NMAX) {
            for &x in chunk {
                self.a += u32::from(x);
                self.b += self.a;
            }
            self.a %= ADLER_MOD;
            self.b %= ADLER_MOD;
        }
    }

    /// The value as Java's `getValue()` returns it (a long holding 32 bits).
    pub fn value(&self) -> i64 {
        i64::from((self.b << 16) | self.a)
    }
}

/// Adler-32 of one buffer.
pub fn adler32(bytes: &[u8]) -> i64 {
    let mut a = Adler32::default();
    a.update(bytes);
    a.value()
}

/// CRC-32 (IEEE), fed incrementally (`crc32fast`, which uses the CPU's CRC instructions
/// where it can: the digest hashes every node of a snapshot).
#[derive(Debug, Clone, Default)]
pub struct Crc32(crc32fast::Hasher);

impl Crc32 {
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub fn value(&self) -> u32 {
        self.0.clone().finalize()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // Reference values from zlib's adler32 and crc32.
        assert_eq!(adler32(b""), 1);
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        let mut c = Crc32::default();
        c.update(b"123456789");
        assert_eq!(c.value(), 0xCBF4_3926);
    }

    #[test]
    fn adler_is_incremental_over_long_inputs() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut a = Adler32::default();
        for part in data.chunks(777) {
            a.update(part);
        }
        assert_eq!(a.value(), adler32(&data));
        // A naive modular computation as the reference.
        let (mut s1, mut s2) = (1u64, 0u64);
        for &x in &data {
            s1 = (s1 + u64::from(x)) % 65_521;
            s2 = (s2 + s1) % 65_521;
        }
        assert_eq!(a.value(), ((s2 << 16) | s1) as i64);
    }
}
