//! Scratch as the hardware addresses it: a dispatch's private segments live in the
//! queue's scratch backing memory (`amd_queue_t`), each wave in its slot at its wave offset,
//! lanes interleaved dword by dword; a queue whose scratch is too small stops the dispatch.

mod shader_common;
use kfd_emu::engine::QueueFault;
use shader_common::*;

/// Two waves of one work-group: after the dispatch, every lane's private array is in the
/// queue's scratch memory at slot (wave) x wave bytes + (array offset + element) x 256 +
/// lane x 4 (gfx942 through flat scratch, gfx90a through the swizzled scratch V#). A model
/// that kept scratch in lane-private emulator memory leaves the backing memory untouched.
#[test]
fn two_waves_private_arrays_land_in_the_queue_scratch_where_the_swizzle_puts_them() {
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/scratch_layout.cl");
        let n = 128usize;
        let wo = dev.alloc(n * 4);
        let sel = 5u32;
        let args = Args::default().ptr(&wo).u32(sel);
        dev.run_ok(
            &mut q,
            &m,
            "scratch_layout",
            [n as u32, 1, 1],
            [128, 1, 1],
            0,
            &args.0,
        );
        let out: Vec<u32> = dev.download(&wo, n);
        for id in 0..n as u32 {
            assert_eq!(out[id as usize], id * 16 + ((id + sel) & 15) + 0x1000);
        }
        let (mem, wave_bytes) = q.scratch().expect("the queue got scratch");
        let words: Vec<u32> = dev.download(mem, (2 * wave_bytes / 4) as usize);
        // Where lane 0 of wave 0 keeps a[0]: the array's offset in the private segment
        // (the compiler's frame layout), in dwords.
        let lane_dwords = (*wave_bytes / 256) as usize;
        let first = (0..lane_dwords)
            .find(|d| words[d * 64] == 0x1000)
            .unwrap_or_else(|| panic!("{}: a[0] of work-item 0 not in scratch", dev.target));
        for id in 0..n {
            let (slot, lane) = (id / 64, id % 64);
            for k in 0..16 {
                let at = slot * (*wave_bytes as usize / 4) + (first + k) * 64 + lane;
                assert_eq!(
                    words[at],
                    (id * 16 + k) as u32 + 0x1000,
                    "{}: work-item {id} a[{k}] at scratch dword {at}",
                    dev.target
                );
            }
        }
    }
}

/// A queue whose COMPUTE_TMPRING_SIZE gives fewer bytes per lane than the kernel's private
/// segment stops the dispatch (the CP's scratch check) with a message naming both sizes;
/// so does one with fewer scratch wave slots than a work-group has waves.
#[test]
fn a_queue_with_too_little_scratch_stops_the_dispatch() {
    for dev in devices() {
        let m = dev.load("cl/scratch_layout.cl");
        let wo = dev.alloc(128 * 4);
        let args = Args::default().ptr(&wo).u32(0);
        let mut q = dev.queue();
        dev.ensure_scratch(&mut q, 16);
        q.set_tmpring_size(64); // 64 waves of 0 KiB
        let f = refused(
            &dev,
            &mut q,
            &m,
            &args.0,
            64,
            64,
            "a dispatch without room for its scratch",
        );
        assert!(
            f.reason.contains("bytes of scratch per work-item") && f.reason.contains("gives 0"),
            "{}: {}",
            dev.target,
            f.reason
        );

        let mut q = dev.queue();
        dev.ensure_scratch(&mut q, 256);
        q.set_tmpring_size(1 | 16 << 12); // 1 wave of 16 KiB
        let f = refused(
            &dev,
            &mut q,
            &m,
            &args.0,
            128,
            128,
            "a work-group with more waves than scratch slots",
        );
        assert!(
            f.reason.contains("2 waves") && f.reason.contains("holds 1"),
            "{}: {}",
            dev.target,
            f.reason
        );
    }
}

/// MI300X in SPX mode: 8 XCCs, the work-groups dealt round-robin over them, each XCC with
/// its own slice of the queue's scratch (ROCr splits it evenly and reports the per-XCC
/// size in NUM_RECORDS and `scratch_backing_memory_byte_size`; XCC x's slice starts at
/// base + x x that size). With one worker thread, work-group g runs on XCC g % 8 in slots 0
/// and 1 of that slice, so after 16 work-groups XCC x's slots hold work-group x + 8's
/// private arrays. A model that used XCC 0's slice for every wave leaves slices 1..7 empty.
#[test]
fn work_groups_on_every_xcc_use_their_xccs_scratch_slice() {
    let dev = Dev::with_xcc("gfx942", 90402, 8);
    let m = dev.load("cl/scratch_layout.cl");
    let (groups, wg) = (16usize, 128usize);
    let n = groups * wg;
    let wo = dev.alloc(n * 4);
    let sel = 9u32;
    let args = Args::default().ptr(&wo).u32(sel);
    let mut q = dev.queue();
    dev.eng.set_shader_threads(1);
    dev.run_ok(
        &mut q,
        &m,
        "scratch_layout",
        [n as u32, 1, 1],
        [wg as u16, 1, 1],
        0,
        &args.0,
    );
    let out: Vec<u32> = dev.download(&wo, n);
    for id in 0..n as u32 {
        assert_eq!(
            out[id as usize],
            id * 16 + ((id + sel) & 15) + 0x1000,
            "{id}"
        );
    }
    let (mem, wave_bytes) = q.scratch().expect("the queue got scratch");
    let wave_dw = (*wave_bytes / 4) as usize;
    let slice_dw = 64 * wave_dw; // 64 waves per XCC (`Dev::ensure_scratch`)
    let words: Vec<u32> = dev.download(mem, 8 * slice_dw);
    let first = (0..wave_dw / 64)
        .find(|d| words[d * 64] == 0x1000 + 8 * 128 * 16)
        .expect("a[0] of work-group 8's first work-item at the start of XCC 0's slice");
    for xcc in 0..8 {
        let g = xcc + 8;
        for slot in 0..2 {
            for lane in 0..64 {
                let id = g * wg + slot * 64 + lane;
                for k in 0..16 {
                    let at = xcc * slice_dw + slot * wave_dw + (first + k) * 64 + lane;
                    assert_eq!(
                        words[at],
                        (id * 16 + k) as u32 + 0x1000,
                        "XCC {xcc} slot {slot} lane {lane} a[{k}] (scratch dword {at})"
                    );
                }
            }
        }
    }

    // Both host cores again: every XCC's waves still get exact results.
    dev.eng.set_shader_threads(0);
    let args = Args::default().ptr(&wo).u32(3);
    dev.run_ok(
        &mut q,
        &m,
        "scratch_layout",
        [n as u32, 1, 1],
        [wg as u16, 1, 1],
        0,
        &args.0,
    );
    let out: Vec<u32> = dev.download(&wo, n);
    for id in 0..n as u32 {
        assert_eq!(out[id as usize], id * 16 + ((id + 3) & 15) + 0x1000, "{id}");
    }
}

/// On several XCCs each XCC's WAVES slots must fit in its slice: a queue whose
/// `scratch_backing_memory_byte_size` is smaller than WAVES x WAVESIZE (the XCCs' slices
/// would overlap) stops the dispatch, naming both.
#[test]
fn xcc_slices_smaller_than_their_slots_stop_the_dispatch() {
    let dev = Dev::with_xcc("gfx942", 90402, 8);
    let m = dev.load("cl/scratch_layout.cl");
    let wo = dev.alloc(128 * 4);
    let args = Args::default().ptr(&wo).u32(0);
    let mut q = dev.queue();
    dev.ensure_scratch(&mut q, 64);
    q.set_scratch_slice_bytes(4096);
    let f = refused(&dev, &mut q, &m, &args.0, 128, 64, "overlapping XCC slices");
    assert!(
        f.reason.contains("scratch_backing_memory_byte_size 4096") && f.reason.contains("overlap"),
        "{}",
        f.reason
    );
}

/// Dispatch `scratch_layout` over `grid` x 1 x 1 work-items in `wg`-wide work-groups,
/// expecting the queue to refuse it (`why` names what the test expects); the fault.
fn refused(
    dev: &Dev,
    q: &mut Queue,
    m: &Module,
    args: &[u8],
    grid: u32,
    wg: u16,
    why: &str,
) -> QueueFault {
    dev.run(q, m, "scratch_layout", [grid, 1, 1], [wg, 1, 1], 0, args)
        .expect_err(why)
}
