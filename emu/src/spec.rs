//! Device strings: `emu[:ITEM[,ITEM...]]`.
//!
//! ```text
//! spec    = "emu" [ ":" item { "," item } ]
//! item    = preset [ "[" option { "," option } "]" ] [ "*" count ]
//! preset  = "mi300x" | "mi250x" | "mi210" | "rx7900xtx" | "rx9070xt"   (any case)
//! count   = 1..=64                        (GPUs of this kind, in order)
//! option  = "vram=" size                  (emulated VRAM capacity, e.g. 64M, 2G, 1048576)
//!         | "xnack=" ("on" | "off")       (the process's initial XNACK mode)
//!         | "bar=" size                   (the CPU-visible VRAM window: small BAR when < VRAM)
//!         | "smallbar"                    (bar=256M, a board without resizable BAR)
//! size    = digits [ "K" | "M" | "G" | "T" ] (binary units; a multiple of 4 KiB, >= 1 MiB)
//! ```
//!
//! A plain `emu` is one [`Preset::DEFAULT`] (MI300X). Examples: `emu:mi300x`,
//! `emu:mi250x*2,rx7900xtx`, `emu:mi210[vram=64M]*2`. Whitespace around items is ignored.
//!
//! `vram=` lowers (or raises) the capacity the emulated KFD enforces and publishes in
//! `mem_banks/0/size_in_bytes`, so that tests can exhaust VRAM quickly. `xnack=on` starts
//! the process with XNACK enabled; it is refused on boards that cannot enable it.
//! `bar=`/`smallbar` model a board whose CPU sees only part of its VRAM through the PCI BAR
//! (no resizable BAR): KFD reports the VRAM heap as FB_PRIVATE and refuses CPU-visible
//! VRAM allocations, so runtimes stage uploads through GTT. Example: `emu:mi210[smallbar]`.

use crate::presets::Preset;

/// The most GPUs one device string may describe (the kernel's `MAX_GPU_INSTANCE`).
pub const MAX_GPUS: usize = 64;

/// One GPU of a parsed device string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuSpec {
    /// The board (with `vram_size` already replaced by a `vram=` option).
    pub preset: Preset,
    /// `xnack=` option, if given.
    pub xnack: Option<bool>,
}

impl From<Preset> for GpuSpec {
    fn from(preset: Preset) -> Self {
        GpuSpec {
            preset,
            xnack: None,
        }
    }
}

/// Why a device string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The string does not start with `emu`.
    #[error(
        "device string {0:?} does not start with \"emu\" (expected emu[:PRESET[*N][,PRESET...]])"
    )]
    NotEmu(String),
    /// `emu:` with nothing after it, or an empty item between commas.
    #[error("empty preset name in {0:?}")]
    EmptyItem(String),
    /// A preset name that is not known.
    #[error("unknown preset {name:?}; known presets: {known}")]
    UnknownPreset {
        /// The name given.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// A count that is not a number in 1..=64.
    #[error("bad count {count:?} for preset {name:?}: expected a number from 1 to {MAX_GPUS}")]
    BadCount {
        /// The preset.
        name: String,
        /// The count text.
        count: String,
    },
    /// More than [`MAX_GPUS`] GPUs in total.
    #[error("{0} GPUs requested; at most {MAX_GPUS} are supported")]
    TooManyGpus(usize),
    /// An option that is not known or has a bad value.
    #[error("bad option {option:?} for preset {name:?}: {reason}")]
    BadOption {
        /// The preset.
        name: String,
        /// The option text.
        option: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// Unbalanced brackets or trailing text.
    #[error("malformed item {0:?}: expected PRESET[\\[OPTIONS\\]][*N]")]
    Malformed(String),
}

/// Parse a device string into the GPUs it describes, in order.
pub fn parse(spec: &str) -> Result<Vec<GpuSpec>, SpecError> {
    let s = spec.trim();
    let rest = match s.get(..3) {
        Some(head) if head.eq_ignore_ascii_case("emu") => &s[3..],
        _ => return Err(SpecError::NotEmu(spec.to_owned())),
    };
    if rest.trim().is_empty() {
        return Ok(vec![Preset::DEFAULT.into()]);
    }
    let Some(list) = rest.strip_prefix(':') else {
        return Err(SpecError::NotEmu(spec.to_owned()));
    };
    let mut out = Vec::new();
    for item in split_items(list).map_err(|()| SpecError::Malformed(list.to_owned()))? {
        let item = item.trim();
        if item.is_empty() {
            return Err(SpecError::EmptyItem(spec.to_owned()));
        }
        let (gpu, count) = parse_item(item)?;
        if out.len() + count > MAX_GPUS {
            return Err(SpecError::TooManyGpus(out.len() + count));
        }
        out.extend(std::iter::repeat_n(gpu, count));
    }
    Ok(out)
}

/// Split at commas that are not inside brackets.
fn split_items(list: &str) -> Result<Vec<&str>, ()> {
    let mut items = Vec::new();
    let mut depth = 0u32;
    let mut start = 0;
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.checked_sub(1).ok_or(())?,
            ',' if depth == 0 => {
                items.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(());
    }
    items.push(&list[start..]);
    Ok(items)
}

fn parse_item(item: &str) -> Result<(GpuSpec, usize), SpecError> {
    let name_end = item.find(['[', '*']).unwrap_or(item.len());
    let name = item[..name_end].trim();
    if name.is_empty() {
        return Err(SpecError::EmptyItem(item.to_owned()));
    }
    let preset = Preset::by_name(name).ok_or_else(|| SpecError::UnknownPreset {
        name: name.to_owned(),
        known: Preset::names().join(", "),
    })?;
    let mut gpu = GpuSpec::from(preset);
    let mut rest = &item[name_end..];
    let mut count: Option<usize> = None;
    let mut seen_options = false;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('[') {
            if seen_options {
                return Err(SpecError::Malformed(item.to_owned()));
            }
            seen_options = true;
            let close = r
                .find(']')
                .ok_or_else(|| SpecError::Malformed(item.to_owned()))?;
            for opt in r[..close].split(',') {
                apply_option(&mut gpu, name, opt.trim())?;
            }
            rest = &r[close + 1..];
        } else if let Some(r) = rest.strip_prefix('*') {
            if count.is_some() {
                return Err(SpecError::Malformed(item.to_owned()));
            }
            let end = r.find('[').unwrap_or(r.len());
            let text = r[..end].trim();
            let n: usize = text
                .parse()
                .ok()
                .filter(|n| (1..=MAX_GPUS).contains(n))
                .ok_or_else(|| SpecError::BadCount {
                    name: name.to_owned(),
                    count: text.to_owned(),
                })?;
            count = Some(n);
            rest = &r[end..];
        } else {
            return Err(SpecError::Malformed(item.to_owned()));
        }
    }
    Ok((gpu, count.unwrap_or(1)))
}

fn apply_option(gpu: &mut GpuSpec, name: &str, opt: &str) -> Result<(), SpecError> {
    let bad = |reason| SpecError::BadOption {
        name: name.to_owned(),
        option: opt.to_owned(),
        reason,
    };
    if opt.eq_ignore_ascii_case("smallbar") {
        gpu.preset.visible_vram_size = Some(Preset::SMALL_BAR);
        return Ok(());
    }
    let (key, value) = opt
        .split_once('=')
        .ok_or_else(|| bad("expected key=value or smallbar"))?;
    match key.trim().to_ascii_lowercase().as_str() {
        "vram" => {
            let size = parse_size(value.trim())
                .ok_or_else(|| bad("expected a size such as 64M, 2G or 2GiB"))?;
            if size < (1 << 20) || size % 4096 != 0 {
                return Err(bad(
                    "the VRAM size must be at least 1M and a multiple of 4K",
                ));
            }
            gpu.preset.vram_size = size;
        }
        "bar" => {
            let size =
                parse_size(value.trim()).ok_or_else(|| bad("expected a size such as 256M"))?;
            if size == 0 || size % 4096 != 0 {
                return Err(bad("the BAR size must be a non-zero multiple of 4K"));
            }
            gpu.preset.visible_vram_size = Some(size);
        }
        "xnack" => {
            gpu.xnack = Some(match value.trim().to_ascii_lowercase().as_str() {
                "on" | "1" => true,
                "off" | "0" => false,
                _ => return Err(bad("expected on or off")),
            });
        }
        _ => {
            return Err(bad(
                "unknown option (known: vram=SIZE, bar=SIZE, smallbar, xnack=on|off)",
            ))
        }
    }
    Ok(())
}

/// Parse `digits[K|M|G|T]` (binary units); `KiB`, `MiB`, `GiB`, `TiB` (and `KB`...)
/// mean the same.
pub fn parse_size(text: &str) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    let text = lower
        .strip_suffix("ib")
        .filter(|t| t.ends_with(['k', 'm', 'g', 't']))
        .or_else(|| {
            lower
                .strip_suffix('b')
                .filter(|t| t.ends_with(['k', 'm', 'g', 't']))
        })
        .unwrap_or(&lower);
    let (digits, shift) = match text.char_indices().last()? {
        (i, 'k' | 'K') => (&text[..i], 10),
        (i, 'm' | 'M') => (&text[..i], 20),
        (i, 'g' | 'G') => (&text[..i], 30),
        (i, 't' | 'T') => (&text[..i], 40),
        _ => (text, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    n.checked_mul(1u64 << shift)
}
