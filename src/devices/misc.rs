//! Small port devices: POST code port 0x80, isa-debug-exit at 0xf4, the reset control register
//! at 0xcf9, and QEMU's fw_cfg legacy port interface at 0x510 (selector) / 0x511 (data).
//!
//! Each implements [`PioDevice`] with offsets relative to its own base. Requests to the machine
//! are fields the machine takes after an access ([`DebugExit::take_exit`],
//! [`ResetControl::take_reset_request`]).

use super::{Persist, PioDevice, SnapError, SnapReader, SnapWriter};

pub const POST_PORT: u16 = 0x80;
pub const DEBUG_EXIT_PORT: u16 = 0xf4;
pub const RESET_CONTROL_PORT: u16 = 0xcf9;
pub const FW_CFG_PORT: u16 = 0x510;

/// Port 0x80: writes are swallowed (the last code is kept for diagnostics); reads return 0xff.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PostCode {
    pub last: u8,
}

impl PioDevice for PostCode {
    fn pio_read(&mut self, _offset: u16, _size: u8, _now: u64) -> u32 {
        0xff
    }
    fn pio_write(&mut self, _offset: u16, _size: u8, value: u32, _now: u64) {
        self.last = value as u8;
    }
}

impl Persist for PostCode {
    fn save(&self, w: &mut SnapWriter) {
        w.u8(self.last);
    }
    fn restore(r: &mut SnapReader) -> Result<Self, SnapError> {
        Ok(PostCode { last: r.u8()? })
    }
}

/// QEMU's isa-debug-exit (iosize 4 at 0xf4): writing v requests exit with code (v << 1) | 1.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DebugExit {
    pub exit_code: Option<u32>,
}

impl DebugExit {
    pub fn take_exit(&mut self) -> Option<u32> {
        self.exit_code.take()
    }
}

impl PioDevice for DebugExit {
    fn pio_read(&mut self, _offset: u16, _size: u8, _now: u64) -> u32 {
        0xffff_ffff
    }
    fn pio_write(&mut self, offset: u16, size: u8, value: u32, _now: u64) {
        if offset == 0 {
            let v = value & super::size_mask(size) as u32;
            self.exit_code = Some((v << 1) | 1);
        }
    }
}

impl Persist for DebugExit {
    fn save(&self, w: &mut SnapWriter) {
        w.opt_u64(self.exit_code.map(u64::from));
    }
    fn restore(r: &mut SnapReader) -> Result<Self, SnapError> {
        let v = r.opt_u64()?;
        let exit_code = match v {
            Some(x) => Some(u32::try_from(x).map_err(|_| SnapError::Invalid("exit code"))?),
            None => None,
        };
        Ok(DebugExit { exit_code })
    }
}

/// PIIX/ICH reset control register (0xcf9): writing a value with bit 2 (RST_CPU) set requests a
/// reset (bit 1 chooses hard/soft; both are a machine reset here). A suitable FADT reset
/// register is port 0xcf9, value 0x06.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResetControl {
    value: u8,
    pub reset_requested: bool,
}

impl ResetControl {
    pub fn take_reset_request(&mut self) -> bool {
        std::mem::take(&mut self.reset_requested)
    }
}

impl PioDevice for ResetControl {
    fn pio_read(&mut self, offset: u16, _size: u8, _now: u64) -> u32 {
        if offset == 0 {
            self.value as u32
        } else {
            0xff
        }
    }
    fn pio_write(&mut self, offset: u16, _size: u8, value: u32, _now: u64) {
        if offset == 0 {
            let v = value as u8;
            if v & 0x04 != 0 {
                self.reset_requested = true;
            }
            self.value = v & 0x0a;
        }
    }
}

impl Persist for ResetControl {
    fn save(&self, w: &mut SnapWriter) {
        w.u8(self.value);
        w.bool(self.reset_requested);
    }
    fn restore(r: &mut SnapReader) -> Result<Self, SnapError> {
        Ok(ResetControl {
            value: r.u8()? & 0x0a,
            reset_requested: r.bool()?,
        })
    }
}

pub const FW_CFG_SIGNATURE: u16 = 0x00;
pub const FW_CFG_ID: u16 = 0x01;
pub const FW_CFG_UUID: u16 = 0x02;
pub const FW_CFG_RAM_SIZE: u16 = 0x03;
pub const FW_CFG_NOGRAPHIC: u16 = 0x04;
pub const FW_CFG_NB_CPUS: u16 = 0x05;
pub const FW_CFG_MAX_CPUS: u16 = 0x0f;
pub const FW_CFG_FILE_DIR: u16 = 0x19;
pub const FW_CFG_FILE_FIRST: u16 = 0x20;
const FW_CFG_ENTRY_MASK: u16 = 0x3fff;
const MAX_FILES: usize = 64;
const MAX_ITEM: usize = 64 << 20;

/// QEMU fw_cfg, legacy I/O interface only (FW_CFG_ID reports "traditional interface", no DMA).
/// Offset 0 (port 0x510) is the 16-bit little-endian selector, offset 1 (port 0x511) the 8-bit
/// data port: each read returns the next byte of the selected item, 0 past its end. Selecting
/// resets the data offset. Writes to the data port are ignored (as in QEMU >= 2.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FwCfg {
    /// (key, contents), sorted by key.
    items: Vec<(u16, Vec<u8>)>,
    /// Named files (key from 0x20 up, in insertion order).
    files: Vec<(String, u16)>,
    selector: u16,
    offset: u32,
}

impl FwCfg {
    /// Items: signature "QEMU", ID 1, zero UUID, RAM size, CPU count, empty file directory.
    pub fn new(ram_bytes: u64, cpus: u16) -> Self {
        let mut f = FwCfg {
            items: Vec::new(),
            files: Vec::new(),
            selector: 0,
            offset: 0,
        };
        f.set(FW_CFG_SIGNATURE, b"QEMU".to_vec());
        f.set(FW_CFG_ID, 1u32.to_le_bytes().to_vec());
        f.set(FW_CFG_UUID, vec![0; 16]);
        f.set(FW_CFG_RAM_SIZE, ram_bytes.to_le_bytes().to_vec());
        f.set(FW_CFG_NOGRAPHIC, 1u16.to_le_bytes().to_vec());
        f.set(FW_CFG_NB_CPUS, cpus.to_le_bytes().to_vec());
        f.set(FW_CFG_MAX_CPUS, cpus.to_le_bytes().to_vec());
        f.rebuild_dir();
        f
    }

    /// Set a numbered item.
    pub fn set(&mut self, key: u16, data: Vec<u8>) {
        let key = key & FW_CFG_ENTRY_MASK;
        match self.items.binary_search_by_key(&key, |(k, _)| *k) {
            Ok(i) => self.items[i].1 = data,
            Err(i) => self.items.insert(i, (key, data)),
        }
    }

    /// Add a named file (name up to 55 bytes); returns its key, or None if the directory is full
    /// or the name too long.
    pub fn add_file(&mut self, name: &str, data: Vec<u8>) -> Option<u16> {
        if name.len() > 55 || self.files.len() >= MAX_FILES || data.len() > MAX_ITEM {
            return None;
        }
        let key = FW_CFG_FILE_FIRST + self.files.len() as u16;
        self.files.push((name.to_string(), key));
        self.set(key, data);
        self.rebuild_dir();
        Some(key)
    }

    fn item(&self, key: u16) -> &[u8] {
        match self.items.binary_search_by_key(&key, |(k, _)| *k) {
            Ok(i) => &self.items[i].1,
            Err(_) => &[],
        }
    }

    /// FILE_DIR: be32 count, then per file be32 size, be16 select, be16 reserved, name[56].
    fn rebuild_dir(&mut self) {
        let mut d = (self.files.len() as u32).to_be_bytes().to_vec();
        for (name, key) in &self.files {
            let size = self.item(*key).len() as u32;
            d.extend_from_slice(&size.to_be_bytes());
            d.extend_from_slice(&key.to_be_bytes());
            d.extend_from_slice(&[0, 0]);
            let mut n = [0u8; 56];
            n[..name.len()].copy_from_slice(name.as_bytes());
            d.extend_from_slice(&n);
        }
        self.set(FW_CFG_FILE_DIR, d);
    }

    fn read_byte(&mut self) -> u8 {
        // arch-local items (bit 15) are not provided
        let b = if self.selector & 0x8000 != 0 {
            0
        } else {
            let item = self.item(self.selector & FW_CFG_ENTRY_MASK);
            item.get(self.offset as usize).copied().unwrap_or(0)
        };
        self.offset = self.offset.saturating_add(1);
        b
    }
}

impl PioDevice for FwCfg {
    fn pio_read(&mut self, offset: u16, size: u8, _now: u64) -> u32 {
        match offset {
            1 => {
                let n = size.clamp(1, 4);
                let mut v = 0u32;
                for i in 0..n {
                    v |= (self.read_byte() as u32) << (8 * i as u32);
                }
                v
            }
            _ => 0,
        }
    }
    fn pio_write(&mut self, offset: u16, _size: u8, value: u32, _now: u64) {
        if offset == 0 {
            self.selector = value as u16;
            self.offset = 0;
        }
    }
}

impl Persist for FwCfg {
    fn save(&self, w: &mut SnapWriter) {
        w.u16(self.selector);
        w.u32(self.offset);
        w.u32(self.items.len() as u32);
        for (k, d) in &self.items {
            w.u16(*k);
            w.blob(d);
        }
        w.u32(self.files.len() as u32);
        for (n, k) in &self.files {
            w.blob(n.as_bytes());
            w.u16(*k);
        }
    }
    fn restore(r: &mut SnapReader) -> Result<Self, SnapError> {
        let selector = r.u16()?;
        let offset = r.u32()?;
        let n = r.u32()? as usize;
        if n > MAX_FILES + FW_CFG_FILE_FIRST as usize {
            return Err(SnapError::Invalid("fw_cfg item count"));
        }
        let mut items: Vec<(u16, Vec<u8>)> = Vec::with_capacity(n);
        for _ in 0..n {
            let k = r.u16()?;
            if items.last().is_some_and(|(p, _)| *p >= k) {
                return Err(SnapError::Invalid("fw_cfg items not sorted"));
            }
            items.push((k, r.blob("fw_cfg item", MAX_ITEM)?));
        }
        let nf = r.u32()? as usize;
        if nf > MAX_FILES {
            return Err(SnapError::Invalid("fw_cfg file count"));
        }
        let mut files = Vec::with_capacity(nf);
        for _ in 0..nf {
            let name = String::from_utf8(r.blob("fw_cfg file name", 55)?)
                .map_err(|_| SnapError::Invalid("fw_cfg file name"))?;
            files.push((name, r.u16()?));
        }
        Ok(FwCfg {
            items,
            files,
            selector,
            offset,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::fuzz::Garbage;

    fn read_item(f: &mut FwCfg, key: u16, n: usize) -> Vec<u8> {
        f.pio_write(0, 2, key as u32, 0);
        (0..n).map(|_| f.pio_read(1, 1, 0) as u8).collect()
    }

    #[test]
    fn fw_cfg_items_and_file_dir() {
        let mut f = FwCfg::new(512 << 20, 2);
        assert_eq!(read_item(&mut f, FW_CFG_SIGNATURE, 5), b"QEMU\0");
        assert_eq!(read_item(&mut f, FW_CFG_ID, 4), [1, 0, 0, 0]);
        assert_eq!(
            read_item(&mut f, FW_CFG_RAM_SIZE, 8),
            (512u64 << 20).to_le_bytes()
        );
        assert_eq!(read_item(&mut f, FW_CFG_NB_CPUS, 2), [2, 0]);
        assert_eq!(read_item(&mut f, FW_CFG_FILE_DIR, 4), [0, 0, 0, 0]);
        assert_eq!(read_item(&mut f, 0x7777, 2), [0, 0]);
        assert_eq!(read_item(&mut f, 0x8000, 1), [0]);
        let key = f.add_file("etc/test", b"hello".to_vec()).unwrap();
        assert_eq!(key, 0x20);
        let dir = read_item(&mut f, FW_CFG_FILE_DIR, 4 + 64);
        assert_eq!(&dir[..4], &[0, 0, 0, 1]);
        assert_eq!(&dir[4..8], &[0, 0, 0, 5]);
        assert_eq!(&dir[8..10], &[0, 0x20]);
        assert_eq!(&dir[12..20], b"etc/test");
        assert_eq!(read_item(&mut f, 0x20, 5), b"hello");
        // a wide read packs successive bytes
        f.pio_write(0, 2, 0, 0);
        assert_eq!(f.pio_read(1, 4, 0), u32::from_le_bytes(*b"QEMU"));
        assert!(f.add_file(&"x".repeat(56), vec![]).is_none());
    }

    #[test]
    fn exit_post_reset() {
        let mut e = DebugExit::default();
        e.pio_write(0, 1, 0x10, 0);
        assert_eq!(e.take_exit(), Some(0x21));
        assert_eq!(e.take_exit(), None);
        e.pio_write(0, 4, 0, 0);
        assert_eq!(e.exit_code, Some(1));
        let mut p = PostCode::default();
        p.pio_write(0, 1, 0x42, 0);
        assert_eq!(p.last, 0x42);
        let mut rc = ResetControl::default();
        rc.pio_write(0, 1, 0x02, 0);
        assert!(!rc.reset_requested);
        rc.pio_write(0, 1, 0x06, 0);
        assert!(rc.take_reset_request());
    }

    fn round_trip<T: Persist + PartialEq + std::fmt::Debug>(t: &T) {
        let mut w = SnapWriter::new();
        t.save(&mut w);
        let b = w.into_bytes();
        assert_eq!(&T::restore(&mut SnapReader::new(&b)).unwrap(), t);
        for n in 0..b.len() {
            assert!(T::restore(&mut SnapReader::new(&b[..n])).is_err());
        }
    }

    #[test]
    fn persist_round_trip_and_garbage() {
        let mut f = FwCfg::new(1 << 30, 1);
        f.add_file("etc/a", vec![1, 2, 3]).unwrap();
        f.pio_write(0, 2, 0x19, 0);
        f.pio_read(1, 1, 0);
        round_trip(&f);
        round_trip(&DebugExit { exit_code: Some(3) });
        round_trip(&PostCode { last: 9 });
        round_trip(&ResetControl {
            value: 2,
            reset_requested: true,
        });
        let mut g = Garbage::new(6);
        let mut e = DebugExit::default();
        let mut rc = ResetControl::default();
        for _ in 0..100_000 {
            let off = g.below(3) as u16;
            let (sz, v) = (g.size(), g.next() as u32);
            match g.below(4) {
                0 => f.pio_write(off, sz, v, 0),
                1 => {
                    f.pio_read(off, sz, 0);
                }
                2 => e.pio_write(off, sz, v, 0),
                _ => rc.pio_write(off, sz, v, 0),
            }
        }
    }
}
