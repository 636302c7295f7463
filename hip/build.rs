//! Links `libamdhip64.so.5` with Debian's soname and symbol version nodes.
//!
//! `abi/libamdhip64.so.5.symbols` lists every symbol Debian's HIP 5.2 library exports with
//! the version node it puts it in (`readelf --dyn-syms`). rustc passes its own anonymous
//! version script, which a second named script cannot add versions to, so the nodes are
//! defined by an (empty) version script and each symbol we export is bound to its node
//! with an assembler `.symver name, name@@@node` directive.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The version node of kfdrt-only exports.
const KFDRT_NODE: &str = "KFDRT_HIP_0";

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let table = dir.join("abi/libamdhip64.so.5.symbols");
    println!("cargo:rerun-if-changed={}", table.display());
    println!("cargo:rerun-if-changed=src");

    let mut node_of = BTreeMap::new();
    let mut nodes: Vec<String> = Vec::new();
    for line in std::fs::read_to_string(&table)
        .expect("symbol table")
        .lines()
    {
        let mut it = line.split_whitespace();
        let (Some(name), Some(node)) = (it.next(), it.next()) else {
            continue;
        };
        node_of.insert(name.to_string(), node.to_string());
        if !nodes.iter().any(|n| n == node) {
            nodes.push(node.to_string());
        }
    }
    // Node order is version order: hip_4.2 < hip_4.3 < ... < hip_5.2.
    nodes.sort_by_key(|n| {
        let v = n.trim_start_matches("hip_");
        let mut p = v.split('.').map(|x| x.parse::<u32>().unwrap_or(0));
        (p.next().unwrap_or(0), p.next().unwrap_or(0))
    });

    let mut exported = Vec::new();
    scan(&dir.join("src"), &mut exported);
    exported.sort();
    exported.dedup();

    let mut asm = String::from("core::arch::global_asm!(\n");
    for name in &exported {
        // kfdrt's own additions (the layout table for the ABI test) get their own node.
        let node = match node_of.get(name) {
            Some(n) => n.as_str(),
            None if name.starts_with("kfdrt_") => KFDRT_NODE,
            None => panic!("{name} is exported but not in Debian's libamdhip64.so.5 table"),
        };
        writeln!(asm, "    \".symver {name}, {name}@@@{node}\",").expect("write");
    }
    asm.push_str(");\n");
    std::fs::write(out.join("symver.rs"), asm).expect("write symver.rs");

    let mut map = String::new();
    let mut prev: Option<&str> = None;
    for n in &nodes {
        match prev {
            None => writeln!(map, "{n} {{ }};"),
            Some(p) => writeln!(map, "{n} {{ }} {p};"),
        }
        .expect("write");
        prev = Some(n);
    }
    writeln!(map, "{KFDRT_NODE} {{ }};").expect("write");
    let map_path = out.join("libamdhip64.map");
    std::fs::write(&map_path, map).expect("write version script");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libamdhip64.so.5");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        map_path.display()
    );
}

/// Names of `extern "C" fn`s defined under `src/` (the exported C API), including the
/// names listed in the `not_supported!(...)` invocation.
fn scan(dir: &Path, out: &mut Vec<String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            scan(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&p).expect("read source");
            // Exported: `pub [unsafe] extern "C" fn` (a private `extern "C" fn` is a
            // helper with the C calling convention, for tail calls).
            let mut at = 0;
            while let Some(i) = text[at..].find("extern \"C\" fn ") {
                let before = &text[..at + i];
                at += i + "extern \"C\" fn ".len();
                if !(before.ends_with("pub ") || before.ends_with("pub unsafe ")) {
                    continue;
                }
                let name: String = text[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.push(name);
                }
            }
            // Functions defined through `not_supported!(a, b, ...)`.
            if let Some(i) = text.find("not_supported!(\n") {
                let body = &text[i + "not_supported!(\n".len()..];
                let end = body.find(");").unwrap_or(body.len());
                out.extend(
                    body[..end]
                        .split(',')
                        .map(|n| n.trim().to_string())
                        .filter(|n| !n.is_empty()),
                );
            }
        }
    }
}
