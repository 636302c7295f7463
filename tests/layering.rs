//! The module layering of `src/` (crate docs, "# Layering"): reads the layer list from
//! `src/lib.rs`, collects every `crate::` path of every source file (comments, string
//! literals and `#[cfg(test)]` modules left out), and checks that a module of the lower
//! layers uses only modules listed before it. A lower module that starts using an upper
//! one (say `signal` using `device::DeviceInner` again) fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Text of `s` with comments, string and char literals blanked (newlines kept).
fn strip(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == b'r' && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#')) {
            // Raw string r"..." / r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c as char);
                i += 1;
                continue;
            }
            j += 1;
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            while j < b.len() && !b[j..].starts_with(&close) {
                j += 1;
            }
            i = j + close.len();
            out.push_str("\"\"");
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            let end = if b.get(i + 1) == Some(&b'\\') {
                (i + 2..b.len()).find(|&k| b[k] == b'\'')
            } else if b.get(i + 2) == Some(&b'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(e) => {
                    out.push_str("' '");
                    i = e + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            // Keep multi-byte characters whole.
            let ch = s[i..].chars().next().unwrap_or(' ');
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// `s` without its test modules (`#[cfg(test)] mod NAME { ... }`, or a `cfg(all(test,
/// ...))`): test code may use anything.
fn without_test_modules(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(p) = rest.find("#[cfg(") {
        let attr_end = rest[p..].find(")]").map_or(rest.len(), |e| p + e + 2);
        let attr = &rest[p..attr_end];
        let after = &rest[attr_end..];
        let is_test = attr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| w == "test");
        if !is_test || !after.trim_start().starts_with("mod ") {
            out.push_str(&rest[..attr_end]);
            rest = after;
            continue;
        }
        out.push_str(&rest[..p]);
        let Some(open) = after.find('{') else {
            rest = "";
            break;
        };
        let mut depth = 0usize;
        let mut end = after.len();
        for (k, ch) in after[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

fn ident_at(s: &str) -> &str {
    let n = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..n]
}

/// The first segments of the paths in a `{ ... }` group starting at `s[0] == '{'`.
fn group_heads(s: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut at_item = true;
    for (k, ch) in s.char_indices() {
        match ch {
            '{' => {
                depth += 1;
                at_item = depth == 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => at_item = true,
            c if at_item && depth == 1 && (c.is_ascii_alphanumeric() || c == '_') => {
                heads.push(ident_at(&s[k..]).to_string());
                at_item = false;
            }
            _ => {}
        }
    }
    heads
}

/// Every `crate::X` of `code`: X, or the heads of a `crate::{...}` group.
fn crate_refs(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (p, _) in code.match_indices("crate::") {
        // Not `kfdrt_crate::` or similar.
        if code[..p]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            continue;
        }
        let rest = &code[p + "crate::".len()..];
        if rest.starts_with('{') {
            out.extend(group_heads(rest));
        } else {
            let id = ident_at(rest);
            if !id.is_empty() {
                out.insert(id.to_string());
            }
        }
    }
    out
}

/// Module name -> its source files (`src/x.rs`, or `src/x/**.rs`).
fn modules() -> BTreeMap<String, Vec<PathBuf>> {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("read src dir") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                walk(&p, files);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let mut m: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for e in std::fs::read_dir(src()).expect("read src") {
        let p = e.expect("dir entry").path();
        let name = p
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        if p.is_dir() {
            let mut files = Vec::new();
            walk(&p, &mut files);
            if !files.is_empty() {
                m.entry(name).or_default().extend(files);
            }
        } else if p.extension().is_some_and(|x| x == "rs") && name != "lib" {
            m.entry(name).or_default().push(p);
        }
    }
    m
}

/// The layer list of the crate docs: (lower modules in order, top-layer modules).
fn documented_layers(lib: &str) -> (Vec<String>, BTreeSet<String>) {
    let docs: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.trim())
        .collect();
    let start = docs
        .iter()
        .position(|l| *l == "# Layering")
        .expect("src/lib.rs docs have a \"# Layering\" section");
    let mut lower = Vec::new();
    let mut top = BTreeSet::new();
    let mut in_top = false;
    let mut in_list = false;
    for l in &docs[start + 1..] {
        if l.starts_with('#') {
            break;
        }
        if l.starts_with("Top layer") {
            in_top = true;
        } else if l.starts_with(|c: char| c.is_ascii_digit()) {
            in_list = true;
        } else if l.is_empty() {
            in_list = false;
        }
        if !(in_list || in_top) {
            continue;
        }
        // Module names are the `backticked` lower-case identifiers of the list.
        for (i, part) in l.split('`').enumerate() {
            if i % 2 == 1
                && !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit())
            {
                if in_top {
                    top.insert(part.to_string());
                } else {
                    lower.push(part.to_string());
                }
            }
        }
    }
    (lower, top)
}

/// Names the crate root re-exports (`pub use module::{A, B}`), mapped to the module.
fn root_names(lib: &str) -> BTreeMap<String, String> {
    let code = strip(lib);
    let mut m = BTreeMap::new();
    for stmt in code.split(';') {
        let s = stmt.trim();
        let Some(path) = s.strip_prefix("pub use ") else {
            continue;
        };
        let module = ident_at(path).to_string();
        let tail = &path[module.len()..];
        let tail = tail.strip_prefix("::").unwrap_or(tail);
        let names: Vec<String> = if tail.starts_with('{') {
            group_heads(tail)
        } else {
            vec![ident_at(tail).to_string()]
        };
        for n in names {
            m.insert(n, module.clone());
        }
    }
    m
}

#[test]
fn lower_layers_never_use_upper_ones() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).expect("read src/lib.rs");
    let (lower, top) = documented_layers(&lib);
    let mods = modules();
    assert!(
        lower.len() >= 10,
        "the layer list names the lower modules: {lower:?}"
    );
    // Every module is in exactly one place of the list.
    for m in mods.keys() {
        let n = lower.iter().filter(|x| *x == m).count() + usize::from(top.contains(m));
        assert_eq!(
            n, 1,
            "module `{m}` must appear once in the crate docs' layer list"
        );
    }
    for m in lower.iter().chain(&top) {
        assert!(
            mods.contains_key(m),
            "the layer list names `{m}`, which is no module"
        );
    }
    let roots = root_names(&lib);
    let rank: BTreeMap<&str, usize> = lower
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    let mut bad = Vec::new();
    for (i, m) in lower.iter().enumerate() {
        for f in &mods[m] {
            let text = std::fs::read_to_string(f).expect("read source");
            let code = without_test_modules(&strip(&text));
            for r in crate_refs(&code) {
                let target = if mods.contains_key(&r) {
                    r.clone()
                } else if let Some(t) = roots.get(&r) {
                    t.clone()
                } else {
                    continue; // a macro or a name of the root itself
                };
                if target == *m {
                    continue;
                }
                match rank.get(target.as_str()) {
                    Some(&j) if j < i => {}
                    _ => bad.push(format!(
                        "{} uses crate::{r} (module `{target}`), not listed before `{m}`",
                        f.strip_prefix(src()).unwrap_or(f).display()
                    )),
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "lower layers must use only modules listed before them (src/lib.rs, # Layering):\n{}",
        bad.join("\n")
    );
}

/// The checker itself sees what it must: grouped imports, root re-exports, and not
/// comments, strings or test modules.
#[test]
fn the_reference_scanner_sees_paths_and_skips_comments_strings_and_tests() {
    let code = r#"
use crate::{error::Error, sync::lock, Device};
// use crate::stream::Stream;
/* crate::event */
let s = "crate::managed";
let c = '{';
fn f(x: &crate::devcore::Gpu) {}
#[cfg(all(test, feature = "emulator"))]
mod tests {
    use crate::vmm::Registry;
    fn g() { let _ = '}'; }
}
fn h() -> crate::Result<()> { Ok(()) }
"#;
    let refs = crate_refs(&without_test_modules(&strip(code)));
    let want: BTreeSet<String> = ["error", "sync", "Device", "devcore", "Result"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(refs, want);
    let roots = root_names("pub use device::Device;\npub use error::{Error, Result};\n");
    assert_eq!(roots.get("Device").map(String::as_str), Some("device"));
    assert_eq!(roots.get("Result").map(String::as_str), Some("error"));
}
