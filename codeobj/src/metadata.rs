//! The `NT_AMDGPU_METADATA` note (code object v3+): a msgpack map with `amdhsa.version`,
//! `amdhsa.target` and `amdhsa.kernels` (LLVM AMDGPUUsage, "Code Object V3 to V6
//! Metadata"). Decoded with `rmpv`; unknown keys are ignored, wrong types are errors.

use rmpv::Value;

use crate::Error;

/// An argument's `.value_kind`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ValueKind {
    /// `by_value`: the bytes are passed in the kernarg segment.
    ByValue,
    /// `global_buffer`: a global address.
    GlobalBuffer,
    /// `dynamic_shared_pointer`: an LDS address (OpenCL `__local` argument).
    DynamicSharedPointer,
    /// `sampler`.
    Sampler,
    /// `image`.
    Image,
    /// `pipe`.
    Pipe,
    /// `queue`.
    Queue,
    /// `hidden_global_offset_{x,y,z}` (dimension 0..2).
    HiddenGlobalOffset(u8),
    /// `hidden_none`: padding the runtime leaves alone.
    HiddenNone,
    /// `hidden_printf_buffer`.
    HiddenPrintfBuffer,
    /// `hidden_hostcall_buffer`.
    HiddenHostcallBuffer,
    /// `hidden_default_queue`.
    HiddenDefaultQueue,
    /// `hidden_completion_action`.
    HiddenCompletionAction,
    /// `hidden_multigrid_sync_arg`.
    HiddenMultigridSyncArg,
    /// `hidden_block_count_{x,y,z}` (v5+): workgroups per dimension.
    HiddenBlockCount(u8),
    /// `hidden_group_size_{x,y,z}` (v5+): work-group size per dimension.
    HiddenGroupSize(u8),
    /// `hidden_remainder_{x,y,z}` (v5+): size of the last, partial work-group.
    HiddenRemainder(u8),
    /// `hidden_grid_dims` (v5+).
    HiddenGridDims,
    /// `hidden_heap_v1` (v5+): the device-malloc heap.
    HiddenHeapV1,
    /// `hidden_dynamic_lds_size` (v5+).
    HiddenDynamicLdsSize,
    /// `hidden_private_base` (v5+): the private aperture base (high half).
    HiddenPrivateBase,
    /// `hidden_shared_base` (v5+): the shared (LDS) aperture base (high half).
    HiddenSharedBase,
    /// `hidden_queue_ptr` (v5+): the `amd_queue_t` address.
    HiddenQueuePtr,
    /// A kind this crate does not know.
    Other(String),
}

impl ValueKind {
    /// Parses a `.value_kind` string.
    pub fn parse(s: &str) -> ValueKind {
        let dim = |c: char| match c {
            'x' => Some(0u8),
            'y' => Some(1),
            'z' => Some(2),
            _ => None,
        };
        let with_dim = |prefix: &str, f: fn(u8) -> ValueKind| {
            let rest = s.strip_prefix(prefix)?;
            let mut cs = rest.chars();
            let d = dim(cs.next()?)?;
            cs.next().is_none().then(|| f(d))
        };
        if let Some(k) = with_dim("hidden_global_offset_", ValueKind::HiddenGlobalOffset)
            .or_else(|| with_dim("hidden_block_count_", ValueKind::HiddenBlockCount))
            .or_else(|| with_dim("hidden_group_size_", ValueKind::HiddenGroupSize))
            .or_else(|| with_dim("hidden_remainder_", ValueKind::HiddenRemainder))
        {
            return k;
        }
        match s {
            "by_value" => ValueKind::ByValue,
            "global_buffer" => ValueKind::GlobalBuffer,
            "dynamic_shared_pointer" => ValueKind::DynamicSharedPointer,
            "sampler" => ValueKind::Sampler,
            "image" => ValueKind::Image,
            "pipe" => ValueKind::Pipe,
            "queue" => ValueKind::Queue,
            "hidden_none" => ValueKind::HiddenNone,
            "hidden_printf_buffer" => ValueKind::HiddenPrintfBuffer,
            "hidden_hostcall_buffer" => ValueKind::HiddenHostcallBuffer,
            "hidden_default_queue" => ValueKind::HiddenDefaultQueue,
            "hidden_completion_action" => ValueKind::HiddenCompletionAction,
            "hidden_multigrid_sync_arg" => ValueKind::HiddenMultigridSyncArg,
            "hidden_grid_dims" => ValueKind::HiddenGridDims,
            "hidden_heap_v1" => ValueKind::HiddenHeapV1,
            "hidden_dynamic_lds_size" => ValueKind::HiddenDynamicLdsSize,
            "hidden_private_base" => ValueKind::HiddenPrivateBase,
            "hidden_shared_base" => ValueKind::HiddenSharedBase,
            "hidden_queue_ptr" => ValueKind::HiddenQueuePtr,
            other => ValueKind::Other(other.to_string()),
        }
    }

    /// Whether the runtime, not the caller, fills the argument.
    pub fn is_hidden(&self) -> bool {
        !matches!(
            self,
            ValueKind::ByValue
                | ValueKind::GlobalBuffer
                | ValueKind::DynamicSharedPointer
                | ValueKind::Sampler
                | ValueKind::Image
                | ValueKind::Pipe
                | ValueKind::Queue
        ) && !matches!(self, ValueKind::Other(s) if !s.starts_with("hidden_"))
    }

    /// The metadata spelling.
    pub fn name(&self) -> String {
        let xyz = |d: u8| ["x", "y", "z"].get(d as usize).copied().unwrap_or("?");
        match self {
            ValueKind::ByValue => "by_value".into(),
            ValueKind::GlobalBuffer => "global_buffer".into(),
            ValueKind::DynamicSharedPointer => "dynamic_shared_pointer".into(),
            ValueKind::Sampler => "sampler".into(),
            ValueKind::Image => "image".into(),
            ValueKind::Pipe => "pipe".into(),
            ValueKind::Queue => "queue".into(),
            ValueKind::HiddenGlobalOffset(d) => format!("hidden_global_offset_{}", xyz(*d)),
            ValueKind::HiddenNone => "hidden_none".into(),
            ValueKind::HiddenPrintfBuffer => "hidden_printf_buffer".into(),
            ValueKind::HiddenHostcallBuffer => "hidden_hostcall_buffer".into(),
            ValueKind::HiddenDefaultQueue => "hidden_default_queue".into(),
            ValueKind::HiddenCompletionAction => "hidden_completion_action".into(),
            ValueKind::HiddenMultigridSyncArg => "hidden_multigrid_sync_arg".into(),
            ValueKind::HiddenBlockCount(d) => format!("hidden_block_count_{}", xyz(*d)),
            ValueKind::HiddenGroupSize(d) => format!("hidden_group_size_{}", xyz(*d)),
            ValueKind::HiddenRemainder(d) => format!("hidden_remainder_{}", xyz(*d)),
            ValueKind::HiddenGridDims => "hidden_grid_dims".into(),
            ValueKind::HiddenHeapV1 => "hidden_heap_v1".into(),
            ValueKind::HiddenDynamicLdsSize => "hidden_dynamic_lds_size".into(),
            ValueKind::HiddenPrivateBase => "hidden_private_base".into(),
            ValueKind::HiddenSharedBase => "hidden_shared_base".into(),
            ValueKind::HiddenQueuePtr => "hidden_queue_ptr".into(),
            ValueKind::Other(s) => s.clone(),
        }
    }
}

/// One kernel argument (`.args` entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelArg {
    /// `.name`, when the compiler kept it.
    pub name: Option<String>,
    /// `.type_name`, when present.
    pub type_name: Option<String>,
    /// `.offset` in the kernarg segment.
    pub offset: u32,
    /// `.size` in bytes.
    pub size: u32,
    /// Alignment: v3+ metadata carries none, so this is the natural alignment clang lays
    /// the argument out with: the largest power of two no larger than the size (capped at
    /// 8) that divides the offset.
    pub align: u32,
    /// `.value_kind`.
    pub value_kind: ValueKind,
    /// `.address_space` (`global`, `local`, ...), for pointers.
    pub address_space: Option<String>,
    /// `.pointee_align` for `dynamic_shared_pointer`.
    pub pointee_align: Option<u32>,
    /// `.is_const`.
    pub is_const: bool,
}

impl KernelArg {
    /// A printable name: `.name`, else `arg<index>`.
    pub fn display_name(&self, index: usize) -> String {
        self.name.clone().unwrap_or_else(|| format!("arg{index}"))
    }
}

/// One `amdhsa.kernels` entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KernelMeta {
    /// `.name`.
    pub name: String,
    /// `.symbol` (the `.kd` symbol).
    pub symbol: String,
    /// `.args` in kernarg order.
    pub args: Vec<KernelArg>,
    /// `.kernarg_segment_size`.
    pub kernarg_segment_size: u32,
    /// `.kernarg_segment_align`.
    pub kernarg_segment_align: u32,
    /// `.group_segment_fixed_size` (static LDS bytes).
    pub group_segment_fixed_size: u32,
    /// `.private_segment_fixed_size` (static scratch bytes per work-item).
    pub private_segment_fixed_size: u32,
    /// `.wavefront_size`.
    pub wavefront_size: u32,
    /// `.sgpr_count`.
    pub sgpr_count: u32,
    /// `.vgpr_count`.
    pub vgpr_count: u32,
    /// `.agpr_count` (gfx90a/gfx94x accumulation registers).
    pub agpr_count: u32,
    /// `.sgpr_spill_count`.
    pub sgpr_spill_count: u32,
    /// `.vgpr_spill_count`.
    pub vgpr_spill_count: u32,
    /// `.max_flat_workgroup_size`.
    pub max_flat_workgroup_size: u32,
    /// `.uses_dynamic_stack`.
    pub uses_dynamic_stack: bool,
    /// `.reqd_workgroup_size`, when given.
    pub reqd_workgroup_size: Option<[u32; 3]>,
    /// `.workgroup_size_hint`, when given.
    pub workgroup_size_hint: Option<[u32; 3]>,
    /// `.language`.
    pub language: Option<String>,
    /// `.kind` (`normal`, `init`, `fini`).
    pub kind: Option<String>,
}

/// The whole note.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Metadata {
    /// `amdhsa.version` (major, minor): 1.1 = v4, 1.2 = v5, 1.3 = v6.
    pub version: (u32, u32),
    /// `amdhsa.target`.
    pub target: Option<String>,
    /// `amdhsa.kernels`.
    pub kernels: Vec<KernelMeta>,
}

fn err(what: impl Into<String>) -> Error {
    Error::Metadata(what.into())
}

fn map_get<'a>(m: &'a [(Value, Value)], key: &str) -> Option<&'a Value> {
    m.iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

fn as_u32(v: &Value, what: &str) -> Result<u32, Error> {
    v.as_u64()
        .and_then(|x| u32::try_from(x).ok())
        .ok_or_else(|| err(format!("{what}: expected an unsigned 32-bit integer")))
}

fn opt_u32(m: &[(Value, Value)], key: &str, ctx: &str) -> Result<Option<u32>, Error> {
    map_get(m, key)
        .map(|v| as_u32(v, &format!("{ctx}{key}")))
        .transpose()
}

fn opt_str(m: &[(Value, Value)], key: &str, ctx: &str) -> Result<Option<String>, Error> {
    map_get(m, key)
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .ok_or_else(|| err(format!("{ctx}{key}: expected a string")))
        })
        .transpose()
}

fn opt_bool(m: &[(Value, Value)], key: &str, ctx: &str) -> Result<bool, Error> {
    match map_get(m, key) {
        None => Ok(false),
        Some(v) => v
            .as_bool()
            .ok_or_else(|| err(format!("{ctx}{key}: expected a boolean"))),
    }
}

fn opt_dim3(m: &[(Value, Value)], key: &str, ctx: &str) -> Result<Option<[u32; 3]>, Error> {
    let Some(v) = map_get(m, key) else {
        return Ok(None);
    };
    let a = v
        .as_array()
        .filter(|a| a.len() == 3)
        .ok_or_else(|| err(format!("{ctx}{key}: expected 3 integers")))?;
    Ok(Some([
        as_u32(&a[0], key)?,
        as_u32(&a[1], key)?,
        as_u32(&a[2], key)?,
    ]))
}

fn natural_align(offset: u32, size: u32) -> u32 {
    let mut a = 1u32;
    while a < 8 && a * 2 <= size && offset % (a * 2) == 0 {
        a *= 2;
    }
    a
}

fn parse_arg(v: &Value, ctx: &str) -> Result<KernelArg, Error> {
    let m = v
        .as_map()
        .ok_or_else(|| err(format!("{ctx}: argument is not a map")))?;
    let offset = opt_u32(m, ".offset", ctx)?.ok_or_else(|| err(format!("{ctx}: no .offset")))?;
    let size = opt_u32(m, ".size", ctx)?.ok_or_else(|| err(format!("{ctx}: no .size")))?;
    let kind =
        opt_str(m, ".value_kind", ctx)?.ok_or_else(|| err(format!("{ctx}: no .value_kind")))?;
    offset
        .checked_add(size)
        .ok_or_else(|| err(format!("{ctx}: offset + size overflows")))?;
    Ok(KernelArg {
        name: opt_str(m, ".name", ctx)?,
        type_name: opt_str(m, ".type_name", ctx)?,
        offset,
        size,
        align: natural_align(offset, size),
        value_kind: ValueKind::parse(&kind),
        address_space: opt_str(m, ".address_space", ctx)?,
        pointee_align: opt_u32(m, ".pointee_align", ctx)?,
        is_const: opt_bool(m, ".is_const", ctx)?,
    })
}

fn parse_kernel(v: &Value, i: usize) -> Result<KernelMeta, Error> {
    let m = v
        .as_map()
        .ok_or_else(|| err(format!("amdhsa.kernels[{i}] is not a map")))?;
    let name = opt_str(m, ".name", "")?.ok_or_else(|| err(format!("kernel {i}: no .name")))?;
    let ctx = format!("kernel {name}: ");
    let symbol = opt_str(m, ".symbol", &ctx)?.ok_or_else(|| err(format!("{ctx}no .symbol")))?;
    let args = match map_get(m, ".args") {
        None => Vec::new(),
        Some(a) => a
            .as_array()
            .ok_or_else(|| err(format!("{ctx}.args is not an array")))?
            .iter()
            .enumerate()
            .map(|(j, a)| parse_arg(a, &format!("{ctx}arg {j}")))
            .collect::<Result<_, _>>()?,
    };
    let need = |k: &str| -> Result<u32, Error> {
        opt_u32(m, k, &ctx)?.ok_or_else(|| err(format!("{ctx}no {k}")))
    };
    let k = KernelMeta {
        kernarg_segment_size: need(".kernarg_segment_size")?,
        kernarg_segment_align: need(".kernarg_segment_align")?,
        group_segment_fixed_size: need(".group_segment_fixed_size")?,
        private_segment_fixed_size: need(".private_segment_fixed_size")?,
        wavefront_size: need(".wavefront_size")?,
        sgpr_count: need(".sgpr_count")?,
        vgpr_count: need(".vgpr_count")?,
        agpr_count: opt_u32(m, ".agpr_count", &ctx)?.unwrap_or(0),
        sgpr_spill_count: opt_u32(m, ".sgpr_spill_count", &ctx)?.unwrap_or(0),
        vgpr_spill_count: opt_u32(m, ".vgpr_spill_count", &ctx)?.unwrap_or(0),
        max_flat_workgroup_size: need(".max_flat_workgroup_size")?,
        uses_dynamic_stack: opt_bool(m, ".uses_dynamic_stack", &ctx)?,
        reqd_workgroup_size: opt_dim3(m, ".reqd_workgroup_size", &ctx)?,
        workgroup_size_hint: opt_dim3(m, ".workgroup_size_hint", &ctx)?,
        language: opt_str(m, ".language", &ctx)?,
        kind: opt_str(m, ".kind", &ctx)?,
        name,
        symbol,
        args,
    };
    if let Some(a) = k
        .args
        .iter()
        .find(|a| a.offset + a.size > k.kernarg_segment_size)
    {
        return Err(err(format!(
            "{ctx}argument at offset {} ({} bytes) lies outside the {}-byte kernarg segment",
            a.offset, a.size, k.kernarg_segment_size
        )));
    }
    if !k.kernarg_segment_align.is_power_of_two() {
        return Err(err(format!(
            "{ctx}.kernarg_segment_align {} is not a power of two",
            k.kernarg_segment_align
        )));
    }
    Ok(k)
}

/// Decodes the msgpack descriptor of an `NT_AMDGPU_METADATA` note.
pub fn parse(desc: &[u8]) -> Result<Metadata, Error> {
    let mut rd = desc;
    // The note is a few levels deep; bound recursion on hostile input.
    let v = rmpv::decode::read_value_with_max_depth(&mut rd, 16)
        .map_err(|e| err(format!("msgpack: {e}")))?;
    let m = v
        .as_map()
        .ok_or_else(|| err("the note is not a msgpack map"))?;
    let version = match map_get(m, "amdhsa.version") {
        Some(Value::Array(a)) if a.len() == 2 => (
            as_u32(&a[0], "amdhsa.version")?,
            as_u32(&a[1], "amdhsa.version")?,
        ),
        _ => return Err(err("amdhsa.version: expected [major, minor]")),
    };
    let target = opt_str(m, "amdhsa.target", "")?;
    let kernels = match map_get(m, "amdhsa.kernels") {
        None => Vec::new(),
        Some(k) => k
            .as_array()
            .ok_or_else(|| err("amdhsa.kernels is not an array"))?
            .iter()
            .enumerate()
            .map(|(i, k)| parse_kernel(k, i))
            .collect::<Result<_, _>>()?,
    };
    Ok(Metadata {
        version,
        target,
        kernels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hidden_kind_round_trips() {
        for s in [
            "by_value",
            "global_buffer",
            "dynamic_shared_pointer",
            "hidden_global_offset_x",
            "hidden_global_offset_z",
            "hidden_none",
            "hidden_printf_buffer",
            "hidden_hostcall_buffer",
            "hidden_default_queue",
            "hidden_completion_action",
            "hidden_multigrid_sync_arg",
            "hidden_block_count_y",
            "hidden_group_size_z",
            "hidden_remainder_x",
            "hidden_grid_dims",
            "hidden_heap_v1",
            "hidden_dynamic_lds_size",
            "hidden_private_base",
            "hidden_shared_base",
            "hidden_queue_ptr",
        ] {
            let k = ValueKind::parse(s);
            assert!(!matches!(k, ValueKind::Other(_)), "{s}");
            assert_eq!(k.name(), s);
            assert_eq!(k.is_hidden(), s.starts_with("hidden_"), "{s}");
        }
        assert_eq!(
            ValueKind::parse("hidden_block_count_w"),
            ValueKind::Other("hidden_block_count_w".into())
        );
        assert!(ValueKind::parse("hidden_new_thing").is_hidden());
    }

    #[test]
    fn alignment_is_natural() {
        assert_eq!(natural_align(0, 8), 8);
        assert_eq!(natural_align(24, 4), 4);
        assert_eq!(natural_align(44, 2), 2);
        assert_eq!(natural_align(12, 16), 4);
        assert_eq!(natural_align(3, 1), 1);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(parse(&[]).is_err());
        assert!(parse(&[0x91, 0x01]).is_err());
        assert!(parse(&[0xdf, 0xff, 0xff, 0xff, 0xff]).is_err());
        // 100 nested arrays exceed the depth bound.
        assert!(parse(&[0x91; 100]).is_err());
    }
}
