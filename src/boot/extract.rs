//! `lockstep extract-vmlinux`: the ELF `vmlinux` inside a bzImage, found through the setup header's payload_offset/payload_length and decompressed (LZ4 legacy frames and XZ; other formats are named in the error).

use super::bzimage::parse_header;
use super::BootError;
use std::io::Read;

/// Setup header: offset of the compressed payload from the start of the protected-mode code,
/// and its length (boot protocol 2.08+).
const PAYLOAD_OFFSET: usize = 0x248;
const PAYLOAD_LENGTH: usize = 0x24c;
/// Decompressed size limit: far above any kernel, bounds a corrupt or hostile payload.
const MAX_OUTPUT: usize = 1 << 30;
/// LZ4 legacy frame ("lz4 -l", what the kernel's build uses): magic, then blocks of a 32-bit
/// little-endian compressed size and data, each decompressing to 8 MiB (the last to less).
const LZ4_LEGACY_MAGIC: u32 = 0x184c_2102;
const LZ4_LEGACY_BLOCK: usize = 8 << 20;

/// How a kernel payload is compressed (from its magic bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    Gzip,
    Bzip2,
    Lzma,
    Xz,
    Lzo,
    Lz4,
    Zstd,
    /// Not compressed: already an ELF file.
    None,
    Unknown,
}

impl Compression {
    pub fn detect(p: &[u8]) -> Self {
        let magics: [(&[u8], Compression); 8] = [
            (b"\x1f\x8b", Compression::Gzip),
            (b"BZh", Compression::Bzip2),
            (b"\x5d\x00\x00", Compression::Lzma),
            (b"\xfd7zXZ\x00", Compression::Xz),
            (b"\x89LZO\x00\r\n\x1a\n", Compression::Lzo),
            (b"\x02\x21\x4c\x18", Compression::Lz4),
            (b"\x28\xb5\x2f\xfd", Compression::Zstd),
            (b"\x7fELF", Compression::None),
        ];
        magics
            .iter()
            .find(|(m, _)| p.starts_with(m))
            .map(|&(_, c)| c)
            .unwrap_or(Compression::Unknown)
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Bzip2 => "bzip2",
            Compression::Lzma => "LZMA",
            Compression::Xz => "XZ",
            Compression::Lzo => "LZO",
            Compression::Lz4 => "LZ4 (legacy frame)",
            Compression::Zstd => "zstd",
            Compression::None => "uncompressed",
            Compression::Unknown => "unknown",
        }
    }
}

/// The vmlinux extracted from a bzImage, and what it came from.
#[derive(Debug)]
pub struct Extracted {
    pub vmlinux: Vec<u8>,
    pub compression: Compression,
    pub payload_len: usize,
}

fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(o..o.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn bad(msg: impl Into<String>) -> BootError {
    BootError::Kernel(msg.into())
}

/// The compressed payload of a bzImage.
pub fn payload(image: &[u8]) -> Result<&[u8], BootError> {
    let h = parse_header(image)?;
    let off = u32_at(image, PAYLOAD_OFFSET).unwrap_or(0) as usize;
    let len = u32_at(image, PAYLOAD_LENGTH).unwrap_or(0) as usize;
    if len == 0 {
        return Err(bad(
            "the setup header has no payload (payload_length is 0; boot protocol 2.08+ needed)",
        ));
    }
    let start = h.setup_size.saturating_add(off);
    image.get(start..start.saturating_add(len)).ok_or_else(|| {
        bad(format!(
            "truncated bzImage: payload {start:#x}+{len:#x} runs past the end of the {}-byte file",
            image.len()
        ))
    })
}

/// Extract and decompress the vmlinux of a bzImage; the result must be an ELF file.
pub fn extract(image: &[u8]) -> Result<Extracted, BootError> {
    let p = payload(image)?;
    let compression = Compression::detect(p);
    let vmlinux = decompress(p, compression)?;
    if !vmlinux.starts_with(b"\x7fELF") {
        return Err(bad(format!(
            "the decompressed {} payload is not an ELF file",
            compression.name()
        )));
    }
    Ok(Extracted {
        vmlinux,
        compression,
        payload_len: p.len(),
    })
}

/// Decompress a kernel payload.
pub fn decompress(p: &[u8], c: Compression) -> Result<Vec<u8>, BootError> {
    match c {
        Compression::Lz4 => unlz4_legacy(p),
        Compression::Xz => unxz(p),
        Compression::None => Ok(p.to_vec()),
        Compression::Unknown => Err(bad(format!(
            "unknown compression of the kernel payload (first bytes {:02x?})",
            &p[..p.len().min(6)]
        ))),
        other => Err(bad(format!(
            "the kernel payload is {}-compressed, which extract-vmlinux does not support \
             (supported: LZ4, XZ)",
            other.name()
        ))),
    }
}

/// LZ4 legacy frames, possibly concatenated, followed (in a kernel build) by the 4-byte
/// uncompressed size that `size_append` adds; that trailer is checked when present.
fn unlz4_legacy(p: &[u8]) -> Result<Vec<u8>, BootError> {
    if u32_at(p, 0) != Some(LZ4_LEGACY_MAGIC) {
        return Err(bad("not an LZ4 legacy frame"));
    }
    let mut out = Vec::new();
    let mut block = vec![0u8; LZ4_LEGACY_BLOCK];
    let mut pos = 4;
    while pos < p.len() {
        let Some(n) = u32_at(p, pos) else {
            return Err(bad(format!(
                "LZ4: {} stray bytes at the end of the payload",
                p.len() - pos
            )));
        };
        if pos + 4 == p.len() {
            // The kernel's size trailer.
            if n as usize != out.len() {
                return Err(bad(format!(
                    "LZ4: the size trailer says {n} bytes, the data decompressed to {}",
                    out.len()
                )));
            }
            break;
        }
        pos += 4;
        if n == LZ4_LEGACY_MAGIC {
            continue; // a concatenated frame
        }
        let data = p.get(pos..pos.saturating_add(n as usize)).ok_or_else(|| {
            bad(format!(
                "LZ4: truncated block of {n} bytes at payload offset {:#x}",
                pos - 4
            ))
        })?;
        let got = lz4_flex::block::decompress_into(data, &mut block).map_err(|e| {
            bad(format!(
                "LZ4: corrupt block at payload offset {:#x}: {e}",
                pos - 4
            ))
        })?;
        if out.len() + got > MAX_OUTPUT {
            return Err(bad("LZ4: decompressed data exceeds 1 GiB"));
        }
        out.extend_from_slice(&block[..got]);
        pos += n as usize;
    }
    Ok(out)
}

/// One XZ stream (the kernel uses the x86 BCJ filter before LZMA2 and a CRC32 check); the
/// size trailer after the stream is ignored.
fn unxz(p: &[u8]) -> Result<Vec<u8>, BootError> {
    let r = lzma_rust2::XzReader::new(p, false);
    let mut out = Vec::new();
    r.take(MAX_OUTPUT as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| bad(format!("XZ: corrupt payload: {e}")))?;
    if out.len() > MAX_OUTPUT {
        return Err(bad("XZ: decompressed data exceeds 1 GiB"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_magics() {
        assert_eq!(Compression::detect(b"\xfd7zXZ\x00\x00"), Compression::Xz);
        assert_eq!(Compression::detect(b"\x02\x21\x4c\x18xx"), Compression::Lz4);
        assert_eq!(Compression::detect(b"\x1f\x8b\x08"), Compression::Gzip);
        assert_eq!(Compression::detect(b"\x7fELF"), Compression::None);
        assert_eq!(Compression::detect(b"??"), Compression::Unknown);
        let e = decompress(b"\x1f\x8b\x08\x00", Compression::Gzip).unwrap_err();
        assert!(e.to_string().contains("gzip-compressed"), "{e}");
        let e = decompress(b"\x01\x02", Compression::Unknown).unwrap_err();
        assert!(e.to_string().contains("unknown compression"), "{e}");
    }

    /// A legacy LZ4 stream of `data` (blocks of 8 MiB) with the kernel's size trailer.
    fn lz4_legacy(data: &[u8]) -> Vec<u8> {
        let mut s = LZ4_LEGACY_MAGIC.to_le_bytes().to_vec();
        for chunk in data.chunks(LZ4_LEGACY_BLOCK) {
            let c = lz4_flex::block::compress(chunk);
            s.extend_from_slice(&(c.len() as u32).to_le_bytes());
            s.extend_from_slice(&c);
        }
        s.extend_from_slice(&(data.len() as u32).to_le_bytes());
        s
    }

    #[test]
    fn lz4_legacy_round_trip_and_errors() {
        let data: Vec<u8> = (0..(9u32 << 20)).map(|i| (i * 7 / 13) as u8).collect();
        let s = lz4_legacy(&data);
        assert_eq!(unlz4_legacy(&s).unwrap(), data);
        // Without the trailer.
        assert_eq!(unlz4_legacy(&s[..s.len() - 4]).unwrap(), data);
        // Wrong trailer.
        let mut t = s.clone();
        let n = t.len();
        t[n - 4] ^= 1;
        assert!(unlz4_legacy(&t)
            .unwrap_err()
            .to_string()
            .contains("size trailer"));
        // Truncated anywhere: an error (or a shorter result), never a panic.
        for cut in (0..s.len()).step_by(s.len() / 97 + 1) {
            let _ = unlz4_legacy(&s[..cut]);
        }
        assert!(unlz4_legacy(&s[..s.len() / 2])
            .unwrap_err()
            .to_string()
            .contains("truncated"));
    }

    #[test]
    fn payload_bounds() {
        // A bzImage-like header whose payload points past the file.
        let mut img = vec![0u8; 2048];
        img[0x1f1] = 1;
        img[0x1fe..0x200].copy_from_slice(&0xaa55u16.to_le_bytes());
        img[0x202..0x206].copy_from_slice(b"HdrS");
        img[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
        img[0x236..0x238].copy_from_slice(&1u16.to_le_bytes());
        img[PAYLOAD_OFFSET..PAYLOAD_OFFSET + 4].copy_from_slice(&0x10u32.to_le_bytes());
        img[PAYLOAD_LENGTH..PAYLOAD_LENGTH + 4].copy_from_slice(&0x1000u32.to_le_bytes());
        let e = extract(&img).unwrap_err().to_string();
        assert!(e.contains("runs past the end"), "{e}");
        img[PAYLOAD_LENGTH..PAYLOAD_LENGTH + 4].copy_from_slice(&0u32.to_le_bytes());
        assert!(extract(&img)
            .unwrap_err()
            .to_string()
            .contains("no payload"));
        // A payload that is a (tiny) LZ4 stream of something that is not ELF.
        let s = lz4_legacy(b"hello, not an ELF file");
        img[PAYLOAD_LENGTH..PAYLOAD_LENGTH + 4].copy_from_slice(&(s.len() as u32).to_le_bytes());
        img[1024 + 0x10..1024 + 0x10 + s.len()].copy_from_slice(&s);
        let e = extract(&img).unwrap_err().to_string();
        assert!(e.contains("not an ELF"), "{e}");
        let s = lz4_legacy(b"\x7fELF and more");
        img[PAYLOAD_LENGTH..PAYLOAD_LENGTH + 4].copy_from_slice(&(s.len() as u32).to_le_bytes());
        img[1024 + 0x10..1024 + 0x10 + s.len()].copy_from_slice(&s);
        let x = extract(&img).unwrap();
        assert_eq!(x.compression, Compression::Lz4);
        assert_eq!(x.vmlinux, b"\x7fELF and more");
    }
}
