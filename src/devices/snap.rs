//! Little-endian byte writer/reader for device snapshots ([`Persist`](super::Persist)).
//!
//! The reader never panics: every read checks the remaining length and returns
//! [`SnapError`] on truncated or corrupt input.

use thiserror::Error;

/// Why a device snapshot could not be restored.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SnapError {
    /// The input ended before the value being read.
    #[error("snapshot truncated: needed {needed} more bytes at offset {offset}")]
    Truncated { offset: usize, needed: usize },
    /// A field holds a value the device cannot have.
    #[error("snapshot field invalid: {0}")]
    Invalid(&'static str),
    /// A length prefix is larger than the input or than the device allows.
    #[error("snapshot length {len} too large for {what}")]
    TooLong { what: &'static str, len: u64 },
}

/// Appends little-endian values to a byte vector.
#[derive(Default, Debug, Clone)]
pub struct SnapWriter {
    buf: Vec<u8>,
}

impl SnapWriter {
    pub fn new() -> Self {
        SnapWriter { buf: Vec::new() }
    }
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn bool(&mut self, v: bool) {
        self.buf.push(v as u8);
    }
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Fixed-size raw bytes (the reader must know the length).
    pub fn raw(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }
    /// Length-prefixed (u32) bytes.
    pub fn blob(&mut self, v: &[u8]) {
        self.u32(v.len() as u32);
        self.buf.extend_from_slice(v);
    }
    pub fn opt_u64(&mut self, v: Option<u64>) {
        match v {
            Some(x) => {
                self.u8(1);
                self.u64(x)
            }
            None => self.u8(0),
        }
    }
}

/// Reads what [`SnapWriter`] wrote.
#[derive(Debug, Clone)]
pub struct SnapReader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> SnapReader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        SnapReader { data, pos: 0 }
    }
    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.data.len().saturating_sub(self.pos)
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], SnapError> {
        let rest = self.data.get(self.pos..).unwrap_or(&[]);
        match rest.get(..n) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(SnapError::Truncated {
                offset: self.pos,
                needed: n - rest.len(),
            }),
        }
    }
    fn arr<const N: usize>(&mut self) -> Result<[u8; N], SnapError> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    pub fn u8(&mut self) -> Result<u8, SnapError> {
        Ok(self.arr::<1>()?[0])
    }
    pub fn bool(&mut self) -> Result<bool, SnapError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(SnapError::Invalid("bool not 0 or 1")),
        }
    }
    pub fn u16(&mut self) -> Result<u16, SnapError> {
        Ok(u16::from_le_bytes(self.arr()?))
    }
    pub fn u32(&mut self) -> Result<u32, SnapError> {
        Ok(u32::from_le_bytes(self.arr()?))
    }
    pub fn u64(&mut self) -> Result<u64, SnapError> {
        Ok(u64::from_le_bytes(self.arr()?))
    }
    pub fn i64(&mut self) -> Result<i64, SnapError> {
        Ok(i64::from_le_bytes(self.arr()?))
    }
    pub fn raw<const N: usize>(&mut self) -> Result<[u8; N], SnapError> {
        self.arr()
    }
    /// Length-prefixed bytes, refusing lengths above `max`.
    pub fn blob(&mut self, what: &'static str, max: usize) -> Result<Vec<u8>, SnapError> {
        let len = self.u32()? as usize;
        if len > max || len > self.remaining() {
            return Err(SnapError::TooLong {
                what,
                len: len as u64,
            });
        }
        Ok(self.take(len)?.to_vec())
    }
    pub fn opt_u64(&mut self) -> Result<Option<u64>, SnapError> {
        Ok(if self.bool()? {
            Some(self.u64()?)
        } else {
            None
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let mut w = SnapWriter::new();
        w.u8(7);
        w.bool(true);
        w.u16(0x1234);
        w.u32(0xdead_beef);
        w.u64(u64::MAX - 1);
        w.i64(-5);
        w.blob(b"abc");
        w.opt_u64(Some(9));
        w.opt_u64(None);
        let b = w.into_bytes();
        let mut r = SnapReader::new(&b);
        assert_eq!(r.u8().unwrap(), 7);
        assert!(r.bool().unwrap());
        assert_eq!(r.u16().unwrap(), 0x1234);
        assert_eq!(r.u32().unwrap(), 0xdead_beef);
        assert_eq!(r.u64().unwrap(), u64::MAX - 1);
        assert_eq!(r.i64().unwrap(), -5);
        assert_eq!(r.blob("t", 10).unwrap(), b"abc");
        assert_eq!(r.opt_u64().unwrap(), Some(9));
        assert_eq!(r.opt_u64().unwrap(), None);
        assert_eq!(r.remaining(), 0);
        assert!(matches!(r.u8(), Err(SnapError::Truncated { .. })));
        // every prefix of a valid stream fails cleanly somewhere, never panics
        for n in 0..b.len() {
            let mut r = SnapReader::new(&b[..n]);
            let res = (|| -> Result<(), SnapError> {
                r.u8()?;
                r.bool()?;
                r.u16()?;
                r.u32()?;
                r.u64()?;
                r.i64()?;
                r.blob("t", 10)?;
                r.opt_u64()?;
                r.opt_u64()?;
                Ok(())
            })();
            assert!(res.is_err(), "prefix {n} accepted");
        }
        let mut r = SnapReader::new(&[0xff, 0xff, 0xff, 0xff, 1]);
        assert!(matches!(r.blob("t", 100), Err(SnapError::TooLong { .. })));
        assert!(SnapReader::new(&[2]).bool().is_err());
    }
}
