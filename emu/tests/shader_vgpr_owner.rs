//! The shader core's worker threads are shared by every emulated GPU in the host process
//! and keep their waves (with the VGPRs the last wave left) between dispatches: a wave of
//! one device's dispatch never starts with register values another device's dispatch
//! left (firmware-notes/isa-gfx9.md "VGPRs at wave launch").

mod shader_common;
use shader_common::*;

const SECRET: u32 = 0x5ec2_e7a5;

#[test]
fn a_device_never_sees_vgprs_another_device_left() {
    for (target, version) in TARGETS {
        let (a, b) = (Dev::new(target, version), Dev::new(target, version));
        a.eng.set_shader_threads(4);
        b.eng.set_shader_threads(4);
        let (ma, mb) = (
            a.load("cl/isa/vgpr_owner.cl"),
            b.load("cl/isa/vgpr_owner.cl"),
        );
        let (mut qa, mut qb) = (a.queue(), b.queue());
        // 256 work-groups of one wave: the pool threads run both devices' work-groups.
        let n = 256 * 64;
        let (oa, ob) = (a.alloc(n * 4), b.alloc(n * 4));
        for round in 0..3 {
            let args = Args::default().ptr(&oa).u32(SECRET);
            a.run_ok(
                &mut qa,
                &ma,
                "plant",
                [n as u32, 1, 1],
                [64, 1, 1],
                0,
                &args.0,
            );
            let planted: Vec<u32> = a.download(&oa, n);
            assert!(planted.iter().all(|&v| v == SECRET), "{target}: plant");
            let args = Args::default().ptr(&ob);
            b.run_ok(
                &mut qb,
                &mb,
                "peek",
                [n as u32, 1, 1],
                [64, 1, 1],
                0,
                &args.0,
            );
            let seen: Vec<u32> = b.download(&ob, n);
            let leaked = seen.iter().filter(|&&v| v == SECRET).count();
            assert_eq!(
                leaked, 0,
                "{target} round {round}: {leaked} of {n} lanes of device B read the v40 \
                 device A's dispatch left"
            );
        }
    }
}
