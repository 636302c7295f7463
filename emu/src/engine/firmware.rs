//! What the CP (MEC) firmware of each family accepts: one table per family, consulted by
//! the engines. A packet or size a family's firmware does not handle stops the queue as
//! the hardware does. Every row is cited in `firmware-notes/firmware-rules.md`.

use pm4::pkt3::op;
use pm4::GfxFamily;

/// PRED_EXEC (0x23): the next EXEC_COUNT dwords run only on the XCCs selected by
/// VIRTUAL_XCC_ID_SELECT (kernel `soc15d.h`).
pub(crate) const PRED_EXEC: u8 = 0x23;

/// The rules of one family's CP firmware.
#[derive(Debug)]
pub(crate) struct Firmware {
    /// Family the table describes.
    pub(crate) family: GfxFamily,
    /// PM4 type-3 opcodes the MEC executes on a compute queue or in an indirect buffer
    /// (any other opcode is an unknown opcode: the queue faults).
    pub(crate) pm4_opcodes: &'static [u8],
    /// Largest DMA_DATA BYTE_COUNT the CP DMA engine moves in one packet.
    pub(crate) dma_data_max_bytes: u32,
    /// An end-of-pipe RELEASE_MEM is delivered through the queue's EOP buffer: on a
    /// queue created without one it faults (a VM fault at the null EOP address).
    pub(crate) eop_release_needs_eop_buffer: bool,
    /// On a GPU with several XCCs in the partition every XCC executes the PM4 of an
    /// indirect buffer; PRED_EXEC selects XCCs.
    pub(crate) ib_runs_on_every_xcc: bool,
}

impl Firmware {
    /// Whether the MEC of this family decodes `opcode`.
    pub(crate) fn accepts(&self, opcode: u8) -> bool {
        self.pm4_opcodes.contains(&opcode)
    }
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
const GFX10_OPCODES: &[u8] = &[
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
    op::WAIT_REG_MEM64,
];

/// BYTE_COUNT is 26 bits on gfx9/gfx10 (Mesa `S_506_BYTE_COUNT`).
const BYTE_COUNT_26: u32 = (1 << 26) - 1;

static GFX9: Firmware = Firmware {
    family: GfxFamily::Gfx9,
    pm4_opcodes: GFX9_OPCODES,
    dma_data_max_bytes: BYTE_COUNT_26,
    eop_release_needs_eop_buffer: true,
    ib_runs_on_every_xcc: true,
};

static GFX10: Firmware = Firmware {
    family: GfxFamily::Gfx10,
    pm4_opcodes: GFX10_OPCODES,
    dma_data_max_bytes: BYTE_COUNT_26,
    eop_release_needs_eop_buffer: true,
    ib_runs_on_every_xcc: true,
};

static GFX11: Firmware = Firmware {
    family: GfxFamily::Gfx11,
    pm4_opcodes: GFX10_OPCODES,
    dma_data_max_bytes: 32767,
    eop_release_needs_eop_buffer: true,
    ib_runs_on_every_xcc: true,
};

static GFX12: Firmware = Firmware {
    family: GfxFamily::Gfx12,
    pm4_opcodes: GFX10_OPCODES,
    dma_data_max_bytes: 32767,
    eop_release_needs_eop_buffer: true,
    ib_runs_on_every_xcc: true,
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
}
