//! The code-object parser (`codeobj_parse` target) on real code objects: the test kernels
//! built by clang-19 for gfx90a and gfx942 (what `run.sh` seeds the fuzzer with), whole,
//! truncated at every 97th byte and with single bytes flipped across the ELF header,
//! program headers and notes. `fuzz_parse` must never panic.

#[test]
fn clang_code_objects_and_their_mutations_parse_without_panics() {
    assert!(
        test_kernels::toolchain_available(),
        "clang-19 and ld.lld-19 are needed (Debian packages clang-19, lld-19)"
    );
    let mut seeds = Vec::new();
    for t in ["gfx90a", "gfx942"] {
        for src in ["cl/vadd.cl", "cl/globals.cl", "hip/dims.hip"] {
            seeds.push(test_kernels::build(src, t).expect("clang-19 builds the kernel"));
        }
        seeds.push(
            test_kernels::build_with("cl/reduce.cl", t, &["-Xclang", "-mcode-object-version=4"])
                .expect("v4"),
        );
    }
    for elf in &seeds {
        assert_eq!(&elf[..4], b"\x7fELF");
        codeobj::fuzz_parse(elf);
        for n in (0..elf.len()).step_by(97) {
            codeobj::fuzz_parse(&elf[..n]);
        }
        let mut m = elf.clone();
        for i in (0..m.len().min(4096)).step_by(7) {
            let old = m[i];
            for x in [0x01, 0x80, 0xFF] {
                m[i] = old ^ x;
                codeobj::fuzz_parse(&m);
            }
            m[i] = old;
        }
    }
}
