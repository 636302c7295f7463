//! The memory layouts the command processor reads (`amd_signal_t`, `amd_queue_t`), defined
//! once in [`pm4::hsa`] for the runtime and the emulator, and how the runtime fills an
//! `amd_queue_t` for one of its GPUs.

pub use pm4::hsa::*;

/// The `amd_queue_t` of an AQL queue over `slots` packets at `ring_va` on `gpu`.
pub fn amd_queue(ring_va: u64, slots: u32, gpu: &crate::devcore::Gpu) -> AmdQueue {
    AmdQueue::new(
        ring_va,
        slots,
        QueueLimits {
            lds_base: gpu.apertures.lds_base,
            scratch_base: gpu.apertures.scratch_base,
            max_cu_id: gpu.cu_count().saturating_sub(1),
            // ROCr amd_aql_queue.cpp: MaxWavesPerSIMD * NumSIMDPerCU - 1 (waves per CU).
            max_wave_id: (gpu.node.properties.max_waves_per_simd)
                .saturating_mul(gpu.node.properties.simd_per_cu)
                .saturating_sub(1),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ROCr amd_aql_queue.cpp: max_cu_id = simd_count / simd_per_cu - 1, max_wave_id =
    /// max_waves_per_simd * simd_per_cu - 1 (MI300X: 304 CUs, 8 waves x 4 SIMDs).
    #[test]
    fn amd_queue_max_ids_as_rocr_computes_them() {
        let dev = crate::Device::open_for_test("emu:mi300x");
        let g = &dev.gpus()[0];
        let q = amd_queue(0x1000, 64, g);
        let p = &g.node.properties;
        assert_eq!(q.max_wave_id, p.max_waves_per_simd * p.simd_per_cu - 1);
        assert_eq!(q.max_cu_id, p.simd_count / p.simd_per_cu - 1);
        assert_eq!((q.max_cu_id, q.max_wave_id), (303, 31));
    }
}
