//! The KFD sysfs topology tree: typed parsing and writing.
//!
//! The kernel publishes the HSA topology under
//! `/sys/devices/virtual/kfd/kfd/topology/` ([`DEFAULT_ROOT`]):
//!
//! ```text
//! generation_id                     one decimal number
//! system_properties                 platform_oem, platform_id, platform_rev
//! nodes/N/gpu_id                    one decimal number, 0 on a CPU-only node
//! nodes/N/name                      one line of text
//! nodes/N/properties                `key value` lines
//! nodes/N/mem_banks/M/properties    (and mem_banks/M/used_memory on newer kernels)
//! nodes/N/caches/M/properties       (`sibling_map` carries a comma-separated list)
//! nodes/N/io_links/M/properties
//! nodes/N/p2p_links/M/properties
//! ```
//!
//! A properties file is a sequence of lines `key value`, where the value is a decimal
//! `u64` (the kernel prints every property with `"%s %u\n"` or `"%s %llu\n"`). The key
//! set depends on the kernel version and on the node kind (CPU nodes lack the
//! GPU-only keys), so keys that a kernel may omit are `Option`s, and keys this module
//! does not know are kept, in file order, in each type's `extra` list.
//!
//! [`Topology::from_sysfs`] takes the root directory as an argument so that tests and
//! the emulator can serve their own tree; [`Topology::to_sysfs`] writes a tree in the
//! same format, which `from_sysfs` reads back to an equal value.
//!
//! Nothing here panics on any file content: every problem is a [`TopologyError`]
//! naming the file, and for line problems the 1-based line number.
//!
//! Facts (key names, widths, bit positions) follow the kernel's
//! `drivers/gpu/drm/amd/amdkfd/kfd_topology.c` and `include/uapi/linux/kfd_sysfs.h`,
//! and what libhsakmt's `topology.c` reads.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use bitflags::bitflags;

/// Where the kernel publishes the topology tree.
pub const DEFAULT_ROOT: &str = "/sys/devices/virtual/kfd/kfd/topology";

/// The longest piece of offending text quoted in an error message.
const MAX_QUOTED: usize = 96;

// ---------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------

/// A problem found while reading a topology tree.
///
/// Every variant names the file (or directory) concerned; line-level variants also
/// carry the 1-based line number. [`TopologyError::path`] and [`TopologyError::line`]
/// give uniform access to both.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    /// A line is not of the form `key value`.
    #[error("{}:{line}: malformed line {text:?}: {reason}", .path.display())]
    MalformedLine {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The line (lossily decoded, possibly shortened).
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A value is not a decimal `u64`.
    #[error("{}:{line}: value {value:?} of `{key}` is not a decimal u64", .path.display())]
    InvalidValue {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The key (for single-value files: the file name).
        key: String,
        /// The offending value text (possibly shortened).
        value: String,
    },
    /// A value is a valid `u64` but too large for the property's width.
    #[error("{}:{line}: value {value} of `{key}` does not fit in {bits} bits", .path.display())]
    ValueOutOfRange {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The key (for single-value files: the file name).
        key: String,
        /// The value read.
        value: u64,
        /// The property's width in bits.
        bits: u32,
    },
    /// A key appears twice in one file.
    #[error("{}:{line}: duplicate key `{key}` (first on line {first_line})", .path.display())]
    DuplicateKey {
        /// The file.
        path: PathBuf,
        /// 1-based line number of the second occurrence.
        line: usize,
        /// The key.
        key: String,
        /// 1-based line number of the first occurrence.
        first_line: usize,
    },
    /// A file or directory the tree must have does not exist.
    #[error("{}: missing file", .path.display())]
    MissingFile {
        /// The missing path.
        path: PathBuf,
    },
    /// A required key is absent from a properties file.
    #[error("{}: missing required key `{key}`", .path.display())]
    MissingKey {
        /// The file.
        path: PathBuf,
        /// The key.
        key: &'static str,
    },
    /// Any other I/O error.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file or directory being read.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

impl TopologyError {
    /// The file or directory the error is about.
    pub fn path(&self) -> &Path {
        match self {
            Self::MalformedLine { path, .. }
            | Self::InvalidValue { path, .. }
            | Self::ValueOutOfRange { path, .. }
            | Self::DuplicateKey { path, .. }
            | Self::MissingFile { path }
            | Self::MissingKey { path, .. }
            | Self::Io { path, .. } => path,
        }
    }

    /// The 1-based line number, for errors about one line.
    pub fn line(&self) -> Option<usize> {
        match self {
            Self::MalformedLine { line, .. }
            | Self::InvalidValue { line, .. }
            | Self::ValueOutOfRange { line, .. }
            | Self::DuplicateKey { line, .. } => Some(*line),
            _ => None,
        }
    }
}

fn shorten(s: &str) -> String {
    if s.len() <= MAX_QUOTED {
        return s.to_owned();
    }
    let mut end = MAX_QUOTED;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

// ---------------------------------------------------------------------------------
// Properties-file parsing
// ---------------------------------------------------------------------------------

enum RawValue {
    Num(u64),
    Text(String),
}

struct Entry {
    key: String,
    value: RawValue,
    line: usize,
    taken: bool,
}

/// The parsed lines of one properties file, consumed key by key.
struct Props {
    path: PathBuf,
    entries: Vec<Entry>,
    index: HashMap<String, usize>,
}

fn parse_decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl Props {
    /// Split `bytes` into `key value` entries. Keys in `text_keys` take the rest of the
    /// line verbatim (possibly empty); all other values must be decimal `u64`s.
    fn parse(path: &Path, bytes: &[u8], text_keys: &[&str]) -> Result<Self, TopologyError> {
        let mut props = Props {
            path: path.to_owned(),
            entries: Vec::new(),
            index: HashMap::new(),
        };
        for (i, raw) in bytes.split(|&b| b == b'\n').enumerate() {
            let line = i + 1;
            let malformed = |reason| TopologyError::MalformedLine {
                path: path.to_owned(),
                line,
                text: shorten(&String::from_utf8_lossy(raw)),
                reason,
            };
            let text = std::str::from_utf8(raw).map_err(|_| malformed("not UTF-8"))?;
            let mut fields = text.split_ascii_whitespace();
            let Some(key) = fields.next() else {
                continue; // blank line
            };
            let value = fields.next();
            if fields.next().is_some() {
                return Err(malformed(
                    "expected `key value`, found more than two fields",
                ));
            }
            let value = if text_keys.contains(&key) {
                RawValue::Text(value.unwrap_or("").to_owned())
            } else {
                let value =
                    value.ok_or_else(|| malformed("expected `key value`, found no value"))?;
                match parse_decimal(value) {
                    Some(v) => RawValue::Num(v),
                    None => {
                        return Err(TopologyError::InvalidValue {
                            path: path.to_owned(),
                            line,
                            key: key.to_owned(),
                            value: shorten(value),
                        })
                    }
                }
            };
            if let Some(&first) = props.index.get(key) {
                return Err(TopologyError::DuplicateKey {
                    path: path.to_owned(),
                    line,
                    key: key.to_owned(),
                    first_line: props.entries[first].line,
                });
            }
            props.index.insert(key.to_owned(), props.entries.len());
            props.entries.push(Entry {
                key: key.to_owned(),
                value,
                line,
                taken: false,
            });
        }
        Ok(props)
    }

    fn take(&mut self, key: &str) -> Option<&mut Entry> {
        let i = *self.index.get(key)?;
        let entry = &mut self.entries[i];
        entry.taken = true;
        Some(entry)
    }

    /// The entries no field consumed, in file order.
    fn into_extra(self) -> Vec<(String, u64)> {
        self.entries
            .into_iter()
            .filter(|e| !e.taken)
            .filter_map(|e| match e.value {
                RawValue::Num(v) => Some((e.key, v)),
                RawValue::Text(_) => None,
            })
            .collect()
    }
}

/// A field type that can be taken out of a properties file: `u32`/`u64` (required),
/// `Option<u32>`/`Option<u64>` (optional), `String` (required text key).
trait Field: Sized {
    fn take(props: &mut Props, key: &'static str) -> Result<Self, TopologyError>;
    fn write(&self, key: &str, out: &mut String);
}

fn take_num(props: &mut Props, key: &'static str, bits: u32) -> Result<Option<u64>, TopologyError> {
    let path = props.path.clone();
    let Some(entry) = props.take(key) else {
        return Ok(None);
    };
    let value = match &entry.value {
        RawValue::Num(v) => *v,
        RawValue::Text(t) => {
            return Err(TopologyError::InvalidValue {
                path,
                line: entry.line,
                key: key.to_owned(),
                value: shorten(t),
            })
        }
    };
    if bits < 64 && value >> bits != 0 {
        return Err(TopologyError::ValueOutOfRange {
            path,
            line: entry.line,
            key: key.to_owned(),
            value,
            bits,
        });
    }
    Ok(Some(value))
}

fn missing(props: &Props, key: &'static str) -> TopologyError {
    TopologyError::MissingKey {
        path: props.path.clone(),
        key,
    }
}

impl Field for u32 {
    fn take(props: &mut Props, key: &'static str) -> Result<Self, TopologyError> {
        match take_num(props, key, 32)? {
            Some(v) => Ok(v as u32),
            None => Err(missing(props, key)),
        }
    }
    fn write(&self, key: &str, out: &mut String) {
        let _ = writeln!(out, "{key} {self}");
    }
}

impl Field for u64 {
    fn take(props: &mut Props, key: &'static str) -> Result<Self, TopologyError> {
        take_num(props, key, 64)?.ok_or_else(|| missing(props, key))
    }
    fn write(&self, key: &str, out: &mut String) {
        let _ = writeln!(out, "{key} {self}");
    }
}

impl Field for Option<u32> {
    fn take(props: &mut Props, key: &'static str) -> Result<Self, TopologyError> {
        Ok(take_num(props, key, 32)?.map(|v| v as u32))
    }
    fn write(&self, key: &str, out: &mut String) {
        if let Some(v) = self {
            v.write(key, out);
        }
    }
}

impl Field for Option<u64> {
    fn take(props: &mut Props, key: &'static str) -> Result<Self, TopologyError> {
        take_num(props, key, 64)
    }
    fn write(&self, key: &str, out: &mut String) {
        if let Some(v) = self {
            v.write(key, out);
        }
    }
}

impl Field for String {
    fn take(props: &mut Props, key: &'static str) -> Result<Self, TopologyError> {
        let path = props.path.clone();
        match props.take(key) {
            Some(Entry {
                value: RawValue::Text(t),
                ..
            }) => Ok(t.clone()),
            Some(Entry {
                value: RawValue::Num(v),
                ..
            }) => Ok(v.to_string()),
            None => Err(TopologyError::MissingKey { path, key }),
        }
    }
    fn write(&self, key: &str, out: &mut String) {
        // The kernel prints `sibling_map` followed by the list; with an empty list the
        // separating space is replaced by the newline.
        if self.is_empty() {
            let _ = writeln!(out, "{key}");
        } else {
            let _ = writeln!(out, "{key} {self}");
        }
    }
}

fn write_extra(extra: &[(String, u64)], out: &mut String) {
    for (k, v) in extra {
        let _ = writeln!(out, "{k} {v}");
    }
}

/// Implements `KEYS`, `parse` and `to_properties_text` for a properties struct whose
/// fields are listed with their sysfs key, in the kernel's print order.
macro_rules! properties_impl {
    ($ty:ident, text_keys = [$($tk:literal),*], { $($field:ident = $key:literal,)* }) => {
        impl $ty {
            /// Every key this type maps to a field, in the order the kernel prints them.
            pub const KEYS: &'static [&'static str] = &[$($key),*];

            /// Parse the contents of a `properties` file. `path` is only used in errors.
            ///
            /// Keys not in [`Self::KEYS`] are kept in `extra`, in file order.
            pub fn parse(bytes: &[u8], path: &Path) -> Result<Self, TopologyError> {
                let mut props = Props::parse(path, bytes, &[$($tk),*])?;
                let mut value = Self::default();
                $( value.$field = Field::take(&mut props, $key)?; )*
                value.extra = props.into_extra();
                Ok(value)
            }

            /// The `properties` file text: known keys in the kernel's order (absent
            /// optional keys omitted), then the `extra` keys.
            pub fn to_properties_text(&self) -> String {
                let mut out = String::new();
                $( Field::write(&self.$field, $key, &mut out); )*
                write_extra(&self.extra, &mut out);
                out
            }
        }
    };
}

// ---------------------------------------------------------------------------------
// Capability bits
// ---------------------------------------------------------------------------------

bitflags! {
    /// The node `capability` word (`HSA_CAP_*` in the kernel's `kfd_sysfs.h`;
    /// libhsakmt's `HSA_CAPABILITY`). Multi-bit fields are masks here; use the
    /// accessor methods to read them.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Capability: u32 {
        /// The node is hot-pluggable.
        const HOT_PLUGGABLE = 0x0000_0001;
        /// An ATS/PRI translation agent (IOMMUv2) serves the node.
        const ATS_PRESENT = 0x0000_0002;
        /// The GPU is also the OS's primary graphics device.
        const SHARED_WITH_GRAPHICS = 0x0000_0004;
        /// Queue sizes must be powers of two.
        const QUEUE_SIZE_POW2 = 0x0000_0008;
        /// Queue sizes must be below 4 GiB.
        const QUEUE_SIZE_32BIT = 0x0000_0010;
        /// Queue-idle notification is supported.
        const QUEUE_IDLE_EVENT = 0x0000_0020;
        /// The GPU's VA range is limited (typically 40 bits).
        const VA_LIMIT = 0x0000_0040;
        /// Address watch points are supported.
        const WATCH_POINTS_SUPPORTED = 0x0000_0080;
        /// Mask of log2(number of watch points), bits 8..11.
        const WATCH_POINTS_TOTALBITS_MASK = 0x0000_0f00;
        /// Mask of the doorbell type, bits 12..13 (see [`DoorbellType`]).
        const DOORBELL_TYPE_MASK = 0x0000_3000;
        /// AQL queues need a double VA mapping (Tonga).
        const AQL_QUEUE_DOUBLE_MAP = 0x0000_4000;
        /// The debugger trap is supported.
        const TRAP_DEBUG_SUPPORT = 0x0000_8000;
        /// Wave-launch trap override is supported.
        const TRAP_DEBUG_WAVE_LAUNCH_TRAP_OVERRIDE_SUPPORTED = 0x0001_0000;
        /// Wave-launch mode is supported.
        const TRAP_DEBUG_WAVE_LAUNCH_MODE_SUPPORTED = 0x0002_0000;
        /// Precise memory operations are supported.
        const TRAP_DEBUG_PRECISE_MEMORY_OPERATIONS_SUPPORTED = 0x0004_0000;
        /// Formerly SRAM EDC; old user mode requires it to be 0.
        const RESERVED_WAS_SRAM_EDCSUPPORTED = 0x0008_0000;
        /// DRAM/HBM EDC (ECC) is active.
        const MEM_EDCSUPPORTED = 0x0010_0000;
        /// Extended RAS event notification is supported.
        const RASEVENTNOTIFY = 0x0020_0000;
        /// Mask of the ASIC revision, bits 22..25.
        const ASIC_REVISION_MASK = 0x03c0_0000;
        /// GFX internal SRAM EDC is active.
        const SRAM_EDCSUPPORTED = 0x0400_0000;
        /// The SVM API (`AMDKFD_IOC_SVM`) is supported.
        const SVMAPI_SUPPORTED = 0x0800_0000;
        /// The host can access the GPU's memory coherently.
        const FLAGS_COHERENTHOSTACCESS = 0x1000_0000;
        /// The firmware supports the debugger trap.
        const TRAP_DEBUG_FIRMWARE_SUPPORTED = 0x2000_0000;
        /// Precise ALU operations are supported.
        const TRAP_DEBUG_PRECISE_ALU_OPERATIONS_SUPPORTED = 0x4000_0000;
        /// Per-queue reset is supported.
        const PER_QUEUE_RESET_SUPPORTED = 0x8000_0000;
    }
}

/// Doorbell kind from `capability` bits 12..13.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DoorbellType {
    /// 0: pre-1.0 doorbells (gfx7 and older), 32-bit.
    Pre1_0,
    /// 1: 1.0 doorbells (gfx8), 32-bit.
    V1_0,
    /// 2: 2.0 doorbells (SOC15, gfx9 and newer), 64-bit.
    V2_0,
    /// 3: reserved.
    Reserved,
}

impl DoorbellType {
    /// The bytes one doorbell occupies: 8 for [`DoorbellType::V2_0`], else 4.
    pub fn size(self) -> usize {
        match self {
            DoorbellType::V2_0 => 8,
            _ => 4,
        }
    }
}

impl Capability {
    /// log2 of the number of address watch points (bits 8..11).
    pub fn watch_points_total_bits(self) -> u32 {
        (self.bits() & Self::WATCH_POINTS_TOTALBITS_MASK.bits()) >> 8
    }

    /// The doorbell type (bits 12..13).
    pub fn doorbell_type(self) -> DoorbellType {
        match (self.bits() & Self::DOORBELL_TYPE_MASK.bits()) >> 12 {
            0 => DoorbellType::Pre1_0,
            1 => DoorbellType::V1_0,
            2 => DoorbellType::V2_0,
            _ => DoorbellType::Reserved,
        }
    }

    /// The ASIC revision (bits 22..25).
    pub fn asic_revision(self) -> u32 {
        (self.bits() & Self::ASIC_REVISION_MASK.bits()) >> 22
    }

    /// Whether the SVM API is supported.
    pub fn svm_supported(self) -> bool {
        self.contains(Self::SVMAPI_SUPPORTED)
    }

    /// Whether an ATS/PRI translation agent serves the node.
    pub fn ats_present(self) -> bool {
        self.contains(Self::ATS_PRESENT)
    }

    /// Whether address watch points are supported.
    pub fn watch_points_supported(self) -> bool {
        self.contains(Self::WATCH_POINTS_SUPPORTED)
    }

    /// Whether the debugger trap is supported (driver and firmware).
    pub fn trap_debug_supported(self) -> bool {
        self.contains(Self::TRAP_DEBUG_SUPPORT)
    }
}

bitflags! {
    /// The node `capability2` word (`HSA_CAP2_*`), printed by newer kernels.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct Capability2: u32 {
        /// Per-SDMA-queue reset is supported.
        const PER_SDMA_QUEUE_RESET_SUPPORTED = 0x0000_0001;
        /// The debugger can trap on out-of-range LDS addresses.
        const TRAP_DEBUG_LDS_OUT_OF_ADDR_RANGE_SUPPORTED = 0x0000_0002;
    }
}

bitflags! {
    /// The node `debug_prop` word (`HSA_DBG_*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct DebugProperties: u64 {
        /// Mask of the lowest watch-address mask bit, bits 0..3.
        const WATCH_ADDR_MASK_LO_BIT_MASK = 0x0000_000f;
        /// Mask of the highest watch-address mask bit, bits 4..9.
        const WATCH_ADDR_MASK_HI_BIT_MASK = 0x0000_03f0;
        /// Dispatch information in trap temporaries is always valid.
        const DISPATCH_INFO_ALWAYS_VALID = 0x0000_0400;
        /// Watch points are exclusive to one process.
        const WATCHPOINTS_EXCLUSIVE = 0x0000_0800;
    }
}

impl DebugProperties {
    /// The lowest address bit a watch-point mask may cover (bits 0..3).
    pub fn watch_addr_mask_lo_bit(self) -> u32 {
        (self.bits() & Self::WATCH_ADDR_MASK_LO_BIT_MASK.bits()) as u32
    }

    /// The highest address bit a watch-point mask may cover (bits 4..9).
    pub fn watch_addr_mask_hi_bit(self) -> u32 {
        ((self.bits() & Self::WATCH_ADDR_MASK_HI_BIT_MASK.bits()) >> 4) as u32
    }
}

// ---------------------------------------------------------------------------------
// GFX version
// ---------------------------------------------------------------------------------

/// A GFX IP version decoded from `gfx_target_version` (decimal `MMmmss`:
/// major * 10000 + minor * 100 + stepping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GfxVersion {
    /// Major version (9 for CDNA/Vega, 10, 11, 12 for RDNA).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Stepping.
    pub stepping: u32,
}

impl GfxVersion {
    /// Decode `gfx_target_version`; `None` for 0 (a CPU node).
    pub fn from_target_version(v: u32) -> Option<Self> {
        (v != 0).then_some(Self {
            major: v / 10000,
            minor: (v / 100) % 100,
            stepping: v % 100,
        })
    }

    /// The encoded `gfx_target_version`.
    pub fn target_version(self) -> u32 {
        self.major
            .saturating_mul(10000)
            .saturating_add(self.minor.saturating_mul(100))
            .saturating_add(self.stepping)
    }

    /// The LLVM target name: `gfx`, the major version in decimal, then minor and
    /// stepping as one hex digit each (90010 -> `gfx90a`, 90402 -> `gfx942`,
    /// 110000 -> `gfx1100`). `None` if minor or stepping exceed one hex digit.
    pub fn name(self) -> Option<String> {
        (self.minor < 16 && self.stepping < 16)
            .then(|| format!("gfx{}{:x}{:x}", self.major, self.minor, self.stepping))
    }
}

// ---------------------------------------------------------------------------------
// Node properties
// ---------------------------------------------------------------------------------

/// `nodes/N/properties`: every key libhsakmt reads, typed with the kernel's width.
///
/// Required fields are the keys the kernel prints for every node, CPU or GPU.
/// `Option` fields are either GPU-only (absent on CPU nodes) or newer than some
/// supported kernels. Keys this type does not know are kept in [`Self::extra`].
///
/// Not in sysfs: the marketing name (libhsakmt asks libdrm's device-id table for it)
/// and the GFX name (derive it with [`Self::gfx_target_name`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeProperties {
    /// Number of CPU cores (0 on a dGPU node).
    pub cpu_cores_count: u32,
    /// Number of SIMDs (0 on a CPU node).
    pub simd_count: u32,
    /// Number of memory banks (`mem_banks/` entries).
    pub mem_banks_count: u32,
    /// Number of caches (`caches/` entries).
    pub caches_count: u32,
    /// Number of IO links (`io_links/` entries).
    pub io_links_count: u32,
    /// Number of peer-to-peer links (`p2p_links/` entries); newer kernels.
    pub p2p_links_count: Option<u32>,
    /// First CPU core id (APIC id) of the node.
    pub cpu_core_id_base: u32,
    /// First SIMD id of the node (bit 31 set on GPUs).
    pub simd_id_base: u32,
    /// Maximum waves per SIMD.
    pub max_waves_per_simd: u32,
    /// LDS per workgroup in KiB.
    pub lds_size_in_kb: u32,
    /// GDS size in KiB.
    pub gds_size_in_kb: u32,
    /// Number of global wave sync resources.
    pub num_gws: u32,
    /// Wavefront size: 64 (CDNA/GCN) or 32 (RDNA).
    pub wave_front_size: u32,
    /// Shader arrays, summed over all XCCs.
    pub array_count: u32,
    /// Shader arrays per shader engine.
    pub simd_arrays_per_engine: u32,
    /// CU slots per shader array (may exceed the active CUs).
    pub cu_per_simd_array: u32,
    /// SIMDs per CU.
    pub simd_per_cu: u32,
    /// Scratch wave slots per CU.
    pub max_slots_scratch_cu: u32,
    /// GFX target version, decimal `MMmmss` (0 on a CPU node).
    pub gfx_target_version: u32,
    /// PCI vendor id (0x1002 for AMD GPUs).
    pub vendor_id: u32,
    /// PCI device id.
    pub device_id: u32,
    /// PCI bus/device/function (`bus << 8 | devfn`).
    pub location_id: u32,
    /// PCI domain.
    pub domain: u32,
    /// DRM render node minor (`/dev/dri/renderD<minor>`).
    pub drm_render_minor: u32,
    /// XGMI hive id (0 when not in a hive).
    pub hive_id: u64,
    /// Number of PCIe-side SDMA engines.
    pub num_sdma_engines: u32,
    /// Number of XGMI SDMA engines.
    pub num_sdma_xgmi_engines: u32,
    /// SDMA queues per engine.
    pub num_sdma_queues_per_engine: u32,
    /// Compute queues available to KFD.
    pub num_cp_queues: u32,
    /// CWSR area size per queue as the kernel computes it; newest kernels only.
    pub cwsr_size: Option<u32>,
    /// Control stack size per queue as the kernel computes it; newest kernels only.
    pub ctl_stack_size: Option<u32>,
    /// Maximum engine clock of the GPU in MHz; GPU nodes.
    pub max_engine_clk_fcompute: Option<u32>,
    /// Always 0 in upstream kernels; use [`Node::vram_size`]. GPU nodes.
    pub local_mem_size: Option<u64>,
    /// MEC firmware version; GPU nodes.
    pub fw_version: Option<u32>,
    /// Capability word, see [`Capability`]; GPU nodes.
    pub capability: Option<u32>,
    /// Second capability word, see [`Capability2`]; newer kernels, GPU nodes.
    pub capability2: Option<u32>,
    /// Debug properties, see [`DebugProperties`]; newer kernels, GPU nodes.
    pub debug_prop: Option<u64>,
    /// SDMA firmware version; GPU nodes.
    pub sdma_fw_version: Option<u32>,
    /// Unique id of the GPU (from the SMU); GPU nodes.
    pub unique_id: Option<u64>,
    /// Number of XCCs (compute dies) in this node; newer kernels, GPU nodes.
    pub num_xcc: Option<u32>,
    /// amdgpu family id; read by libhsakmt when present.
    pub family_id: Option<u32>,
    /// Maximum CPU clock in MHz (the kernel prints it last, for every node).
    pub max_engine_clk_ccompute: u32,
    /// Keys this type does not know, with their values, in file order.
    pub extra: Vec<(String, u64)>,
}

properties_impl!(NodeProperties, text_keys = [], {
    cpu_cores_count = "cpu_cores_count",
    simd_count = "simd_count",
    mem_banks_count = "mem_banks_count",
    caches_count = "caches_count",
    io_links_count = "io_links_count",
    p2p_links_count = "p2p_links_count",
    cpu_core_id_base = "cpu_core_id_base",
    simd_id_base = "simd_id_base",
    max_waves_per_simd = "max_waves_per_simd",
    lds_size_in_kb = "lds_size_in_kb",
    gds_size_in_kb = "gds_size_in_kb",
    num_gws = "num_gws",
    wave_front_size = "wave_front_size",
    array_count = "array_count",
    simd_arrays_per_engine = "simd_arrays_per_engine",
    cu_per_simd_array = "cu_per_simd_array",
    simd_per_cu = "simd_per_cu",
    max_slots_scratch_cu = "max_slots_scratch_cu",
    gfx_target_version = "gfx_target_version",
    vendor_id = "vendor_id",
    device_id = "device_id",
    location_id = "location_id",
    domain = "domain",
    drm_render_minor = "drm_render_minor",
    hive_id = "hive_id",
    num_sdma_engines = "num_sdma_engines",
    num_sdma_xgmi_engines = "num_sdma_xgmi_engines",
    num_sdma_queues_per_engine = "num_sdma_queues_per_engine",
    num_cp_queues = "num_cp_queues",
    cwsr_size = "cwsr_size",
    ctl_stack_size = "ctl_stack_size",
    max_engine_clk_fcompute = "max_engine_clk_fcompute",
    local_mem_size = "local_mem_size",
    fw_version = "fw_version",
    capability = "capability",
    capability2 = "capability2",
    debug_prop = "debug_prop",
    sdma_fw_version = "sdma_fw_version",
    unique_id = "unique_id",
    num_xcc = "num_xcc",
    family_id = "family_id",
    max_engine_clk_ccompute = "max_engine_clk_ccompute",
});

impl NodeProperties {
    /// Whether the node has GPU compute cores (`simd_count > 0`).
    pub fn has_gpu_cores(&self) -> bool {
        self.simd_count > 0
    }

    /// Active compute units: `simd_count / simd_per_cu` (0 if `simd_per_cu` is 0).
    pub fn cu_count(&self) -> u32 {
        self.simd_count.checked_div(self.simd_per_cu).unwrap_or(0)
    }

    /// Shader engines: `array_count / simd_arrays_per_engine` (libhsakmt's
    /// `NumShaderBanks`; 0 if `simd_arrays_per_engine` is 0).
    pub fn shader_engines(&self) -> u32 {
        self.array_count
            .checked_div(self.simd_arrays_per_engine)
            .unwrap_or(0)
    }

    /// XCC count, defaulting to 1 when the key is absent or 0 (as libhsakmt does).
    pub fn xcc_count(&self) -> u32 {
        match self.num_xcc {
            Some(n) if n > 0 => n,
            _ => 1,
        }
    }

    /// The decoded GFX version; `None` on a CPU node.
    pub fn gfx_version(&self) -> Option<GfxVersion> {
        GfxVersion::from_target_version(self.gfx_target_version)
    }

    /// The LLVM target name, e.g. `gfx942`; `None` on a CPU node.
    pub fn gfx_target_name(&self) -> Option<String> {
        self.gfx_version()?.name()
    }

    /// The capability word as flags (empty if absent).
    pub fn capability_flags(&self) -> Capability {
        Capability::from_bits_retain(self.capability.unwrap_or(0))
    }

    /// The second capability word as flags (empty if absent).
    pub fn capability2_flags(&self) -> Capability2 {
        Capability2::from_bits_retain(self.capability2.unwrap_or(0))
    }

    /// The debug properties as flags (empty if absent).
    pub fn debug_flags(&self) -> DebugProperties {
        DebugProperties::from_bits_retain(self.debug_prop.unwrap_or(0))
    }

    /// The doorbell type from the capability word.
    pub fn doorbell_type(&self) -> DoorbellType {
        self.capability_flags().doorbell_type()
    }

    /// Bytes per doorbell: 8 with SOC15 64-bit doorbells (type 2.0), else 4.
    pub fn doorbell_size(&self) -> usize {
        self.doorbell_type().size()
    }

    /// Whether the SVM API is supported (capability bit).
    pub fn svm_supported(&self) -> bool {
        self.capability_flags().svm_supported()
    }

    /// The MEC microcode version as libhsakmt keeps it (`fw_version & 0x3ff`).
    pub fn mec_ucode_version(&self) -> Option<u32> {
        self.fw_version.map(|v| v & 0x3ff)
    }

    /// The SDMA microcode version as libhsakmt keeps it (`sdma_fw_version & 0x3ff`).
    pub fn sdma_ucode_version(&self) -> Option<u32> {
        self.sdma_fw_version.map(|v| v & 0x3ff)
    }
}

// ---------------------------------------------------------------------------------
// Memory banks, caches, links
// ---------------------------------------------------------------------------------

/// Heap type of system memory.
pub const HEAP_TYPE_SYSTEM: u32 = 0;
/// Heap type of host-visible (large-BAR) VRAM.
pub const HEAP_TYPE_FB_PUBLIC: u32 = 1;
/// Heap type of VRAM not visible to the host.
pub const HEAP_TYPE_FB_PRIVATE: u32 = 2;
/// Heap type of GDS.
pub const HEAP_TYPE_GPU_GDS: u32 = 3;
/// Heap type of LDS.
pub const HEAP_TYPE_GPU_LDS: u32 = 4;
/// Heap type of scratch.
pub const HEAP_TYPE_GPU_SCRATCH: u32 = 5;

/// Memory bank flag: hot-pluggable.
pub const MEM_FLAGS_HOT_PLUGGABLE: u32 = 0x1;
/// Memory bank flag: non-volatile.
pub const MEM_FLAGS_NON_VOLATILE: u32 = 0x2;

/// `nodes/N/mem_banks/M/properties` (plus the optional `used_memory` file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemBank {
    /// Heap type (`HEAP_TYPE_*`).
    pub heap_type: u32,
    /// Size in bytes.
    pub size_in_bytes: u64,
    /// Flags (`MEM_FLAGS_*`).
    pub flags: u32,
    /// Bus width in bits.
    pub width: u32,
    /// Maximum memory clock in MHz.
    pub mem_clk_max: u32,
    /// Keys this type does not know, with their values, in file order.
    pub extra: Vec<(String, u64)>,
    /// Bytes in use, from the bank's `used_memory` file (VRAM banks on newer kernels).
    pub used_memory: Option<u64>,
}

properties_impl!(MemBank, text_keys = [], {
    heap_type = "heap_type",
    size_in_bytes = "size_in_bytes",
    flags = "flags",
    width = "width",
    mem_clk_max = "mem_clk_max",
});

impl MemBank {
    /// Whether the bank is VRAM (heap type FB public or FB private).
    pub fn is_vram(&self) -> bool {
        matches!(self.heap_type, HEAP_TYPE_FB_PUBLIC | HEAP_TYPE_FB_PRIVATE)
    }
}

bitflags! {
    /// Cache `type` bits (`HSA_CACHE_TYPE_*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct CacheType: u32 {
        /// Caches data.
        const DATA = 0x1;
        /// Caches instructions.
        const INSTRUCTION = 0x2;
        /// A CPU cache.
        const CPU = 0x4;
        /// A GPU (HSA compute unit) cache.
        const HSACU = 0x8;
    }
}

/// `nodes/N/caches/M/properties`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cache {
    /// First processor (CPU APIC id or GPU SIMD id) the cache serves.
    pub processor_id_low: u32,
    /// Cache level (1, 2, 3).
    pub level: u32,
    /// Size in KiB.
    pub size: u32,
    /// Line size in bytes.
    pub cache_line_size: u32,
    /// Lines per tag.
    pub cache_lines_per_tag: u32,
    /// Associativity.
    pub association: u32,
    /// Latency in ns.
    pub latency: u32,
    /// Type bits, see [`CacheType`] (sysfs key `type`).
    pub cache_type: u32,
    /// Sharing map as printed: comma-separated 0/1 per processor, starting at
    /// `processor_id_low` (empty if the kernel printed no entries).
    pub sibling_map: String,
    /// Keys this type does not know, with their values, in file order.
    pub extra: Vec<(String, u64)>,
}

properties_impl!(Cache, text_keys = ["sibling_map"], {
    processor_id_low = "processor_id_low",
    level = "level",
    size = "size",
    cache_line_size = "cache_line_size",
    cache_lines_per_tag = "cache_lines_per_tag",
    association = "association",
    latency = "latency",
    cache_type = "type",
    sibling_map = "sibling_map",
});

impl Cache {
    /// The type bits as flags.
    pub fn type_flags(&self) -> CacheType {
        CacheType::from_bits_retain(self.cache_type)
    }

    /// Offsets (from `processor_id_low`) of the processors sharing this cache: the
    /// positions of `1` entries in `sibling_map`.
    pub fn siblings(&self) -> Vec<usize> {
        self.sibling_map
            .split(',')
            .enumerate()
            .filter(|(_, s)| s.trim() == "1")
            .map(|(i, _)| i)
            .collect()
    }
}

/// IO link type: undefined.
pub const IOLINK_TYPE_UNDEFINED: u32 = 0;
/// IO link type: HyperTransport.
pub const IOLINK_TYPE_HYPERTRANSPORT: u32 = 1;
/// IO link type: PCI Express.
pub const IOLINK_TYPE_PCIEXPRESS: u32 = 2;
/// IO link type: AMBA.
pub const IOLINK_TYPE_AMBA: u32 = 3;
/// IO link type: MIPI.
pub const IOLINK_TYPE_MIPI: u32 = 4;
/// IO link type: QPI 1.1.
pub const IOLINK_TYPE_QPI_1_1: u32 = 5;
/// IO link type: RapidIO.
pub const IOLINK_TYPE_RAPID_IO: u32 = 8;
/// IO link type: InfiniBand.
pub const IOLINK_TYPE_INFINIBAND: u32 = 9;
/// IO link type: XGMI.
pub const IOLINK_TYPE_XGMI: u32 = 11;
/// IO link type: XGOP.
pub const IOLINK_TYPE_XGOP: u32 = 12;
/// IO link type: GZ.
pub const IOLINK_TYPE_GZ: u32 = 13;
/// IO link type: Ethernet RDMA.
pub const IOLINK_TYPE_ETHERNET_RDMA: u32 = 14;
/// IO link type: other RDMA.
pub const IOLINK_TYPE_RDMA_OTHER: u32 = 15;
/// IO link type: other.
pub const IOLINK_TYPE_OTHER: u32 = 16;

bitflags! {
    /// IO link `flags` bits (`HSA_IOLINK_FLAGS_*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct IoLinkFlags: u32 {
        /// The link is enabled.
        const ENABLED = 1 << 0;
        /// The link is not cache coherent.
        const NON_COHERENT = 1 << 1;
        /// No 32-bit atomics over the link.
        const NO_ATOMICS_32_BIT = 1 << 2;
        /// No 64-bit atomics over the link.
        const NO_ATOMICS_64_BIT = 1 << 3;
        /// No peer-to-peer DMA over the link.
        const NO_PEER_TO_PEER_DMA = 1 << 4;
    }
}

/// `nodes/N/io_links/M/properties` or `nodes/N/p2p_links/M/properties`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IoLink {
    /// Link type (`IOLINK_TYPE_*`; sysfs key `type`).
    pub link_type: u32,
    /// Link version, major.
    pub version_major: u32,
    /// Link version, minor.
    pub version_minor: u32,
    /// Source node id.
    pub node_from: u32,
    /// Destination node id.
    pub node_to: u32,
    /// Relative distance (NUMA-style weight).
    pub weight: u32,
    /// Minimum latency in ns.
    pub min_latency: u32,
    /// Maximum latency in ns.
    pub max_latency: u32,
    /// Minimum bandwidth in MB/s.
    pub min_bandwidth: u32,
    /// Maximum bandwidth in MB/s.
    pub max_bandwidth: u32,
    /// Recommended transfer size in bytes.
    pub recommended_transfer_size: u32,
    /// Mask of SDMA engines recommended for this link; newer kernels.
    pub recommended_sdma_engine_id_mask: Option<u32>,
    /// Flags, see [`IoLinkFlags`].
    pub flags: u32,
    /// Keys this type does not know, with their values, in file order.
    pub extra: Vec<(String, u64)>,
}

properties_impl!(IoLink, text_keys = [], {
    link_type = "type",
    version_major = "version_major",
    version_minor = "version_minor",
    node_from = "node_from",
    node_to = "node_to",
    weight = "weight",
    min_latency = "min_latency",
    max_latency = "max_latency",
    min_bandwidth = "min_bandwidth",
    max_bandwidth = "max_bandwidth",
    recommended_transfer_size = "recommended_transfer_size",
    recommended_sdma_engine_id_mask = "recommended_sdma_engine_id_mask",
    flags = "flags",
});

impl IoLink {
    /// The flags as bits.
    pub fn link_flags(&self) -> IoLinkFlags {
        IoLinkFlags::from_bits_retain(self.flags)
    }

    /// Whether this is an XGMI link.
    pub fn is_xgmi(&self) -> bool {
        self.link_type == IOLINK_TYPE_XGMI
    }

    /// Whether this is a PCIe link.
    pub fn is_pcie(&self) -> bool {
        self.link_type == IOLINK_TYPE_PCIEXPRESS
    }
}

/// The `system_properties` file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SystemProperties {
    /// Platform OEM table id (from the CRAT / ACPI table).
    pub platform_oem: u64,
    /// Platform OEM id.
    pub platform_id: u64,
    /// Platform OEM revision.
    pub platform_rev: u64,
    /// Keys this type does not know, with their values, in file order.
    pub extra: Vec<(String, u64)>,
}

properties_impl!(SystemProperties, text_keys = [], {
    platform_oem = "platform_oem",
    platform_id = "platform_id",
    platform_rev = "platform_rev",
});

// ---------------------------------------------------------------------------------
// Nodes and the whole tree
// ---------------------------------------------------------------------------------

/// One `nodes/N` directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// The sysfs node id `N`.
    pub id: u32,
    /// The `gpu_id` file: the id ioctls take; 0 on a CPU-only node.
    pub gpu_id: u32,
    /// The `name` file without its newline (e.g. an ASIC name or `ip discovery`;
    /// empty on CPU nodes). Empty if the file is absent.
    pub name: String,
    /// The `properties` file.
    pub properties: NodeProperties,
    /// `mem_banks/M`, in numeric order.
    pub mem_banks: Vec<MemBank>,
    /// `caches/M`, in numeric order.
    pub caches: Vec<Cache>,
    /// `io_links/M`, in numeric order.
    pub io_links: Vec<IoLink>,
    /// `p2p_links/M`, in numeric order.
    pub p2p_links: Vec<IoLink>,
}

impl Node {
    /// Whether this is a GPU node (non-zero `gpu_id`).
    pub fn is_gpu(&self) -> bool {
        self.gpu_id != 0
    }

    /// VRAM bytes: the sum of `size_in_bytes` over FB public and FB private banks.
    pub fn vram_size(&self) -> u64 {
        self.mem_banks
            .iter()
            .filter(|b| b.is_vram())
            .fold(0u64, |acc, b| acc.saturating_add(b.size_in_bytes))
    }

    /// Active compute units, see [`NodeProperties::cu_count`].
    pub fn cu_count(&self) -> u32 {
        self.properties.cu_count()
    }

    /// The LLVM target name, see [`NodeProperties::gfx_target_name`].
    pub fn gfx_target_name(&self) -> Option<String> {
        self.properties.gfx_target_name()
    }

    /// Bytes per doorbell, see [`NodeProperties::doorbell_size`].
    pub fn doorbell_size(&self) -> usize {
        self.properties.doorbell_size()
    }
}

/// A whole topology tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// The `generation_id` file: bumped by the kernel on every topology change.
    pub generation_id: u32,
    /// The `system_properties` file.
    pub system: SystemProperties,
    /// The nodes, ordered by numeric id.
    pub nodes: Vec<Node>,
    /// Ids of nodes whose files could not be read for lack of permission (a device
    /// cgroup hides those GPUs from this process); they are left out of `nodes`, as
    /// libhsakmt leaves them out. Not written by [`Topology::to_sysfs`].
    pub inaccessible_nodes: Vec<u32>,
}

/// Where a sysfs-format topology tree is read from: the file system
/// ([`FsSource`]) or memory ([`SysfsTree`]).
pub trait SysfsSource {
    /// The bytes of the file at `path` (`NotFound` / `PermissionDenied` as the file
    /// system reports them).
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// The entry names of directory `path`, in any order.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
}

/// The file system as a [`SysfsSource`].
#[derive(Debug, Clone, Copy, Default)]
pub struct FsSource;

impl SysfsSource for FsSource {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(path)? {
            if let Some(n) = entry?.file_name().to_str() {
                out.push(n.to_owned());
            }
        }
        Ok(out)
    }
}

/// A sysfs-format topology tree held in memory: file paths (relative to the tree's
/// root, e.g. `nodes/1/properties`) and their contents. Directories are implied by
/// the files under them. [`Topology::to_tree`] builds one; [`Topology::from_source`]
/// parses one back (rooted at `""`). Emulators serve it instead of writing files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SysfsTree {
    files: std::collections::BTreeMap<PathBuf, Vec<u8>>,
}

impl SysfsTree {
    /// An empty tree.
    pub fn new() -> SysfsTree {
        SysfsTree::default()
    }

    /// Add (or replace) the file at relative `path`.
    pub fn insert(&mut self, path: impl Into<PathBuf>, contents: impl Into<Vec<u8>>) {
        self.files.insert(path.into(), contents.into());
    }

    /// The contents of the file at relative `path` (a leading `/` is ignored).
    pub fn read_file(&self, path: &Path) -> Option<&[u8]> {
        let path = path.strip_prefix("/").unwrap_or(path);
        self.files.get(path).map(|v| v.as_slice())
    }

    /// The sorted, distinct entry names of the directory at relative `path` (`""` is
    /// the root); `None` when no file lies under it.
    pub fn list_dir(&self, path: &Path) -> Option<Vec<String>> {
        let path = path.strip_prefix("/").unwrap_or(path);
        let mut out: Vec<String> = Vec::new();
        for f in self.files.keys() {
            let Ok(rest) = f.strip_prefix(path) else {
                continue;
            };
            if let Some(std::path::Component::Normal(first)) = rest.components().next() {
                if rest.components().count() >= 1 && f != path {
                    let n = first.to_string_lossy().into_owned();
                    if out.last() != Some(&n) && !out.contains(&n) {
                        out.push(n);
                    }
                }
            }
        }
        if out.is_empty() {
            return None;
        }
        out.sort();
        Some(out)
    }

    /// Whether relative `path` is a directory of the tree.
    pub fn is_dir(&self, path: &Path) -> bool {
        self.list_dir(path).is_some()
    }

    /// Every file path, sorted.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.files.keys().map(|p| p.as_path())
    }
}

impl SysfsSource for SysfsTree {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.read_file(path)
            .map(|b| b.to_vec())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        SysfsTree::list_dir(self, path)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such directory"))
    }
}

fn read_bytes(src: &dyn SysfsSource, path: &Path) -> Result<Vec<u8>, TopologyError> {
    src.read(path).map_err(|e| io_error(path, e))
}

fn io_error(path: &Path, e: io::Error) -> TopologyError {
    if e.kind() == io::ErrorKind::NotFound {
        TopologyError::MissingFile {
            path: path.to_owned(),
        }
    } else {
        TopologyError::Io {
            path: path.to_owned(),
            source: e,
        }
    }
}

/// Parse a file holding one decimal number (`generation_id`, `gpu_id`).
fn parse_single_u32(path: &Path, bytes: &[u8]) -> Result<u32, TopologyError> {
    let key = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = String::from_utf8_lossy(bytes);
    let trimmed = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let value = parse_decimal(trimmed).ok_or_else(|| TopologyError::InvalidValue {
        path: path.to_owned(),
        line: 1,
        key: key.clone(),
        value: shorten(trimmed),
    })?;
    u32::try_from(value).map_err(|_| TopologyError::ValueOutOfRange {
        path: path.to_owned(),
        line: 1,
        key,
        value,
        bits: 32,
    })
}

/// The numerically named entries of `dir`, sorted by number. Other names are
/// ignored. A missing directory is an error only if `required`.
fn numbered_entries(
    src: &dyn SysfsSource,
    dir: &Path,
    required: bool,
) -> Result<Vec<(u32, PathBuf)>, TopologyError> {
    let rd = match src.list_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound && !required => return Ok(Vec::new()),
        Err(e) => return Err(io_error(dir, e)),
    };
    let mut out = Vec::new();
    for name in rd {
        let Some(id) = parse_decimal(&name) else {
            continue;
        };
        if let Ok(id) = u32::try_from(id) {
            out.push((id, dir.join(&name)));
        }
    }
    out.sort_by_key(|(id, _)| *id);
    Ok(out)
}

fn is_permission_denied(e: &TopologyError) -> bool {
    matches!(e, TopologyError::Io { source, .. } if source.kind() == io::ErrorKind::PermissionDenied)
}

fn read_list<T>(
    src: &dyn SysfsSource,
    dir: &Path,
    skip_denied: bool,
    parse: impl Fn(&[u8], &Path) -> Result<T, TopologyError>,
) -> Result<Vec<(PathBuf, T)>, TopologyError> {
    let mut out = Vec::new();
    for (_, sub) in numbered_entries(src, dir, false)? {
        let path = sub.join("properties");
        let bytes = match read_bytes(src, &path) {
            Ok(b) => b,
            // libhsakmt skips links the device cgroup hides.
            Err(e) if skip_denied && is_permission_denied(&e) => continue,
            Err(e) => return Err(e),
        };
        out.push((sub, parse(&bytes, &path)?));
    }
    Ok(out)
}

impl Node {
    /// Read one `nodes/N` directory. `Ok(None)` if the node is hidden from this
    /// process (permission denied on `gpu_id` or `properties`).
    fn from_dir(src: &dyn SysfsSource, id: u32, dir: &Path) -> Result<Option<Node>, TopologyError> {
        let gpu_id_path = dir.join("gpu_id");
        let gpu_id = match read_bytes(src, &gpu_id_path) {
            Ok(b) => parse_single_u32(&gpu_id_path, &b)?,
            Err(e) if is_permission_denied(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let name_path = dir.join("name");
        let name = match src.read(&name_path) {
            Ok(b) => {
                let s = String::from_utf8_lossy(&b);
                s.strip_suffix('\n').unwrap_or(&s).to_owned()
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Ok(None),
            Err(e) => return Err(io_error(&name_path, e)),
        };
        let props_path = dir.join("properties");
        let properties = match read_bytes(src, &props_path) {
            Ok(b) => NodeProperties::parse(&b, &props_path)?,
            Err(e) if is_permission_denied(&e) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut mem_banks = Vec::new();
        for (sub, mut bank) in read_list(src, &dir.join("mem_banks"), false, MemBank::parse)? {
            let used_path = sub.join("used_memory");
            bank.used_memory = match src.read(&used_path) {
                Ok(b) => Some(parse_u64_file(&used_path, &b)?),
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => return Err(io_error(&used_path, e)),
            };
            mem_banks.push(bank);
        }
        let caches = values(read_list(src, &dir.join("caches"), false, Cache::parse)?);
        let io_links = values(read_list(src, &dir.join("io_links"), true, IoLink::parse)?);
        let p2p_links = values(read_list(src, &dir.join("p2p_links"), true, IoLink::parse)?);
        Ok(Some(Node {
            id,
            gpu_id,
            name,
            properties,
            mem_banks,
            caches,
            io_links,
            p2p_links,
        }))
    }
}

fn values<T>(list: Vec<(PathBuf, T)>) -> Vec<T> {
    list.into_iter().map(|(_, v)| v).collect()
}

fn parse_u64_file(path: &Path, bytes: &[u8]) -> Result<u64, TopologyError> {
    let text = String::from_utf8_lossy(bytes);
    let trimmed = text.trim_matches(|c: char| c.is_ascii_whitespace());
    parse_decimal(trimmed).ok_or_else(|| TopologyError::InvalidValue {
        path: path.to_owned(),
        line: 1,
        key: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        value: shorten(trimmed),
    })
}

fn invalid_input(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn check_extra(what: &str, known: &[&str], extra: &[(String, u64)]) -> io::Result<()> {
    for (i, (k, _)) in extra.iter().enumerate() {
        if k.is_empty()
            || k.bytes()
                .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(invalid_input(format!(
                "{what}: extra key {k:?} is not a single word"
            )));
        }
        if known.contains(&k.as_str()) {
            return Err(invalid_input(format!(
                "{what}: extra key `{k}` is a known key"
            )));
        }
        if extra[..i].iter().any(|(k2, _)| k2 == k) {
            return Err(invalid_input(format!(
                "{what}: extra key `{k}` appears twice"
            )));
        }
    }
    Ok(())
}

/// Where [`Topology::write_tree`] puts files: the file system, or a [`SysfsTree`].
enum Sink<'a> {
    Fs,
    Mem(&'a mut SysfsTree),
}

impl Sink<'_> {
    fn write_file(&mut self, path: &Path, contents: &str) -> io::Result<()> {
        match self {
            Sink::Fs => fs::write(path, contents)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
            Sink::Mem(t) => {
                t.insert(path, contents.as_bytes());
                Ok(())
            }
        }
    }

    fn create_dir(&mut self, path: &Path) -> io::Result<()> {
        match self {
            Sink::Fs => fs::create_dir_all(path)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
            Sink::Mem(_) => Ok(()),
        }
    }
}

impl Topology {
    /// Read the tree the running kernel publishes at [`DEFAULT_ROOT`].
    pub fn from_system() -> Result<Topology, TopologyError> {
        Self::from_sysfs(Path::new(DEFAULT_ROOT))
    }

    /// Read a topology tree rooted at `root` (the directory holding `generation_id`,
    /// `system_properties` and `nodes/`).
    ///
    /// Nodes and their sub-objects are ordered by numeric id (`10` after `9`);
    /// directory entries whose names are not decimal numbers are ignored. A node
    /// without `mem_banks/`, `caches/`, `io_links/` or `p2p_links/` has none of those
    /// (the `*_count` properties are reported as read, not checked against the
    /// directories). The `name` file is optional; `gpu_id` and every `properties`
    /// file are required. Nodes this process may not read (permission denied, as a
    /// device cgroup causes) are listed in [`Topology::inaccessible_nodes`].
    pub fn from_sysfs(root: &Path) -> Result<Topology, TopologyError> {
        Self::from_source(&FsSource, root)
    }

    /// [`Topology::from_sysfs`] over any [`SysfsSource`] (an in-memory [`SysfsTree`]
    /// is rooted at `""`).
    pub fn from_source(src: &dyn SysfsSource, root: &Path) -> Result<Topology, TopologyError> {
        let gen_path = root.join("generation_id");
        let generation_id = parse_single_u32(&gen_path, &read_bytes(src, &gen_path)?)?;
        let sys_path = root.join("system_properties");
        let system = SystemProperties::parse(&read_bytes(src, &sys_path)?, &sys_path)?;
        let mut nodes = Vec::new();
        let mut inaccessible_nodes = Vec::new();
        for (id, dir) in numbered_entries(src, &root.join("nodes"), true)? {
            match Node::from_dir(src, id, &dir)? {
                Some(node) => nodes.push(node),
                None => inaccessible_nodes.push(id),
            }
        }
        Ok(Topology {
            generation_id,
            system,
            nodes,
            inaccessible_nodes,
        })
    }

    /// Write this topology as a sysfs-style tree under `root`, in the kernel's
    /// format, so that [`Topology::from_sysfs`] reads back an equal value (except
    /// for `inaccessible_nodes`, which is not written).
    ///
    /// `root` is created if needed; it must not already contain `nodes/` (this
    /// function never deletes anything). Fails with `InvalidInput` if the value
    /// cannot be represented: duplicate node ids, a node name containing a newline,
    /// a `sibling_map` containing whitespace, or an `extra` key that is empty,
    /// contains whitespace, repeats, or names a known key.
    pub fn to_sysfs(&self, root: &Path) -> io::Result<()> {
        self.validate()?;
        let nodes_dir = root.join("nodes");
        if nodes_dir.exists() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{}: already exists", nodes_dir.display()),
            ));
        }
        self.write_tree(&mut Sink::Fs, root)
    }

    /// This topology as an in-memory [`SysfsTree`] (the files [`Topology::to_sysfs`]
    /// writes, relative to the root); same validation as `to_sysfs`.
    pub fn to_tree(&self) -> io::Result<SysfsTree> {
        self.validate()?;
        let mut t = SysfsTree::new();
        self.write_tree(&mut Sink::Mem(&mut t), Path::new(""))?;
        Ok(t)
    }

    fn write_tree(&self, sink: &mut Sink<'_>, root: &Path) -> io::Result<()> {
        let nodes_dir = root.join("nodes");
        sink.create_dir(&nodes_dir)?;
        sink.write_file(
            &root.join("generation_id"),
            &format!("{}\n", self.generation_id),
        )?;
        sink.write_file(
            &root.join("system_properties"),
            &self.system.to_properties_text(),
        )?;
        for node in &self.nodes {
            let dir = nodes_dir.join(node.id.to_string());
            sink.create_dir(&dir)?;
            sink.write_file(&dir.join("gpu_id"), &format!("{}\n", node.gpu_id))?;
            sink.write_file(&dir.join("name"), &format!("{}\n", node.name))?;
            sink.write_file(
                &dir.join("properties"),
                &node.properties.to_properties_text(),
            )?;
            fn write_list(
                sink: &mut Sink<'_>,
                dir: &Path,
                sub: &str,
                texts: Vec<String>,
            ) -> io::Result<Vec<PathBuf>> {
                let base = dir.join(sub);
                sink.create_dir(&base)?;
                let mut dirs = Vec::new();
                for (i, text) in texts.into_iter().enumerate() {
                    let d = base.join(i.to_string());
                    sink.create_dir(&d)?;
                    sink.write_file(&d.join("properties"), &text)?;
                    dirs.push(d);
                }
                Ok(dirs)
            }
            let bank_dirs = write_list(
                sink,
                &dir,
                "mem_banks",
                node.mem_banks
                    .iter()
                    .map(|b| b.to_properties_text())
                    .collect(),
            )?;
            for (bank, d) in node.mem_banks.iter().zip(&bank_dirs) {
                if let Some(used) = bank.used_memory {
                    sink.write_file(&d.join("used_memory"), &format!("{used}\n"))?;
                }
            }
            write_list(
                sink,
                &dir,
                "caches",
                node.caches.iter().map(|c| c.to_properties_text()).collect(),
            )?;
            write_list(
                sink,
                &dir,
                "io_links",
                node.io_links
                    .iter()
                    .map(|l| l.to_properties_text())
                    .collect(),
            )?;
            write_list(
                sink,
                &dir,
                "p2p_links",
                node.p2p_links
                    .iter()
                    .map(|l| l.to_properties_text())
                    .collect(),
            )?;
        }
        Ok(())
    }

    fn validate(&self) -> io::Result<()> {
        check_extra(
            "system_properties",
            SystemProperties::KEYS,
            &self.system.extra,
        )?;
        for (i, node) in self.nodes.iter().enumerate() {
            let n = node.id;
            if self.nodes[..i].iter().any(|m| m.id == n) {
                return Err(invalid_input(format!("node id {n} appears twice")));
            }
            if node.name.contains('\n') {
                return Err(invalid_input(format!("node {n}: name contains a newline")));
            }
            check_extra(
                &format!("node {n} properties"),
                NodeProperties::KEYS,
                &node.properties.extra,
            )?;
            for (j, b) in node.mem_banks.iter().enumerate() {
                check_extra(&format!("node {n} mem_bank {j}"), MemBank::KEYS, &b.extra)?;
            }
            for (j, c) in node.caches.iter().enumerate() {
                check_extra(&format!("node {n} cache {j}"), Cache::KEYS, &c.extra)?;
                if c.sibling_map
                    .bytes()
                    .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
                {
                    return Err(invalid_input(format!(
                        "node {n} cache {j}: sibling_map contains whitespace"
                    )));
                }
            }
            for (kind, links) in [("io_link", &node.io_links), ("p2p_link", &node.p2p_links)] {
                for (j, l) in links.iter().enumerate() {
                    check_extra(&format!("node {n} {kind} {j}"), IoLink::KEYS, &l.extra)?;
                }
            }
        }
        Ok(())
    }

    /// The GPU nodes (non-zero `gpu_id`), in node order.
    pub fn gpu_nodes(&self) -> impl Iterator<Item = &Node> + '_ {
        self.nodes.iter().filter(|n| n.is_gpu())
    }

    /// The CPU-only nodes (`gpu_id` 0), in node order.
    pub fn cpu_nodes(&self) -> impl Iterator<Item = &Node> + '_ {
        self.nodes.iter().filter(|n| !n.is_gpu())
    }

    /// The node with sysfs id `id`.
    pub fn node(&self, id: u32) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The GPU node with the given `gpu_id`.
    pub fn node_by_gpu_id(&self, gpu_id: u32) -> Option<&Node> {
        self.gpu_nodes().find(|n| n.gpu_id == gpu_id)
    }
}
