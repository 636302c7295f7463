//! Scratch as the hardware addresses it: a dispatch's private segments live in the
//! queue's scratch backing memory (`amd_queue_t`), each wave in its slot at its wave offset,
//! lanes interleaved dword by dword; a queue whose scratch is too small stops the dispatch.

mod shader_common;
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
        let f = dev
            .run(
                &mut q,
                &m,
                "scratch_layout",
                [64, 1, 1],
                [64, 1, 1],
                0,
                &args.0,
            )
            .expect_err("a dispatch without room for its scratch");
        assert!(
            f.reason.contains("bytes of scratch per work-item") && f.reason.contains("gives 0"),
            "{}: {}",
            dev.target,
            f.reason
        );

        let mut q = dev.queue();
        dev.ensure_scratch(&mut q, 256);
        q.set_tmpring_size(1 | 16 << 12); // 1 wave of 16 KiB
        let f = dev
            .run(
                &mut q,
                &m,
                "scratch_layout",
                [128, 1, 1],
                [128, 1, 1],
                0,
                &args.0,
            )
            .expect_err("a work-group with more waves than scratch slots");
        assert!(
            f.reason.contains("2 waves") && f.reason.contains("holds 1"),
            "{}: {}",
            dev.target,
            f.reason
        );
    }
}
