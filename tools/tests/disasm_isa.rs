//! `kfdrt disasm --engine isa`: code objects, hex words and usage errors.

use std::path::PathBuf;
mod common;

use common::disasm;

/// A scratch file under cargo's per-test temporary directory, removed on drop.
struct Scratch(PathBuf);
impl Scratch {
    fn new(name: &str, bytes: &[u8]) -> Self {
        let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("{}-{name}", std::process::id()));
        std::fs::write(&p, bytes).expect("write scratch file");
        Scratch(p)
    }
    fn path(&self) -> &str {
        self.0.to_str().expect("utf-8 path")
    }
}
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn code_object_is_listed_with_labels_like_objdump() {
    if !test_kernels::toolchain_available() {
        eprintln!("SKIP: clang-19/ld.lld-19 not installed");
        return;
    }
    for gfx in ["gfx90a", "gfx942"] {
        let elf = test_kernels::build("cl/vadd.cl", gfx).expect("vadd builds");
        let f = Scratch::new(&format!("vadd-{gfx}.co"), &elf);
        let o = disasm("isa", gfx, &[f.path()]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{out}\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(out.contains(" <vadd>:"), "{out}");
        assert!(out.contains("global_load_dword"), "{out}");
        assert!(
            out.lines().any(|l| l.trim_start().starts_with("s_endpgm")),
            "{out}"
        );
        // every instruction line carries its address and words
        assert!(
            out.lines()
                .filter(|l| l.starts_with('\t'))
                .all(|l| l.contains("// 0000")),
            "{out}"
        );
    }
}

#[test]
fn hex_words_decode_and_a_truncated_tail_exits_1() {
    let f = Scratch::new("words.txt", b"0x02040201 bf810000 # v_add_f32, s_endpgm\n");
    let o = disasm("isa", "gfx942", &["--hex", f.path()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    assert!(lines[0].starts_with("v_add_f32_e32 v2, s1, v1"), "{out}");
    assert!(lines[1].starts_with("s_endpgm"), "{out}");

    // a VOP3 first dword without its second one
    let g = Scratch::new("trunc.txt", b"d1010000\n");
    let o = disasm("isa", "gfx90a", &["--hex", g.path()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains(".long 0xd1010000") && out.contains("truncated"),
        "{out}"
    );
}

#[test]
fn unknown_target_is_a_usage_error() {
    let f = Scratch::new("one.bin", &0xBF81_0000u32.to_le_bytes());
    let o = disasm("isa", "gfx1100", &[f.path()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--gfx must be"));
    let o = disasm("isa", "gfx942", &[f.path()]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("s_endpgm"));
}
