//! Decode (and print) throughput over the `.text` of every test kernel:
//! `cargo run --release -p amdgpu-isa --example decode_speed`. Prints the median of 15 runs.

use amdgpu_isa::{decode, Target};
use object::{Object, ObjectSection};
use std::time::Instant;

fn main() {
    let dir = test_kernels::source_dir().join("cl");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("test-kernels/cl")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".cl"))
        .collect();
    names.sort();
    let mut words = Vec::new();
    for n in &names {
        let elf = test_kernels::build(&format!("cl/{n}"), "gfx942").expect("kernel builds");
        let f = object::File::parse(&*elf).expect("ELF");
        let t = f.section_by_name(".text").expect(".text");
        let d = t.data().expect("data");
        words.extend(
            d.chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        );
    }
    let count = |print: bool| {
        let mut n = 0usize;
        let mut i = 0;
        let mut s = String::new();
        while i < words.len() {
            let step = match decode(&words[i..], Target::Gfx942) {
                Ok(inst) => {
                    if print {
                        use std::fmt::Write;
                        s.clear();
                        let _ = write!(s, "{inst}");
                    }
                    std::hint::black_box(&inst);
                    usize::from(inst.len)
                }
                Err(_) => 1,
            };
            n += 1;
            i += step;
        }
        n
    };
    for (what, print) in [("decode", false), ("decode+print", true)] {
        let mut ns = Vec::new();
        let mut insts = 0;
        for _ in 0..15 {
            let t = Instant::now();
            insts = count(print);
            ns.push(t.elapsed().as_nanos() as f64 / insts as f64);
        }
        ns.sort_by(|a, b| a.total_cmp(b));
        println!(
            "{what}: {insts} instructions, median {:.1} ns/instruction",
            ns[7]
        );
    }
}
