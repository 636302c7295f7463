//! The emulated KFD never panics, whatever the arguments: thousands of seeded random ioctls
//! (valid ids mixed with garbage), then a check that the device still works.

mod kfd_common;

use kfd::abi::{self, *};
use kfd::Ioctl;
use kfd_common::open;

/// xorshift64*: deterministic.
struct Rng(std::cell::Cell<u64>);
impl Rng {
    fn next(&self) -> u64 {
        let mut x = self.0.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<T: Copy>(&self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
}

#[test]
fn random_ioctls_never_panic() {
    let dev = open("emu:mi210[vram=256M],rx7900xtx[vram=128M]");
    let b = dev.b();
    // A read-write arena for user pointers, SVM ranges and BO VAs.
    let arena_len = 4usize << 20;
    // SAFETY: a fresh private anonymous mapping, unmapped at the end.
    let arena_raw = unsafe {
        rustix::mm::mmap_anonymous(
            core::ptr::null_mut(),
            arena_len,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::PRIVATE,
        )
    }
    .unwrap();
    let arena = arena_raw as u64;
    let rng = Rng(std::cell::Cell::new(0x0123_4567_89ab_cdef));
    let mut handles: Vec<u64> = vec![0, u64::MAX];
    let mut queues: Vec<u32> = vec![0, 1, 1000, u32::MAX];
    let mut events: Vec<u32> = vec![0, 1, abi::KFD_SIGNAL_EVENT_LIMIT, 0x8000_0000, u32::MAX];
    let (mut ok, mut err) = (0u32, 0u32);
    for _ in 0..6000 {
        let gpu = rng.pick(&[dev.gpus[0], dev.gpus[1], 0, 0xffff, u32::MAX]);
        let va = match rng.below(4) {
            0 => arena + rng.below(900) * 4096,
            1 => arena + rng.below(1 << 22),
            2 => 0x1_0000_0000 + rng.below(1 << 30) * 4096,
            _ => rng.next(),
        };
        let size = rng.pick(&[
            0u64,
            1,
            4096,
            8192,
            65536,
            1 << 20,
            1 << 33,
            u64::MAX,
            rng.below(1 << 16),
        ]);
        let handle = rng.pick(&handles);
        let qid = rng.pick(&queues);
        let eid = rng.pick(&events);
        let r = match rng.below(23) {
            0 => {
                let flags = rng.pick(&[
                    abi::KFD_IOC_ALLOC_MEM_FLAGS_GTT,
                    abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM | abi::KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC,
                    abi::KFD_IOC_ALLOC_MEM_FLAGS_USERPTR,
                    abi::KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL,
                    abi::KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP,
                    rng.next() as u32,
                ]) | abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
                let mut a = AllocMemoryOfGpuArgs {
                    va_addr: va,
                    size,
                    gpu_id: gpu,
                    flags,
                    mmap_offset: va,
                    handle: 0,
                };
                let r = b.ioctl(Ioctl::AllocMemoryOfGpu(&mut a));
                if r.is_ok() {
                    handles.push(a.handle);
                }
                r
            }
            1 => b.ioctl(Ioctl::FreeMemoryOfGpu(&mut FreeMemoryOfGpuArgs { handle })),
            2 | 3 => {
                let ids = [gpu, dev.gpus[rng.below(2) as usize], rng.next() as u32];
                let n = rng.below(4) as u32;
                let mut a = MapMemoryToGpuArgs {
                    handle,
                    device_ids_array_ptr: 0,
                    n_devices: n,
                    n_success: rng.below(3) as u32,
                };
                if rng.below(2) == 0 {
                    b.ioctl(Ioctl::MapMemoryToGpu {
                        args: &mut a,
                        gpu_ids: &ids[..rng.below(4) as usize],
                    })
                } else {
                    let mut u = UnmapMemoryFromGpuArgs {
                        handle,
                        device_ids_array_ptr: 0,
                        n_devices: n,
                        n_success: a.n_success,
                    };
                    b.ioctl(Ioctl::UnmapMemoryFromGpu {
                        args: &mut u,
                        gpu_ids: &ids[..rng.below(4) as usize],
                    })
                }
            }
            4 => {
                let mut a = CreateQueueArgs {
                    ring_base_address: va,
                    write_pointer_address: rng.pick(&[va, arena, rng.next()]),
                    read_pointer_address: rng.pick(&[va + 8, arena + 8, rng.next()]),
                    ring_size: rng.pick(&[0, 1024, 4096, 65536, 3000, u32::MAX]),
                    gpu_id: gpu,
                    queue_type: rng.below(7) as u32,
                    queue_percentage: rng.pick(&[0, 100, 101, 0x1ff]),
                    queue_priority: rng.below(18) as u32,
                    eop_buffer_address: rng.pick(&[0, va, rng.next()]),
                    eop_buffer_size: rng.pick(&[0, 4096, u64::MAX]),
                    ctx_save_restore_address: rng.pick(&[0, va, rng.next()]),
                    ctx_save_restore_size: rng.next() as u32,
                    ctl_stack_size: rng.next() as u32,
                    sdma_engine_id: rng.below(20) as u32,
                    metadata_ring_size: rng.pick(&[0, 0, 1024, 3000, 65536]),
                    ..Default::default()
                };
                let r = b.ioctl(Ioctl::CreateQueue(&mut a));
                if r.is_ok() {
                    queues.push(a.queue_id);
                }
                r
            }
            5 => b.ioctl(Ioctl::DestroyQueue(&mut DestroyQueueArgs {
                queue_id: qid,
                pad: 0,
            })),
            6 => b.ioctl(Ioctl::UpdateQueue(&mut UpdateQueueArgs {
                ring_base_address: va,
                queue_id: qid,
                ring_size: rng.pick(&[0, 1024, 65536, 77]),
                queue_percentage: rng.below(300) as u32,
                queue_priority: rng.below(20) as u32,
            })),
            7 => {
                let mask = [rng.next() as u32; 40];
                let mut a = SetCuMaskArgs {
                    queue_id: qid,
                    num_cu_mask: rng.pick(&[0, 32, 33, 1280, 4096, u32::MAX]),
                    cu_mask_ptr: 0,
                };
                b.ioctl(Ioctl::SetCuMask {
                    args: &mut a,
                    mask: &mask[..rng.below(41) as usize],
                })
            }
            8 => b.ioctl(Ioctl::GetQueueWaveState(&mut GetQueueWaveStateArgs {
                queue_id: qid,
                ..Default::default()
            })),
            9 => {
                let mut a = CreateEventArgs {
                    event_type: rng.below(10) as u32,
                    auto_reset: rng.below(2) as u32,
                    event_page_offset: rng.pick(&[0, 0, 0, handle]),
                    ..Default::default()
                };
                let r = b.ioctl(Ioctl::CreateEvent(&mut a));
                if r.is_ok() {
                    events.push(a.event_id);
                }
                r
            }
            10 => b.ioctl(Ioctl::DestroyEvent(&mut DestroyEventArgs {
                event_id: eid,
                pad: 0,
            })),
            11 => b.ioctl(Ioctl::SetEvent(&mut SetEventArgs {
                event_id: eid,
                pad: 0,
            })),
            12 => b.ioctl(Ioctl::ResetEvent(&mut ResetEventArgs {
                event_id: eid,
                pad: 0,
            })),
            13 => {
                let mut evs: Vec<EventData> = (0..rng.below(4))
                    .map(|_| EventData::for_signal(rng.pick(&events), rng.below(3)))
                    .collect();
                let mut a = WaitEventsArgs {
                    events_ptr: 0,
                    num_events: rng.below(5) as u32,
                    wait_for_all: rng.below(2) as u32,
                    timeout: 0,
                    wait_result: 0,
                };
                b.ioctl(Ioctl::WaitEvents {
                    args: &mut a,
                    events: &mut evs,
                })
            }
            14 | 15 => {
                let mut attrs: Vec<SvmAttribute> = (0..rng.below(5))
                    .map(|_| SvmAttribute {
                        type_: rng.below(9) as u32,
                        value: rng.pick(&[
                            0,
                            gpu,
                            dev.gpus[0],
                            abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED,
                            rng.next() as u32,
                        ]),
                    })
                    .collect();
                let start = rng.pick(&[arena + rng.below(900) * 4096, va]);
                let len = rng.pick(&[4096, 65536, rng.below(64) * 4096, size]);
                let mut a = SvmArgs {
                    start_addr: start,
                    size: len,
                    op: rng.below(3) as u32,
                    nattr: rng.below(6) as u32,
                };
                b.ioctl(Ioctl::Svm {
                    args: &mut a,
                    attrs: &mut attrs,
                })
            }
            16 => b.ioctl(Ioctl::SetXnackMode(&mut SetXnackModeArgs {
                xnack_enabled: rng.pick(&[-1, 0, 1, 7]),
            })),
            17 => b.ioctl(Ioctl::RuntimeEnable(&mut RuntimeEnableArgs {
                r_debug: 0,
                mode_mask: rng.below(4) as u32,
                capabilities_mask: 0,
            })),
            18 => b.ioctl(Ioctl::AvailableMemory(&mut GetAvailableMemoryArgs {
                gpu_id: gpu,
                ..Default::default()
            })),
            19 => {
                let mut a = ExportDmabufArgs {
                    handle,
                    flags: rng.pick(&[0, 0o2000000]),
                    dmabuf_fd: 0,
                };
                let r = b.ioctl(Ioctl::ExportDmabuf(&mut a));
                if r.is_ok() {
                    // Import it back somewhere, then close our fd.
                    let mut i = ImportDmabufArgs {
                        va_addr: va,
                        handle: 0,
                        gpu_id: gpu,
                        dmabuf_fd: a.dmabuf_fd,
                    };
                    if b.ioctl(Ioctl::ImportDmabuf(&mut i)).is_ok() {
                        handles.push(i.handle);
                    }
                    let mut info = GetDmabufInfoArgs {
                        dmabuf_fd: a.dmabuf_fd,
                        ..Default::default()
                    };
                    let _ = b.ioctl(Ioctl::GetDmabufInfo(&mut info));
                    // SAFETY: the fd was just created for us and is closed once.
                    drop(unsafe {
                        <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(
                            a.dmabuf_fd as i32,
                        )
                    });
                }
                r
            }
            20 => b.ioctl(Ioctl::SetMemoryPolicy(&mut SetMemoryPolicyArgs {
                gpu_id: gpu,
                default_policy: rng.below(3) as u32,
                alternate_policy: rng.below(3) as u32,
                alternate_aperture_base: va,
                alternate_aperture_size: size,
                misc_process_flag: rng.below(3) as u32,
            })),
            21 => b.ioctl(Ioctl::CreateProcess),
            _ => {
                let mut n = GetProcessAperturesNewArgs {
                    num_of_nodes: rng.below(4) as u32,
                    ..Default::default()
                };
                let mut v = vec![ProcessDeviceApertures::default(); rng.below(3) as usize];
                b.ioctl(Ioctl::GetProcessAperturesNew {
                    args: &mut n,
                    apertures: &mut v,
                })
            }
        };
        if r.is_ok() {
            ok += 1;
        } else {
            err += 1;
        }
    }
    assert!(ok > 300, "some calls succeed ({ok})");
    assert!(err > 300, "most garbage is refused ({err})");
    // Still a working device.
    let v = kfd::ioctl::get_version(b).unwrap();
    assert_eq!(v.minor_version, abi::KFD_IOCTL_MINOR_VERSION);
    for q in queues {
        let _ = kfd::ioctl::destroy_queue(b, q);
    }
    let r = kfd_common::Reservation::new(4 << 20, 2 << 20);
    let (h, p) = kfd_common::gtt(&dev, 0, r.base, 4096);
    // SAFETY: mapped.
    unsafe { p.write_volatile(5) };
    let mut n = 0;
    kfd::ioctl::unmap_memory_from_gpu(b, h, &dev.gpus[..1], &mut n).unwrap();
    kfd::ioctl::free_memory_of_gpu(b, h).unwrap();
    drop(dev);
    // SAFETY: the arena is ours; the device that registered parts of it is gone.
    unsafe { rustix::mm::munmap(arena_raw, arena_len).unwrap() };
}
