//! One thin function per KFD ioctl, each returning `Result<_, KfdError>`.
//!
//! The functions fill the pointer fields of the argument structs from the slices they
//! are given, call [`Backend::ioctl`], and on failure build a [`KfdError`] naming the ioctl,
//! the errno and the arguments that were asked for. They add no policy: retries,
//! version gating and resource ownership belong to the runtime.

use crate::abi::*;
use crate::backend::{Backend, Ioctl};
use crate::error::KfdError;
use rustix::io::Errno;

fn call(b: &dyn Backend, req: Ioctl<'_>, ctx: impl FnOnce() -> String) -> Result<(), KfdError> {
    let name = req.name();
    b.ioctl(req).map_err(|e| KfdError::new(name, e, ctx()))
}

/// `AMDKFD_IOC_GET_VERSION`.
pub fn get_version(b: &dyn Backend) -> Result<GetVersionArgs, KfdError> {
    let mut a = GetVersionArgs::default();
    call(b, Ioctl::GetVersion(&mut a), String::new)?;
    Ok(a)
}

/// `AMDKFD_IOC_CREATE_QUEUE`: fills `queue_id` and `doorbell_offset` in `args`.
pub fn create_queue(b: &dyn Backend, args: &mut CreateQueueArgs) -> Result<(), KfdError> {
    let a = *args;
    call(b, Ioctl::CreateQueue(args), || {
        format!(
            "gpu_id={:#x} type={} ring={:#x} ring_size={:#x} rptr={:#x} wptr={:#x} priority={} percentage={} eop={:#x}/{:#x} cwsr={:#x}/{:#x} ctl_stack={:#x}",
            a.gpu_id, a.queue_type, a.ring_base_address, a.ring_size, a.read_pointer_address,
            a.write_pointer_address, a.queue_priority, a.queue_percentage, a.eop_buffer_address,
            a.eop_buffer_size, a.ctx_save_restore_address, a.ctx_save_restore_size, a.ctl_stack_size
        )
    })
}

/// `AMDKFD_IOC_DESTROY_QUEUE`.
pub fn destroy_queue(b: &dyn Backend, queue_id: u32) -> Result<(), KfdError> {
    let mut a = DestroyQueueArgs { queue_id, pad: 0 };
    call(b, Ioctl::DestroyQueue(&mut a), || {
        format!("queue_id={queue_id}")
    })
}

/// `AMDKFD_IOC_UPDATE_QUEUE`.
pub fn update_queue(b: &dyn Backend, args: &mut UpdateQueueArgs) -> Result<(), KfdError> {
    let a = *args;
    call(b, Ioctl::UpdateQueue(args), || {
        format!(
            "queue_id={} ring={:#x} ring_size={:#x} percentage={} priority={}",
            a.queue_id, a.ring_base_address, a.ring_size, a.queue_percentage, a.queue_priority
        )
    })
}

/// `AMDKFD_IOC_SET_CU_MASK`: `mask` holds one bit per CU, 32 per word.
pub fn set_cu_mask(b: &dyn Backend, queue_id: u32, mask: &[u32]) -> Result<(), KfdError> {
    let Some(bits) = u32::try_from(mask.len())
        .ok()
        .and_then(|n| n.checked_mul(32))
    else {
        return Err(KfdError::new(
            "AMDKFD_IOC_SET_CU_MASK",
            Errno::INVAL,
            format!("queue_id={queue_id} mask words={} (too many)", mask.len()),
        ));
    };
    let mut a = SetCuMaskArgs {
        queue_id,
        num_cu_mask: bits,
        cu_mask_ptr: mask.as_ptr() as u64,
    };
    call(b, Ioctl::SetCuMask { args: &mut a, mask }, || {
        format!("queue_id={queue_id} num_cu_mask={bits}")
    })
}

/// `AMDKFD_IOC_GET_QUEUE_WAVE_STATE`.
pub fn get_queue_wave_state(
    b: &dyn Backend,
    queue_id: u32,
    ctl_stack_address: u64,
) -> Result<GetQueueWaveStateArgs, KfdError> {
    let mut a = GetQueueWaveStateArgs {
        queue_id,
        ctl_stack_address,
        ..Default::default()
    };
    call(b, Ioctl::GetQueueWaveState(&mut a), || {
        format!("queue_id={queue_id} ctl_stack={ctl_stack_address:#x}")
    })?;
    Ok(a)
}

/// `AMDKFD_IOC_SET_MEMORY_POLICY`.
pub fn set_memory_policy(b: &dyn Backend, args: &mut SetMemoryPolicyArgs) -> Result<(), KfdError> {
    let a = *args;
    call(b, Ioctl::SetMemoryPolicy(args), || {
        format!(
            "gpu_id={:#x} default={} alternate={} aperture={:#x}+{:#x}",
            a.gpu_id,
            a.default_policy,
            a.alternate_policy,
            a.alternate_aperture_base,
            a.alternate_aperture_size
        )
    })
}

/// `AMDKFD_IOC_GET_CLOCK_COUNTERS`.
pub fn get_clock_counters(b: &dyn Backend, gpu_id: u32) -> Result<GetClockCountersArgs, KfdError> {
    let mut a = GetClockCountersArgs {
        gpu_id,
        ..Default::default()
    };
    call(b, Ioctl::GetClockCounters(&mut a), || {
        format!("gpu_id={gpu_id:#x}")
    })?;
    Ok(a)
}

/// `AMDKFD_IOC_GET_PROCESS_APERTURES` (deprecated; at most 7 GPUs).
pub fn get_process_apertures(b: &dyn Backend) -> Result<GetProcessAperturesArgs, KfdError> {
    let mut a = GetProcessAperturesArgs::default();
    call(b, Ioctl::GetProcessApertures(&mut a), String::new)?;
    Ok(a)
}

/// `AMDKFD_IOC_GET_PROCESS_APERTURES_NEW`: asks for the count, then fills a vector.
pub fn get_process_apertures_new(b: &dyn Backend) -> Result<Vec<ProcessDeviceApertures>, KfdError> {
    let mut a = GetProcessAperturesNewArgs::default();
    call(
        b,
        Ioctl::GetProcessAperturesNew {
            args: &mut a,
            apertures: &mut [],
        },
        || "num_of_nodes=0 (count query)".into(),
    )?;
    let n = a.num_of_nodes as usize;
    let mut v = vec![ProcessDeviceApertures::default(); n];
    a.kfd_process_device_apertures_ptr = v.as_mut_ptr() as u64;
    call(
        b,
        Ioctl::GetProcessAperturesNew {
            args: &mut a,
            apertures: &mut v,
        },
        || format!("num_of_nodes={n}"),
    )?;
    v.truncate(a.num_of_nodes as usize);
    Ok(v)
}

/// `AMDKFD_IOC_CREATE_EVENT`: fills `event_id`, `event_trigger_data`, `event_slot_index`
/// and (for the first signal event) `event_page_offset`.
pub fn create_event(b: &dyn Backend, args: &mut CreateEventArgs) -> Result<(), KfdError> {
    let a = *args;
    call(b, Ioctl::CreateEvent(args), || {
        format!(
            "event_type={} auto_reset={} node_id={} event_page_offset={:#x}",
            a.event_type, a.auto_reset, a.node_id, a.event_page_offset
        )
    })
}

/// `AMDKFD_IOC_DESTROY_EVENT`.
pub fn destroy_event(b: &dyn Backend, event_id: u32) -> Result<(), KfdError> {
    let mut a = DestroyEventArgs { event_id, pad: 0 };
    call(b, Ioctl::DestroyEvent(&mut a), || {
        format!("event_id={event_id}")
    })
}

/// `AMDKFD_IOC_SET_EVENT`.
pub fn set_event(b: &dyn Backend, event_id: u32) -> Result<(), KfdError> {
    let mut a = SetEventArgs { event_id, pad: 0 };
    call(b, Ioctl::SetEvent(&mut a), || {
        format!("event_id={event_id}")
    })
}

/// `AMDKFD_IOC_RESET_EVENT`.
pub fn reset_event(b: &dyn Backend, event_id: u32) -> Result<(), KfdError> {
    let mut a = ResetEventArgs { event_id, pad: 0 };
    call(b, Ioctl::ResetEvent(&mut a), || {
        format!("event_id={event_id}")
    })
}

/// `AMDKFD_IOC_WAIT_EVENTS`: returns `KFD_IOC_WAIT_RESULT_*`; `events` is written back
/// (event ages, exception data).
pub fn wait_events(
    b: &dyn Backend,
    events: &mut [EventData],
    wait_for_all: bool,
    timeout_ms: u32,
) -> Result<u32, KfdError> {
    let n = events.len();
    let Ok(num_events) = u32::try_from(n) else {
        return Err(KfdError::new(
            "AMDKFD_IOC_WAIT_EVENTS",
            Errno::INVAL,
            format!("num_events={n}"),
        ));
    };
    let mut a = WaitEventsArgs {
        events_ptr: events.as_mut_ptr() as u64,
        num_events,
        wait_for_all: wait_for_all as u32,
        timeout: timeout_ms,
        wait_result: 0,
    };
    let first = events.first().map(|e| e.event_id);
    call(
        b,
        Ioctl::WaitEvents {
            args: &mut a,
            events,
        },
        || {
            format!("num_events={n} first_event_id={first:?} wait_for_all={wait_for_all} timeout_ms={timeout_ms}")
        },
    )?;
    Ok(a.wait_result)
}

/// `AMDKFD_IOC_SET_SCRATCH_BACKING_VA`.
pub fn set_scratch_backing_va(b: &dyn Backend, gpu_id: u32, va_addr: u64) -> Result<(), KfdError> {
    let mut a = SetScratchBackingVaArgs {
        va_addr,
        gpu_id,
        pad: 0,
    };
    call(b, Ioctl::SetScratchBackingVa(&mut a), || {
        format!("gpu_id={gpu_id:#x} va={va_addr:#x}")
    })
}

/// `AMDKFD_IOC_SET_TRAP_HANDLER`.
pub fn set_trap_handler(
    b: &dyn Backend,
    gpu_id: u32,
    tba_addr: u64,
    tma_addr: u64,
) -> Result<(), KfdError> {
    let mut a = SetTrapHandlerArgs {
        tba_addr,
        tma_addr,
        gpu_id,
        pad: 0,
    };
    call(b, Ioctl::SetTrapHandler(&mut a), || {
        format!("gpu_id={gpu_id:#x} tba={tba_addr:#x} tma={tma_addr:#x}")
    })
}

/// `AMDKFD_IOC_ACQUIRE_VM`: `drm_fd` is the GPU's render node.
pub fn acquire_vm(b: &dyn Backend, gpu_id: u32, drm_fd: i32) -> Result<(), KfdError> {
    let mut a = AcquireVmArgs {
        drm_fd: drm_fd as u32,
        gpu_id,
    };
    call(b, Ioctl::AcquireVm(&mut a), || {
        format!("gpu_id={gpu_id:#x} drm_fd={drm_fd}")
    })
}

/// `AMDKFD_IOC_ALLOC_MEMORY_OF_GPU`: fills `handle` and `mmap_offset`.
pub fn alloc_memory_of_gpu(
    b: &dyn Backend,
    args: &mut AllocMemoryOfGpuArgs,
) -> Result<(), KfdError> {
    let a = *args;
    call(b, Ioctl::AllocMemoryOfGpu(args), || {
        format!(
            "gpu_id={:#x} va={:#x} size={:#x} flags={:?} mmap_offset={:#x}",
            a.gpu_id,
            a.va_addr,
            a.size,
            AllocFlags::from_bits_retain(a.flags),
            a.mmap_offset
        )
    })
}

/// `AMDKFD_IOC_FREE_MEMORY_OF_GPU`.
pub fn free_memory_of_gpu(b: &dyn Backend, handle: u64) -> Result<(), KfdError> {
    let mut a = FreeMemoryOfGpuArgs { handle };
    call(b, Ioctl::FreeMemoryOfGpu(&mut a), || {
        format!("handle={handle:#x}")
    })
}

/// `AMDKFD_IOC_MAP_MEMORY_TO_GPU` on `gpu_ids`, resuming from `*n_success` (start at 0).
/// On failure `*n_success` tells how many GPUs from the start are mapped.
pub fn map_memory_to_gpu(
    b: &dyn Backend,
    handle: u64,
    gpu_ids: &[u32],
    n_success: &mut u32,
) -> Result<(), KfdError> {
    let mut a = MapMemoryToGpuArgs {
        handle,
        device_ids_array_ptr: gpu_ids.as_ptr() as u64,
        n_devices: gpu_ids.len() as u32,
        n_success: *n_success,
    };
    let r = call(
        b,
        Ioctl::MapMemoryToGpu {
            args: &mut a,
            gpu_ids,
        },
        || format!("handle={handle:#x} gpu_ids={gpu_ids:x?} n_success={n_success}"),
    );
    *n_success = a.n_success;
    r
}

/// `AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU`, resuming from `*n_success` like the map call.
pub fn unmap_memory_from_gpu(
    b: &dyn Backend,
    handle: u64,
    gpu_ids: &[u32],
    n_success: &mut u32,
) -> Result<(), KfdError> {
    let mut a = UnmapMemoryFromGpuArgs {
        handle,
        device_ids_array_ptr: gpu_ids.as_ptr() as u64,
        n_devices: gpu_ids.len() as u32,
        n_success: *n_success,
    };
    let r = call(
        b,
        Ioctl::UnmapMemoryFromGpu {
            args: &mut a,
            gpu_ids,
        },
        || format!("handle={handle:#x} gpu_ids={gpu_ids:x?} n_success={n_success}"),
    );
    *n_success = a.n_success;
    r
}

/// `AMDKFD_IOC_GET_DMABUF_INFO` (without metadata).
pub fn get_dmabuf_info(b: &dyn Backend, dmabuf_fd: i32) -> Result<GetDmabufInfoArgs, KfdError> {
    let mut a = GetDmabufInfoArgs {
        dmabuf_fd: dmabuf_fd as u32,
        ..Default::default()
    };
    call(b, Ioctl::GetDmabufInfo(&mut a), || {
        format!("dmabuf_fd={dmabuf_fd}")
    })?;
    Ok(a)
}

/// `AMDKFD_IOC_IMPORT_DMABUF` at `va_addr` on `gpu_id`; returns the new handle.
pub fn import_dmabuf(
    b: &dyn Backend,
    gpu_id: u32,
    dmabuf_fd: i32,
    va_addr: u64,
) -> Result<u64, KfdError> {
    let mut a = ImportDmabufArgs {
        va_addr,
        handle: 0,
        gpu_id,
        dmabuf_fd: dmabuf_fd as u32,
    };
    call(b, Ioctl::ImportDmabuf(&mut a), || {
        format!("gpu_id={gpu_id:#x} dmabuf_fd={dmabuf_fd} va={va_addr:#x}")
    })?;
    Ok(a.handle)
}

/// `AMDKFD_IOC_EXPORT_DMABUF`: returns the new dmabuf fd (owned by the caller).
pub fn export_dmabuf(b: &dyn Backend, handle: u64, flags: u32) -> Result<i32, KfdError> {
    let mut a = ExportDmabufArgs {
        handle,
        flags,
        dmabuf_fd: 0,
    };
    call(b, Ioctl::ExportDmabuf(&mut a), || {
        format!("handle={handle:#x} flags={flags:#x}")
    })?;
    Ok(a.dmabuf_fd as i32)
}

/// `AMDKFD_IOC_SVM`: SET_ATTR or GET_ATTR over `[start, start+size)`; `attrs` is written
/// back for GET_ATTR.
pub fn svm(
    b: &dyn Backend,
    op: u32,
    start_addr: u64,
    size: u64,
    attrs: &mut [SvmAttribute],
) -> Result<(), KfdError> {
    let n = attrs.len();
    if n > SVM_MAX_ATTRS {
        return Err(KfdError::new(
            "AMDKFD_IOC_SVM",
            Errno::INVAL,
            format!("nattr={n} exceeds {SVM_MAX_ATTRS}, the most the request code can describe"),
        ));
    }
    let mut a = SvmArgs {
        start_addr,
        size,
        op,
        nattr: n as u32,
    };
    let first = attrs.first().copied();
    call(
        b,
        Ioctl::Svm {
            args: &mut a,
            attrs,
        },
        || format!("op={op} start={start_addr:#x} size={size:#x} nattr={n} first_attr={first:?}"),
    )
}

/// `AMDKFD_IOC_SET_XNACK_MODE`: `mode` < 0 queries; returns the current mode.
pub fn set_xnack_mode(b: &dyn Backend, mode: i32) -> Result<i32, KfdError> {
    let mut a = SetXnackModeArgs {
        xnack_enabled: mode,
    };
    call(b, Ioctl::SetXnackMode(&mut a), || {
        format!("xnack_enabled={mode}")
    })?;
    Ok(a.xnack_enabled)
}

/// `AMDKFD_IOC_AVAILABLE_MEMORY`: VRAM bytes this process can still allocate.
pub fn available_memory(b: &dyn Backend, gpu_id: u32) -> Result<u64, KfdError> {
    let mut a = GetAvailableMemoryArgs {
        gpu_id,
        ..Default::default()
    };
    call(b, Ioctl::AvailableMemory(&mut a), || {
        format!("gpu_id={gpu_id:#x}")
    })?;
    Ok(a.available)
}

/// `AMDKFD_IOC_RUNTIME_ENABLE`: returns the capabilities mask.
pub fn runtime_enable(b: &dyn Backend, r_debug: u64, mode_mask: u32) -> Result<u32, KfdError> {
    let mut a = RuntimeEnableArgs {
        r_debug,
        mode_mask,
        capabilities_mask: 0,
    };
    call(b, Ioctl::RuntimeEnable(&mut a), || {
        format!("r_debug={r_debug:#x} mode_mask={mode_mask:#x}")
    })?;
    Ok(a.capabilities_mask)
}

/// `AMDKFD_IOC_DBG_TRAP` (KFD 1.13): one debugger operation on `args.pid`. `buf` is the
/// memory the operation's pointer field refers to (the pointer is filled from it); the
/// kernel writes outputs back into `args`.
pub fn dbg_trap(b: &dyn Backend, args: &mut DbgTrapArgs, buf: &mut [u8]) -> Result<(), KfdError> {
    let (pid, op) = (args.pid, args.op);
    call(b, Ioctl::DbgTrap { args, buf }, || {
        format!("pid={pid} op={}", dbg_trap_op_name(op))
    })
}

/// `AMDKFD_IOC_CREATE_PROCESS` (KFD 1.19): give this fd a new secondary KFD process.
pub fn create_process(b: &dyn Backend) -> Result<(), KfdError> {
    call(b, Ioctl::CreateProcess, String::new)
}
