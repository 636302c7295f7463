//! `kfdrt disasm CODE_OBJECT`: each kernel's descriptor and metadata of an AMDGPU code
//! object (an ELF, or a clang offload bundle with `--gfx` picking the entry).

use std::fmt::Write as _;
use std::process::ExitCode;

use kfdrt::codeobj::{self, CodeObject, Kernel, TargetId};
use pm4::kd::code_props as cp;

/// Whether `bytes` look like a code object or an offload bundle.
pub fn is_code_object(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x7fELF") || codeobj::bundle::is_bundle(bytes)
}

/// If `argv`'s file is a code object (or bundle), print it and return the exit code;
/// `None` lets the packet disassembler handle `argv`.
pub fn maybe_run(argv: &[String]) -> Option<ExitCode> {
    let args = crate::args::Args::parse(argv, &["engine", "gfx"], &["hex", "json"]).ok()?;
    if args.flag("hex") || args.value("engine").is_some_and(|e| e != "codeobj") {
        return None;
    }
    let [file] = args.positional.as_slice() else {
        return None;
    };
    let bytes = std::fs::read(file).ok()?;
    if !is_code_object(&bytes) {
        return None;
    }
    let parsed = if codeobj::bundle::is_bundle(&bytes) {
        let Some(gfx) = args.value("gfx") else {
            eprintln!("kfdrt disasm: {file} is an offload bundle: --gfx TARGET picks the entry");
            return Some(ExitCode::from(2));
        };
        TargetId::parse(gfx).and_then(|t| CodeObject::parse_for(&bytes, &t))
    } else {
        CodeObject::parse(&bytes)
    };
    match parsed {
        Ok(co) => {
            if args.flag("json") {
                println!("{}", json(&co));
            } else {
                print!("{}", text(&co));
            }
            Some(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("kfdrt disasm: {file}: {e}");
            Some(ExitCode::from(1))
        }
    }
}

fn props(p: u16) -> String {
    let names = [
        (
            cp::ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER,
            "private_segment_buffer",
        ),
        (cp::ENABLE_SGPR_DISPATCH_PTR, "dispatch_ptr"),
        (cp::ENABLE_SGPR_QUEUE_PTR, "queue_ptr"),
        (cp::ENABLE_SGPR_KERNARG_SEGMENT_PTR, "kernarg_segment_ptr"),
        (cp::ENABLE_SGPR_DISPATCH_ID, "dispatch_id"),
        (cp::ENABLE_SGPR_FLAT_SCRATCH_INIT, "flat_scratch_init"),
        (cp::ENABLE_SGPR_PRIVATE_SEGMENT_SIZE, "private_segment_size"),
        (cp::ENABLE_WAVEFRONT_SIZE32, "wavefront_size32"),
        (cp::USES_DYNAMIC_STACK, "uses_dynamic_stack"),
    ];
    let v: Vec<&str> = names
        .iter()
        .filter(|(b, _)| p & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if v.is_empty() {
        "-".into()
    } else {
        v.join(",")
    }
}

/// The human-readable listing.
pub fn text(co: &CodeObject) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "code object v{} target {} e_flags={:#x} image={:#x} bytes, {} segment(s), {} relocation(s)",
        co.version.number(),
        co.target,
        co.e_flags,
        co.image_size(),
        co.segments.len(),
        co.relocations.len()
    );
    for k in &co.kernels {
        kernel_text(&mut o, k);
    }
    let globals: Vec<_> = co
        .symbols
        .iter()
        .filter(|s| co.global(&s.name).is_some())
        .collect();
    for g in globals {
        let _ = writeln!(o, "global {} at +{:#x} size {}", g.name, g.address, g.size);
    }
    o
}

fn kernel_text(o: &mut String, k: &Kernel) {
    let d = &k.descriptor;
    let m = &k.meta;
    let _ = writeln!(
        o,
        "kernel {} kd=+{:#x} entry=+{:#x}",
        k.name,
        k.kd_offset,
        k.entry_offset()
    );
    let _ = writeln!(
        o,
        "  descriptor group_segment={} private_segment={} kernarg_size={} \
         rsrc1={:#010x} rsrc2={:#010x} rsrc3={:#010x} properties={} kernarg_preload={}@{}",
        d.group_segment_fixed_size,
        d.private_segment_fixed_size,
        d.kernarg_size,
        d.compute_pgm_rsrc1,
        d.compute_pgm_rsrc2,
        d.compute_pgm_rsrc3,
        props(d.kernel_code_properties),
        d.kernarg_preload_length(),
        d.kernarg_preload_offset()
    );
    let _ = writeln!(
        o,
        "  rsrc vgpr_blocks={} sgpr_blocks={} user_sgprs={} workgroup_id={}{}{} \
         workgroup_info={} workitem_id_dims={} scratch={} ieee={} dx10_clamp={}",
        d.granulated_vgpr_count(),
        d.granulated_sgpr_count(),
        d.user_sgpr_count(),
        if d.workgroup_id_enabled(0) { "x" } else { "" },
        if d.workgroup_id_enabled(1) { "y" } else { "" },
        if d.workgroup_id_enabled(2) { "z" } else { "" },
        d.workgroup_info_enabled(),
        d.workitem_id_dims() + 1,
        d.private_segment_enabled(),
        d.ieee_mode(),
        d.dx10_clamp()
    );
    let _ = writeln!(
        o,
        "  metadata wavefront={} sgprs={} vgprs={} agprs={} spills={}/{} max_workgroup={}{} \
         lds={} scratch={} dynamic_stack={} kernarg={}@{}",
        m.wavefront_size,
        m.sgpr_count,
        m.vgpr_count,
        m.agpr_count,
        m.sgpr_spill_count,
        m.vgpr_spill_count,
        m.max_flat_workgroup_size,
        m.reqd_workgroup_size
            .map(|r| format!(" reqd={r:?}"))
            .unwrap_or_default(),
        m.group_segment_fixed_size,
        m.private_segment_fixed_size,
        m.uses_dynamic_stack,
        m.kernarg_segment_size,
        m.kernarg_segment_align
    );
    for (i, a) in m.args.iter().enumerate() {
        let _ = writeln!(
            o,
            "  arg {i:2} +{:<4} size {:<2} align {} {:<26} {}{}",
            a.offset,
            a.size,
            a.align,
            a.value_kind.name(),
            a.display_name(i),
            a.type_name
                .as_deref()
                .map(|t| format!(" : {t}"))
                .unwrap_or_default()
        );
    }
}

/// The JSON listing.
pub fn json(co: &CodeObject) -> serde_json::Value {
    use serde_json::json;
    let kernels: Vec<_> = co
        .kernels
        .iter()
        .map(|k| {
            let d = &k.descriptor;
            let m = &k.meta;
            json!({
                "name": k.name,
                "kd_offset": k.kd_offset,
                "entry_offset": k.entry_offset(),
                "descriptor": {
                    "group_segment_fixed_size": d.group_segment_fixed_size,
                    "private_segment_fixed_size": d.private_segment_fixed_size,
                    "kernarg_size": d.kernarg_size,
                    "kernel_code_entry_byte_offset": d.kernel_code_entry_byte_offset,
                    "compute_pgm_rsrc1": d.compute_pgm_rsrc1,
                    "compute_pgm_rsrc2": d.compute_pgm_rsrc2,
                    "compute_pgm_rsrc3": d.compute_pgm_rsrc3,
                    "kernel_code_properties": d.kernel_code_properties,
                    "kernarg_preload": d.kernarg_preload,
                    "user_sgpr_count": d.user_sgpr_count(),
                },
                "metadata": {
                    "wavefront_size": m.wavefront_size,
                    "sgpr_count": m.sgpr_count,
                    "vgpr_count": m.vgpr_count,
                    "agpr_count": m.agpr_count,
                    "max_flat_workgroup_size": m.max_flat_workgroup_size,
                    "group_segment_fixed_size": m.group_segment_fixed_size,
                    "private_segment_fixed_size": m.private_segment_fixed_size,
                    "uses_dynamic_stack": m.uses_dynamic_stack,
                    "kernarg_segment_size": m.kernarg_segment_size,
                    "kernarg_segment_align": m.kernarg_segment_align,
                    "args": m.args.iter().enumerate().map(|(i, a)| json!({
                        "name": a.display_name(i),
                        "type_name": a.type_name,
                        "offset": a.offset,
                        "size": a.size,
                        "align": a.align,
                        "value_kind": a.value_kind.name(),
                    })).collect::<Vec<_>>(),
                },
            })
        })
        .collect();
    json!({
        "version": co.version.number(),
        "target": co.target.to_string(),
        "kernels": kernels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_descriptor_and_metadata() {
        let elf = test_kernels::build("cl/vadd.cl", "gfx942").unwrap();
        let co = CodeObject::parse(&elf).unwrap();
        let t = text(&co);
        assert!(
            t.contains("code object v5 target amdgcn-amd-amdhsa--gfx942"),
            "{t}"
        );
        assert!(t.contains("kernel vadd kd=+"), "{t}");
        assert!(t.contains("kernarg_size=288"), "{t}");
        assert!(t.contains("hidden_block_count_x"), "{t}");
        assert!(t.contains("arg  3 +24   size 4  align 4 by_value"), "{t}");
        let j = json(&co);
        assert_eq!(j["kernels"][0]["metadata"]["kernarg_segment_size"], 288);
        assert_eq!(
            j["kernels"][0]["metadata"]["args"][3]["value_kind"],
            "by_value"
        );
    }
}
