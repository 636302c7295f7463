//! What the CP (MEC) firmware of each family accepts: one table per family, consulted by
//! the engines. A packet or size a family's firmware does not handle stops the queue as
//! the hardware does. Every row is cited in `firmware-notes/firmware-rules.md`.

use pm4::pkt3::op;
use pm4::GfxFamily;

/// PRED_EXEC (0x23): the next EXEC_COUNT dwords run only on the XCCs selected by
/// VIRTUAL_XCC_ID_SELECT (kernel `soc15d.h`).
pub(crate) const PRED_EXEC: u8 = 0x23;

/// The compute SH registers DISPATCH_DIRECT reads, as dword offsets from
/// `PACKET3_SET_SH_REG_START` (0x2C00; byte address 0xB000) — what SET_SH_REG's
/// REG_OFFSET holds. Byte addresses are Mesa's `R_00B8xx_COMPUTE_*` (`sid.h`,
/// `radv_emit_compute_shader`, `ac_shadowed_regs.c`), the same on gfx9..gfx11; field
/// layouts from Mesa `sid.h` (`S_00B800_*`, `S_00B81C_*`). Cited in
/// `firmware-notes/firmware-rules.md`.
pub(crate) mod sh {
    /// SH register space in dwords (`PACKET3_SET_SH_REG_END` 0x3000 - START).
    pub(crate) const SPACE: u32 = 0x400;
    /// COMPUTE_START_X/Y/Z (0xB810..): first work-group id.
    pub(crate) const START_X: u32 = 0x204;
    pub(crate) const START_Y: u32 = 0x205;
    pub(crate) const START_Z: u32 = 0x206;
    /// COMPUTE_NUM_THREAD_X/Y/Z (0xB81C..): work-group size (NUM_THREAD_FULL bits 9:0).
    pub(crate) const NUM_THREAD_X: u32 = 0x207;
    pub(crate) const NUM_THREAD_Y: u32 = 0x208;
    pub(crate) const NUM_THREAD_Z: u32 = 0x209;
    pub(crate) const NUM_THREAD_FULL_MASK: u32 = 0x3FF;
    /// COMPUTE_PGM_LO/HI (0xB830, 0xB834): program address >> 8.
    pub(crate) const PGM_LO: u32 = 0x20C;
    pub(crate) const PGM_HI: u32 = 0x20D;
    /// COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI (0xB840, 0xB844): the wave scratch base >> 8
    /// (LO: address bits 39:8, HI: bits 47:40) on parts with architected flat scratch
    /// (gfx940+ compute, gfx11+; Mesa `ac_gpu_info.c` `has_scratch_base_registers`).
    pub(crate) const DISPATCH_SCRATCH_BASE_LO: u32 = 0x210;
    pub(crate) const DISPATCH_SCRATCH_BASE_HI: u32 = 0x211;
    /// COMPUTE_PGM_RSRC1/2 (0xB848, 0xB84C).
    pub(crate) const PGM_RSRC1: u32 = 0x212;
    pub(crate) const PGM_RSRC2: u32 = 0x213;
    /// COMPUTE_TMPRING_SIZE (0xB860): WAVES bits 11:0, WAVESIZE from bit 12.
    pub(crate) const TMPRING_SIZE: u32 = 0x218;
    pub(crate) const TMPRING_WAVESIZE_SHIFT: u32 = 12;
    /// COMPUTE_PGM_RSRC3 (0xB8A0; gfx90a/gfx94x: ACCUM_OFFSET, TG_SPLIT).
    pub(crate) const PGM_RSRC3: u32 = 0x228;
    /// COMPUTE_USER_DATA_0..15 (0xB900..0xB93C): the user SGPRs, verbatim.
    pub(crate) const USER_DATA_0: u32 = 0x240;
    /// COMPUTE_DISPATCH_INITIATOR bits: COMPUTE_SHADER_EN (0), FORCE_START_AT_000 (2),
    /// USE_THREAD_DIMENSIONS (5).
    pub(crate) const INITIATOR_COMPUTE_SHADER_EN: u32 = 1 << 0;
    pub(crate) const INITIATOR_FORCE_START_AT_000: u32 = 1 << 2;
    pub(crate) const INITIATOR_USE_THREAD_DIMENSIONS: u32 = 1 << 5;
    /// RSRC2 LDS_SIZE granule in bytes (128 dwords on gfx7+: Mesa
    /// `lds_encode_granularity`).
    pub(crate) const LDS_GRANULE: u32 = 512;
}

/// The rules of one family's CP firmware.
#[derive(Debug)]
pub(crate) struct Firmware {
    /// Family the table describes.
    pub(crate) family: GfxFamily,
    /// PM4 type-3 opcodes the MEC executes on a compute queue or in an indirect buffer, as
    /// an older family's list plus what this one adds (any other opcode is an unknown
    /// opcode: the queue faults).
    /// (The bitmap below is what the engines read; the tests check it against this.)
    #[cfg(test)]
    pub(crate) pm4_opcodes: &'static [&'static [u8]],
    /// `pm4_opcodes` as a 256-bit set (`opcode_set(pm4_opcodes)`).
    pub(crate) pm4_opcode_set: [u64; 4],
    /// Largest DMA_DATA BYTE_COUNT the CP DMA engine moves in one packet.
    pub(crate) dma_data_max_bytes: u32,
    /// An end-of-pipe RELEASE_MEM is delivered through the queue's EOP buffer: on a
    /// queue created without one it faults (a VM fault at the null EOP address).
    pub(crate) eop_release_needs_eop_buffer: bool,
    /// On a GPU with several XCCs in the partition every XCC executes the PM4 of an
    /// indirect buffer; PRED_EXEC selects XCCs.
    pub(crate) ib_runs_on_every_xcc: bool,
    /// COMPUTE_TMPRING_SIZE.WAVESIZE: field mask (after the shift) and granule in bytes
    /// per wave (13 bits of 1 KiB on gfx9/gfx10, 15 bits of 256 bytes on gfx11+).
    pub(crate) tmpring_wavesize_mask: u32,
    pub(crate) tmpring_wavesize_granule: u32,
}

impl Firmware {
    /// Whether the MEC of this family decodes `opcode`.
    pub(crate) fn accepts(&self, opcode: u8) -> bool {
        // A table look-up per executed packet (the lists are scanned once, at compile
        // time, into one bitmap per family).
        self.pm4_opcode_set[usize::from(opcode >> 6)] >> (opcode & 63) & 1 != 0
    }
}

/// The opcode lists `lists` as a 256-bit set.
const fn opcode_set(lists: &[&[u8]]) -> [u64; 4] {
    let mut set = [0u64; 4];
    let mut i = 0;
    while i < lists.len() {
        let mut j = 0;
        while j < lists[i].len() {
            let op = lists[i][j];
            set[(op >> 6) as usize] |= 1 << (op & 63);
            j += 1;
        }
        i += 1;
    }
    set
}

/// Opcodes of `soc15d.h` (gfx9) that a compute queue runs.
const GFX9_OPCODES: &[u8] = &[
    op::NOP,
    op::DISPATCH_DIRECT,
    op::ATOMIC_MEM,
    PRED_EXEC,
    op::WRITE_DATA,
    op::WAIT_REG_MEM,
    op::INDIRECT_BUFFER,
    op::COPY_DATA,
    op::EVENT_WRITE,
    op::RELEASE_MEM,
    op::DMA_DATA,
    op::ACQUIRE_MEM,
    op::SET_SH_REG,
];

/// gfx10+ (`nvd.h`) adds WAIT_REG_MEM64.
const GFX10_OPCODES: &[&[u8]] = &[GFX9_OPCODES, &[op::WAIT_REG_MEM64]];

/// BYTE_COUNT is 26 bits on gfx9/gfx10 (Mesa `S_506_BYTE_COUNT`).
const BYTE_COUNT_26: u32 = (1 << 26) - 1;

static GFX9: Firmware = Firmware {
    family: GfxFamily::Gfx9,
    #[cfg(test)]
    pm4_opcodes: &[GFX9_OPCODES],
    pm4_opcode_set: opcode_set(&[GFX9_OPCODES]),
    dma_data_max_bytes: BYTE_COUNT_26,
    eop_release_needs_eop_buffer: true,
    ib_runs_on_every_xcc: true,
    tmpring_wavesize_mask: 0x1FFF,
    tmpring_wavesize_granule: 1024,
};

static GFX10: Firmware = Firmware {
    family: GfxFamily::Gfx10,
    #[cfg(test)]
    pm4_opcodes: GFX10_OPCODES,
    pm4_opcode_set: opcode_set(GFX10_OPCODES),
    ..GFX9
};

static GFX11: Firmware = Firmware {
    family: GfxFamily::Gfx11,
    #[cfg(test)]
    pm4_opcodes: GFX10_OPCODES,
    pm4_opcode_set: opcode_set(GFX10_OPCODES),
    dma_data_max_bytes: 32767,
    eop_release_needs_eop_buffer: true,
    ib_runs_on_every_xcc: true,
    tmpring_wavesize_mask: 0x7FFF,
    tmpring_wavesize_granule: 256,
};

static GFX12: Firmware = Firmware {
    family: GfxFamily::Gfx12,
    ..GFX11
};

/// The KFD exception code (`enum kfd_dbg_trap_exception_code`) a packet error reports.
pub(crate) fn queue_exception(reason: &str) -> u32 {
    use kfd::abi::ec;
    if reason.contains("vendor AQL packet format") {
        ec::QUEUE_PACKET_VENDOR_UNSUPPORTED
    } else if reason.contains("work-group of") {
        ec::QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID
    } else if reason.contains("kernel object") || reason.contains("kernel descriptor") {
        ec::QUEUE_PACKET_DISPATCH_CODE_INVALID
    } else if reason.contains("invalid kernel dispatch") {
        ec::QUEUE_PACKET_DISPATCH_DIM_INVALID
    } else if reason.starts_with(super::ISA_NOT_SUPPORTED) {
        ec::QUEUE_WAVE_ILLEGAL_INSTRUCTION
    } else {
        ec::QUEUE_PACKET_UNSUPPORTED
    }
}

/// The table of `family`.
pub(crate) fn firmware(family: GfxFamily) -> &'static Firmware {
    match family {
        GfxFamily::Gfx9 => &GFX9,
        GfxFamily::Gfx10 => &GFX10,
        GfxFamily::Gfx11 => &GFX11,
        GfxFamily::Gfx12 => &GFX12,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_match_their_family() {
        for f in GfxFamily::ALL {
            assert_eq!(firmware(f).family, f);
        }
        assert!(!firmware(GfxFamily::Gfx9).accepts(op::WAIT_REG_MEM64));
        assert!(firmware(GfxFamily::Gfx10).accepts(op::WAIT_REG_MEM64));
        assert_eq!(firmware(GfxFamily::Gfx11).dma_data_max_bytes, 32767);
    }

    /// The opcode bitmap says exactly what the opcode lists say, for every opcode.
    #[test]
    fn opcode_set_matches_the_lists() {
        for f in GfxFamily::ALL {
            let fw = firmware(f);
            let mut n = 0;
            for opcode in 0..=u8::MAX {
                let listed = fw.pm4_opcodes.iter().any(|ops| ops.contains(&opcode));
                assert_eq!(fw.accepts(opcode), listed, "{f:?} opcode {opcode:#04x}");
                n += usize::from(listed);
            }
            assert!(n > 10, "{f:?}: {n} opcodes");
        }
    }
}
