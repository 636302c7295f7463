//! Reading an input as typed choices, and writing choices back as an input.
//!
//! [`Src`] reads only with `Unstructured::arbitrary` on fixed-width integers (little
//! endian, zeros once the input is used up), so [`Enc`] can produce the exact bytes a
//! given sequence of choices is read from: that is how seeds are written.

use arbitrary::Unstructured;

/// A fuzz input read as a sequence of choices.
pub struct Src<'a> {
    u: Unstructured<'a>,
}

impl<'a> Src<'a> {
    /// Reads `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Src {
            u: Unstructured::new(data),
        }
    }
    /// True when the input is used up.
    pub fn is_empty(&self) -> bool {
        self.u.is_empty()
    }
    /// Bytes left.
    pub fn len(&self) -> usize {
        self.u.len()
    }
    /// One byte (0 when the input is used up).
    pub fn u8(&mut self) -> u8 {
        self.u.arbitrary().unwrap_or(0)
    }
    /// A little-endian u16.
    pub fn u16(&mut self) -> u16 {
        self.u.arbitrary().unwrap_or(0)
    }
    /// A little-endian u32.
    pub fn u32(&mut self) -> u32 {
        self.u.arbitrary().unwrap_or(0)
    }
    /// A little-endian u64.
    pub fn u64(&mut self) -> u64 {
        self.u.arbitrary().unwrap_or(0)
    }
    /// Low bit of a byte.
    pub fn bool(&mut self) -> bool {
        self.u.arbitrary().unwrap_or(false)
    }
    /// A byte reduced modulo `n` (`n` > 0).
    pub fn below(&mut self, n: u8) -> u8 {
        self.u8() % n.max(1)
    }
}

/// Writes choices as the bytes [`Src`] reads them from.
#[derive(Default, Debug, Clone)]
pub struct Enc {
    /// The input so far.
    pub bytes: Vec<u8>,
}

impl Enc {
    /// An empty input.
    pub fn new() -> Self {
        Self::default()
    }
    /// A byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.bytes.push(v);
        self
    }
    /// A u16.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// A u32.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// A u64.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// A bool.
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(v as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enc_is_what_src_reads() {
        let mut e = Enc::new();
        e.u8(7)
            .u16(0xBEEF)
            .u32(0xDEAD_BEEF)
            .u64(u64::MAX - 5)
            .bool(true);
        let mut s = Src::new(&e.bytes);
        assert_eq!(s.u8(), 7);
        assert_eq!(s.u16(), 0xBEEF);
        assert_eq!(s.u32(), 0xDEAD_BEEF);
        assert_eq!(s.u64(), u64::MAX - 5);
        assert!(s.bool());
        assert!(s.is_empty());
        assert_eq!(s.u32(), 0);
    }
}
