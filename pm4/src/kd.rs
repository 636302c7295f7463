//! The AMDHSA kernel descriptor: the 64-byte, 64-byte-aligned record that an AQL
//! KERNEL_DISPATCH packet's `kernel_object` points at and the command processor reads to
//! set up waves.
//!
//! Layout and bit fields: LLVM `llvm/include/llvm/Support/AMDHSAKernelDescriptor.h`
//! (`kernel_descriptor_t`, `COMPUTE_PGM_RSRC1/2/3`, `KERNEL_CODE_PROPERTY`,
//! `KERNARG_PRELOAD_SPEC`) and the AMDGPUUsage document's "Kernel Descriptor" tables; see
//! `firmware-notes/kernels.md`. It is defined here once and used by the code-object loader,
//! the runtime and the emulated CP alike.
//!
//! ```
//! use pm4::kd::KernelDescriptor;
//! let mut kd = KernelDescriptor::default();
//! kd.group_segment_fixed_size = 1024;
//! kd.compute_pgm_rsrc2 = 2 << 1 | 1 << 7; // two user SGPRs, workgroup id X
//! let bytes = kd.to_bytes();
//! let back = KernelDescriptor::from_bytes(&bytes);
//! assert_eq!(back, kd);
//! assert_eq!(back.user_sgpr_count(), 2);
//! assert!(back.workgroup_id_enabled(0));
//! ```

/// Size of a kernel descriptor in bytes (also its required alignment).
pub const KERNEL_DESCRIPTOR_SIZE: usize = 64;

/// `kernel_code_properties` bits (AMDHSAKernelDescriptor.h `KERNEL_CODE_PROPERTY_*`).
pub mod code_props {
    /// User SGPRs 0..3: the private segment buffer descriptor (V#).
    pub const ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER: u16 = 1 << 0;
    /// User SGPRs: the 64-bit address of the AQL dispatch packet.
    pub const ENABLE_SGPR_DISPATCH_PTR: u16 = 1 << 1;
    /// User SGPRs: the 64-bit address of the `amd_queue_t`.
    pub const ENABLE_SGPR_QUEUE_PTR: u16 = 1 << 2;
    /// User SGPRs: the 64-bit kernarg segment address.
    pub const ENABLE_SGPR_KERNARG_SEGMENT_PTR: u16 = 1 << 3;
    /// User SGPRs: the 64-bit dispatch id.
    pub const ENABLE_SGPR_DISPATCH_ID: u16 = 1 << 4;
    /// User SGPRs: flat scratch init (offset, size).
    pub const ENABLE_SGPR_FLAT_SCRATCH_INIT: u16 = 1 << 5;
    /// User SGPR: the private segment size per work-item.
    pub const ENABLE_SGPR_PRIVATE_SEGMENT_SIZE: u16 = 1 << 6;
    /// Wave32 (gfx10+ only).
    pub const ENABLE_WAVEFRONT_SIZE32: u16 = 1 << 10;
    /// The kernel uses a dynamically sized stack.
    pub const USES_DYNAMIC_STACK: u16 = 1 << 11;
}

/// The AMDHSA kernel descriptor (`kernel_descriptor_t`), field for field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelDescriptor {
    /// Byte 0: static LDS bytes per workgroup.
    pub group_segment_fixed_size: u32,
    /// Byte 4: static private (scratch) bytes per work-item.
    pub private_segment_fixed_size: u32,
    /// Byte 8: kernarg segment size in bytes.
    pub kernarg_size: u32,
    /// Byte 16: signed offset from the descriptor's address to the kernel's first
    /// instruction.
    pub kernel_code_entry_byte_offset: i64,
    /// Byte 44: COMPUTE_PGM_RSRC3 (gfx90a/gfx94x: ACCUM_OFFSET, TG_SPLIT; gfx10+:
    /// SHARED_VGPR_COUNT...).
    pub compute_pgm_rsrc3: u32,
    /// Byte 48: COMPUTE_PGM_RSRC1 (register counts, float modes).
    pub compute_pgm_rsrc1: u32,
    /// Byte 52: COMPUTE_PGM_RSRC2 (user SGPR count, system SGPR/VGPR enables, LDS size).
    pub compute_pgm_rsrc2: u32,
    /// Byte 56: [`code_props`] bits.
    pub kernel_code_properties: u16,
    /// Byte 58: KERNARG_PRELOAD_SPEC (length bits 0..6, offset in dwords bits 7..15).
    pub kernarg_preload: u16,
}

fn bits(v: u32, lo: u32, width: u32) -> u32 {
    (v >> lo) & ((1u32 << width) - 1)
}

impl KernelDescriptor {
    /// Reads a descriptor from its 64 bytes (reserved bytes are ignored).
    pub fn from_bytes(b: &[u8; KERNEL_DESCRIPTOR_SIZE]) -> Self {
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        let mut e = [0u8; 8];
        e.copy_from_slice(&b[16..24]);
        Self {
            group_segment_fixed_size: u32_at(0),
            private_segment_fixed_size: u32_at(4),
            kernarg_size: u32_at(8),
            kernel_code_entry_byte_offset: i64::from_le_bytes(e),
            compute_pgm_rsrc3: u32_at(44),
            compute_pgm_rsrc1: u32_at(48),
            compute_pgm_rsrc2: u32_at(52),
            kernel_code_properties: u16_at(56),
            kernarg_preload: u16_at(58),
        }
    }

    /// Reads a descriptor from a slice of at least 64 bytes; `None` when shorter.
    pub fn from_slice(b: &[u8]) -> Option<Self> {
        let a: &[u8; KERNEL_DESCRIPTOR_SIZE] = b.get(..KERNEL_DESCRIPTOR_SIZE)?.try_into().ok()?;
        Some(Self::from_bytes(a))
    }

    /// The 64 bytes of the descriptor (reserved bytes zero).
    pub fn to_bytes(&self) -> [u8; KERNEL_DESCRIPTOR_SIZE] {
        let mut b = [0u8; KERNEL_DESCRIPTOR_SIZE];
        b[0..4].copy_from_slice(&self.group_segment_fixed_size.to_le_bytes());
        b[4..8].copy_from_slice(&self.private_segment_fixed_size.to_le_bytes());
        b[8..12].copy_from_slice(&self.kernarg_size.to_le_bytes());
        b[16..24].copy_from_slice(&self.kernel_code_entry_byte_offset.to_le_bytes());
        b[44..48].copy_from_slice(&self.compute_pgm_rsrc3.to_le_bytes());
        b[48..52].copy_from_slice(&self.compute_pgm_rsrc1.to_le_bytes());
        b[52..56].copy_from_slice(&self.compute_pgm_rsrc2.to_le_bytes());
        b[56..58].copy_from_slice(&self.kernel_code_properties.to_le_bytes());
        b[58..60].copy_from_slice(&self.kernarg_preload.to_le_bytes());
        b
    }

    /// Whether a [`code_props`] bit is set.
    pub fn has(&self, prop: u16) -> bool {
        self.kernel_code_properties & prop != 0
    }

    /// RSRC1 GRANULATED_WORKITEM_VGPR_COUNT (bits 0..5): VGPR blocks - 1.
    pub fn granulated_vgpr_count(&self) -> u32 {
        bits(self.compute_pgm_rsrc1, 0, 6)
    }
    /// RSRC1 GRANULATED_WAVEFRONT_SGPR_COUNT (bits 6..9): SGPR blocks - 1 (gfx9).
    pub fn granulated_sgpr_count(&self) -> u32 {
        bits(self.compute_pgm_rsrc1, 6, 4)
    }
    /// RSRC1 FLOAT_ROUND_MODE_32 (bits 12..13).
    pub fn float_round_mode_32(&self) -> u32 {
        bits(self.compute_pgm_rsrc1, 12, 2)
    }
    /// RSRC1 FLOAT_ROUND_MODE_16_64 (bits 14..15).
    pub fn float_round_mode_16_64(&self) -> u32 {
        bits(self.compute_pgm_rsrc1, 14, 2)
    }
    /// RSRC1 FLOAT_DENORM_MODE_32 (bits 16..17).
    pub fn float_denorm_mode_32(&self) -> u32 {
        bits(self.compute_pgm_rsrc1, 16, 2)
    }
    /// RSRC1 FLOAT_DENORM_MODE_16_64 (bits 18..19).
    pub fn float_denorm_mode_16_64(&self) -> u32 {
        bits(self.compute_pgm_rsrc1, 18, 2)
    }
    /// RSRC1 ENABLE_DX10_CLAMP (bit 21).
    pub fn dx10_clamp(&self) -> bool {
        self.compute_pgm_rsrc1 & (1 << 21) != 0
    }
    /// RSRC1 ENABLE_IEEE_MODE (bit 23).
    pub fn ieee_mode(&self) -> bool {
        self.compute_pgm_rsrc1 & (1 << 23) != 0
    }
    /// RSRC2 ENABLE_PRIVATE_SEGMENT (bit 0): scratch in use.
    pub fn private_segment_enabled(&self) -> bool {
        self.compute_pgm_rsrc2 & 1 != 0
    }
    /// RSRC2 USER_SGPR_COUNT (bits 1..5): the first system SGPR follows the user SGPRs.
    pub fn user_sgpr_count(&self) -> u32 {
        bits(self.compute_pgm_rsrc2, 1, 5)
    }
    /// RSRC2 ENABLE_TRAP_HANDLER (bit 6).
    pub fn trap_handler_enabled(&self) -> bool {
        self.compute_pgm_rsrc2 & (1 << 6) != 0
    }
    /// RSRC2 ENABLE_SGPR_WORKGROUP_ID_{X,Y,Z} (bits 7, 8, 9) for `dim` 0, 1, 2.
    pub fn workgroup_id_enabled(&self, dim: u32) -> bool {
        dim < 3 && self.compute_pgm_rsrc2 & (1 << (7 + dim)) != 0
    }
    /// RSRC2 ENABLE_SGPR_WORKGROUP_INFO (bit 10).
    pub fn workgroup_info_enabled(&self) -> bool {
        self.compute_pgm_rsrc2 & (1 << 10) != 0
    }
    /// RSRC2 ENABLE_VGPR_WORKITEM_ID (bits 11..12): 0 = X, 1 = X and Y, 2 = X, Y and Z.
    pub fn workitem_id_dims(&self) -> u32 {
        bits(self.compute_pgm_rsrc2, 11, 2)
    }
    /// RSRC2 GRANULATED_LDS_SIZE (bits 15..23); the CP sets it per dispatch, so code
    /// objects leave it zero.
    pub fn granulated_lds_size(&self) -> u32 {
        bits(self.compute_pgm_rsrc2, 15, 9)
    }
    /// RSRC3 ACCUM_OFFSET (gfx90a/gfx94x, bits 0..5): first AccVGPR = (value + 1) * 4.
    pub fn accum_offset(&self) -> u32 {
        (bits(self.compute_pgm_rsrc3, 0, 6) + 1) * 4
    }
    /// RSRC3 TG_SPLIT (gfx90a/gfx94x, bit 16).
    pub fn tg_split(&self) -> bool {
        self.compute_pgm_rsrc3 & (1 << 16) != 0
    }
    /// KERNARG_PRELOAD_SPEC_LENGTH: kernarg dwords preloaded into user SGPRs (gfx94x).
    pub fn kernarg_preload_length(&self) -> u32 {
        u32::from(self.kernarg_preload & 0x7f)
    }
    /// KERNARG_PRELOAD_SPEC_OFFSET: first preloaded kernarg dword.
    pub fn kernarg_preload_offset(&self) -> u32 {
        u32::from(self.kernarg_preload >> 7)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_offsets_follow_kernel_descriptor_t() {
        let kd = KernelDescriptor {
            group_segment_fixed_size: 0x11,
            private_segment_fixed_size: 0x22,
            kernarg_size: 0x33,
            kernel_code_entry_byte_offset: -0x100,
            compute_pgm_rsrc3: 0x44,
            compute_pgm_rsrc1: 0x55,
            compute_pgm_rsrc2: 0x66,
            kernel_code_properties: 0x77,
            kernarg_preload: 0x88,
        };
        let b = kd.to_bytes();
        assert_eq!(b[0], 0x11);
        assert_eq!(b[4], 0x22);
        assert_eq!(b[8], 0x33);
        assert_eq!(&b[16..24], &(-0x100i64).to_le_bytes());
        assert_eq!(b[44], 0x44);
        assert_eq!(b[48], 0x55);
        assert_eq!(b[52], 0x66);
        assert_eq!(b[56], 0x77);
        assert_eq!(b[58], 0x88);
        assert_eq!(KernelDescriptor::from_bytes(&b), kd);
        assert!(KernelDescriptor::from_slice(&b[..63]).is_none());
    }

    #[test]
    fn rsrc_fields() {
        let kd = KernelDescriptor {
            compute_pgm_rsrc1: 3 | (2 << 6) | (3 << 16) | (1 << 21) | (1 << 23),
            compute_pgm_rsrc2: 1 | (6 << 1) | (0b111 << 7) | (2 << 11),
            compute_pgm_rsrc3: 5 | (1 << 16),
            kernarg_preload: 4 | (2 << 7),
            ..Default::default()
        };
        assert_eq!(kd.granulated_vgpr_count(), 3);
        assert_eq!(kd.granulated_sgpr_count(), 2);
        assert_eq!(kd.float_denorm_mode_32(), 3);
        assert!(kd.dx10_clamp() && kd.ieee_mode());
        assert!(kd.private_segment_enabled());
        assert_eq!(kd.user_sgpr_count(), 6);
        assert!((0..3).all(|d| kd.workgroup_id_enabled(d)));
        assert!(!kd.workgroup_id_enabled(3));
        assert_eq!(kd.workitem_id_dims(), 2);
        assert_eq!(kd.accum_offset(), 24);
        assert!(kd.tg_split());
        assert_eq!(kd.kernarg_preload_length(), 4);
        assert_eq!(kd.kernarg_preload_offset(), 2);
    }
}
