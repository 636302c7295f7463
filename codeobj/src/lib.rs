//! AMDGPU HSA code objects: the ELF files clang and hipcc produce for AMD GPUs.
//!
//! Pure parsing, no I/O besides [`CodeObject::from_file`]: the ELF via the `object` crate,
//! the `NT_AMDGPU_METADATA` note via `rmpv`. Supports code object v4, v5 and v6
//! (`EI_ABIVERSION` 2, 3, 4 with `ELFOSABI_AMDGPU_HSA`), kernels found by their `.kd`
//! symbols with their 64-byte [`KernelDescriptor`] and metadata, loadable segments with
//! the AMDGPU dynamic relocations applied for a chosen load address, global variables,
//! target IDs and clang offload bundles. Hostile input gives an [`Error`], never a panic.
//! Facts and sources: `firmware-notes/kernels.md`.
//!
//! ```no_run
//! let elf = std::fs::read("vadd.co").unwrap();
//! let co = codeobj::CodeObject::parse(&elf).unwrap();
//! let k = co.kernel("vadd").unwrap();
//! println!("{} kernarg bytes, entry at {:#x}", k.meta.kernarg_segment_size, k.entry_offset());
//! let image = co.load_image(0x7f00_0000_0000).unwrap(); // relocated bytes to copy to the GPU
//! # let _ = image;
//! ```
#![deny(missing_docs)]

pub mod bundle;
pub mod metadata;
pub mod target;

use object::elf;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, Rel, Rela, SectionHeader, Sym};
use object::LittleEndian as LE;

pub use metadata::{KernelArg, KernelMeta, Metadata, ValueKind};
pub use pm4::kd::{KernelDescriptor, KERNEL_DESCRIPTOR_SIZE};
pub use target::{Feature, TargetId};

/// Why a code object was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The ELF container is malformed or truncated.
    #[error("code object ELF: {0}")]
    Elf(String),
    /// The `NT_AMDGPU_METADATA` note is missing or malformed.
    #[error("code object metadata: {0}")]
    Metadata(String),
    /// A target ID is malformed.
    #[error("{0}")]
    Target(String),
    /// The code object's target does not run on the device.
    #[error("code object target {code_object} does not run on device target {device}")]
    TargetMismatch {
        /// What the code object (or bundle) is built for.
        code_object: String,
        /// The device's target ID.
        device: String,
    },
    /// A clang offload bundle is malformed.
    #[error("clang offload bundle: {0}")]
    Bundle(String),
    /// A valid feature this crate does not handle.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// A relocation cannot be applied.
    #[error("relocation: {0}")]
    Relocation(String),
    /// No kernel of that name.
    #[error("no kernel named {name:?} in the code object (kernels: {available})")]
    NoKernel {
        /// The name asked for.
        name: String,
        /// The kernels the code object has, comma-separated.
        available: String,
    },
    /// Reading a file failed.
    #[error("{0}")]
    Io(String),
}

impl From<object::Error> for Error {
    fn from(e: object::Error) -> Self {
        Error::Elf(e.to_string())
    }
}

/// `EM_AMDGPU`.
pub const EM_AMDGPU: u16 = 224;
/// `ELFOSABI_AMDGPU_HSA`.
pub const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// `NT_AMDGPU_METADATA` (note name `AMDGPU`).
pub const NT_AMDGPU_METADATA: u32 = 32;
/// Largest load image accepted (the span of the PT_LOAD segments).
pub const MAX_IMAGE_BYTES: u64 = 1 << 30;

/// AMDGPU relocation types (LLVM `llvm/BinaryFormat/ELFRelocs/AMDGPU.def`).
pub mod reloc {
    /// `R_AMDGPU_NONE`.
    pub const NONE: u32 = 0;
    /// `R_AMDGPU_ABS32_LO`: low 32 bits of S + A.
    pub const ABS32_LO: u32 = 1;
    /// `R_AMDGPU_ABS32_HI`: high 32 bits of S + A.
    pub const ABS32_HI: u32 = 2;
    /// `R_AMDGPU_ABS64`: S + A.
    pub const ABS64: u32 = 3;
    /// `R_AMDGPU_REL32`: S + A - P (32 bits).
    pub const REL32: u32 = 4;
    /// `R_AMDGPU_REL64`: S + A - P.
    pub const REL64: u32 = 5;
    /// `R_AMDGPU_ABS32`: S + A (32 bits).
    pub const ABS32: u32 = 6;
    /// `R_AMDGPU_REL32_LO`: low 32 bits of S + A - P.
    pub const REL32_LO: u32 = 10;
    /// `R_AMDGPU_REL32_HI`: high 32 bits of S + A - P.
    pub const REL32_HI: u32 = 11;
    /// `R_AMDGPU_RELATIVE64`: B + A.
    pub const RELATIVE64: u32 = 13;
}

/// The code object version (from `EI_ABIVERSION`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CodeObjectVersion {
    /// v4 (`ELFABIVERSION_AMDGPU_HSA_V4` = 2).
    V4,
    /// v5 (3): hidden arguments describe the dispatch.
    V5,
    /// v6 (4): generic targets.
    V6,
}

impl CodeObjectVersion {
    /// The version number (4, 5, 6).
    pub fn number(self) -> u32 {
        match self {
            CodeObjectVersion::V4 => 4,
            CodeObjectVersion::V5 => 5,
            CodeObjectVersion::V6 => 6,
        }
    }
}

/// A PT_LOAD segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Address relative to the load base.
    pub vaddr: u64,
    /// Bytes in memory (the tail beyond `file_size` is zero).
    pub mem_size: u64,
    /// Offset of the file bytes.
    pub file_offset: u64,
    /// Bytes taken from the file.
    pub file_size: u64,
    /// `PF_R | PF_W | PF_X`.
    pub flags: u32,
}

/// A relocation the loader applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relocation {
    /// Where, relative to the load base.
    pub offset: u64,
    /// [`reloc`] type.
    pub r_type: u32,
    /// The symbol's value (relative to the base) when the relocation names a defined
    /// symbol; `None` for no symbol.
    pub symbol_value: Option<u64>,
    /// The symbol name, when any.
    pub symbol_name: Option<String>,
    /// The symbol is undefined (and not weak): the relocation cannot be resolved.
    pub undefined: bool,
    /// The addend (explicit for RELA, read from the image for REL).
    pub addend: i64,
    /// Whether the addend is implicit (SHT_REL).
    pub implicit_addend: bool,
}

/// A defined symbol (global variable or function).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Name.
    pub name: String,
    /// Address relative to the load base.
    pub address: u64,
    /// Size in bytes.
    pub size: u64,
    /// `STT_OBJECT` (a variable) vs function / other.
    pub is_object: bool,
}

/// A kernel: its descriptor and metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    /// The kernel name (`.name`).
    pub name: String,
    /// Address of the `.kd` symbol relative to the load base (the AQL `kernel_object` is
    /// base + this).
    pub kd_offset: u64,
    /// The kernel descriptor.
    pub descriptor: KernelDescriptor,
    /// The metadata entry.
    pub meta: KernelMeta,
}

impl Kernel {
    /// Address of the first instruction relative to the load base.
    pub fn entry_offset(&self) -> u64 {
        self.kd_offset
            .wrapping_add_signed(self.descriptor.kernel_code_entry_byte_offset)
    }
}

/// A parsed code object.
#[derive(Debug, Clone)]
pub struct CodeObject {
    data: Vec<u8>,
    /// Code object version.
    pub version: CodeObjectVersion,
    /// The target the code was built for.
    pub target: TargetId,
    /// `e_flags`.
    pub e_flags: u32,
    /// The metadata note.
    pub metadata: Metadata,
    /// Kernels, in metadata order.
    pub kernels: Vec<Kernel>,
    /// PT_LOAD segments.
    pub segments: Vec<Segment>,
    /// Dynamic relocations.
    pub relocations: Vec<Relocation>,
    /// Defined symbols (variables, functions, `.kd` descriptors).
    pub symbols: Vec<Symbol>,
}

impl CodeObject {
    /// Reads and parses a code object (or offload bundle, see [`CodeObject::parse_for`])
    /// from a file.
    pub fn from_file(path: impl AsRef<std::path::Path>) -> Result<CodeObject, Error> {
        let p = path.as_ref();
        let b = std::fs::read(p).map_err(|e| Error::Io(format!("{}: {e}", p.display())))?;
        CodeObject::parse(&b)
    }

    /// Parses a code object, or an offload bundle holding a compatible one for `device`;
    /// refuses a code object whose target does not run on `device` (the error names both).
    pub fn parse_for(bytes: &[u8], device: &TargetId) -> Result<CodeObject, Error> {
        let elf = if bundle::is_bundle(bytes) {
            bundle::select(bytes, device)?
        } else {
            bytes
        };
        let co = CodeObject::parse(elf)?;
        co.target.check(device)?;
        Ok(co)
    }

    /// Parses an ELF code object.
    pub fn parse(bytes: &[u8]) -> Result<CodeObject, Error> {
        if bundle::is_bundle(bytes) {
            return Err(Error::Unsupported(
                "a clang offload bundle: use CodeObject::parse_for with the device's target".into(),
            ));
        }
        if bytes.len() < 4 || &bytes[..4] != b"\x7fELF" {
            return Err(Error::Elf("no ELF magic".into()));
        }
        // The ELF layer reads headers in place and needs them 8-byte aligned; input from
        // `include_bytes!` or a sub-slice of a bundle may not be.
        let store;
        let bytes = if bytes.as_ptr() as usize % 8 == 0 {
            bytes
        } else {
            store = aligned_copy(bytes);
            &store.0[store.1..store.1 + bytes.len()]
        };
        let f = ElfFile64::<LE>::parse(bytes)?;
        let hdr = f.elf_header();
        let ident = hdr.e_ident();
        if hdr.e_machine(LE) != EM_AMDGPU {
            return Err(Error::Elf(format!(
                "e_machine {} is not EM_AMDGPU ({EM_AMDGPU})",
                hdr.e_machine(LE)
            )));
        }
        if ident.os_abi != ELFOSABI_AMDGPU_HSA {
            return Err(Error::Unsupported(format!(
                "EI_OSABI {} (want ELFOSABI_AMDGPU_HSA {ELFOSABI_AMDGPU_HSA}: PAL and Mesa \
                 code objects are not HSA code objects)",
                ident.os_abi
            )));
        }
        let version = match ident.abi_version {
            2 => CodeObjectVersion::V4,
            3 => CodeObjectVersion::V5,
            4 => CodeObjectVersion::V6,
            v => {
                return Err(Error::Unsupported(format!(
                    "code object EI_ABIVERSION {v} (v{}); kfdrt loads v4, v5 and v6",
                    u32::from(v) + 2
                )))
            }
        };
        let e_flags = hdr.e_flags(LE);

        let mut segments = Vec::new();
        let mut meta_desc: Option<&[u8]> = None;
        for ph in f.elf_program_headers() {
            match ph.p_type(LE) {
                elf::PT_LOAD => {
                    let s = Segment {
                        vaddr: ph.p_vaddr(LE),
                        mem_size: ph.p_memsz(LE),
                        file_offset: ph.p_offset(LE),
                        file_size: ph.p_filesz(LE),
                        flags: ph.p_flags(LE),
                    };
                    if s.file_size > s.mem_size
                        || s.file_offset
                            .checked_add(s.file_size)
                            .is_none_or(|e| e > bytes.len() as u64)
                        || s.vaddr
                            .checked_add(s.mem_size)
                            .is_none_or(|e| e > MAX_IMAGE_BYTES)
                    {
                        return Err(Error::Elf(format!(
                            "PT_LOAD at {:#x} (file {:#x}+{:#x}, memory {:#x}) is out of range",
                            s.vaddr, s.file_offset, s.file_size, s.mem_size
                        )));
                    }
                    segments.push(s);
                }
                elf::PT_NOTE => {
                    if let Some(mut notes) = ph.notes(LE, bytes)? {
                        while let Some(n) = notes.next()? {
                            if n.name() == b"AMDGPU" && n.n_type(LE) == NT_AMDGPU_METADATA {
                                meta_desc = Some(n.desc());
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        if segments.is_empty() {
            return Err(Error::Elf("no PT_LOAD segment".into()));
        }
        let desc = meta_desc
            .ok_or_else(|| Error::Metadata("no NT_AMDGPU_METADATA note in a PT_NOTE".into()))?;
        let metadata = metadata::parse(desc)?;

        let target = match &metadata.target {
            Some(t) => TargetId::parse(t)?,
            None => target_from_flags(e_flags)?,
        };

        let sections = hdr.sections(LE, bytes)?;
        let mut symbols = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for table in [
            sections.symbols(LE, bytes, elf::SHT_DYNSYM)?,
            sections.symbols(LE, bytes, elf::SHT_SYMTAB)?,
        ] {
            for s in table.iter() {
                if s.st_shndx(LE) == elf::SHN_UNDEF || s.st_name(LE) == 0 {
                    continue;
                }
                let name = s
                    .name(LE, table.strings())
                    .map_err(|_| Error::Elf("symbol name out of range".into()))?;
                let name = String::from_utf8_lossy(name).into_owned();
                if !seen.insert(name.clone()) {
                    continue;
                }
                symbols.push(Symbol {
                    name,
                    address: s.st_value(LE),
                    size: s.st_size(LE),
                    is_object: s.st_type() == elf::STT_OBJECT,
                });
            }
        }

        let mut relocations = Vec::new();
        for sh in sections.iter() {
            let ty = sh.sh_type(LE);
            if ty != elf::SHT_RELA && ty != elf::SHT_REL {
                continue;
            }
            let link = object::SectionIndex(sh.sh_link(LE) as usize);
            let symtab = if link.0 == 0 {
                None
            } else {
                Some(sections.symbol_table_by_index(LE, bytes, link)?)
            };
            // Only relocations against the loaded image (not .rela.debug_* or the like).
            if sh.sh_flags(LE) & u64::from(elf::SHF_INFO_LINK) != 0 {
                continue;
            }
            let mut push = |offset: u64, sym: u32, r_type: u32, addend: i64, implicit: bool| {
                let (symbol_value, symbol_name, undefined) = match (&symtab, sym) {
                    (_, 0) | (None, _) => (None, None, false),
                    (Some(t), i) => {
                        let s = t.symbol(object::SymbolIndex(i as usize)).map_err(|_| {
                            Error::Elf(format!("relocation symbol {i} out of range"))
                        })?;
                        let n = s
                            .name(LE, t.strings())
                            .map(|n| String::from_utf8_lossy(n).into_owned())
                            .ok();
                        let undef = s.st_shndx(LE) == elf::SHN_UNDEF;
                        let weak = s.st_bind() == elf::STB_WEAK;
                        (
                            Some(if undef { 0 } else { s.st_value(LE) }),
                            n,
                            undef && !weak,
                        )
                    }
                };
                relocations.push(Relocation {
                    offset,
                    r_type,
                    symbol_value,
                    symbol_name,
                    undefined,
                    addend,
                    implicit_addend: implicit,
                });
                Ok::<(), Error>(())
            };
            if ty == elf::SHT_RELA {
                let rs: &[elf::Rela64<LE>] = sh
                    .data_as_array(LE, bytes)
                    .map_err(|_| Error::Elf("SHT_RELA section out of range".into()))?;
                for r in rs {
                    push(
                        r.r_offset(LE),
                        r.r_sym(LE, false),
                        r.r_type(LE, false),
                        r.r_addend(LE),
                        false,
                    )?;
                }
            } else {
                let rs: &[elf::Rel64<LE>] = sh
                    .data_as_array(LE, bytes)
                    .map_err(|_| Error::Elf("SHT_REL section out of range".into()))?;
                for r in rs {
                    push(r.r_offset(LE), r.r_sym(LE), r.r_type(LE), 0, true)?;
                }
            }
        }

        let mut co = CodeObject {
            data: bytes.to_vec(),
            version,
            target,
            e_flags,
            metadata,
            kernels: Vec::new(),
            segments,
            relocations,
            symbols,
        };
        let mut kernels = Vec::with_capacity(co.metadata.kernels.len());
        for m in &co.metadata.kernels {
            let sym = co
                .symbols
                .iter()
                .find(|s| s.name == m.symbol)
                .ok_or_else(|| Error::Elf(format!("kernel {}: no symbol {}", m.name, m.symbol)))?;
            if sym.address % KERNEL_DESCRIPTOR_SIZE as u64 != 0 {
                return Err(Error::Elf(format!(
                    "kernel {}: descriptor at {:#x} is not 64-byte aligned",
                    m.name, sym.address
                )));
            }
            let raw = co.read_loaded(sym.address, KERNEL_DESCRIPTOR_SIZE)?;
            let descriptor = KernelDescriptor::from_slice(&raw)
                .ok_or_else(|| Error::Elf(format!("kernel {}: short descriptor", m.name)))?;
            kernels.push(Kernel {
                name: m.name.clone(),
                kd_offset: sym.address,
                descriptor,
                meta: m.clone(),
            });
        }
        co.kernels = kernels;
        Ok(co)
    }

    /// The kernel named `name` (its `.name`, or its `.kd` symbol).
    pub fn kernel(&self, name: &str) -> Result<&Kernel, Error> {
        self.kernels
            .iter()
            .find(|k| k.name == name || k.meta.symbol == name)
            .ok_or_else(|| Error::NoKernel {
                name: name.to_string(),
                available: self
                    .kernels
                    .iter()
                    .map(|k| k.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// A defined global variable (`STT_OBJECT`, not a kernel descriptor) by name.
    pub fn global(&self, name: &str) -> Option<&Symbol> {
        self.symbols
            .iter()
            .find(|s| s.is_object && s.name == name && !s.name.ends_with(".kd"))
    }

    /// The original ELF bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// Bytes of the load image: from address 0 to the end of the last segment, rounded up
    /// to 4 KiB.
    pub fn image_size(&self) -> u64 {
        self.segments
            .iter()
            .map(|s| s.vaddr + s.mem_size)
            .max()
            .unwrap_or(0)
            .next_multiple_of(4096)
    }

    fn read_loaded(&self, addr: u64, len: usize) -> Result<Vec<u8>, Error> {
        let end = addr
            .checked_add(len as u64)
            .ok_or_else(|| Error::Elf(format!("address {addr:#x} overflows")))?;
        let s = self
            .segments
            .iter()
            .find(|s| s.vaddr <= addr && end <= s.vaddr + s.mem_size)
            .ok_or_else(|| Error::Elf(format!("{addr:#x}+{len} lies in no PT_LOAD segment")))?;
        let mut out = vec![0u8; len];
        for (i, b) in out.iter_mut().enumerate() {
            let rel = addr - s.vaddr + i as u64;
            if rel < s.file_size {
                *b = self.data[(s.file_offset + rel) as usize];
            }
        }
        Ok(out)
    }

    /// The load image for loading at GPU address `base`: every PT_LOAD segment at its
    /// address (zero-filled past its file bytes), with every relocation applied for
    /// `base`. `base` must be page aligned.
    pub fn load_image(&self, base: u64) -> Result<Vec<u8>, Error> {
        if base % 4096 != 0 {
            return Err(Error::Relocation(format!(
                "load base {base:#x} is not 4 KiB aligned"
            )));
        }
        let mut img = vec![0u8; self.image_size() as usize];
        for s in &self.segments {
            let (o, n) = (s.file_offset as usize, s.file_size as usize);
            img[s.vaddr as usize..s.vaddr as usize + n].copy_from_slice(&self.data[o..o + n]);
        }
        for r in &self.relocations {
            apply(&mut img, base, r)?;
        }
        Ok(img)
    }
}

/// A copy of `bytes` starting at an 8-byte aligned address: (buffer, offset of the copy).
fn aligned_copy(bytes: &[u8]) -> (Vec<u8>, usize) {
    let mut v = vec![0u8; bytes.len() + 8];
    let off = (8 - v.as_ptr() as usize % 8) % 8;
    v[off..off + bytes.len()].copy_from_slice(bytes);
    (v, off)
}

fn apply(img: &mut [u8], base: u64, r: &Relocation) -> Result<(), Error> {
    let what = || {
        format!(
            "type {} at {:#x}{}",
            r.r_type,
            r.offset,
            r.symbol_name
                .as_deref()
                .map(|n| format!(" against {n}"))
                .unwrap_or_default()
        )
    };
    let width = match r.r_type {
        reloc::NONE => return Ok(()),
        reloc::ABS64 | reloc::REL64 | reloc::RELATIVE64 => 8,
        reloc::ABS32
        | reloc::ABS32_LO
        | reloc::ABS32_HI
        | reloc::REL32
        | reloc::REL32_LO
        | reloc::REL32_HI => 4,
        _ => {
            return Err(Error::Relocation(format!(
                "{}: not a relocation the loader applies",
                what()
            )))
        }
    };
    if r.undefined {
        return Err(Error::Relocation(format!(
            "{}: undefined symbol (kfdrt links no other code objects)",
            what()
        )));
    }
    let at = usize::try_from(r.offset)
        .ok()
        .filter(|&o| o.checked_add(width).is_some_and(|e| e <= img.len()))
        .ok_or_else(|| Error::Relocation(format!("{}: outside the image", what())))?;
    let addend = if r.implicit_addend {
        let mut b = [0u8; 8];
        b[..width].copy_from_slice(&img[at..at + width]);
        if width == 4 {
            i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        } else {
            i64::from_le_bytes(b)
        }
    } else {
        r.addend
    };
    let s = base.wrapping_add(r.symbol_value.unwrap_or(0));
    let p = base.wrapping_add(r.offset);
    let sa = s.wrapping_add_signed(addend);
    let v: u64 = match r.r_type {
        reloc::ABS64 | reloc::ABS32 | reloc::ABS32_LO => sa,
        reloc::ABS32_HI => sa >> 32,
        reloc::REL64 | reloc::REL32 | reloc::REL32_LO => sa.wrapping_sub(p),
        reloc::REL32_HI => sa.wrapping_sub(p) >> 32,
        _ => base.wrapping_add_signed(addend), // RELATIVE64: B + A
    };
    img[at..at + width].copy_from_slice(&v.to_le_bytes()[..width]);
    Ok(())
}

/// The target ID encoded in `e_flags` (v4+: EF_AMDGPU_MACH bits 0..7, XNACK bits 8..9,
/// SRAMECC bits 10..11; 1 = any, 2 = off, 3 = on).
pub fn target_from_flags(e_flags: u32) -> Result<TargetId, Error> {
    let mach = e_flags & 0xff;
    let processor = target::mach_name(mach).ok_or_else(|| {
        Error::Unsupported(format!("EF_AMDGPU_MACH {mach:#x} without amdhsa.target"))
    })?;
    let feat = |v: u32| match v {
        2 => Feature::Off,
        3 => Feature::On,
        _ => Feature::Any,
    };
    Ok(TargetId::new(
        processor,
        feat((e_flags >> 10) & 3),
        feat((e_flags >> 8) & 3),
    ))
}

/// Parses `data` every way the crate can (fuzzing entry point): ELF, bundle, image.
pub fn fuzz_parse(data: &[u8]) {
    if let Ok(co) = CodeObject::parse(data) {
        for k in &co.kernels {
            let _ = k.entry_offset();
            let _ = co.kernel(&k.name);
        }
        if co.image_size() <= 1 << 24 {
            let _ = co.load_image(0x1000_0000);
        }
    }
    let _ = bundle::entries(data);
    let dev = TargetId::new("gfx942", Feature::On, Feature::Off);
    let _ = CodeObject::parse_for(data, &dev);
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = TargetId::parse(s);
    }
}
