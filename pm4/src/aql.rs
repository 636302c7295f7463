//! AQL packets (64 bytes) and the AQL ring writer.
//!
//! Layouts follow HSA `hsa.h` (`hsa_kernel_dispatch_packet_t`,
//! `hsa_barrier_and_packet_t`, `hsa_barrier_or_packet_t`) and the AMD vendor
//! packets of ROCr (`hsa_ext_amd.h` `hsa_amd_barrier_value_packet_t`,
//! `amd_aql_queue.cpp`'s PM4-IB packet). Dword 0 holds the 16-bit header
//! (type bits 7:0, barrier bit 8, acquire fence scope bits 10:9, release fence
//! scope bits 12:11) and, above it, the 16-bit `setup` (dispatch) or the AMD
//! vendor format byte (vendor packets).

use core::sync::atomic::{AtomicU32, Ordering};

use crate::error::{check_reserved, DecodeError, EncodeError};
use crate::pkt3::{self, IndirectBuffer, Pm4Packet};
use crate::sink::{hi, join, lo};
use crate::GfxFamily;

/// Dwords in an AQL packet.
pub const PACKET_DWORDS: usize = 16;
/// Bytes in an AQL packet.
pub const PACKET_BYTES: usize = 64;

/// `hsa_packet_type_t`.
pub mod packet_type {
    /// HSA_PACKET_TYPE_VENDOR_SPECIFIC.
    pub const VENDOR_SPECIFIC: u8 = 0;
    /// HSA_PACKET_TYPE_INVALID.
    pub const INVALID: u8 = 1;
    /// HSA_PACKET_TYPE_KERNEL_DISPATCH.
    pub const KERNEL_DISPATCH: u8 = 2;
    /// HSA_PACKET_TYPE_BARRIER_AND.
    pub const BARRIER_AND: u8 = 3;
    /// HSA_PACKET_TYPE_AGENT_DISPATCH.
    pub const AGENT_DISPATCH: u8 = 4;
    /// HSA_PACKET_TYPE_BARRIER_OR.
    pub const BARRIER_OR: u8 = 5;

    /// Name of a packet type.
    pub const fn name(t: u8) -> &'static str {
        match t {
            VENDOR_SPECIFIC => "VENDOR_SPECIFIC",
            INVALID => "INVALID",
            KERNEL_DISPATCH => "KERNEL_DISPATCH",
            BARRIER_AND => "BARRIER_AND",
            AGENT_DISPATCH => "AGENT_DISPATCH",
            BARRIER_OR => "BARRIER_OR",
            _ => "UNKNOWN",
        }
    }
}

/// AMD vendor packet formats (`AmdFormat`, byte 2 of a vendor packet).
pub mod amd_format {
    /// AMD_AQL_FORMAT_PM4_IB.
    pub const PM4_IB: u8 = 1;
    /// AMD_AQL_FORMAT_BARRIER_VALUE (HSA_AMD_PACKET_TYPE_BARRIER_VALUE).
    pub const BARRIER_VALUE: u8 = 2;
}

/// `dw_cnt_remain` of a PM4-IB vendor packet.
pub const PM4_IB_DW_CNT_REMAIN: u32 = 0xA;

/// `hsa_fence_scope_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum FenceScope {
    /// HSA_FENCE_SCOPE_NONE.
    #[default]
    None = 0,
    /// HSA_FENCE_SCOPE_AGENT.
    Agent = 1,
    /// HSA_FENCE_SCOPE_SYSTEM.
    System = 2,
}

impl FenceScope {
    const fn from_bits(v: u16) -> Option<Self> {
        match v {
            0 => Some(FenceScope::None),
            1 => Some(FenceScope::Agent),
            2 => Some(FenceScope::System),
            _ => None,
        }
    }
    /// Disassembly name.
    pub const fn name(self) -> &'static str {
        match self {
            FenceScope::None => "none",
            FenceScope::Agent => "agent",
            FenceScope::System => "system",
        }
    }
}

/// The header bits shared by every packet: barrier and fence scopes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PacketControl {
    /// HSA_PACKET_HEADER_BARRIER (bit 8): wait for earlier packets to complete.
    pub barrier: bool,
    /// HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE (bits 10:9).
    pub acquire: FenceScope,
    /// HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE (bits 12:11).
    pub release: FenceScope,
}

impl PacketControl {
    /// Barrier set, system-scope acquire and release.
    pub const SYSTEM_BARRIER: PacketControl = PacketControl {
        barrier: true,
        acquire: FenceScope::System,
        release: FenceScope::System,
    };
}

/// A full 16-bit AQL packet header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AqlHeader {
    /// Packet type (bits 7:0), see [`packet_type`].
    pub packet_type: u8,
    /// Barrier and fence scopes.
    pub control: PacketControl,
}

impl AqlHeader {
    /// Encodes the 16-bit header.
    pub const fn to_u16(self) -> u16 {
        self.packet_type as u16
            | ((self.control.barrier as u16) << 8)
            | ((self.control.acquire as u16) << 9)
            | ((self.control.release as u16) << 11)
    }

    /// Decodes a 16-bit header; scope 3 and bits 15:13 are errors.
    pub const fn from_u16(h: u16) -> Result<Self, DecodeError> {
        if h >> 13 != 0 {
            return Err(DecodeError::ReservedBits {
                dword: 0,
                bits: (h as u32) & 0xE000,
            });
        }
        let Some(acquire) = FenceScope::from_bits((h >> 9) & 3) else {
            return Err(DecodeError::InvalidField {
                field: "acquire_fence_scope",
                value: 3,
            });
        };
        let Some(release) = FenceScope::from_bits((h >> 11) & 3) else {
            return Err(DecodeError::InvalidField {
                field: "release_fence_scope",
                value: 3,
            });
        };
        Ok(AqlHeader {
            packet_type: h as u8,
            control: PacketControl {
                barrier: (h >> 8) & 1 != 0,
                acquire,
                release,
            },
        })
    }
}

/// `hsa_kernel_dispatch_packet_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelDispatch {
    /// Barrier and fence scopes.
    pub control: PacketControl,
    /// Grid dimensions, 1..=3 (setup bits 1:0).
    pub dimensions: u8,
    /// Work-group size x, y, z.
    pub workgroup_size: [u16; 3],
    /// Grid size x, y, z (work-items).
    pub grid_size: [u32; 3],
    /// Private (scratch) segment bytes per work-item.
    pub private_segment_size: u32,
    /// Group (LDS) segment bytes.
    pub group_segment_size: u32,
    /// Kernel code object address.
    pub kernel_object: u64,
    /// Kernel argument address.
    pub kernarg_address: u64,
    /// Completion signal handle (0 = none).
    pub completion_signal: u64,
}

impl KernelDispatch {
    /// A dispatch of `grid_size` work-items in workgroups of `workgroup_size`; the setup
    /// dimensions are the highest dimension whose grid or workgroup extent exceeds 1 (HSA
    /// runtime spec, `hsa_kernel_dispatch_packet_t.setup`).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        control: PacketControl,
        workgroup_size: [u16; 3],
        grid_size: [u32; 3],
        private_segment_size: u32,
        group_segment_size: u32,
        kernel_object: u64,
        kernarg_address: u64,
        completion_signal: u64,
    ) -> Self {
        let dimensions = if grid_size[2] > 1 || workgroup_size[2] > 1 {
            3
        } else if grid_size[1] > 1 || workgroup_size[1] > 1 {
            2
        } else {
            1
        };
        KernelDispatch {
            control,
            dimensions,
            workgroup_size,
            grid_size,
            private_segment_size,
            group_segment_size,
            kernel_object,
            kernarg_address,
            completion_signal,
        }
    }
}

/// `hsa_barrier_and_packet_t` / `hsa_barrier_or_packet_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Barrier {
    /// Barrier and fence scopes.
    pub control: PacketControl,
    /// Dependent signal handles (0 = none).
    pub dep_signals: [u64; 5],
    /// Completion signal handle (0 = none).
    pub completion_signal: u64,
}

/// AMD vendor packet format 1 (`AMD_AQL_FORMAT_PM4_IB`): the CP executes the
/// INDIRECT_BUFFER command held in the packet body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VendorPm4Ib {
    /// Barrier and fence scopes.
    pub control: PacketControl,
    /// The INDIRECT_BUFFER command (dwords 1..4 of the packet).
    pub ib: IndirectBuffer,
    /// Completion signal handle (byte 56).
    pub completion_signal: u64,
}

/// `hsa_signal_condition_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SignalCondition {
    /// HSA_SIGNAL_CONDITION_EQ.
    Eq = 0,
    /// HSA_SIGNAL_CONDITION_NE.
    Ne = 1,
    /// HSA_SIGNAL_CONDITION_LT.
    Lt = 2,
    /// HSA_SIGNAL_CONDITION_GTE.
    Gte = 3,
}

impl SignalCondition {
    const fn from_bits(v: u32) -> Option<Self> {
        match v {
            0 => Some(SignalCondition::Eq),
            1 => Some(SignalCondition::Ne),
            2 => Some(SignalCondition::Lt),
            3 => Some(SignalCondition::Gte),
            _ => None,
        }
    }
    /// Disassembly name.
    pub const fn name(self) -> &'static str {
        match self {
            SignalCondition::Eq => "EQ",
            SignalCondition::Ne => "NE",
            SignalCondition::Lt => "LT",
            SignalCondition::Gte => "GTE",
        }
    }
    /// Evaluates `(value & mask) COND reference` on signed signal values.
    pub const fn test(self, value: i64, mask: i64, reference: i64) -> bool {
        let v = value & mask;
        match self {
            SignalCondition::Eq => v == reference,
            SignalCondition::Ne => v != reference,
            SignalCondition::Lt => v < reference,
            SignalCondition::Gte => v >= reference,
        }
    }
}

/// AMD vendor packet format 2 (`hsa_amd_barrier_value_packet_t`): waits
/// until `(signal.value & mask) cond value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BarrierValue {
    /// Barrier and fence scopes.
    pub control: PacketControl,
    /// Dependent signal handle (byte 8).
    pub signal: u64,
    /// Value to compare against (byte 16).
    pub value: i64,
    /// Mask (byte 24).
    pub mask: i64,
    /// Condition (byte 32).
    pub cond: SignalCondition,
    /// Completion signal handle (byte 56).
    pub completion_signal: u64,
}

/// Byte offset of the completion signal handle in every AQL packet type (HSA
/// `hsa_kernel_dispatch_packet_t`, barrier-AND/OR and AMD vendor packets alike).
pub const COMPLETION_SIGNAL_OFFSET: usize = 56;

impl BarrierValue {
    /// Encodes the 16 dwords, as [`AqlPacket::encode`] does for this packet (inlined:
    /// the runtime's timeline waits encode one per cross-stream dependency).
    #[inline]
    pub fn encode(&self) -> [u32; 16] {
        let mut w = [0u32; 16];
        w[0] = control_bits(self.control, packet_type::VENDOR_SPECIFIC)
            | ((amd_format::BARRIER_VALUE as u32) << 16);
        put64(&mut w, 2, self.signal);
        put64(&mut w, 4, self.value as u64);
        put64(&mut w, 6, self.mask as u64);
        w[8] = self.cond as u32;
        put64(&mut w, 14, self.completion_signal);
        w
    }
}

impl VendorPm4Ib {
    /// The encoding of [`AqlPacket::pm4_ib`]`(addr, dwords, completion_signal)` made from
    /// `template`, the encoding of `new(0, 0, 0)`: only the IB address, IB size and
    /// completion signal dwords change (the submission hot path encodes one per command).
    /// `addr` must be 4-aligned and `dwords` below 2^20, as [`AqlPacket::validate`] checks.
    #[inline]
    pub fn patch(
        template: &[u32; 16],
        addr: u64,
        dwords: u32,
        completion_signal: u64,
    ) -> [u32; 16] {
        let mut w = *template;
        w[2] = lo(addr & !3);
        w[3] = hi(addr);
        w[4] |= dwords & 0xF_FFFF;
        put64(&mut w, 14, completion_signal);
        w
    }
}

/// Any AQL packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AqlPacket {
    /// HSA kernel dispatch.
    KernelDispatch(KernelDispatch),
    /// Barrier-AND: wait for all dependent signals to reach 0.
    BarrierAnd(Barrier),
    /// Barrier-OR: wait for any dependent signal to reach 0.
    BarrierOr(Barrier),
    /// AMD vendor PM4-IB packet.
    VendorPm4Ib(VendorPm4Ib),
    /// AMD vendor barrier-value packet.
    BarrierValue(BarrierValue),
    /// A slot whose header type is INVALID (not yet written, or consumed).
    Invalid,
    /// A packet of a type or vendor format this crate does not decode, kept raw.
    Unknown {
        /// The 16 dwords.
        words: [u32; 16],
    },
}

/// Constructors of every AQL packet kfdrt submits, with the system-scope acquire/release
/// and the barrier bit every runtime packet carries ([`PacketControl::SYSTEM_BARRIER`]).
impl AqlPacket {
    /// A barrier-AND over up to five dependent signals (0 = none).
    pub const fn barrier_and(dep_signals: [u64; 5], completion_signal: u64) -> AqlPacket {
        AqlPacket::BarrierAnd(Barrier {
            control: PacketControl::SYSTEM_BARRIER,
            dep_signals,
            completion_signal,
        })
    }

    /// A barrier-OR over up to five dependent signals (0 = none).
    pub const fn barrier_or(dep_signals: [u64; 5], completion_signal: u64) -> AqlPacket {
        AqlPacket::BarrierOr(Barrier {
            control: PacketControl::SYSTEM_BARRIER,
            dep_signals,
            completion_signal,
        })
    }

    /// A PM4-IB packet running `dwords` of the indirect buffer at `addr`.
    pub const fn pm4_ib(addr: u64, dwords: u32, completion_signal: u64) -> AqlPacket {
        AqlPacket::VendorPm4Ib(VendorPm4Ib {
            control: PacketControl::SYSTEM_BARRIER,
            ib: IndirectBuffer::new(addr, dwords),
            completion_signal,
        })
    }

    /// A barrier-value packet waiting until `(signal.value & mask) cond value`.
    pub const fn barrier_value(
        signal: u64,
        cond: SignalCondition,
        value: i64,
        mask: i64,
        completion_signal: u64,
    ) -> AqlPacket {
        AqlPacket::BarrierValue(BarrierValue {
            control: PacketControl::SYSTEM_BARRIER,
            signal,
            value,
            mask,
            cond,
            completion_signal,
        })
    }

    /// A kernel dispatch ([`KernelDispatch::new`] with system scope and barrier).
    #[allow(clippy::too_many_arguments)]
    pub fn kernel_dispatch(
        workgroup_size: [u16; 3],
        grid_size: [u32; 3],
        private_segment_size: u32,
        group_segment_size: u32,
        kernel_object: u64,
        kernarg_address: u64,
        completion_signal: u64,
    ) -> AqlPacket {
        AqlPacket::KernelDispatch(KernelDispatch::new(
            PacketControl::SYSTEM_BARRIER,
            workgroup_size,
            grid_size,
            private_segment_size,
            group_segment_size,
            kernel_object,
            kernarg_address,
            completion_signal,
        ))
    }
}

#[inline]
const fn control_bits(c: PacketControl, ty: u8) -> u32 {
    AqlHeader {
        packet_type: ty,
        control: c,
    }
    .to_u16() as u32
}

fn put64(w: &mut [u32; 16], i: usize, v: u64) {
    w[i] = lo(v);
    w[i + 1] = hi(v);
}

impl AqlPacket {
    /// Packet type of the header this packet encodes to.
    pub fn packet_type(&self) -> u8 {
        match self {
            AqlPacket::KernelDispatch(_) => packet_type::KERNEL_DISPATCH,
            AqlPacket::BarrierAnd(_) => packet_type::BARRIER_AND,
            AqlPacket::BarrierOr(_) => packet_type::BARRIER_OR,
            AqlPacket::VendorPm4Ib(_) | AqlPacket::BarrierValue(_) => packet_type::VENDOR_SPECIFIC,
            AqlPacket::Invalid => packet_type::INVALID,
            AqlPacket::Unknown { words } => words[0] as u8,
        }
    }

    /// Disassembly name.
    pub fn name(&self) -> &'static str {
        match self {
            AqlPacket::KernelDispatch(_) => "KERNEL_DISPATCH",
            AqlPacket::BarrierAnd(_) => "BARRIER_AND",
            AqlPacket::BarrierOr(_) => "BARRIER_OR",
            AqlPacket::VendorPm4Ib(_) => "AMD_PM4_IB",
            AqlPacket::BarrierValue(_) => "AMD_BARRIER_VALUE",
            AqlPacket::Invalid => "INVALID",
            AqlPacket::Unknown { .. } => "UNKNOWN",
        }
    }

    /// Checks that every field fits; [`AqlPacket::encode`] masks fields that do not.
    pub fn validate(&self) -> Result<(), EncodeError> {
        match self {
            AqlPacket::KernelDispatch(k) if !(1..=3).contains(&k.dimensions) => {
                Err(EncodeError::InvalidField {
                    field: "dimensions",
                    value: k.dimensions as u64,
                })
            }
            AqlPacket::VendorPm4Ib(p) => {
                let mut tmp = [0u32; 4];
                p.ib.encode(GfxFamily::Gfx9, &mut tmp).map(|_| ())
            }
            _ => Ok(()),
        }
    }

    /// Encodes the 16 dwords; dword 0 (header and setup) is the one to
    /// publish last. Out-of-range fields are masked to their widths.
    pub fn encode(&self) -> [u32; 16] {
        let mut w = [0u32; 16];
        match self {
            AqlPacket::KernelDispatch(k) => {
                w[0] = control_bits(k.control, packet_type::KERNEL_DISPATCH)
                    | (((k.dimensions & 3) as u32) << 16);
                w[1] = k.workgroup_size[0] as u32 | ((k.workgroup_size[1] as u32) << 16);
                w[2] = k.workgroup_size[2] as u32;
                w[3] = k.grid_size[0];
                w[4] = k.grid_size[1];
                w[5] = k.grid_size[2];
                w[6] = k.private_segment_size;
                w[7] = k.group_segment_size;
                put64(&mut w, 8, k.kernel_object);
                put64(&mut w, 10, k.kernarg_address);
                put64(&mut w, 14, k.completion_signal);
            }
            AqlPacket::BarrierAnd(b) | AqlPacket::BarrierOr(b) => {
                let ty = if matches!(self, AqlPacket::BarrierAnd(_)) {
                    packet_type::BARRIER_AND
                } else {
                    packet_type::BARRIER_OR
                };
                w[0] = control_bits(b.control, ty);
                for (i, &s) in b.dep_signals.iter().enumerate() {
                    put64(&mut w, 2 + 2 * i, s);
                }
                put64(&mut w, 14, b.completion_signal);
            }
            AqlPacket::VendorPm4Ib(p) => {
                w[0] = control_bits(p.control, packet_type::VENDOR_SPECIFIC)
                    | ((amd_format::PM4_IB as u32) << 16);
                let mut ib = p.ib;
                ib.addr &= !3;
                ib.size_dw &= 0xFFFFF;
                ib.vmid &= 0xF;
                let mut body = [0u32; 4];
                // Cannot fail after masking.
                let _ = ib.encode(GfxFamily::Gfx9, &mut body);
                w[1..5].copy_from_slice(&body);
                w[5] = PM4_IB_DW_CNT_REMAIN;
                put64(&mut w, 14, p.completion_signal);
            }
            AqlPacket::BarrierValue(b) => w = b.encode(),
            AqlPacket::Invalid => w[0] = packet_type::INVALID as u32,
            AqlPacket::Unknown { words } => w = *words,
        }
        w
    }

    /// Encodes to 64 little-endian bytes.
    pub fn encode_bytes(&self) -> [u8; 64] {
        let w = self.encode();
        let mut b = [0u8; 64];
        for (i, d) in w.iter().enumerate() {
            b[4 * i..4 * i + 4].copy_from_slice(&d.to_le_bytes());
        }
        b
    }

    /// Decodes 64 little-endian bytes.
    pub fn decode_bytes(b: &[u8; 64]) -> Result<AqlPacket, DecodeError> {
        let mut w = [0u32; 16];
        for (i, d) in w.iter_mut().enumerate() {
            *d = u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
        }
        Self::decode(&w)
    }

    /// Decodes 16 dwords. Reserved fields must be zero.
    ///
    /// The two vendor packets kfdrt submits on every command are recognised first from a
    /// few whole-dword compares: a PM4-IB packet whose INDIRECT_BUFFER is the compute-queue
    /// form (valid, VMID 0, LRU, no other control bit) and a barrier-value packet, both
    /// with their reserved bits clear. Anything else, and every error, goes through the
    /// field-by-field decoder, so the result is the same for every input (the emulated
    /// CP decodes each packet it runs; the general decoder cost ~110 host instructions
    /// per packet, mostly its per-field branches and saved registers).
    pub fn decode(w: &[u32; 16]) -> Result<AqlPacket, DecodeError> {
        let h = w[0];
        // Fence scopes (bits 12:9): 3 in either 2-bit field is invalid.
        let bad_scope = (h >> 9) & (h >> 10) & 0b101;
        // Type VENDOR_SPECIFIC (7:0), bits 15:13 clear, the format byte, reserved byte 3.
        let kind = h & 0xFFFF_E0FF;
        if kind == (amd_format::PM4_IB as u32) << 16 {
            const IB_HEADER: u32 = pkt3::packet3(pkt3::op::INDIRECT_BUFFER, 2);
            // The INDIRECT_BUFFER header (decode_header does not read bits 7:0), IB
            // address bits 1:0, the control dword's bits 31:20 = VALID only,
            // dw_cnt_remain, reserved dwords 6..14.
            let bad = bad_scope
                | ((w[1] & 0xFFFF_FF00) ^ IB_HEADER)
                | (w[2] & 3)
                | ((w[4] >> 20) ^ 0x008)
                | (w[5] ^ PM4_IB_DW_CNT_REMAIN)
                | w[6]
                | w[7]
                | w[8]
                | w[9]
                | w[10]
                | w[11]
                | w[12]
                | w[13];
            if bad == 0 {
                return Ok(AqlPacket::VendorPm4Ib(VendorPm4Ib {
                    control: fast_control(h),
                    ib: IndirectBuffer::new(join(w[2], w[3]), w[4] & 0xF_FFFF),
                    completion_signal: join(w[14], w[15]),
                }));
            }
        } else if kind == (amd_format::BARRIER_VALUE as u32) << 16 {
            // Reserved dword 1, the condition (0..=3), reserved dwords 9..14.
            let bad = bad_scope | w[1] | (w[8] & !3) | w[9] | w[10] | w[11] | w[12] | w[13];
            if bad == 0 {
                return Ok(AqlPacket::BarrierValue(BarrierValue {
                    control: fast_control(h),
                    signal: join(w[2], w[3]),
                    value: join(w[4], w[5]) as i64,
                    mask: join(w[6], w[7]) as i64,
                    cond: match w[8] & 3 {
                        0 => SignalCondition::Eq,
                        1 => SignalCondition::Ne,
                        2 => SignalCondition::Lt,
                        _ => SignalCondition::Gte,
                    },
                    completion_signal: join(w[14], w[15]),
                }));
            }
        }
        Self::decode_general(w)
    }

    /// [`AqlPacket::decode`] field by field: every packet type, every error. Out of line:
    /// the fast forms above need no saved registers.
    #[inline(never)]
    fn decode_general(w: &[u32; 16]) -> Result<AqlPacket, DecodeError> {
        let ty = w[0] as u8;
        if ty == packet_type::INVALID {
            return Ok(AqlPacket::Invalid);
        }
        let known = matches!(
            ty,
            packet_type::KERNEL_DISPATCH
                | packet_type::BARRIER_AND
                | packet_type::BARRIER_OR
                | packet_type::VENDOR_SPECIFIC
        );
        if !known {
            return Ok(AqlPacket::Unknown { words: *w });
        }
        let header = AqlHeader::from_u16(w[0] as u16)?;
        let control = header.control;
        let sig = |i: usize| join(w[i], w[i + 1]);
        match ty {
            packet_type::KERNEL_DISPATCH => {
                let setup = w[0] >> 16;
                check_reserved(setup, 3, 0).map_err(|_| DecodeError::ReservedBits {
                    dword: 0,
                    bits: w[0] & 0xFFFC_0000,
                })?;
                let dimensions = (setup & 3) as u8;
                if dimensions == 0 {
                    return Err(DecodeError::InvalidField {
                        field: "dimensions",
                        value: 0,
                    });
                }
                check_reserved(w[2], 0xFFFF, 2)?;
                check_reserved(w[12], 0, 12)?;
                check_reserved(w[13], 0, 13)?;
                Ok(AqlPacket::KernelDispatch(KernelDispatch {
                    control,
                    dimensions,
                    workgroup_size: [w[1] as u16, (w[1] >> 16) as u16, w[2] as u16],
                    grid_size: [w[3], w[4], w[5]],
                    private_segment_size: w[6],
                    group_segment_size: w[7],
                    kernel_object: sig(8),
                    kernarg_address: sig(10),
                    completion_signal: sig(14),
                }))
            }
            packet_type::BARRIER_AND | packet_type::BARRIER_OR => {
                check_reserved(w[0], 0xFFFF, 0)?;
                check_reserved(w[1], 0, 1)?;
                check_reserved(w[12], 0, 12)?;
                check_reserved(w[13], 0, 13)?;
                let b = Barrier {
                    control,
                    dep_signals: [sig(2), sig(4), sig(6), sig(8), sig(10)],
                    completion_signal: sig(14),
                };
                Ok(if ty == packet_type::BARRIER_AND {
                    AqlPacket::BarrierAnd(b)
                } else {
                    AqlPacket::BarrierOr(b)
                })
            }
            _ => {
                // Vendor specific: AmdFormat in byte 2, reserved byte 3.
                let format = (w[0] >> 16) as u8;
                match format {
                    amd_format::PM4_IB => {
                        check_reserved(w[0], 0x00FF_FFFF, 0)?;
                        // The common case (a 4-dword INDIRECT_BUFFER header) decodes just the
                        // IB body; anything else takes the general PM4 decoder for its error.
                        let ib = match pkt3::decode_header(w[1]) {
                            Ok((pkt3::op::INDIRECT_BUFFER, IndirectBuffer::DWORDS)) => {
                                IndirectBuffer::decode_body(w[2], w[3], w[4])?
                            }
                            _ => match pkt3::decode_pm4(&w[1..5], GfxFamily::Gfx9) {
                                Ok((Pm4Packet::IndirectBuffer(ib), 4)) => ib,
                                Ok(_) => {
                                    return Err(DecodeError::InvalidField {
                                        field: "ib_jump_cmd",
                                        value: w[1] as u64,
                                    })
                                }
                                Err(e) => return Err(e),
                            },
                        };
                        if w[5] != PM4_IB_DW_CNT_REMAIN {
                            return Err(DecodeError::InvalidField {
                                field: "dw_cnt_remain",
                                value: w[5] as u64,
                            });
                        }
                        check_zero::<6, 14>(w)?;
                        Ok(AqlPacket::VendorPm4Ib(VendorPm4Ib {
                            control,
                            ib,
                            completion_signal: sig(14),
                        }))
                    }
                    amd_format::BARRIER_VALUE => {
                        check_reserved(w[0], 0x00FF_FFFF, 0)?;
                        check_reserved(w[1], 0, 1)?;
                        let Some(cond) = SignalCondition::from_bits(w[8]) else {
                            return Err(DecodeError::InvalidField {
                                field: "cond",
                                value: w[8] as u64,
                            });
                        };
                        check_zero::<9, 14>(w)?;
                        Ok(AqlPacket::BarrierValue(BarrierValue {
                            control,
                            signal: sig(2),
                            value: sig(4) as i64,
                            mask: sig(6) as i64,
                            cond,
                            completion_signal: sig(14),
                        }))
                    }
                    _ => Ok(AqlPacket::Unknown { words: *w }),
                }
            }
        }
    }
}

/// The barrier bit and fence scopes of header dword `h`, whose scopes are known valid
/// (neither is 3).
#[inline(always)]
const fn fast_control(h: u32) -> PacketControl {
    // A table (one load) rather than a match (a compare chain per scope); entry 3 is
    // never read.
    const SCOPE: [FenceScope; 4] = [
        FenceScope::None,
        FenceScope::Agent,
        FenceScope::System,
        FenceScope::System,
    ];
    PacketControl {
        barrier: h & (1 << 8) != 0,
        acquire: SCOPE[(h >> 9) as usize & 3],
        release: SCOPE[(h >> 11) as usize & 3],
    }
}

/// Reserved dwords `A..B` must be zero: the first nonzero one is the error (as a
/// `check_reserved(w[i], 0, i)` per dword in order reports it). Constant bounds: the
/// common all-zero test is one unrolled OR.
#[inline(always)]
fn check_zero<const A: usize, const B: usize>(w: &[u32; 16]) -> Result<(), DecodeError> {
    let mut any = 0;
    let mut i = A;
    while i < B && i < 16 {
        any |= w[i];
        i += 1;
    }
    if any == 0 {
        return Ok(());
    }
    check_zero_slow(w, A..B)
}

/// [`check_zero`]'s error: the first nonzero dword of `r`.
#[cold]
fn check_zero_slow(w: &[u32; 16], r: core::ops::Range<usize>) -> Result<(), DecodeError> {
    for (i, &x) in w.iter().enumerate().take(r.end).skip(r.start) {
        check_reserved(x, 0, i)?;
    }
    Ok(())
}

/// Sets every slot of `ring` (16 dwords each) to an INVALID packet: the
/// header dword becomes `HSA_PACKET_TYPE_INVALID`, the body zero.
pub fn init_invalid(ring: &[AtomicU32]) {
    for slot in ring.chunks(PACKET_DWORDS) {
        for w in slot.iter().skip(1) {
            w.store(0, Ordering::Relaxed);
        }
        if let Some(h) = slot.first() {
            h.store(packet_type::INVALID as u32, Ordering::Release);
        }
    }
}

/// Writes AQL packets into a ring viewed as atomics. Publish order: dwords
/// 1..15 with relaxed stores, then dword 0 (header and setup) with a release
/// store, so the packet processor never sees a valid header before the body.
pub struct AqlRingWriter<'a> {
    ring: &'a [AtomicU32],
    mask: u64,
}

impl<'a> AqlRingWriter<'a> {
    /// A writer over `ring` (`slots * 16` dwords). `None` unless the slot count
    /// is a non-zero power of two and the length a multiple of 16.
    pub fn new(ring: &'a [AtomicU32]) -> Option<Self> {
        let slots = ring.len() / PACKET_DWORDS;
        if slots == 0 || ring.len() % PACKET_DWORDS != 0 || !slots.is_power_of_two() {
            return None;
        }
        Some(AqlRingWriter {
            ring,
            mask: slots as u64 - 1,
        })
    }

    /// Number of 64-byte slots.
    pub fn slot_count(&self) -> usize {
        self.mask as usize + 1
    }

    /// Writes `pkt` into slot `index % slot_count` and returns the doorbell
    /// value, which is `index` (the packet's write index).
    #[inline]
    pub fn write(&self, index: u64, pkt: &AqlPacket) -> u64 {
        let w = pkt.encode();
        let base = ((index & self.mask) as usize) * PACKET_DWORDS;
        let slot = &self.ring[base..base + PACKET_DWORDS];
        for i in 1..PACKET_DWORDS {
            slot[i].store(w[i], Ordering::Relaxed);
        }
        slot[0].store(w[0], Ordering::Release);
        index
    }

    /// Writes pre-encoded packet dwords into slot `index % slot_count`, in the same
    /// publish order as [`AqlRingWriter::write`] (body relaxed, header release).
    #[inline]
    pub fn write_words(&self, index: u64, w: &[u32; 16]) -> u64 {
        let base = ((index & self.mask) as usize) * PACKET_DWORDS;
        let slot = &self.ring[base..base + PACKET_DWORDS];
        for i in 1..PACKET_DWORDS {
            slot[i].store(w[i], Ordering::Relaxed);
        }
        slot[0].store(w[0], Ordering::Release);
        index
    }

    /// Reads back and decodes slot `index % slot_count` (acquire on the header).
    pub fn read(&self, index: u64) -> Result<AqlPacket, DecodeError> {
        let base = ((index & self.mask) as usize) * PACKET_DWORDS;
        let mut w = [0u32; 16];
        w[0] = self.ring[base].load(Ordering::Acquire);
        for (i, d) in w.iter_mut().enumerate().skip(1) {
            *d = self.ring[base + i].load(Ordering::Relaxed);
        }
        AqlPacket::decode(&w)
    }
}

#[cfg(test)]
mod dispatch_tests {
    use super::*;

    #[test]
    fn pm4_ib_patch_matches_encode() {
        let t = AqlPacket::pm4_ib(0, 0, 0).encode();
        for (a, n, c) in [
            (0x1000u64, 7u32, 0x2000u64),
            (0x7fff_ffff_f000, 16, u64::MAX - 63),
            (0xdead_beef_0004, 0xF_FFFF, 0),
        ] {
            assert_eq!(
                VendorPm4Ib::patch(&t, a, n, c),
                AqlPacket::pm4_ib(a, n, c).encode()
            );
        }
    }

    #[test]
    fn kernel_dispatch_new_sets_dimensions_and_encodes() {
        let k = KernelDispatch::new(
            PacketControl::SYSTEM_BARRIER,
            [16, 16, 1],
            [64, 32, 1],
            1040,
            2048,
            0x7000_0040,
            0x8000_0000,
            0x9000_0000,
        );
        assert_eq!(k.dimensions, 2);
        let w = AqlPacket::KernelDispatch(k).encode();
        assert_eq!(w[0] & 0xff, packet_type::KERNEL_DISPATCH as u32);
        assert_eq!(w[0] >> 16, 2);
        assert_eq!(w[1], 16 | 16 << 16);
        assert_eq!((w[3], w[4], w[5]), (64, 32, 1));
        assert_eq!((w[6], w[7]), (1040, 2048));
        assert_eq!(AqlPacket::decode(&w).unwrap(), AqlPacket::KernelDispatch(k));
        let one = KernelDispatch::new(
            PacketControl::default(),
            [64, 1, 1],
            [256, 1, 1],
            0,
            0,
            0,
            0,
            0,
        );
        assert_eq!(one.dimensions, 1);
        let three = KernelDispatch::new(
            PacketControl::default(),
            [4, 4, 4],
            [4, 4, 8],
            0,
            0,
            0,
            0,
            0,
        );
        assert_eq!(three.dimensions, 3);
    }

    #[test]
    fn vendor_packet_errors_name_the_first_bad_dword() {
        let ib = AqlPacket::pm4_ib(0x1000, 8, 0x2000).encode();
        let err = |w: [u32; 16]| AqlPacket::decode(&w).unwrap_err();
        // Reserved dwords 6..14: the lowest nonzero one is reported.
        let mut w = ib;
        w[11] = 4;
        w[9] = 1 << 7;
        assert_eq!(
            err(w),
            DecodeError::ReservedBits {
                dword: 9,
                bits: 1 << 7
            }
        );
        // The range's ends: dword 6 is checked, dword 14 (the signal) is not reserved.
        let mut w = ib;
        w[6] = 1;
        assert_eq!(err(w), DecodeError::ReservedBits { dword: 6, bits: 1 });
        let mut w = ib;
        w[13] = 1 << 31;
        assert_eq!(
            err(w),
            DecodeError::ReservedBits {
                dword: 13,
                bits: 1 << 31
            }
        );
        // IB address bits 1:0 (dword 1 of the INDIRECT_BUFFER).
        let mut w = ib;
        w[2] |= 2;
        assert_eq!(err(w), DecodeError::ReservedBits { dword: 1, bits: 2 });
        // Another PM4 packet in the body, and a bad PM4 header.
        let mut w = ib;
        w[1] = (3 << 30) | (2 << 16) | ((pkt3::op::NOP as u32) << 8);
        assert_eq!(
            err(w),
            DecodeError::InvalidField {
                field: "ib_jump_cmd",
                value: w[1] as u64
            }
        );
        let mut w = ib;
        w[1] &= !(3 << 30);
        assert!(matches!(err(w), DecodeError::BadHeaderType { .. }));
        // An INDIRECT_BUFFER header of another length.
        let mut w = ib;
        w[1] = (3 << 30) | (1 << 16) | ((pkt3::op::INDIRECT_BUFFER as u32) << 8);
        assert!(matches!(err(w), DecodeError::BadLength { .. }));
        // Barrier-value: reserved dwords 9..14.
        let mut w = AqlPacket::barrier_value(0x40, SignalCondition::Lt, 5, -1, 0).encode();
        w[13] = 9;
        assert_eq!(err(w), DecodeError::ReservedBits { dword: 13, bits: 9 });
        w[9] = 3;
        assert_eq!(err(w), DecodeError::ReservedBits { dword: 9, bits: 3 });
        w[9] = 0;
        w[13] = 0;
        assert!(matches!(
            AqlPacket::decode(&w),
            Ok(AqlPacket::BarrierValue(_))
        ));
        assert_eq!(
            AqlPacket::decode(&ib),
            Ok(AqlPacket::pm4_ib(0x1000, 8, 0x2000))
        );
    }
}

#[cfg(test)]
mod decode_agreement_tests {
    //! [`AqlPacket::decode`]'s whole-dword fast forms against the field-by-field decoder
    //! they short-cut: every input must decode (or fail) identically.
    use super::*;
    use proptest::prelude::*;

    fn scope(v: u8) -> FenceScope {
        match v % 3 {
            0 => FenceScope::None,
            1 => FenceScope::Agent,
            _ => FenceScope::System,
        }
    }

    fn control(barrier: bool, acquire: u8, release: u8) -> PacketControl {
        PacketControl {
            barrier,
            acquire: scope(acquire),
            release: scope(release),
        }
    }

    fn cond(v: u8) -> SignalCondition {
        match v % 4 {
            0 => SignalCondition::Eq,
            1 => SignalCondition::Ne,
            2 => SignalCondition::Lt,
            _ => SignalCondition::Gte,
        }
    }

    fn pm4_ib(c: PacketControl, addr: u64, size: u32, sig: u64) -> [u32; 16] {
        AqlPacket::VendorPm4Ib(VendorPm4Ib {
            control: c,
            ib: IndirectBuffer::new(addr & !3, size & 0xF_FFFF),
            completion_signal: sig,
        })
        .encode()
    }

    fn barrier_value(c: PacketControl, s: u64, v: i64, m: i64, k: u8, sig: u64) -> [u32; 16] {
        AqlPacket::BarrierValue(BarrierValue {
            control: c,
            signal: s,
            value: v,
            mask: m,
            cond: cond(k),
            completion_signal: sig,
        })
        .encode()
    }

    /// Checks `w` and returns the decoding.
    fn agree(w: &[u32; 16]) -> Result<AqlPacket, DecodeError> {
        let r = AqlPacket::decode(w);
        assert_eq!(r, AqlPacket::decode_general(w), "words {w:08x?}");
        r
    }

    /// Every control (barrier, 3 x 3 scopes), every condition: the fast forms decode to
    /// exactly the packet encoded (a field taken from the wrong bits fails here).
    #[test]
    fn fast_forms_decode_every_control() {
        for barrier in [false, true] {
            for a in 0..3 {
                for r in 0..3 {
                    let c = control(barrier, a, r);
                    let p = AqlPacket::VendorPm4Ib(VendorPm4Ib {
                        control: c,
                        ib: IndirectBuffer::new(0x7fff_dead_bee4, 0xA_BCDE),
                        completion_signal: 0x1234_5678_9abc_def0,
                    });
                    assert_eq!(agree(&p.encode()), Ok(p));
                    for k in 0..4 {
                        let b = AqlPacket::BarrierValue(BarrierValue {
                            control: c,
                            signal: 0x8000_0000_0040 + k as u64,
                            value: -7 - k as i64,
                            mask: 0x0f0f_0f0f_0f0f_0f0f,
                            cond: cond(k),
                            completion_signal: u64::MAX - 3,
                        });
                        assert_eq!(agree(&b.encode()), Ok(b));
                    }
                }
            }
        }
    }

    /// Every single-bit flip of a fast-form packet (with both scopes at their limits):
    /// the same result as the general decoder, accepted or refused.
    #[test]
    fn single_bit_flips_agree() {
        let c = control(true, 2, 1);
        for base in [
            pm4_ib(c, 0x1000, 16, 0x2000),
            pm4_ib(PacketControl::default(), 0, 0, 0),
            barrier_value(c, 0x40, 5, -1, 2, 0x80),
            barrier_value(PacketControl::default(), 0, 0, 0, 3, 0),
        ] {
            // Both outcomes occur (an address or signal bit flipped still decodes, a
            // reserved one does not), so both sides of the fast path are compared.
            let (mut ok, mut err) = (0, 0);
            for d in 0..16 {
                for bit in 0..32 {
                    let mut w = base;
                    w[d] ^= 1 << bit;
                    // A second flip in the header (scope 3, other types and formats).
                    for hb in [None].into_iter().chain((8..24).map(Some)) {
                        let mut w2 = w;
                        if let Some(hb) = hb {
                            w2[0] ^= 1 << hb;
                        }
                        match agree(&w2) {
                            Ok(_) => ok += 1,
                            Err(_) => err += 1,
                        }
                    }
                }
            }
            assert!(ok > 100 && err > 100, "{ok} decoded, {err} refused");
        }
    }

    fn any_control() -> impl Strategy<Value = PacketControl> {
        (any::<bool>(), 0u8..3, 0u8..3).prop_map(|(b, a, r)| control(b, a, r))
    }

    /// Packets near the fast forms: valid ones with random fields, then up to four
    /// random dwords replaced by random values or random bit masks XORed in.
    fn near_fast_forms() -> impl Strategy<Value = [u32; 16]> {
        let ib = (any_control(), any::<u64>(), any::<u32>(), any::<u64>())
            .prop_map(|(c, a, n, s)| pm4_ib(c, a, n, s));
        let bv = (
            any_control(),
            any::<u64>(),
            any::<i64>(),
            any::<i64>(),
            any::<u8>(),
            any::<u64>(),
        )
            .prop_map(|(c, s, v, m, k, sig)| barrier_value(c, s, v, m, k, sig));
        let base = prop_oneof![ib, bv, any::<[u32; 16]>()];
        let edit = (0usize..16, any::<u32>(), any::<bool>(), 0u32..32);
        (base, proptest::collection::vec(edit, 0..4)).prop_map(|(mut w, edits)| {
            for (d, v, replace, bit) in edits {
                if replace {
                    w[d] = v;
                } else {
                    w[d] ^= 1 << bit;
                }
            }
            w
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 4096,
            failure_persistence: None,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b66_6472_7400_0a91),
            ..ProptestConfig::default()
        })]

        #[test]
        fn decode_agrees_with_the_general_decoder(w in near_fast_forms()) {
            let r = AqlPacket::decode(&w);
            prop_assert_eq!(r, AqlPacket::decode_general(&w));
        }
    }
}
