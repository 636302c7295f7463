//! Clang offload bundles (`__CLANG_OFFLOAD_BUNDLE__`, what hipcc emits into a fat binary):
//! the 24-byte magic, a little-endian u64 entry count, then per entry u64 offset, u64 size,
//! u64 ID length and the ID (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`,
//! `host-x86_64-unknown-linux-gnu`). Layout: LLVM `clang/lib/Driver/OffloadBundler.cpp`
//! (`BinaryFileHandler::ReadHeader`); the compressed form (`CCOB`) is not supported.

use crate::target::TargetId;
use crate::Error;

/// The magic string at offset 0 of an uncompressed bundle.
pub const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
/// The magic of a compressed bundle (`CompressedOffloadBundle`).
pub const COMPRESSED_BUNDLE_MAGIC: &[u8] = b"CCOB";

/// One entry of a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleEntry<'a> {
    /// The entry ID, for example `hipv4-amdgcn-amd-amdhsa--gfx90a`.
    pub id: String,
    /// The offload kind (`hip`, `hipv4`, `openmp`, `host`).
    pub kind: String,
    /// The entry's target ID when it is an AMDHSA entry.
    pub target: Option<TargetId>,
    /// The entry bytes.
    pub data: &'a [u8],
}

/// Whether `bytes` start like an offload bundle (either form).
pub fn is_bundle(bytes: &[u8]) -> bool {
    bytes.starts_with(BUNDLE_MAGIC) || bytes.starts_with(COMPRESSED_BUNDLE_MAGIC)
}

fn u64_at(b: &[u8], off: usize) -> Result<u64, Error> {
    let s = off
        .checked_add(8)
        .and_then(|e| b.get(off..e))
        .ok_or_else(|| Error::Bundle(format!("truncated header at byte {off}")))?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Ok(u64::from_le_bytes(a))
}

/// Parses every entry of an uncompressed bundle.
pub fn entries(bytes: &[u8]) -> Result<Vec<BundleEntry<'_>>, Error> {
    if bytes.starts_with(COMPRESSED_BUNDLE_MAGIC) {
        return Err(Error::Unsupported(
            "compressed clang offload bundle (CCOB); unbundle it with clang-offload-bundler".into(),
        ));
    }
    if !bytes.starts_with(BUNDLE_MAGIC) {
        return Err(Error::Bundle("no __CLANG_OFFLOAD_BUNDLE__ magic".into()));
    }
    let n = u64_at(bytes, BUNDLE_MAGIC.len())?;
    // Each entry header takes at least 24 bytes: bound the count by the input.
    if n > (bytes.len() / 24) as u64 {
        return Err(Error::Bundle(format!(
            "{n} entries in {} bytes",
            bytes.len()
        )));
    }
    let mut pos = BUNDLE_MAGIC.len() + 8;
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n {
        let off = u64_at(bytes, pos)?;
        let size = u64_at(bytes, pos + 8)?;
        let id_len = u64_at(bytes, pos + 16)?;
        pos += 24;
        let id_end = usize::try_from(id_len)
            .ok()
            .and_then(|l| pos.checked_add(l))
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| Error::Bundle(format!("entry {i}: ID runs past the end")))?;
        let id = std::str::from_utf8(&bytes[pos..id_end])
            .map_err(|_| Error::Bundle(format!("entry {i}: ID is not UTF-8")))?
            .to_string();
        pos = id_end;
        let data = usize::try_from(off)
            .ok()
            .zip(usize::try_from(size).ok())
            .and_then(|(o, s)| Some((o, o.checked_add(s)?)))
            .and_then(|(o, e)| bytes.get(o..e))
            .ok_or_else(|| Error::Bundle(format!("entry {i} ({id}): data runs past the end")))?;
        let (kind, triple) = id.split_once('-').unwrap_or((id.as_str(), ""));
        let target = if triple.starts_with(crate::target::AMDHSA_TRIPLE) {
            Some(TargetId::parse(triple)?)
        } else {
            None
        };
        out.push(BundleEntry {
            kind: kind.to_string(),
            target,
            id: id.clone(),
            data,
        });
    }
    Ok(out)
}

/// The code object in `bytes` for `device`: the first HIP/OpenMP AMDHSA entry whose target
/// is compatible with the device's. The error lists the targets the bundle holds.
pub fn select<'a>(bytes: &'a [u8], device: &TargetId) -> Result<&'a [u8], Error> {
    let all = entries(bytes)?;
    let pick = all.iter().find(|e| {
        matches!(e.kind.as_str(), "hip" | "hipv4" | "openmp")
            && e.target.as_ref().is_some_and(|t| t.compatible_with(device))
            && !e.data.is_empty()
    });
    match pick {
        Some(e) => Ok(e.data),
        None => Err(Error::TargetMismatch {
            code_object: {
                let ids: Vec<&str> = all.iter().map(|e| e.id.as_str()).collect();
                format!("offload bundle [{}]", ids.join(", "))
            },
            device: device.to_string(),
        }),
    }
}

/// Builds an uncompressed bundle from `(id, data)` entries (for tests and tools).
pub fn build(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut hdr = BUNDLE_MAGIC.to_vec();
    hdr.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    let header_len: usize = hdr.len() + entries.iter().map(|(id, _)| 24 + id.len()).sum::<usize>();
    let mut data_off = header_len.next_multiple_of(4096);
    let mut body = Vec::new();
    for (id, d) in entries {
        hdr.extend_from_slice(&(data_off as u64).to_le_bytes());
        hdr.extend_from_slice(&(d.len() as u64).to_le_bytes());
        hdr.extend_from_slice(&(id.len() as u64).to_le_bytes());
        hdr.extend_from_slice(id.as_bytes());
        body.push((data_off, *d));
        data_off = (data_off + d.len()).next_multiple_of(4096);
    }
    let mut out = hdr;
    for (off, d) in body {
        out.resize(off, 0);
        out.extend_from_slice(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Feature;

    #[test]
    fn build_parse_select() {
        let b = build(&[
            ("host-x86_64-unknown-linux-gnu", b""),
            ("hipv4-amdgcn-amd-amdhsa--gfx90a", b"A90A"),
            ("hipv4-amdgcn-amd-amdhsa--gfx942:xnack-", b"B942"),
        ]);
        let e = entries(&b).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(e[1].kind, "hipv4");
        assert_eq!(e[2].target.as_ref().unwrap().xnack, Feature::Off);
        let dev = TargetId::new("gfx942", Feature::On, Feature::Off);
        assert_eq!(select(&b, &dev).unwrap(), b"B942");
        let dev = TargetId::new("gfx90a", Feature::Off, Feature::On);
        assert_eq!(select(&b, &dev).unwrap(), b"A90A");
        let dev = TargetId::new("gfx1100", Feature::Off, Feature::Off);
        let err = select(&b, &dev).unwrap_err().to_string();
        assert!(err.contains("gfx1100") && err.contains("gfx90a"), "{err}");
    }

    #[test]
    fn truncated_bundles_are_errors() {
        let b = build(&[("hipv4-amdgcn-amd-amdhsa--gfx90a", b"0123456789")]);
        for n in 0..b.len() {
            // Any prefix either parses or errors; none panics.
            let _ = entries(&b[..n]);
        }
        assert!(entries(&b[..30]).is_err());
        assert!(entries(b"CCOB....").is_err());
        let mut huge = BUNDLE_MAGIC.to_vec();
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(entries(&huge).is_err());
    }
}
