//! Board presets: the facts the emulated KFD publishes for each emulated GPU.
//!
//! Every number comes from a real board. Where a public KFD sysfs dump of the board exists
//! (the topology dumps collected for this project: MI300X, MI210, RX 7900 XTX, RX 9070 XT),
//! the preset copies that dump's `properties` and `mem_banks` values. The MI250X GCD has no
//! public dump; its preset combines the MI210 dump (the same Aldebaran die: gfx90a, same
//! firmware, SDMA layout and capability bits) with AMD's public specifications of one
//! MI250X GCD: 110 active CUs out of 112 slots (8 arrays x 14), 64 GiB HBM2e.
//!
//! The CWSR sizes are not stored: [`crate::cwsr_sizes`] derives them exactly as the kernel
//! does (`kfd_queue_ctx_save_restore_size`), and the results match the `cwsr_size` and
//! `ctl_stack_size` keys of the MI300X and RX 9070 XT dumps.

/// One emulated board: the KFD topology facts of a real GPU.
///
/// The fields are public so that tests can derive variants (for example a smaller VRAM);
/// the spec option `vram=` does that from a device string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preset {
    /// Spec name, lower case (`"mi300x"`).
    pub name: &'static str,
    /// Marketing name, written to the node's `name` file.
    pub marketing_name: &'static str,
    /// `gfx_target_version` (decimal `MMmmss`: 90402 = gfx942).
    pub gfx_target_version: u32,
    /// PCI device id.
    pub device_id: u32,
    /// SIMDs over all XCCs (`simd_count`).
    pub simd_count: u32,
    /// SIMDs per CU.
    pub simd_per_cu: u32,
    /// Shader arrays over all XCCs.
    pub array_count: u32,
    /// Shader arrays per shader engine.
    pub simd_arrays_per_engine: u32,
    /// CU slots per shader array.
    pub cu_per_simd_array: u32,
    /// Compute dies (XCCs) in the partition.
    pub num_xcc: u32,
    /// Wavefront size (64 on CDNA, 32 on RDNA).
    pub wave_front_size: u32,
    /// Waves per SIMD.
    pub max_waves_per_simd: u32,
    /// LDS per workgroup in KiB.
    pub lds_size_in_kb: u32,
    /// VRAM bytes (what `mem_banks/0/size_in_bytes` reports; the capacity the emulated
    /// KFD enforces, unless the spec option `vram=` lowers it).
    pub vram_size: u64,
    /// Bytes of VRAM the CPU can reach through the PCI BAR when less than all of it (a
    /// board without resizable BAR: a 256 MiB window), else `None`. KFD then reports the
    /// VRAM heap as `HEAP_TYPE_FB_PRIVATE` and refuses CPU-visible (PUBLIC) VRAM
    /// allocations (spec options `bar=SIZE`, `smallbar`; firmware-notes/kfd-memory.md).
    pub visible_vram_size: Option<u64>,
    /// VRAM bus width in bits.
    pub vram_width: u32,
    /// Maximum memory clock in MHz.
    pub mem_clk_max: u32,
    /// PCIe SDMA engines.
    pub num_sdma_engines: u32,
    /// XGMI SDMA engines.
    pub num_sdma_xgmi_engines: u32,
    /// Queues per SDMA engine.
    pub num_sdma_queues_per_engine: u32,
    /// Compute queues available to KFD.
    pub num_cp_queues: u32,
    /// Maximum engine clock in MHz.
    pub max_engine_clk_fcompute: u32,
    /// MEC firmware version.
    pub fw_version: u32,
    /// SDMA firmware version.
    pub sdma_fw_version: u32,
    /// `capability` word (includes the doorbell type 2.0: 64-bit doorbells).
    pub capability: u32,
    /// `capability2` word, where the dump has one.
    pub capability2: Option<u32>,
    /// `debug_prop` word.
    pub debug_prop: u64,
    /// PCI location id of the first instance (`bus << 8 | devfn`).
    pub location_id: u32,
    /// `simd_id_base` of the first instance.
    pub simd_id_base: u32,
    /// Whether the GPU supports per-process XNACK (retry faults): gfx90a, gfx942 and later
    /// CDNA parts (`KFD_SUPPORT_XNACK_PER_PROCESS`); RDNA parts cannot enable it.
    pub xnack_capable: bool,
    /// GPU timestamp counter rate in Hz (the 100 MHz SOC reference clock on all presets).
    pub gpu_clock_hz: u64,
}

const GIB: u64 = 1 << 30;

impl Preset {
    /// AMD Instinct MI300X in SPX mode (gfx942, 8 XCC, 304 CU, 192 GB HBM3), from the
    /// rocprofiler-sdk topology dump.
    pub const MI300X: Preset = Preset {
        name: "mi300x",
        marketing_name: "AMD Instinct MI300X",
        gfx_target_version: 90402,
        device_id: 0x74a1,
        simd_count: 1216,
        simd_per_cu: 4,
        array_count: 32,
        simd_arrays_per_engine: 1,
        cu_per_simd_array: 10,
        num_xcc: 8,
        wave_front_size: 64,
        max_waves_per_simd: 8,
        lds_size_in_kb: 64,
        vram_size: 206_141_652_992,
        visible_vram_size: None,
        vram_width: 8192,
        mem_clk_max: 1300,
        num_sdma_engines: 2,
        num_sdma_xgmi_engines: 14,
        num_sdma_queues_per_engine: 8,
        num_cp_queues: 24,
        max_engine_clk_fcompute: 2100,
        fw_version: 192,
        sdma_fw_version: 25,
        capability: 2_893_521_536,
        capability2: Some(1),
        debug_prop: 1511,
        location_id: 9728,
        simd_id_base: 2_147_487_784,
        xnack_capable: true,
        gpu_clock_hz: 100_000_000,
    };

    /// One GCD of an AMD Instinct MI250X (gfx90a, 110 CU, 64 GiB HBM2e). No public KFD
    /// dump exists; the fields not set here are the MI210 die's (from the MI210 dump), the
    /// CU count, VRAM and device id (0x740C) from AMD's public specifications.
    pub const MI250X: Preset = Preset {
        name: "mi250x",
        marketing_name: "AMD Instinct MI250X",
        device_id: 0x740c,
        simd_count: 440,
        location_id: 0xc100,
        ..Preset::MI210
    };

    /// AMD Instinct MI210 (gfx90a, 104 CU, 64 GB HBM2e), from the k8s-device-plugin
    /// topology dump.
    pub const MI210: Preset = Preset {
        name: "mi210",
        marketing_name: "AMD Instinct MI210",
        gfx_target_version: 90010,
        device_id: 0x740f,
        simd_count: 416,
        simd_per_cu: 4,
        array_count: 8,
        simd_arrays_per_engine: 1,
        cu_per_simd_array: 14,
        num_xcc: 1,
        wave_front_size: 64,
        max_waves_per_simd: 8,
        lds_size_in_kb: 64,
        vram_size: 64 * GIB,
        visible_vram_size: None,
        vram_width: 4096,
        mem_clk_max: 1600,
        num_sdma_engines: 2,
        num_sdma_xgmi_engines: 3,
        num_sdma_queues_per_engine: 8,
        num_cp_queues: 24,
        max_engine_clk_fcompute: 1700,
        fw_version: 92,
        sdma_fw_version: 9,
        capability: 746_037_888,
        capability2: None,
        debug_prop: 470,
        location_id: 25344,
        simd_id_base: 2_147_487_744,
        xnack_capable: true,
        gpu_clock_hz: 100_000_000,
    };

    /// AMD Radeon RX 7900 XTX (gfx1100, 96 CU, 24 GB GDDR6), from the tinygrad topology
    /// dump.
    pub const RX7900XTX: Preset = Preset {
        name: "rx7900xtx",
        marketing_name: "AMD Radeon RX 7900 XTX",
        gfx_target_version: 110000,
        device_id: 0x744c,
        simd_count: 192,
        simd_per_cu: 2,
        array_count: 12,
        simd_arrays_per_engine: 2,
        cu_per_simd_array: 8,
        num_xcc: 1,
        wave_front_size: 32,
        max_waves_per_simd: 16,
        lds_size_in_kb: 64,
        vram_size: 24 * GIB,
        visible_vram_size: None,
        vram_width: 384,
        mem_clk_max: 1250,
        num_sdma_engines: 2,
        num_sdma_xgmi_engines: 0,
        num_sdma_queues_per_engine: 6,
        num_cp_queues: 8,
        max_engine_clk_fcompute: 2482,
        fw_version: 2140,
        sdma_fw_version: 20,
        capability: 671_588_992,
        capability2: None,
        debug_prop: 1495,
        location_id: 34304,
        simd_id_base: 2_147_488_032,
        xnack_capable: false,
        gpu_clock_hz: 100_000_000,
    };

    /// AMD Radeon RX 9070 XT (gfx1201, 64 CU, 16 GB GDDR6), from the rocprofiler-sdk
    /// topology dump.
    pub const RX9070XT: Preset = Preset {
        name: "rx9070xt",
        marketing_name: "AMD Radeon RX 9070 XT",
        gfx_target_version: 120001,
        device_id: 0x7550,
        simd_count: 128,
        simd_per_cu: 2,
        array_count: 8,
        simd_arrays_per_engine: 2,
        cu_per_simd_array: 8,
        num_xcc: 1,
        wave_front_size: 32,
        max_waves_per_simd: 16,
        lds_size_in_kb: 64,
        vram_size: 17_095_983_104,
        visible_vram_size: None,
        vram_width: 256,
        mem_clk_max: 1258,
        num_sdma_engines: 2,
        num_sdma_xgmi_engines: 0,
        num_sdma_queues_per_engine: 6,
        num_cp_queues: 4,
        max_engine_clk_fcompute: 2400,
        fw_version: 3250,
        sdma_fw_version: 36502,
        capability: 1_745_068_672,
        capability2: Some(0),
        debug_prop: 1495,
        location_id: 33536,
        simd_id_base: 2_147_487_744,
        xnack_capable: false,
        gpu_clock_hz: 100_000_000,
    };

    /// Every preset, in the order `kfdrt info` lists them.
    pub const ALL: [Preset; 5] = [
        Preset::MI300X,
        Preset::MI250X,
        Preset::MI210,
        Preset::RX7900XTX,
        Preset::RX9070XT,
    ];

    /// The preset used by a plain `emu` device string.
    pub const DEFAULT: Preset = Preset::MI300X;

    /// The preset called `name` (case-insensitive).
    pub fn by_name(name: &str) -> Option<Preset> {
        Self::ALL
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name))
            .cloned()
    }

    /// The names of all presets.
    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|p| p.name).collect()
    }

    /// Whether the CPU sees only part of the VRAM (see [`Preset::visible_vram_size`]).
    pub fn is_small_bar(&self) -> bool {
        self.visible_vram_size.is_some_and(|v| v < self.vram_size)
    }

    /// The CPU-visible window of a board without resizable BAR (256 MiB).
    pub const SMALL_BAR: u64 = 256 << 20;

    /// Active compute units (`simd_count / simd_per_cu`).
    pub fn cu_count(&self) -> u32 {
        self.simd_count.checked_div(self.simd_per_cu).unwrap_or(0)
    }

    /// The CWSR sizes the kernel computes for this board.
    pub fn cwsr(&self) -> Option<CwsrSizes> {
        cwsr_sizes(
            self.gfx_target_version,
            self.num_xcc,
            self.simd_count,
            self.simd_per_cu,
            self.array_count,
            self.simd_arrays_per_engine,
            self.lds_size_in_kb,
        )
    }

    /// SRAM ECC is enabled on this board: its topology `capability` has
    /// `HSA_CAP_SRAM_EDCSUPPORTED` (the target ID reads `sramecc+`).
    pub fn sramecc(&self) -> bool {
        self.capability & kfd::topology::Capability::SRAM_EDCSUPPORTED.bits() != 0
    }

    /// The packet family of this board.
    pub fn family(&self) -> Option<pm4::GfxFamily> {
        pm4::GfxFamily::from_gfx_target_version(self.gfx_target_version)
    }

    /// The SDMA packet version of this board (SDMA 4 on gfx9, 5 on gfx10, 6 on gfx11,
    /// 7 on gfx12).
    pub fn sdma_version(&self) -> Option<pm4::SdmaVersion> {
        Some(match self.family()? {
            pm4::GfxFamily::Gfx9 => pm4::SdmaVersion::V4,
            pm4::GfxFamily::Gfx10 => pm4::SdmaVersion::V5,
            pm4::GfxFamily::Gfx11 => pm4::SdmaVersion::V6,
            pm4::GfxFamily::Gfx12 => pm4::SdmaVersion::V7,
        })
    }
}

/// Context-save (CWSR) sizes of one GPU, as `kfd_queue_ctx_save_restore_size`
/// (drivers/gpu/drm/amd/amdkfd/kfd_queue.c) computes them; the computation lives in
/// [`kfd::cwsr`] (the runtime sizes its queues with the same function, as ROCr does).
pub use kfd::cwsr::QueueSizes as CwsrSizes;

/// The CWSR sizes the kernel computes for a GPU (`kfd_queue_ctx_save_restore_size` in
/// kfd_queue.c), from the topology values it uses: `gfx_target_version`, the XCC count,
/// `simd_count`, `simd_per_cu`, `array_count`, `simd_arrays_per_engine` and
/// `lds_size_in_kb` (the LDS size only matters on gfx950). `None` before gfx8.0.1
/// (Carrizo), where the kernel computes nothing. Arithmetic saturates instead of
/// overflowing on absurd inputs.
///
/// The result for MI300X is `cwsr_size` 23203840 / `ctl_stack_size` 12288, for RX 9070 XT
/// 30699520 / 28672, equal to what those boards' kernels publish.
pub fn cwsr_sizes(
    gfx_target_version: u32,
    num_xcc: u32,
    simd_count: u32,
    simd_per_cu: u32,
    array_count: u32,
    simd_arrays_per_engine: u32,
    lds_size_in_kb: u32,
) -> Option<CwsrSizes> {
    kfd::cwsr::queue_sizes(&kfd::topology::NodeProperties {
        gfx_target_version,
        num_xcc: Some(num_xcc),
        simd_count,
        simd_per_cu,
        array_count,
        simd_arrays_per_engine,
        lds_size_in_kb,
        ..Default::default()
    })
}
