//! ABI conformance: every struct size, field offset and constant of `kfd::abi` is
//! compared with the host's installed `linux/kfd_ioctl.h`, through a C compiler probe.
//!
//! Structs or fields newer than the installed header (gated on its
//! `KFD_IOCTL_MINOR_VERSION`) are checked where the header has them; a struct that grew
//! at its tail (CREATE_QUEUE in 1.17) must match the header up to the header's size, and
//! its request code must match in every field but the size.
//!
//! Needs `cc` and the kernel uapi headers (Debian: gcc, linux-libc-dev); `.ci/run`
//! installs both, and the test fails (never skips) when they are missing.

use std::collections::HashMap;
use std::mem::{align_of, offset_of, size_of};
use std::process::Command;

use kfd::abi::*;
use zerocopy::IntoBytes;

struct StructCheck {
    c_name: &'static str,
    min_minor: u32,
    rust_size: usize,
    /// (C field, our offset, our size, first minor version with the field)
    fields: Vec<(&'static str, usize, usize, u32)>,
}

macro_rules! st {
    ($c:literal, $min:expr, $ty:ty, { $($cf:ident => $rf:ident $(: $view:ident)? $(@ $fmin:expr)?),* $(,)? }) => {
        StructCheck {
            c_name: $c,
            min_minor: $min,
            rust_size: size_of::<$ty>(),
            fields: vec![$((
                stringify!($cf),
                offset_of!($ty, $rf),
                st!(@size $ty, $rf $(, $view)?),
                st!(@min $min $(, $fmin)?),
            )),*],
        }
    };
    (@size $ty:ty, $rf:ident) => { field_size(|s: &$ty| &s.$rf) };
    // A member of a C union kept as raw bytes: its size is that of the typed view.
    (@size $ty:ty, $rf:ident, $view:ident) => { size_of::<$view>() };
    (@min $min:expr) => { $min };
    (@min $min:expr, $fmin:expr) => { $fmin };
}

fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

fn structs() -> Vec<StructCheck> {
    vec![
        st!("kfd_ioctl_get_version_args", 0, GetVersionArgs, { major_version => major_version, minor_version => minor_version }),
        st!("kfd_ioctl_create_queue_args", 0, CreateQueueArgs, {
            ring_base_address => ring_base_address, write_pointer_address => write_pointer_address,
            read_pointer_address => read_pointer_address, doorbell_offset => doorbell_offset,
            ring_size => ring_size, gpu_id => gpu_id, queue_type => queue_type,
            queue_percentage => queue_percentage, queue_priority => queue_priority, queue_id => queue_id,
            eop_buffer_address => eop_buffer_address, eop_buffer_size => eop_buffer_size,
            ctx_save_restore_address => ctx_save_restore_address,
            ctx_save_restore_size => ctx_save_restore_size, ctl_stack_size => ctl_stack_size,
            sdma_engine_id => sdma_engine_id @ 17, metadata_ring_size => metadata_ring_size @ 22,
        }),
        st!("kfd_ioctl_destroy_queue_args", 0, DestroyQueueArgs, { queue_id => queue_id, pad => pad }),
        st!("kfd_ioctl_update_queue_args", 0, UpdateQueueArgs, {
            ring_base_address => ring_base_address, queue_id => queue_id, ring_size => ring_size,
            queue_percentage => queue_percentage, queue_priority => queue_priority,
        }),
        st!("kfd_ioctl_set_cu_mask_args", 0, SetCuMaskArgs, { queue_id => queue_id, num_cu_mask => num_cu_mask, cu_mask_ptr => cu_mask_ptr }),
        st!("kfd_ioctl_get_queue_wave_state_args", 0, GetQueueWaveStateArgs, {
            ctl_stack_address => ctl_stack_address, ctl_stack_used_size => ctl_stack_used_size,
            save_area_used_size => save_area_used_size, queue_id => queue_id, pad => pad,
        }),
        st!("kfd_ioctl_get_available_memory_args", 9, GetAvailableMemoryArgs, { available => available, gpu_id => gpu_id, pad => pad }),
        st!("kfd_ioctl_set_memory_policy_args", 0, SetMemoryPolicyArgs, {
            alternate_aperture_base => alternate_aperture_base, alternate_aperture_size => alternate_aperture_size,
            gpu_id => gpu_id, default_policy => default_policy, alternate_policy => alternate_policy,
            misc_process_flag => misc_process_flag @ 18,
        }),
        st!("kfd_ioctl_get_clock_counters_args", 0, GetClockCountersArgs, {
            gpu_clock_counter => gpu_clock_counter, cpu_clock_counter => cpu_clock_counter,
            system_clock_counter => system_clock_counter, system_clock_freq => system_clock_freq,
            gpu_id => gpu_id, pad => pad,
        }),
        st!("kfd_process_device_apertures", 0, ProcessDeviceApertures, {
            lds_base => lds_base, lds_limit => lds_limit, scratch_base => scratch_base,
            scratch_limit => scratch_limit, gpuvm_base => gpuvm_base, gpuvm_limit => gpuvm_limit,
            gpu_id => gpu_id, pad => pad,
        }),
        st!("kfd_ioctl_get_process_apertures_args", 0, GetProcessAperturesArgs, {
            process_apertures => process_apertures, num_of_nodes => num_of_nodes, pad => pad,
        }),
        st!("kfd_ioctl_get_process_apertures_new_args", 0, GetProcessAperturesNewArgs, {
            kfd_process_device_apertures_ptr => kfd_process_device_apertures_ptr, num_of_nodes => num_of_nodes, pad => pad,
        }),
        st!("kfd_ioctl_create_event_args", 0, CreateEventArgs, {
            event_page_offset => event_page_offset, event_trigger_data => event_trigger_data,
            event_type => event_type, auto_reset => auto_reset, node_id => node_id,
            event_id => event_id, event_slot_index => event_slot_index,
        }),
        st!("kfd_ioctl_destroy_event_args", 0, DestroyEventArgs, { event_id => event_id, pad => pad }),
        st!("kfd_ioctl_set_event_args", 0, SetEventArgs, { event_id => event_id, pad => pad }),
        st!("kfd_ioctl_reset_event_args", 0, ResetEventArgs, { event_id => event_id, pad => pad }),
        st!("kfd_memory_exception_failure", 0, MemoryExceptionFailure, {
            NotPresent => not_present, ReadOnly => read_only, NoExecute => no_execute, imprecise => imprecise,
        }),
        st!("kfd_hsa_memory_exception_data", 0, HsaMemoryExceptionData, {
            failure => failure, va => va, gpu_id => gpu_id, ErrorType => error_type @ 4,
        }),
        st!("kfd_hsa_hw_exception_data", 0, HsaHwExceptionData, {
            reset_type => reset_type, reset_cause => reset_cause, memory_lost => memory_lost, gpu_id => gpu_id,
        }),
        st!("kfd_hsa_signal_event_data", 14, HsaSignalEventData, { last_event_age => last_event_age }),
        st!("kfd_event_data", 0, EventData, {
            memory_exception_data => payload: HsaMemoryExceptionData,
            hw_exception_data => payload: HsaHwExceptionData,
            signal_event_data => payload: HsaSignalEventData @ 14,
            kfd_event_data_ext => kfd_event_data_ext, event_id => event_id, pad => pad,
        }),
        st!("kfd_ioctl_wait_events_args", 0, WaitEventsArgs, {
            events_ptr => events_ptr, num_events => num_events, wait_for_all => wait_for_all,
            timeout => timeout, wait_result => wait_result,
        }),
        st!("kfd_ioctl_set_scratch_backing_va_args", 0, SetScratchBackingVaArgs, { va_addr => va_addr, gpu_id => gpu_id, pad => pad }),
        st!("kfd_ioctl_set_trap_handler_args", 0, SetTrapHandlerArgs, { tba_addr => tba_addr, tma_addr => tma_addr, gpu_id => gpu_id, pad => pad }),
        st!("kfd_ioctl_acquire_vm_args", 0, AcquireVmArgs, { drm_fd => drm_fd, gpu_id => gpu_id }),
        st!("kfd_ioctl_alloc_memory_of_gpu_args", 0, AllocMemoryOfGpuArgs, {
            va_addr => va_addr, size => size, handle => handle, mmap_offset => mmap_offset, gpu_id => gpu_id, flags => flags,
        }),
        st!("kfd_ioctl_free_memory_of_gpu_args", 0, FreeMemoryOfGpuArgs, { handle => handle }),
        st!("kfd_ioctl_map_memory_to_gpu_args", 0, MapMemoryToGpuArgs, {
            handle => handle, device_ids_array_ptr => device_ids_array_ptr, n_devices => n_devices, n_success => n_success,
        }),
        st!("kfd_ioctl_unmap_memory_from_gpu_args", 0, UnmapMemoryFromGpuArgs, {
            handle => handle, device_ids_array_ptr => device_ids_array_ptr, n_devices => n_devices, n_success => n_success,
        }),
        st!("kfd_ioctl_alloc_queue_gws_args", 0, AllocQueueGwsArgs, { queue_id => queue_id, num_gws => num_gws, first_gws => first_gws, pad => pad }),
        st!("kfd_ioctl_get_dmabuf_info_args", 0, GetDmabufInfoArgs, {
            size => size, metadata_ptr => metadata_ptr, metadata_size => metadata_size,
            gpu_id => gpu_id, flags => flags, dmabuf_fd => dmabuf_fd,
        }),
        st!("kfd_ioctl_import_dmabuf_args", 0, ImportDmabufArgs, { va_addr => va_addr, handle => handle, gpu_id => gpu_id, dmabuf_fd => dmabuf_fd }),
        st!("kfd_ioctl_export_dmabuf_args", 12, ExportDmabufArgs, { handle => handle, flags => flags, dmabuf_fd => dmabuf_fd }),
        st!("kfd_ioctl_svm_attribute", 5, SvmAttribute, { type => type_, value => value }),
        st!("kfd_ioctl_svm_args", 5, SvmArgs, { start_addr => start_addr, size => size, op => op, nattr => nattr }),
        st!("kfd_ioctl_set_xnack_mode_args", 5, SetXnackModeArgs, { xnack_enabled => xnack_enabled }),
        st!("kfd_ioctl_get_tile_config_args", 0, GetTileConfigArgs, {
            tile_config_ptr => tile_config_ptr, macro_tile_config_ptr => macro_tile_config_ptr,
            num_tile_configs => num_tile_configs, num_macro_tile_configs => num_macro_tile_configs,
            gpu_id => gpu_id, gb_addr_config => gb_addr_config, num_banks => num_banks, num_ranks => num_ranks,
        }),
        st!("kfd_ioctl_smi_events_args", 3, SmiEventsArgs, { gpuid => gpuid, anon_fd => anon_fd }),
        st!("kfd_ioctl_criu_args", 7, CriuArgs, {
            devices => devices, bos => bos, priv_data => priv_data, priv_data_size => priv_data_size,
            num_devices => num_devices, num_bos => num_bos, num_objects => num_objects, pid => pid, op => op,
        }),
        st!("kfd_criu_device_bucket", 7, CriuDeviceBucket, { user_gpu_id => user_gpu_id, actual_gpu_id => actual_gpu_id, drm_fd => drm_fd, pad => pad }),
        st!("kfd_criu_bo_bucket", 7, CriuBoBucket, {
            addr => addr, size => size, offset => offset, restored_offset => restored_offset,
            gpu_id => gpu_id, alloc_flags => alloc_flags, dmabuf_fd => dmabuf_fd, pad => pad,
        }),
        st!("kfd_ioctl_dbg_register_args", 0, DbgRegisterArgs, { gpu_id => gpu_id, pad => pad }),
        st!("kfd_ioctl_dbg_unregister_args", 0, DbgUnregisterArgs, { gpu_id => gpu_id, pad => pad }),
        st!("kfd_ioctl_dbg_address_watch_args", 0, DbgAddressWatchArgs, { content_ptr => content_ptr, gpu_id => gpu_id, buf_size_in_bytes => buf_size_in_bytes }),
        st!("kfd_ioctl_dbg_wave_control_args", 0, DbgWaveControlArgs, { content_ptr => content_ptr, gpu_id => gpu_id, buf_size_in_bytes => buf_size_in_bytes }),
        st!("kfd_dbg_device_info_entry", 13, DbgDeviceInfoEntry, {
            exception_status => exception_status, lds_base => lds_base, lds_limit => lds_limit,
            scratch_base => scratch_base, scratch_limit => scratch_limit, gpuvm_base => gpuvm_base,
            gpuvm_limit => gpuvm_limit, gpu_id => gpu_id, location_id => location_id, vendor_id => vendor_id,
            device_id => device_id, revision_id => revision_id, subsystem_vendor_id => subsystem_vendor_id,
            subsystem_device_id => subsystem_device_id, fw_version => fw_version,
            gfx_target_version => gfx_target_version, simd_count => simd_count,
            max_waves_per_simd => max_waves_per_simd, array_count => array_count,
            simd_arrays_per_engine => simd_arrays_per_engine, num_xcc => num_xcc,
            capability => capability, debug_prop => debug_prop,
            // Appended after 1.22 without a version bump: no installed header can be
            // gated on it, so `newer_than_installed_header_matches_1_22_text` checks it.
            capability2 => capability2 @ 23, pad => pad @ 23,
        }),
        st!("kfd_queue_snapshot_entry", 13, QueueSnapshotEntry, {
            exception_status => exception_status, ring_base_address => ring_base_address,
            write_pointer_address => write_pointer_address, read_pointer_address => read_pointer_address,
            ctx_save_restore_address => ctx_save_restore_address, queue_id => queue_id, gpu_id => gpu_id,
            ring_size => ring_size, queue_type => queue_type,
            ctx_save_restore_area_size => ctx_save_restore_area_size, reserved => reserved,
        }),
        st!("kfd_runtime_info", 13, RuntimeInfo, { r_debug => r_debug, runtime_state => runtime_state, ttmp_setup => ttmp_setup }),
        st!("kfd_ioctl_runtime_enable_args", 13, RuntimeEnableArgs, { r_debug => r_debug, mode_mask => mode_mask, capabilities_mask => capabilities_mask }),
        st!("kfd_ioctl_dbg_trap_enable_args", 13, DbgTrapEnableArgs, { exception_mask => exception_mask, rinfo_ptr => rinfo_ptr, rinfo_size => rinfo_size, dbg_fd => dbg_fd }),
        st!("kfd_ioctl_dbg_trap_send_runtime_event_args", 13, DbgTrapSendRuntimeEventArgs, { exception_mask => exception_mask, gpu_id => gpu_id, queue_id => queue_id }),
        st!("kfd_ioctl_dbg_trap_set_exceptions_enabled_args", 13, DbgTrapSetExceptionsEnabledArgs, { exception_mask => exception_mask }),
        st!("kfd_ioctl_dbg_trap_set_wave_launch_override_args", 13, DbgTrapSetWaveLaunchOverrideArgs, { override_mode => override_mode, enable_mask => enable_mask, support_request_mask => support_request_mask, pad => pad }),
        st!("kfd_ioctl_dbg_trap_set_wave_launch_mode_args", 13, DbgTrapSetWaveLaunchModeArgs, { launch_mode => launch_mode, pad => pad }),
        st!("kfd_ioctl_dbg_trap_suspend_queues_args", 13, DbgTrapSuspendQueuesArgs, { exception_mask => exception_mask, queue_array_ptr => queue_array_ptr, num_queues => num_queues, grace_period => grace_period }),
        st!("kfd_ioctl_dbg_trap_resume_queues_args", 13, DbgTrapResumeQueuesArgs, { queue_array_ptr => queue_array_ptr, num_queues => num_queues, pad => pad }),
        st!("kfd_ioctl_dbg_trap_set_node_address_watch_args", 13, DbgTrapSetNodeAddressWatchArgs, { address => address, mode => mode, mask => mask, gpu_id => gpu_id, id => id }),
        st!("kfd_ioctl_dbg_trap_clear_node_address_watch_args", 13, DbgTrapClearNodeAddressWatchArgs, { gpu_id => gpu_id, id => id }),
        st!("kfd_ioctl_dbg_trap_set_flags_args", 13, DbgTrapSetFlagsArgs, { flags => flags, pad => pad }),
        st!("kfd_ioctl_dbg_trap_query_debug_event_args", 13, DbgTrapQueryDebugEventArgs, { exception_mask => exception_mask, gpu_id => gpu_id, queue_id => queue_id }),
        st!("kfd_ioctl_dbg_trap_query_exception_info_args", 13, DbgTrapQueryExceptionInfoArgs, { info_ptr => info_ptr, info_size => info_size, source_id => source_id, exception_code => exception_code, clear_exception => clear_exception }),
        st!("kfd_ioctl_dbg_trap_queue_snapshot_args", 13, DbgTrapQueueSnapshotArgs, { exception_mask => exception_mask, snapshot_buf_ptr => snapshot_buf_ptr, num_queues => num_queues, entry_size => entry_size }),
        st!("kfd_ioctl_dbg_trap_device_snapshot_args", 13, DbgTrapDeviceSnapshotArgs, { exception_mask => exception_mask, snapshot_buf_ptr => snapshot_buf_ptr, num_devices => num_devices, entry_size => entry_size }),
        st!("kfd_ioctl_dbg_trap_args", 13, DbgTrapArgs, { pid => pid, op => op }),
    ]
}

/// Offsets of members nested inside unions and arrays, which our structs expose through
/// typed views: (C struct, C member path, our offset, first minor version).
fn nested() -> Vec<(&'static str, String, usize, u32)> {
    let ev = offset_of!(EventData, payload);
    let mut v = vec![
        (
            "kfd_event_data",
            "memory_exception_data.failure.NotPresent".to_string(),
            ev + offset_of!(HsaMemoryExceptionData, failure)
                + offset_of!(MemoryExceptionFailure, not_present),
            0,
        ),
        (
            "kfd_event_data",
            "memory_exception_data.failure.ReadOnly".into(),
            ev + offset_of!(MemoryExceptionFailure, read_only),
            0,
        ),
        (
            "kfd_event_data",
            "memory_exception_data.failure.NoExecute".into(),
            ev + offset_of!(MemoryExceptionFailure, no_execute),
            0,
        ),
        (
            "kfd_event_data",
            "memory_exception_data.failure.imprecise".into(),
            ev + offset_of!(MemoryExceptionFailure, imprecise),
            0,
        ),
        (
            "kfd_event_data",
            "memory_exception_data.va".into(),
            ev + offset_of!(HsaMemoryExceptionData, va),
            0,
        ),
        (
            "kfd_event_data",
            "memory_exception_data.gpu_id".into(),
            ev + offset_of!(HsaMemoryExceptionData, gpu_id),
            0,
        ),
        (
            "kfd_event_data",
            "memory_exception_data.ErrorType".into(),
            ev + offset_of!(HsaMemoryExceptionData, error_type),
            4,
        ),
        (
            "kfd_event_data",
            "hw_exception_data.reset_type".into(),
            ev + offset_of!(HsaHwExceptionData, reset_type),
            0,
        ),
        (
            "kfd_event_data",
            "hw_exception_data.reset_cause".into(),
            ev + offset_of!(HsaHwExceptionData, reset_cause),
            0,
        ),
        (
            "kfd_event_data",
            "hw_exception_data.memory_lost".into(),
            ev + offset_of!(HsaHwExceptionData, memory_lost),
            0,
        ),
        (
            "kfd_event_data",
            "hw_exception_data.gpu_id".into(),
            ev + offset_of!(HsaHwExceptionData, gpu_id),
            0,
        ),
        (
            "kfd_event_data",
            "signal_event_data.last_event_age".into(),
            ev + offset_of!(HsaSignalEventData, last_event_age),
            14,
        ),
    ];
    // The members of the dbg_trap_args union all start at `payload`.
    let dt = offset_of!(DbgTrapArgs, payload);
    for (m, o) in [
        ("enable", 0),
        ("enable.dbg_fd", offset_of!(DbgTrapEnableArgs, dbg_fd)),
        (
            "send_runtime_event.queue_id",
            offset_of!(DbgTrapSendRuntimeEventArgs, queue_id),
        ),
        ("set_exceptions_enabled.exception_mask", 0),
        (
            "launch_override.support_request_mask",
            offset_of!(DbgTrapSetWaveLaunchOverrideArgs, support_request_mask),
        ),
        ("launch_mode.launch_mode", 0),
        (
            "suspend_queues.grace_period",
            offset_of!(DbgTrapSuspendQueuesArgs, grace_period),
        ),
        (
            "resume_queues.num_queues",
            offset_of!(DbgTrapResumeQueuesArgs, num_queues),
        ),
        (
            "set_node_address_watch.id",
            offset_of!(DbgTrapSetNodeAddressWatchArgs, id),
        ),
        (
            "clear_node_address_watch.id",
            offset_of!(DbgTrapClearNodeAddressWatchArgs, id),
        ),
        ("set_flags.flags", 0),
        (
            "query_debug_event.queue_id",
            offset_of!(DbgTrapQueryDebugEventArgs, queue_id),
        ),
        (
            "query_exception_info.clear_exception",
            offset_of!(DbgTrapQueryExceptionInfoArgs, clear_exception),
        ),
        (
            "queue_snapshot.entry_size",
            offset_of!(DbgTrapQueueSnapshotArgs, entry_size),
        ),
        (
            "device_snapshot.entry_size",
            offset_of!(DbgTrapDeviceSnapshotArgs, entry_size),
        ),
    ] {
        v.push(("kfd_ioctl_dbg_trap_args", m.to_string(), dt + o, 13));
    }
    let base = offset_of!(GetProcessAperturesArgs, process_apertures);
    let el = size_of::<ProcessDeviceApertures>();
    for i in 0..NUM_OF_SUPPORTED_GPUS {
        for (f, o) in [
            ("lds_base", offset_of!(ProcessDeviceApertures, lds_base)),
            ("lds_limit", offset_of!(ProcessDeviceApertures, lds_limit)),
            (
                "scratch_base",
                offset_of!(ProcessDeviceApertures, scratch_base),
            ),
            (
                "scratch_limit",
                offset_of!(ProcessDeviceApertures, scratch_limit),
            ),
            ("gpuvm_base", offset_of!(ProcessDeviceApertures, gpuvm_base)),
            (
                "gpuvm_limit",
                offset_of!(ProcessDeviceApertures, gpuvm_limit),
            ),
            ("gpu_id", offset_of!(ProcessDeviceApertures, gpu_id)),
        ] {
            v.push((
                "kfd_ioctl_get_process_apertures_args",
                format!("process_apertures[{i}].{f}"),
                base + i * el + o,
                0,
            ));
        }
    }
    v
}

/// (C name, our value, first minor version that has it)
fn constants() -> Vec<(&'static str, u64, u32)> {
    macro_rules! c {
        ($($name:ident $(@ $min:expr)?),* $(,)?) => {
            vec![$((stringify!($name), $name as u64, c!(@m $($min)?))),*]
        };
        (@m) => { 0 };
        (@m $min:expr) => { $min };
    }
    c![
        KFD_IOCTL_MAJOR_VERSION,
        KFD_IOC_QUEUE_TYPE_COMPUTE, KFD_IOC_QUEUE_TYPE_SDMA, KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
        KFD_IOC_QUEUE_TYPE_SDMA_XGMI, KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID @ 17,
        KFD_MAX_QUEUE_PERCENTAGE, KFD_MAX_QUEUE_PRIORITY,
        KFD_IOC_CACHE_POLICY_COHERENT, KFD_IOC_CACHE_POLICY_NONCOHERENT,
        NUM_OF_SUPPORTED_GPUS, KFD_INVALID_FD,
        KFD_IOC_EVENT_SIGNAL, KFD_IOC_EVENT_NODECHANGE, KFD_IOC_EVENT_DEVICESTATECHANGE,
        KFD_IOC_EVENT_HW_EXCEPTION, KFD_IOC_EVENT_SYSTEM_EVENT, KFD_IOC_EVENT_DEBUG_EVENT,
        KFD_IOC_EVENT_PROFILE_EVENT, KFD_IOC_EVENT_QUEUE_EVENT, KFD_IOC_EVENT_MEMORY,
        KFD_IOC_WAIT_RESULT_COMPLETE, KFD_IOC_WAIT_RESULT_TIMEOUT, KFD_IOC_WAIT_RESULT_FAIL,
        KFD_SIGNAL_EVENT_LIMIT,
        KFD_HW_EXCEPTION_WHOLE_GPU_RESET, KFD_HW_EXCEPTION_PER_ENGINE_RESET,
        KFD_HW_EXCEPTION_GPU_HANG, KFD_HW_EXCEPTION_ECC,
        KFD_MEM_ERR_NO_RAS, KFD_MEM_ERR_SRAM_ECC, KFD_MEM_ERR_POISON_CONSUMED, KFD_MEM_ERR_GPU_HANG,
        KFD_IOC_ALLOC_MEM_FLAGS_VRAM, KFD_IOC_ALLOC_MEM_FLAGS_GTT, KFD_IOC_ALLOC_MEM_FLAGS_USERPTR,
        KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL, KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP,
        KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE, KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE,
        KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC, KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE,
        KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM, KFD_IOC_ALLOC_MEM_FLAGS_COHERENT,
        KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED, KFD_IOC_ALLOC_MEM_FLAGS_EXT_COHERENT @ 12,
        KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS @ 16,
        KFD_IOCTL_SVM_FLAG_HOST_ACCESS @ 5, KFD_IOCTL_SVM_FLAG_COHERENT @ 5,
        KFD_IOCTL_SVM_FLAG_HIVE_LOCAL @ 5, KFD_IOCTL_SVM_FLAG_GPU_RO @ 5,
        KFD_IOCTL_SVM_FLAG_GPU_EXEC @ 5, KFD_IOCTL_SVM_FLAG_GPU_READ_MOSTLY @ 5,
        KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED @ 12, KFD_IOCTL_SVM_FLAG_EXT_COHERENT @ 12,
        KFD_IOCTL_SVM_OP_SET_ATTR @ 5, KFD_IOCTL_SVM_OP_GET_ATTR @ 5,
        KFD_IOCTL_SVM_LOCATION_SYSMEM @ 5, KFD_IOCTL_SVM_LOCATION_UNDEFINED @ 5,
        KFD_IOCTL_SVM_ATTR_PREFERRED_LOC @ 5, KFD_IOCTL_SVM_ATTR_PREFETCH_LOC @ 5,
        KFD_IOCTL_SVM_ATTR_ACCESS @ 5, KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE @ 5,
        KFD_IOCTL_SVM_ATTR_NO_ACCESS @ 5, KFD_IOCTL_SVM_ATTR_SET_FLAGS @ 5,
        KFD_IOCTL_SVM_ATTR_CLR_FLAGS @ 5, KFD_IOCTL_SVM_ATTR_GRANULARITY @ 5,
        KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK @ 13, KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK @ 13,
        KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP @ 13, KFD_DBG_TRAP_FLAG_SINGLE_ALU_OP @ 13,
        KFD_PROC_FLAG_MFMA_HIGH_PRECISION @ 18, KFD_DBG_TRAP_FLAG_LDS_OUT_OF_ADDR_RANGE @ 21,
        AMDKFD_COMMAND_START,
    ]
}

/// (C name, our code, minor version, C struct name whose size is in the code)
fn request_codes() -> Vec<(&'static str, u32, u32, &'static str)> {
    vec![
        (
            "AMDKFD_IOC_GET_VERSION",
            AMDKFD_IOC_GET_VERSION,
            0,
            "kfd_ioctl_get_version_args",
        ),
        (
            "AMDKFD_IOC_CREATE_QUEUE",
            AMDKFD_IOC_CREATE_QUEUE,
            0,
            "kfd_ioctl_create_queue_args",
        ),
        (
            "AMDKFD_IOC_DESTROY_QUEUE",
            AMDKFD_IOC_DESTROY_QUEUE,
            0,
            "kfd_ioctl_destroy_queue_args",
        ),
        (
            "AMDKFD_IOC_SET_MEMORY_POLICY",
            AMDKFD_IOC_SET_MEMORY_POLICY,
            0,
            "kfd_ioctl_set_memory_policy_args",
        ),
        (
            "AMDKFD_IOC_GET_CLOCK_COUNTERS",
            AMDKFD_IOC_GET_CLOCK_COUNTERS,
            0,
            "kfd_ioctl_get_clock_counters_args",
        ),
        (
            "AMDKFD_IOC_GET_PROCESS_APERTURES",
            AMDKFD_IOC_GET_PROCESS_APERTURES,
            0,
            "kfd_ioctl_get_process_apertures_args",
        ),
        (
            "AMDKFD_IOC_UPDATE_QUEUE",
            AMDKFD_IOC_UPDATE_QUEUE,
            0,
            "kfd_ioctl_update_queue_args",
        ),
        (
            "AMDKFD_IOC_CREATE_EVENT",
            AMDKFD_IOC_CREATE_EVENT,
            0,
            "kfd_ioctl_create_event_args",
        ),
        (
            "AMDKFD_IOC_DESTROY_EVENT",
            AMDKFD_IOC_DESTROY_EVENT,
            0,
            "kfd_ioctl_destroy_event_args",
        ),
        (
            "AMDKFD_IOC_SET_EVENT",
            AMDKFD_IOC_SET_EVENT,
            0,
            "kfd_ioctl_set_event_args",
        ),
        (
            "AMDKFD_IOC_RESET_EVENT",
            AMDKFD_IOC_RESET_EVENT,
            0,
            "kfd_ioctl_reset_event_args",
        ),
        (
            "AMDKFD_IOC_WAIT_EVENTS",
            AMDKFD_IOC_WAIT_EVENTS,
            0,
            "kfd_ioctl_wait_events_args",
        ),
        (
            "AMDKFD_IOC_SET_SCRATCH_BACKING_VA",
            AMDKFD_IOC_SET_SCRATCH_BACKING_VA,
            0,
            "kfd_ioctl_set_scratch_backing_va_args",
        ),
        (
            "AMDKFD_IOC_SET_TRAP_HANDLER",
            AMDKFD_IOC_SET_TRAP_HANDLER,
            0,
            "kfd_ioctl_set_trap_handler_args",
        ),
        (
            "AMDKFD_IOC_GET_PROCESS_APERTURES_NEW",
            AMDKFD_IOC_GET_PROCESS_APERTURES_NEW,
            0,
            "kfd_ioctl_get_process_apertures_new_args",
        ),
        (
            "AMDKFD_IOC_ACQUIRE_VM",
            AMDKFD_IOC_ACQUIRE_VM,
            0,
            "kfd_ioctl_acquire_vm_args",
        ),
        (
            "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU",
            AMDKFD_IOC_ALLOC_MEMORY_OF_GPU,
            0,
            "kfd_ioctl_alloc_memory_of_gpu_args",
        ),
        (
            "AMDKFD_IOC_FREE_MEMORY_OF_GPU",
            AMDKFD_IOC_FREE_MEMORY_OF_GPU,
            0,
            "kfd_ioctl_free_memory_of_gpu_args",
        ),
        (
            "AMDKFD_IOC_MAP_MEMORY_TO_GPU",
            AMDKFD_IOC_MAP_MEMORY_TO_GPU,
            0,
            "kfd_ioctl_map_memory_to_gpu_args",
        ),
        (
            "AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU",
            AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU,
            0,
            "kfd_ioctl_unmap_memory_from_gpu_args",
        ),
        (
            "AMDKFD_IOC_SET_CU_MASK",
            AMDKFD_IOC_SET_CU_MASK,
            0,
            "kfd_ioctl_set_cu_mask_args",
        ),
        (
            "AMDKFD_IOC_GET_QUEUE_WAVE_STATE",
            AMDKFD_IOC_GET_QUEUE_WAVE_STATE,
            0,
            "kfd_ioctl_get_queue_wave_state_args",
        ),
        (
            "AMDKFD_IOC_GET_DMABUF_INFO",
            AMDKFD_IOC_GET_DMABUF_INFO,
            0,
            "kfd_ioctl_get_dmabuf_info_args",
        ),
        (
            "AMDKFD_IOC_IMPORT_DMABUF",
            AMDKFD_IOC_IMPORT_DMABUF,
            0,
            "kfd_ioctl_import_dmabuf_args",
        ),
        (
            "AMDKFD_IOC_ALLOC_QUEUE_GWS",
            AMDKFD_IOC_ALLOC_QUEUE_GWS,
            0,
            "kfd_ioctl_alloc_queue_gws_args",
        ),
        (
            "AMDKFD_IOC_GET_TILE_CONFIG",
            AMDKFD_IOC_GET_TILE_CONFIG,
            0,
            "kfd_ioctl_get_tile_config_args",
        ),
        (
            "AMDKFD_IOC_SMI_EVENTS",
            AMDKFD_IOC_SMI_EVENTS,
            3,
            "kfd_ioctl_smi_events_args",
        ),
        (
            "AMDKFD_IOC_CRIU_OP",
            AMDKFD_IOC_CRIU_OP,
            7,
            "kfd_ioctl_criu_args",
        ),
        ("AMDKFD_IOC_SVM", AMDKFD_IOC_SVM, 5, "kfd_ioctl_svm_args"),
        (
            "AMDKFD_IOC_SET_XNACK_MODE",
            AMDKFD_IOC_SET_XNACK_MODE,
            5,
            "kfd_ioctl_set_xnack_mode_args",
        ),
        (
            "AMDKFD_IOC_AVAILABLE_MEMORY",
            AMDKFD_IOC_AVAILABLE_MEMORY,
            9,
            "kfd_ioctl_get_available_memory_args",
        ),
        (
            "AMDKFD_IOC_EXPORT_DMABUF",
            AMDKFD_IOC_EXPORT_DMABUF,
            12,
            "kfd_ioctl_export_dmabuf_args",
        ),
        (
            "AMDKFD_IOC_RUNTIME_ENABLE",
            AMDKFD_IOC_RUNTIME_ENABLE,
            13,
            "kfd_ioctl_runtime_enable_args",
        ),
        (
            "AMDKFD_IOC_DBG_TRAP",
            AMDKFD_IOC_DBG_TRAP,
            13,
            "kfd_ioctl_dbg_trap_args",
        ),
        (
            "AMDKFD_IOC_CREATE_PROCESS",
            AMDKFD_IOC_CREATE_PROCESS,
            19,
            "",
        ),
    ]
}

fn guard(min: u32, body: String) -> String {
    if min == 0 {
        body
    } else {
        format!("#if KFD_IOCTL_MINOR_VERSION >= {min}\n{body}#endif\n")
    }
}

/// Build, compile and run the C probe; returns its `KIND NAME VALUE` lines as a map.
fn probe() -> HashMap<String, u64> {
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <linux/kfd_ioctl.h>\n\
         #define P(k, n, v) printf(\"%s %s %llu\\n\", k, n, (unsigned long long)(v))\n\
         int main(void) {\nP(\"V\", \"minor\", KFD_IOCTL_MINOR_VERSION);\n",
    );
    for s in structs() {
        let mut body = format!("P(\"S\", \"{0}\", sizeof(struct {0}));\n", s.c_name);
        for (f, _, _, fmin) in &s.fields {
            body += &guard(
                if *fmin > s.min_minor { *fmin } else { 0 },
                format!(
                    "P(\"F\", \"{0}.{1}\", offsetof(struct {0}, {1}));\nP(\"Z\", \"{0}.{1}\", sizeof(((struct {0} *)0)->{1}));\n",
                    s.c_name, f
                ),
            );
        }
        c += &guard(s.min_minor, body);
    }
    for (n, _, min) in constants() {
        c += &guard(min, format!("P(\"C\", \"{n}\", (unsigned int)({n}));\n"));
    }
    for (st, path, _, min) in nested() {
        c += &guard(
            min,
            format!("P(\"N\", \"{st}.{path}\", offsetof(struct {st}, {path}));\n"),
        );
    }
    for (n, _, min, _) in request_codes() {
        c += &guard(min, format!("P(\"R\", \"{n}\", (unsigned int)({n}));\n"));
    }
    c += "return 0;\n}\n";

    let dir = std::env::temp_dir().join(format!("kfdrt-abi-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create probe dir");
    let src = dir.join("probe.c");
    let exe = dir.join("probe");
    std::fs::write(&src, &c).expect("write probe.c");
    // kfd_ioctl.h includes <drm/drm.h> only for the kernel's integer types; Debian ships
    // that header in libdrm-dev, not linux-libc-dev, so give the probe a minimal one.
    std::fs::create_dir_all(dir.join("drm")).expect("create drm dir");
    std::fs::write(
        dir.join("drm/drm.h"),
        "#include <linux/types.h>\n#include <linux/ioctl.h>\n",
    )
    .expect("write drm.h");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .arg("-I")
        .arg(&dir)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("running the C compiler `{cc}` failed: {e} (install gcc)"));
    assert!(
        out.status.success(),
        "compiling the ABI probe failed (is linux-libc-dev installed?):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().expect("run probe");
    assert!(run.status.success());
    let _ = std::fs::remove_dir_all(&dir);
    String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let mut it = l.split(' ');
            let k = it.next().unwrap();
            let n = it.next().unwrap();
            let v: u64 = it.next().unwrap().parse().unwrap();
            (format!("{k} {n}"), v)
        })
        .collect()
}

#[test]
fn abi_matches_installed_kfd_ioctl_h() {
    let p = probe();
    let minor = p["V minor"] as u32;
    assert!(minor >= 1, "installed header reports KFD minor {minor}");
    let mut errors = Vec::new();
    let (mut n_structs, mut n_offsets, mut n_sizes, mut n_consts, mut n_codes) = (0, 0, 0, 0, 0);
    let mut n_field_sizes = 0;
    let mut grown: HashMap<&str, usize> = HashMap::new();

    for s in structs() {
        let Some(&csize) = p.get(&format!("S {}", s.c_name)) else {
            assert!(s.min_minor > minor, "{} missing from the probe", s.c_name);
            continue;
        };
        n_structs += 1;
        let mut present_end = 0usize;
        for (f, roff, rsize, fmin) in &s.fields {
            let Some(&coff) = p.get(&format!("F {}.{}", s.c_name, f)) else {
                assert!(*fmin > minor, "{}.{f} missing from the probe", s.c_name);
                continue;
            };
            n_offsets += 1;
            if coff as usize != *roff {
                errors.push(format!(
                    "{}.{f}: header offset {coff}, ours {roff}",
                    s.c_name
                ));
            }
            let fsize = p[&format!("Z {}.{}", s.c_name, f)] as usize;
            n_field_sizes += 1;
            if fsize != *rsize {
                errors.push(format!(
                    "{}.{f}: header size {fsize}, ours {rsize}",
                    s.c_name
                ));
            }
            present_end = present_end.max(coff as usize + fsize);
        }
        if csize as usize == s.rust_size {
            n_sizes += 1;
        } else if (csize as usize) < s.rust_size && s.fields.iter().any(|(_, _, _, m)| *m > minor) {
            // Tail growth newer than the header: the header's struct must end where its
            // last field ends (rounded to alignment), i.e. only our tail is new.
            n_sizes += 1;
            if csize as usize != present_end.next_multiple_of(8) {
                errors.push(format!(
                    "{}: header size {csize} is not a prefix of ours",
                    s.c_name
                ));
            }
            grown.insert(s.c_name, csize as usize);
        } else {
            errors.push(format!(
                "{}: header size {csize}, ours {}",
                s.c_name, s.rust_size
            ));
        }
    }
    for (st, path, ours, min) in nested() {
        match p.get(&format!("N {st}.{path}")) {
            Some(&c) => {
                n_offsets += 1;
                if c as usize != ours {
                    errors.push(format!("{st}.{path}: header offset {c}, ours {ours}"));
                }
            }
            None => assert!(min > minor, "{st}.{path} missing from the probe"),
        }
    }
    for (n, v, min) in constants() {
        match p.get(&format!("C {n}")) {
            Some(&cv) => {
                n_consts += 1;
                if cv != v {
                    errors.push(format!("{n}: header {cv:#x}, ours {v:#x}"));
                }
            }
            None => assert!(min > minor, "{n} missing from the probe"),
        }
    }
    for (n, v, min, sname) in request_codes() {
        match p.get(&format!("R {n}")) {
            Some(&cv) => {
                n_codes += 1;
                let cv = cv as u32;
                let size_mask = IOC_SIZEMASK << IOC_SIZESHIFT;
                if let Some(&hsize) = grown.get(sname) {
                    if cv & !size_mask != v & !size_mask || ioc_size(cv) as usize != hsize {
                        errors.push(format!("{n}: header {cv:#x}, ours {v:#x} (grown struct)"));
                    }
                } else if cv != v {
                    errors.push(format!("{n}: header {cv:#x}, ours {v:#x}"));
                }
            }
            None => assert!(min > minor, "{n} missing from the probe"),
        }
    }
    println!(
        "ABI conformance against linux/kfd_ioctl.h (KFD 1.{minor}): {n_structs} structs, {n_sizes} sizes, \
         {n_offsets} field offsets, {n_field_sizes} field sizes, {n_consts} constants, {n_codes} request codes compared; \
         grown since the header: {:?}",
        grown.keys().collect::<Vec<_>>()
    );
    assert!(errors.is_empty(), "ABI mismatches:\n{}", errors.join("\n"));
    assert!(n_offsets > 200, "too few offsets compared: {n_offsets}");
}

#[test]
fn svm_request_code_carries_attribute_bytes() {
    assert_eq!(ioc_size(AMDKFD_IOC_SVM) as usize, size_of::<SvmArgs>());
    let c = svm_request_code(3).unwrap();
    assert_eq!(ioc_size(c) as usize, size_of::<SvmArgs>() + 3 * 8);
    assert_eq!(ioc_nr(c), 0x20);
    assert!(svm_request_code(SVM_MAX_ATTRS).is_some());
    assert!(svm_request_code(SVM_MAX_ATTRS + 1).is_none());
}

#[test]
fn mmap_offset_gpu_id_round_trips() {
    for id in [0u32, 1, 0x1a2b, 0xffff] {
        let off = KFD_MMAP_TYPE_DOORBELL | kfd_mmap_gpu_id(id);
        assert_eq!(kfd_mmap_get_gpu_id(off), id);
        assert_eq!(off & KFD_MMAP_TYPE_MASK, KFD_MMAP_TYPE_DOORBELL);
    }
}

/// Layout facts of what is newer than the installed header (Debian 12 ships KFD 1.11),
/// computed by hand from the header text of each change (sources in
/// `firmware-notes/kfd-abi.md`): 1.18 "Rename pad in set_memory_policy_args to
/// misc_process_flag", 1.19 "Add a new ioctl to craete secondary kfd processes"
/// (`AMDKFD_IO(0x27)`, `AMDKFD_COMMAND_END` 0x28), 1.21 `KFD_DBG_TRAP_FLAG_LDS_OUT_OF_ADDR_RANGE
/// = 4`, 1.22 "Add queue creation with metadata ring base address" (`pad` of
/// create_queue_args becomes `metadata_ring_size`), and the post-1.22 `capability2` + `pad`
/// at the end of `kfd_dbg_device_info_entry`.
#[test]
fn newer_than_installed_header_matches_1_22_text() {
    assert_eq!(KFD_IOCTL_MAJOR_VERSION, 1);
    assert_eq!(KFD_IOCTL_MINOR_VERSION, 22);

    // create_queue_args: 4 x u64 (0..32), 6 x u32 (32..56), 3 x u64 (56..80),
    // ctx_save_restore_size 80, ctl_stack_size 84, sdma_engine_id 88, metadata_ring_size 92.
    assert_eq!(size_of::<CreateQueueArgs>(), 96);
    assert_eq!(offset_of!(CreateQueueArgs, ctx_save_restore_size), 80);
    assert_eq!(offset_of!(CreateQueueArgs, ctl_stack_size), 84);
    assert_eq!(offset_of!(CreateQueueArgs, sdma_engine_id), 88);
    assert_eq!(offset_of!(CreateQueueArgs, metadata_ring_size), 92);
    assert_eq!(AMDKFD_IOC_CREATE_QUEUE, 0xC060_4B02); // _IOWR('K', 0x02, 96 bytes)

    // set_memory_policy_args: 2 x u64, gpu_id 16, default 20, alternate 24, flag 28.
    assert_eq!(size_of::<SetMemoryPolicyArgs>(), 32);
    assert_eq!(offset_of!(SetMemoryPolicyArgs, misc_process_flag), 28);
    assert_eq!(KFD_PROC_FLAG_MFMA_HIGH_PRECISION, 1);
    assert_eq!(AMDKFD_IOC_SET_MEMORY_POLICY, 0x4020_4B04); // _IOW('K', 0x04, 32 bytes)

    // kfd_dbg_device_info_entry: 7 x u64 (0..56), then 18 x u32: gpu_id 56 ...
    // debug_prop 116, capability2 120, pad 124; 128 bytes.
    assert_eq!(size_of::<DbgDeviceInfoEntry>(), 128);
    assert_eq!(offset_of!(DbgDeviceInfoEntry, gpu_id), 56);
    assert_eq!(offset_of!(DbgDeviceInfoEntry, num_xcc), 108);
    assert_eq!(offset_of!(DbgDeviceInfoEntry, capability), 112);
    assert_eq!(offset_of!(DbgDeviceInfoEntry, debug_prop), 116);
    assert_eq!(offset_of!(DbgDeviceInfoEntry, capability2), 120);
    assert_eq!(offset_of!(DbgDeviceInfoEntry, pad), 124);

    // _IO('K', 0x27): direction none, size 0.
    assert_eq!(AMDKFD_IOC_CREATE_PROCESS, 0x4B27);
    assert_eq!(ioc_nr(AMDKFD_IOC_CREATE_PROCESS), 0x27);
    assert_eq!(ioc_size(AMDKFD_IOC_CREATE_PROCESS), 0);
    assert_eq!(AMDKFD_COMMAND_END, 0x28);
    assert_eq!(KFD_DBG_TRAP_FLAG_LDS_OUT_OF_ADDR_RANGE, 4);
    assert_eq!(
        kfd::Ioctl::CreateProcess.request_code(),
        Some(AMDKFD_IOC_CREATE_PROCESS)
    );

    // AMDKFD_IOC_DBG_TRAP (1.13; Debian 12's 1.11 header lacks it). From the header text
    // (torvalds/linux include/uapi/linux/kfd_ioctl.h as of 1.22): the per-op structs are
    // all u64s then u32s; the largest union members (enable, suspend_queues,
    // set_node_address_watch, query_exception_info, queue/device_snapshot) are 24 bytes,
    // so dbg_trap_args = pid 0, op 4, union 8..32: _IOWR('K', 0x26, 32) = 0xC0204B26.
    let sizes = [
        (size_of::<DbgTrapEnableArgs>(), 24),
        (size_of::<DbgTrapSendRuntimeEventArgs>(), 16),
        (size_of::<DbgTrapSetExceptionsEnabledArgs>(), 8),
        (size_of::<DbgTrapSetWaveLaunchOverrideArgs>(), 16),
        (size_of::<DbgTrapSetWaveLaunchModeArgs>(), 8),
        (size_of::<DbgTrapSuspendQueuesArgs>(), 24),
        (size_of::<DbgTrapResumeQueuesArgs>(), 16),
        (size_of::<DbgTrapSetNodeAddressWatchArgs>(), 24),
        (size_of::<DbgTrapClearNodeAddressWatchArgs>(), 8),
        (size_of::<DbgTrapSetFlagsArgs>(), 8),
        (size_of::<DbgTrapQueryDebugEventArgs>(), 16),
        (size_of::<DbgTrapQueryExceptionInfoArgs>(), 24),
        (size_of::<DbgTrapQueueSnapshotArgs>(), 24),
        (size_of::<DbgTrapDeviceSnapshotArgs>(), 24),
    ];
    for (i, (got, want)) in sizes.iter().enumerate() {
        assert_eq!(got, want, "dbg_trap per-op struct #{i}");
    }
    assert_eq!(offset_of!(DbgTrapEnableArgs, rinfo_size), 16);
    assert_eq!(offset_of!(DbgTrapEnableArgs, dbg_fd), 20);
    assert_eq!(offset_of!(DbgTrapSuspendQueuesArgs, num_queues), 16);
    assert_eq!(offset_of!(DbgTrapSuspendQueuesArgs, grace_period), 20);
    assert_eq!(offset_of!(DbgTrapSetNodeAddressWatchArgs, mode), 8);
    assert_eq!(offset_of!(DbgTrapSetNodeAddressWatchArgs, id), 20);
    assert_eq!(offset_of!(DbgTrapQueryExceptionInfoArgs, source_id), 12);
    assert_eq!(
        offset_of!(DbgTrapQueryExceptionInfoArgs, clear_exception),
        20
    );
    assert_eq!(offset_of!(DbgTrapQueueSnapshotArgs, entry_size), 20);
    assert_eq!(offset_of!(DbgTrapDeviceSnapshotArgs, num_devices), 16);
    assert_eq!(offset_of!(DbgTrapSetWaveLaunchOverrideArgs, pad), 12);
    assert_eq!(size_of::<DbgTrapArgs>(), 32);
    assert_eq!(align_of::<DbgTrapArgs>(), 8);
    assert_eq!(offset_of!(DbgTrapArgs, pid), 0);
    assert_eq!(offset_of!(DbgTrapArgs, op), 4);
    assert_eq!(offset_of!(DbgTrapArgs, payload), 8);
    assert_eq!(AMDKFD_IOC_DBG_TRAP, 0xC020_4B26);
    assert_eq!(min_minor::DBG_TRAP, 13);
    // enum kfd_dbg_trap_operations: ENABLE 0 .. GET_DEVICE_SNAPSHOT 14, in header order.
    let ops = [
        KFD_IOC_DBG_TRAP_ENABLE,
        KFD_IOC_DBG_TRAP_DISABLE,
        KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT,
        KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED,
        KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE,
        KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE,
        KFD_IOC_DBG_TRAP_SUSPEND_QUEUES,
        KFD_IOC_DBG_TRAP_RESUME_QUEUES,
        KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH,
        KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH,
        KFD_IOC_DBG_TRAP_SET_FLAGS,
        KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT,
        KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO,
        KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT,
        KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT,
    ];
    assert_eq!(ops, core::array::from_fn::<u32, 15, _>(|i| i as u32));
    assert_eq!(
        dbg_trap_op_name(KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT),
        "KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT"
    );
    let mut a = DbgTrapArgs::default();
    let mut buf = [0u8; 0];
    assert_eq!(
        kfd::Ioctl::DbgTrap {
            args: &mut a,
            buf: &mut buf
        }
        .request_code(),
        Some(AMDKFD_IOC_DBG_TRAP)
    );
}

/// The dbg_trap_args union views: a member written through `set_op_args` reads back,
/// lands at the header's offsets (union at byte 8) and sets nothing past its size; the
/// pointer-field helpers address the right member for each operation.
#[test]
fn dbg_trap_union_views() {
    let w = DbgTrapSetNodeAddressWatchArgs {
        address: 0x1122_3344_5566_7788,
        mode: 2,
        mask: 0xfff,
        gpu_id: 0xabcd,
        id: 3,
    };
    let a = DbgTrapArgs::new(42, w);
    assert_eq!((a.pid, a.op), (42, KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH));
    assert_eq!(a.op_args::<DbgTrapSetNodeAddressWatchArgs>(), w);
    let bytes = a.as_bytes();
    assert_eq!(&bytes[8..16], &0x1122_3344_5566_7788u64.to_ne_bytes());
    assert_eq!(&bytes[24..28], &0xabcdu32.to_ne_bytes());
    // A smaller member zeroes the rest of the union.
    let mut b = a;
    b.set_op_args(DbgTrapSetFlagsArgs { flags: 4, pad: 0 });
    assert_eq!(&b.as_bytes()[12..32], &[0u8; 20]);
    assert_eq!(b.op_args::<DbgTrapSetFlagsArgs>().flags, 4);

    let d = DbgTrapArgs::disable(7);
    assert_eq!(
        (d.pid, d.op, d.user_buffer_len()),
        (7, KFD_IOC_DBG_TRAP_DISABLE, None)
    );

    let mut q = DbgTrapArgs::new(
        1,
        DbgTrapQueueSnapshotArgs {
            exception_mask: 0,
            snapshot_buf_ptr: 0,
            num_queues: 3,
            entry_size: size_of::<QueueSnapshotEntry>() as u32,
        },
    );
    assert_eq!(
        q.user_buffer_len(),
        Some(3 * size_of::<QueueSnapshotEntry>() as u64)
    );
    q.set_user_buffer_ptr(0xdead_0000);
    let s = q.op_args::<DbgTrapQueueSnapshotArgs>();
    assert_eq!((s.snapshot_buf_ptr, s.num_queues), (0xdead_0000, 3));

    let mut r = DbgTrapArgs::new(
        1,
        DbgTrapSuspendQueuesArgs {
            num_queues: 5,
            ..Default::default()
        },
    );
    assert_eq!(r.user_buffer_len(), Some(20));
    r.set_user_buffer_ptr(0x1000);
    assert_eq!(
        r.op_args::<DbgTrapSuspendQueuesArgs>().queue_array_ptr,
        0x1000
    );
}
