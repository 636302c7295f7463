//! A software WAIT_REG_MEM64 for gfx9: the wait kernel `kfdrt_wait_mem64`.
//!
//! gfx9's CP has no WAIT_REG_MEM64 (`soc15d.h`; it is in gfx10's `nvd.h`) and the AQL
//! BARRIER_VALUE packet compares signed 64-bit values, so a 64-bit wait whose mask has
//! bit 63 and whose unsigned condition has no signed equivalent (GEQ with a reference that
//! is not a power of two) has no exact single-packet form there
//! ([`crate::cmdbuf::barrier_value_for`] returns NotSupported for it). For exactly that case
//! the stream dispatches this kernel instead, as CLR does all its waits by default
//! (`__amd_rocclr_streamOpsWait`, `rocclr/device/blitcl.cpp`): one work-item polls the value
//! with a system-coherent load, masks it, compares it unsigned as the CP's WAIT_REG_MEM
//! functions do, and `s_sleep`s between polls. The dispatch carries the barrier bit, so
//! the stream's later packets start after the kernel ends, i.e. after the condition held.
//! Facts and sources: `firmware-notes/wait-kernel.md`.
//!
//! The kernel is written in gfx9 assembly (`wait_mem64.s`); its code objects (one per
//! target: the coherent load's cache bits differ, `glc` on gfx90a and `sc0 sc1` on
//! gfx942) are committed as bytes in `code.rs`, so neither clang nor LLVM is needed to
//! build or run kfdrt. A test reassembles the source and checks the bytes.
//!
//! The code object is loaded through the Module API the first time a stream of a GPU
//! needs it and shared by the device's streams while any of them holds it (each such
//! stream keeps it alive until its own work completed).

mod code;

use std::sync::{Arc, Mutex, Weak};

use crate::cmd::WaitCondition;
use crate::cmdbuf::CmdBuf;
use crate::error::{Error, ErrorKind, Result};
use crate::module::{Kernel, Module, ModuleInner};
use crate::stream::{Place, Stream};
use crate::sync::lock;

/// The kernel's name in its code object.
pub const KERNEL_NAME: &str = "kfdrt_wait_mem64";

/// The wait kernel's code object for a gfx9 processor (`gfx90a` or `gfx942`), if kfdrt has
/// one. Arguments (32 bytes of kernarg): `addr` (u64 pointer), `reference` (u64), `mask`
/// (u64), `function` (u32, the CP's WAIT_REG_MEM function encoding of
/// [`pm4::pkt3::CompareFn`]).
pub fn code_object(processor: &str) -> Option<&'static [u8]> {
    match processor {
        "gfx90a" => Some(&code::GFX90A),
        "gfx942" => Some(&code::GFX942),
        _ => None,
    }
}

/// Per device: the loaded wait-kernel module of each GPU, weakly (the streams that use it
/// hold it; a strong reference here would keep the device alive through the module).
#[derive(Default)]
pub(crate) struct DeviceCache {
    modules: Mutex<Vec<(usize, Weak<ModuleInner>)>>,
}

/// Per stream: the wait kernel, once the stream needed it.
#[derive(Default)]
pub(crate) struct StreamSlot {
    kernel: Mutex<Option<Kernel>>,
}

impl Stream {
    /// The wait kernel for this stream's GPU, loaded on first use.
    fn wait_kernel(&self) -> Result<Kernel> {
        let s = &*self.inner;
        let mut slot = lock(&s.wait_kernel.kernel);
        if let Some(k) = slot.as_ref() {
            return Ok(k.clone());
        }
        let mut cache = lock(&s.dev.wait_kernels.modules);
        cache.retain(|(_, w)| w.strong_count() > 0);
        let module = match cache
            .iter()
            .find(|(g, _)| *g == s.gpu_index)
            .and_then(|(_, w)| w.upgrade())
        {
            Some(inner) => Module { inner },
            None => {
                let gpu = s.dev.gpu(s.gpu_index)?;
                let name = gpu.gfx_name();
                let bytes = code_object(&name).ok_or_else(|| {
                    Error::new(
                        ErrorKind::NotSupported,
                        "hipStreamWaitValue64",
                        format!("kfdrt has no wait kernel for {name}"),
                    )
                })?;
                let dev = crate::Device {
                    inner: s.dev.clone(),
                };
                let m = dev.load_module(s.gpu_index, bytes)?;
                cache.push((s.gpu_index, Arc::downgrade(&m.inner)));
                m
            }
        };
        let k = module.kernel(KERNEL_NAME)?;
        *slot = Some(k.clone());
        Ok(k)
    }

    /// Wait until `c` holds for the 64-bit value at `addr` with the wait kernel: on a
    /// dedicated queue (the spinning wave must hold no other stream's work), ordered after
    /// the stream's earlier work and before its later work by the barrier bit.
    pub(crate) fn wait_mem64_kernel(&self, addr: u64, c: WaitCondition) -> Result<()> {
        let WaitCondition::Poll {
            function,
            reference,
            mask,
        } = c
        else {
            return Ok(());
        };
        let k = self.wait_kernel()?;
        let mut args = k.args();
        args.ptr(addr)?
            .arg(&reference)?
            .arg(&mask)?
            .arg(&(function as u32))?;
        // An empty submission only moves the stream to its dedicated queue.
        self.submit(&CmdBuf::new(self.inner.family), Place::Dedicated, None)?;
        self.launch(&k, 1, 1, 0, &args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::process::Command;

    const TARGETS: [(&str, &str); 2] = [("gfx90a", "0"), ("gfx942", "1")];

    fn tool(name: &str) -> bool {
        Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Assemble `wait_mem64.s` for `target` into a code object (in a directory under
    /// target/, removed afterwards).
    fn assemble(target: &str, defsym: &str) -> Vec<u8> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target")
            .join(format!("wait_mem64-{target}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/waitkernel/wait_mem64.s");
        let (obj, co) = (dir.join("k.o"), dir.join("k.co"));
        let st = Command::new("llvm-mc-19")
            .args(["-triple", "amdgcn-amd-amdhsa", "-filetype=obj"])
            .arg(format!("-mcpu={target}"))
            .args(["--defsym", &format!("GFX942={defsym}")])
            .arg("-o")
            .arg(&obj)
            .arg(&src)
            .status()
            .unwrap();
        assert!(st.success(), "llvm-mc-19 failed for {target}");
        let st = Command::new("ld.lld-19")
            .args(["-shared", "--build-id=none", "-o"])
            .arg(&co)
            .arg(&obj)
            .status()
            .unwrap();
        assert!(st.success(), "ld.lld-19 failed for {target}");
        let b = std::fs::read(&co).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        b
    }

    fn regen(objs: &[(&str, Vec<u8>)]) {
        let mut out = String::from(
            "//! Generated from `wait_mem64.s` by the test `waitkernel::tests::code_objects_match_the_source`\n\
             //! (`KFDRT_REGEN_WAIT_KERNEL=1` rewrites this file). Do not edit.\n\n",
        );
        for (t, b) in objs {
            out += &format!(
                "/// `wait_mem64.s` assembled for {t} (llvm-mc-19, ld.lld-19).\n\
                 pub(crate) static {}: [u8; {}] = [\n",
                t.to_uppercase(),
                b.len()
            );
            for c in b.chunks(16) {
                let line: Vec<String> = c.iter().map(|x| format!("0x{x:02x},")).collect();
                out += &format!("    {}\n", line.join(" "));
            }
            out += "];\n\n";
        }
        out.pop();
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/waitkernel/code.rs");
        std::fs::write(p, out).unwrap();
    }

    /// The committed bytes are what llvm-mc-19 + ld.lld-19 make of the source (when they
    /// are installed; `KFDRT_REGEN_WAIT_KERNEL=1` rewrites `code.rs` instead).
    #[test]
    fn code_objects_match_the_source() {
        if !tool("llvm-mc-19") || !tool("ld.lld-19") {
            eprintln!("llvm-mc-19 / ld.lld-19 not installed: reassembly check skipped");
            return;
        }
        let objs: Vec<(&str, Vec<u8>)> =
            TARGETS.iter().map(|&(t, d)| (t, assemble(t, d))).collect();
        if std::env::var_os("KFDRT_REGEN_WAIT_KERNEL").is_some() {
            regen(&objs);
            return;
        }
        for (t, b) in &objs {
            assert!(
                code_object(t).unwrap() == b.as_slice(),
                "src/waitkernel/code.rs is stale for {t}: rerun this test with \
                 KFDRT_REGEN_WAIT_KERNEL=1"
            );
        }
    }

    /// The kernel is used exactly where gfx9 has no exact packet (GEQ, bit 63 in the mask,
    /// a value that is not a power of two); never for other conditions, never on gfx10+.
    #[test]
    fn kernel_only_where_no_packet_is_exact() {
        use crate::cmd::wait_condition;
        use crate::cmdbuf::{CmdBuf, MemWait, Target};
        use pm4::GfxFamily;
        // The choice is CmdBuf::wait_mem's: the kernel, and then no packet encoded.
        // (An always-true condition is encoded as nothing.)
        let needs_kernel = |t: Target, c| {
            let mut b = CmdBuf::new(t);
            let how = b.wait_mem(0x1000, 64, c).unwrap();
            let poll = matches!(c, crate::cmd::WaitCondition::Poll { .. });
            assert_eq!(b.is_empty(), how == MemWait::WaitKernel || !poll);
            how == MemWait::WaitKernel
        };
        let gfx9 = Target {
            family: GfxFamily::Gfx9,
            num_xcc: 1,
        };
        let gfx11 = Target {
            family: GfxFamily::Gfx11,
            num_xcc: 1,
        };
        let vals = [0u64, 1, 3, 4, 0x7fff_ffff, 1 << 63, (1 << 63) + 5, u64::MAX];
        let masks = [u64::MAX, 0xffff_ffff, 1 << 63, (1 << 63) - 1, 0];
        let mut used = 0;
        for flags in 0..4 {
            for &m in &masks {
                for &v in &vals {
                    let c = wait_condition(flags, v, m, 64).unwrap();
                    let want = flags == crate::cmd::WAIT_VALUE_GTE
                        && m & (1 << 63) != 0
                        && v != 0
                        && !v.is_power_of_two();
                    assert_eq!(needs_kernel(gfx9, c), want, "{flags} {v:#x} {m:#x}");
                    assert!(!needs_kernel(gfx11, c));
                    used += want as u32;
                }
            }
        }
        assert!(used > 0);
    }

    /// Every instruction of the kernel decodes with `amdgpu_isa`, the code ends in
    /// s_endpgm, and the metadata gives the argument layout the runtime fills.
    #[test]
    fn every_instruction_decodes() {
        use amdgpu_isa::{decode, Opcode, Target as IsaTarget};
        for (t, _) in TARGETS {
            let co = codeobj::CodeObject::parse(code_object(t).unwrap()).unwrap();
            let k = co.kernel(KERNEL_NAME).unwrap();
            let offsets: Vec<u32> = k.meta.args.iter().map(|a| a.offset).collect();
            assert_eq!(offsets, [0, 8, 16, 24], "{t}");
            assert_eq!(k.meta.kernarg_segment_size, 32);
            let image = co.load_image(0).unwrap();
            let entry = (k.kd_offset as i64 + k.descriptor.kernel_code_entry_byte_offset) as usize;
            let words: Vec<u32> = image[entry..]
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            let target = IsaTarget::from_name(t).unwrap();
            let (mut at, mut n, mut ended) = (0usize, 0, false);
            let mut loads = 0;
            while at < words.len() {
                let i = decode(&words[at..], target)
                    .unwrap_or_else(|e| panic!("{t}: word {at} does not decode: {e:?}"));
                n += 1;
                at += i.len as usize;
                if i.name().starts_with("global_load") {
                    loads += 1;
                }
                if i.op == Opcode::S_ENDPGM {
                    ended = true;
                    break;
                }
            }
            assert!(ended, "{t}: no s_endpgm");
            assert_eq!(loads, 1, "{t}");
            assert!(n > 20, "{t}: {n} instructions");
        }
    }
}
