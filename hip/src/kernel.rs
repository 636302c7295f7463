//! Kernels: the registration path hipcc-compiled programs use (`__hipRegisterFatBinary`,
//! `__hipRegisterFunction`, `__hipRegisterVar`, `__hipUnregisterFatBinary`, the
//! `<<<>>>` call configuration and `hipLaunchKernel`) and the module API
//! (`hipModuleLoad*`, `hipModuleGetFunction`, `hipModuleLaunchKernel`,
//! `hipFuncGetAttributes`), over kfdrt's [`kfdrt::Module`] / [`kfdrt::Kernel`] /
//! [`kfdrt::KernelArgs`] / [`kfdrt::Stream::launch`].
//!
//! The protocol (clang `CGCUDANV.cpp` for HIP, ROCm/clr `hipamd/src/hip_platform.cpp`):
//! a static constructor in the program calls `__hipRegisterFatBinary` with a wrapper
//! `{ u32 magic = 0x48495046 "HIPF", u32 version = 1, void *bundle, void *unused }` whose
//! bundle is a clang offload bundle in `.hip_fatbin`; the returned handle is passed to one
//! `__hipRegisterFunction` per kernel (host stub address -> mangled device name) and to
//! `__hipUnregisterFatBinary` at exit. A `<<<g, b, s, q>>>` launch pushes the
//! configuration, the stub pops it and calls `hipLaunchKernel(stub, g, b, args, s, q)`
//! where `args[i]` points at the i-th argument's value. As in CLR, a code object is loaded
//! on a GPU at the first launch there, not at registration (registration runs before
//! `main`, where no device need be opened).

use crate::api::{device, out, ret, stream, Hip};
use crate::error::*;
use crate::handles::Registry;
use kfdrt::codeobj::ValueKind;
use kfdrt::{Dim3, Kernel, KernelArgs, Module};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// `dim3` / `uint3` of the HIP headers.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct dim3 {
    /// x.
    pub x: u32,
    /// y.
    pub y: u32,
    /// z.
    pub z: u32,
}

impl dim3 {
    /// (x | y << 32, z): how the SysV ABI passes a `dim3` by value (two registers), so
    /// that comparing it is two compares.
    #[inline(always)]
    fn packed(self) -> (u64, u32) {
        (u64::from(self.x) | u64::from(self.y) << 32, self.z)
    }
}

/// `hipFuncAttributes` (5.2 header field order).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipFuncAttributes {
    /// Code object version times 10.
    pub binaryVersion: c_int,
    /// Not modelled: 0.
    pub cacheModeCA: c_int,
    /// Not modelled: 0.
    pub constSizeBytes: usize,
    /// Private (scratch) bytes per work-item.
    pub localSizeBytes: usize,
    /// LDS a launch may add dynamically: the GPU's LDS minus the static size.
    pub maxDynamicSharedSizeBytes: c_int,
    /// `.max_flat_workgroup_size`.
    pub maxThreadsPerBlock: c_int,
    /// VGPRs used.
    pub numRegs: c_int,
    /// Not modelled: 0.
    pub preferredShmemCarveout: c_int,
    /// Code object version times 10 (as CLR reports it).
    pub ptxVersion: c_int,
    /// Static LDS bytes.
    pub sharedSizeBytes: usize,
}

/// The fat binary wrapper's magic, "HIPF" (clr `hip_fatbin.h` `__hipFatMAGIC2`).
pub const HIP_FAT_MAGIC: u32 = 0x4849_5046;

/// A registered fat binary: its offload bundle (copied out of the program) and the
/// module loaded from it on each GPU so far.
struct FatBinary {
    bundle: Vec<u8>,
    /// Per GPU index: the loaded module, or why it cannot be loaded.
    modules: Mutex<HashMap<usize, Result<Module, hipError_t>>>,
}

/// A kernel registered by its host stub.
struct HostFunction {
    fatbin: usize,
    name: String,
    /// Per GPU index, resolved at the first launch there.
    kernels: Mutex<HashMap<usize, Kernel>>,
}

/// A `hipFunction_t`: a kernel of a `hipModuleLoad*`ed module.
struct ModuleFunction {
    module: usize,
    kernel: Kernel,
}

static FATBINS: Registry<FatBinary> = Registry::new(3);
static HOST_FUNCTIONS: Mutex<Option<HashMap<usize, Arc<HostFunction>>>> = Mutex::new(None);
static MODULES: Registry<Module> = Registry::new(4);
static FUNCTIONS: Registry<ModuleFunction> = Registry::new(5);
/// Modules of unregistered fat binaries: kernels may still run (HIP does not make a
/// program synchronize before exit or `dlclose`), so their code stays mapped.
static RETIRED: Mutex<Vec<Module>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---- raw images -------------------------------------------------------------------------

/// Reads a little-endian u64 at `p + off`.
///
/// # Safety
/// `p + off .. p + off + 8` must be readable.
unsafe fn u64_at(p: *const u8, off: usize) -> u64 {
    // SAFETY: the caller guarantees the 8 bytes are readable; unaligned read.
    u64::from_le(unsafe { (p.add(off) as *const u64).read_unaligned() })
}

/// Length of the clang offload bundle at `p` (the end of its furthest entry), read from
/// its header (LLVM `OffloadBundler.cpp`: magic, u64 count, then per entry u64 offset,
/// u64 size, u64 ID length, ID). `None` when the header is implausible.
///
/// # Safety
/// `p` must point at a complete bundle.
unsafe fn bundle_len(p: *const u8) -> Option<usize> {
    let magic = kfdrt::codeobj::bundle::BUNDLE_MAGIC;
    // SAFETY: the magic's bytes are the first of the bundle the caller passes.
    let head = unsafe { std::slice::from_raw_parts(p, magic.len()) };
    if head != magic {
        return None;
    }
    // SAFETY: the count follows the magic in the header.
    let n = unsafe { u64_at(p, magic.len()) };
    if n == 0 || n > 1024 {
        return None;
    }
    let mut pos = magic.len() + 8;
    let mut end = pos;
    for _ in 0..n {
        // SAFETY: entry headers follow one another inside the bundle header.
        let (off, size, id_len) =
            unsafe { (u64_at(p, pos), u64_at(p, pos + 8), u64_at(p, pos + 16)) };
        if id_len > 4096 || off > 1 << 40 || size > 1 << 40 {
            return None;
        }
        pos += 24 + id_len as usize;
        end = end.max(pos).max((off + size) as usize);
    }
    Some(end)
}

/// Length of the ELF64 image at `p`: the furthest of its section headers and section
/// contents. `None` when it is not a 64-bit little-endian ELF.
///
/// # Safety
/// `p` must point at a complete ELF image.
unsafe fn elf_len(p: *const u8) -> Option<usize> {
    // SAFETY: e_ident (16 bytes) starts every ELF file.
    let ident = unsafe { std::slice::from_raw_parts(p, 16) };
    if &ident[..4] != b"\x7fELF" || ident[4] != 2 || ident[5] != 1 {
        return None;
    }
    // SAFETY: the 64-byte ELF64 header (e_shoff at 0x28, e_shentsize/e_shnum at 0x3a/0x3c,
    // e_phoff at 0x20, e_phentsize/e_phnum at 0x36/0x38) is part of the image.
    let (shoff, phoff, w) = unsafe {
        (
            u64_at(p, 0x28),
            u64_at(p, 0x20),
            u64_at(p, 0x36), // phentsize, phnum, shentsize, shnum as four u16
        )
    };
    let (phentsize, phnum) = (w & 0xffff, w >> 16 & 0xffff);
    let (shentsize, shnum) = (w >> 32 & 0xffff, w >> 48 & 0xffff);
    if shoff > 1 << 40 || phoff > 1 << 40 || (shnum > 0 && shentsize < 64) {
        return None;
    }
    let mut end = (shoff + shentsize * shnum)
        .max(phoff + phentsize * phnum)
        .max(64);
    for i in 0..shnum {
        let sh = (shoff + i * shentsize) as usize;
        // SAFETY: section header `i` lies inside the section header table of the image.
        let (kind, off, size) = unsafe {
            (
                u64_at(p, sh + 4) as u32,
                u64_at(p, sh + 0x18),
                u64_at(p, sh + 0x20),
            )
        };
        const SHT_NOBITS: u32 = 8;
        if kind != SHT_NOBITS && off < 1 << 40 && size < 1 << 40 {
            end = end.max(off + size);
        }
    }
    Some(end as usize)
}

/// Whether `bytes` starts as an ELF or an offload bundle (plain or compressed). CLR 5.2
/// fails anything else with hipErrorInvalidKernelFile (a malformed ELF or bundle:
/// hipErrorInvalidImage).
fn is_code_object(bytes: &[u8]) -> bool {
    use kfdrt::codeobj::bundle::{BUNDLE_MAGIC, COMPRESSED_BUNDLE_MAGIC};
    bytes.starts_with(b"\x7fELF")
        || bytes.starts_with(BUNDLE_MAGIC)
        || bytes.starts_with(COMPRESSED_BUNDLE_MAGIC)
}

/// The bytes of the code object or bundle at `image`.
///
/// # Safety
/// `image` must point at a complete ELF or offload bundle.
unsafe fn image_bytes<'a>(image: *const c_void) -> Result<&'a [u8], hipError_t> {
    if image.is_null() {
        return Err(hipErrorInvalidValue);
    }
    let p = image as *const u8;
    // SAFETY: the first 4 bytes of an image of either kind are readable.
    let first = unsafe { std::slice::from_raw_parts(p, 4) };
    // SAFETY: the caller's image is complete, so its headers are readable.
    let len = unsafe {
        if first == b"\x7fELF" {
            elf_len(p)
        } else if first == &kfdrt::codeobj::bundle::BUNDLE_MAGIC[..4] {
            bundle_len(p)
        } else {
            return Err(hipErrorInvalidKernelFile);
        }
    }
    .ok_or(hipErrorInvalidImage)?;
    // SAFETY: the image is `len` bytes long by its own headers.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

// ---- registration -----------------------------------------------------------------------

/// `__hipRegisterFatBinary`: copies the wrapper's offload bundle and returns a handle for
/// `__hipRegisterFunction`. A bad wrapper still gets a handle (registration cannot fail
/// in the ABI); launching its kernels reports `hipErrorInvalidImage`.
#[no_mangle]
pub unsafe extern "C" fn __hipRegisterFatBinary(data: *const c_void) -> *mut *mut c_void {
    let bundle = (|| {
        if data.is_null() {
            return None;
        }
        let w = data as *const u32;
        // SAFETY: `data` is the program's `__CudaFatBinaryWrapper`: u32 magic, u32 version,
        // then the bundle pointer at byte 8.
        let (magic, version, bin) = unsafe {
            (
                w.read_unaligned(),
                w.add(1).read_unaligned(),
                (data as *const *const c_void).add(1).read_unaligned(),
            )
        };
        if magic != HIP_FAT_MAGIC || version != 1 || bin.is_null() {
            return None;
        }
        // SAFETY: the wrapper points at the bundle hipcc placed in `.hip_fatbin`.
        let p = bin as *const u8;
        let len = unsafe { bundle_len(p) }?;
        // SAFETY: as above, `len` bytes by the bundle's own header.
        Some(unsafe { std::slice::from_raw_parts(p, len) }.to_vec())
    })();
    FATBINS
        .insert(FatBinary {
            bundle: bundle.unwrap_or_default(),
            modules: Mutex::new(HashMap::new()),
        })
        // A full registry (a million fat binaries) leaves the kernels unregistered.
        .unwrap_or(0) as *mut *mut c_void
}

/// `__hipRegisterFunction`: host stub `host_function` launches `device_name` of the fat
/// binary `modules`.
#[no_mangle]
pub unsafe extern "C" fn __hipRegisterFunction(
    modules: *mut *mut c_void,
    host_function: *const c_void,
    device_function: *mut c_char,
    device_name: *const c_char,
    _thread_limit: c_uint,
    _tid: *mut c_void,
    _bid: *mut c_void,
    _block_dim: *mut dim3,
    _grid_dim: *mut dim3,
    _wsize: *mut c_int,
) {
    let name = if device_name.is_null() {
        device_function as *const c_char
    } else {
        device_name
    };
    if name.is_null() || host_function.is_null() || FATBINS.get(modules as usize).is_none() {
        return;
    }
    // SAFETY: a NUL-terminated name from the program's registration code.
    let name = unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned();
    lock(&HOST_FUNCTIONS)
        .get_or_insert_with(HashMap::new)
        .insert(
            host_function as usize,
            Arc::new(HostFunction {
                fatbin: modules as usize,
                name,
                kernels: Mutex::new(HashMap::new()),
            }),
        );
}

/// A `__device__`/`__constant__` variable registered by its host shadow's address.
struct Var {
    fatbin: usize,
    name: String,
    size: usize,
}

static VARS: Mutex<Option<HashMap<usize, Var>>> = Mutex::new(None);

/// `__hipRegisterVar`: the host shadow `var` of device variable `device_var` (`size`
/// bytes) of fat binary `modules`, for the symbol API (`hipGetSymbolAddress`,
/// `hipMemcpyToSymbol`...). Its address on a GPU comes from the code object loaded there.
#[no_mangle]
pub unsafe extern "C" fn __hipRegisterVar(
    modules: *mut *mut c_void,
    var: *mut c_void,
    host_var: *mut c_char,
    device_var: *const c_char,
    _ext: c_int,
    size: usize,
    _constant: c_int,
    _global: c_int,
) {
    let name = if device_var.is_null() {
        host_var as *const c_char
    } else {
        device_var
    };
    if name.is_null() || var.is_null() || !FATBINS.is_live(modules as usize) {
        return;
    }
    // SAFETY: a NUL-terminated name from the program's registration code.
    let name = unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned();
    lock(&VARS).get_or_insert_with(HashMap::new).insert(
        var as usize,
        Var {
            fatbin: modules as usize,
            name,
            size,
        },
    );
}

/// The address and size on GPU `gpu` of the device variable whose host shadow is at
/// `symbol` (its fat binary loaded there at first use). InvalidSymbol for an address
/// that is no registered variable.
pub(crate) fn symbol(symbol: *const c_void, gpu: usize) -> Result<(u64, usize), hipError_t> {
    let (fatbin, name, size) = lock(&VARS)
        .as_ref()
        .and_then(|m| m.get(&(symbol as usize)))
        .map(|v| (v.fatbin, v.name.clone(), v.size))
        .ok_or(hipErrorInvalidSymbol)?;
    let fb = FATBINS.get(fatbin).ok_or(hipErrorInvalidSymbol)?;
    let (va, len) = fatbin_module(&fb, gpu)?
        .global(&name)
        .map_err(|_| hipErrorInvalidSymbol)?;
    // The code object's symbol size; the registered one if the symbol has none.
    Ok((va, if len != 0 { len } else { size }))
}

/// `__hipUnregisterFatBinary`: forgets the fat binary and its kernels.
#[no_mangle]
pub unsafe extern "C" fn __hipUnregisterFatBinary(modules: *mut *mut c_void) {
    let Some(fb) = FATBINS.remove(modules as usize) else {
        return;
    };
    GENERATION.fetch_add(1, Ordering::AcqRel);
    if let Some(m) = lock(&HOST_FUNCTIONS).as_mut() {
        m.retain(|_, f| f.fatbin != modules as usize);
    }
    if let Some(m) = lock(&VARS).as_mut() {
        m.retain(|_, v| v.fatbin != modules as usize);
    }
    let loaded: Vec<Module> = lock(&fb.modules)
        .drain()
        .filter_map(|(_, m)| m.ok())
        .collect();
    lock(&RETIRED).extend(loaded);
}

/// `__hipPushCallConfiguration`: the `<<<grid, block, shared, stream>>>` of the next launch,
/// into the thread's fixed slots (no lock, no allocation).
#[no_mangle]
pub extern "C" fn __hipPushCallConfiguration(
    grid: dim3,
    block: dim3,
    shared: usize,
    stream: *mut c_void,
) -> hipError_t {
    let f = crate::api::fast();
    // SAFETY: the calling thread's own slot; plain data.
    unsafe {
        let d = (*f).call_depth as usize;
        let Some(slot) = (*f).calls.get_mut(d) else {
            // A tail call (same C signature): the fast path makes no call (no frame).
            return push_deep(grid, block, shared, stream);
        };
        *slot = (grid, block, shared, stream);
        (*f).call_depth = d as u32 + 1;
        (*f).last_error = hipSuccess;
    }
    hipSuccess
}

/// [`__hipPushCallConfiguration`] beyond the fixed slots.
#[cold]
#[inline(never)]
extern "C" fn push_deep(grid: dim3, block: dim3, shared: usize, stream: *mut c_void) -> hipError_t {
    crate::api::with_tls(|t| {
        t.call_config
            .borrow_mut()
            .push((grid, block, shared, stream))
    });
    let f = crate::api::fast();
    // SAFETY: the calling thread's own slot; plain data.
    unsafe {
        (*f).call_depth = (*f).call_depth.wrapping_add(1);
        (*f).last_error = hipSuccess;
    }
    hipSuccess
}

/// `__hipPopCallConfiguration`: the configuration pushed last (InvalidConfiguration when
/// none is pushed; InvalidValue for a null out-pointer, the configuration popped anyway).
#[no_mangle]
pub unsafe extern "C" fn __hipPopCallConfiguration(
    grid: *mut dim3,
    block: *mut dim3,
    shared: *mut usize,
    stream: *mut *mut c_void,
) -> hipError_t {
    let f = crate::api::fast();
    // SAFETY: the calling thread's own slot (plain data); the out-pointers are the launch
    // stub's, checked non-null before the writes.
    unsafe {
        let d = (*f).call_depth as usize;
        let outs_ok = !grid.is_null() && !block.is_null() && !shared.is_null() && !stream.is_null();
        match (*f).calls.get(d.wrapping_sub(1)) {
            Some(c) if outs_ok => {
                // Field by field straight from the slot (no copy of the whole
                // configuration first); the depth and last error after.
                let c = c as *const crate::api::CallConfig;
                grid.write((*c).0);
                block.write((*c).1);
                shared.write((*c).2);
                stream.write((*c).3);
                (*f).call_depth = d as u32 - 1;
                (*f).last_error = hipSuccess;
                hipSuccess
            }
            _ => pop_slow(grid, block, shared, stream),
        }
    }
}

/// [`__hipPopCallConfiguration`] with nothing pushed, a configuration beyond the fixed
/// slots or a null out-pointer (written in order up to the first null one).
///
/// `extern "C"` as the entry point, so that its call there is a tail call (no frame).
#[cold]
#[inline(never)]
extern "C" fn pop_slow(
    grid: *mut dim3,
    block: *mut dim3,
    shared: *mut usize,
    stream: *mut *mut c_void,
) -> hipError_t {
    let f = crate::api::fast();
    // SAFETY: the calling thread's own slot; plain data.
    let c = unsafe {
        match (*f).call_depth as usize {
            0 => None,
            d => {
                (*f).call_depth = d as u32 - 1;
                match (*f).calls.get(d - 1) {
                    Some(c) => Some(*c),
                    None => pop_deep(),
                }
            }
        }
    };
    let e = match c {
        None => hipErrorInvalidConfiguration,
        Some((g, b, s, q)) => match out(grid, g)
            .and_then(|_| out(block, b))
            .and_then(|_| out(shared, s))
            .and_then(|_| out(stream, q))
        {
            Ok(()) => hipSuccess,
            Err(e) => e,
        },
    };
    // SAFETY: the calling thread's own slot.
    unsafe { (*f).last_error = e };
    e
}

/// The configuration pushed last beyond the fixed slots.
#[cold]
#[inline(never)]
fn pop_deep() -> Option<crate::api::CallConfig> {
    crate::api::with_tls(|t| t.call_config.borrow_mut().pop())
}

/// The module of fat binary `fb` on GPU `gpu`, loaded there at first use.
fn fatbin_module(fb: &FatBinary, gpu: usize) -> Result<Module, hipError_t> {
    let mut mods = lock(&fb.modules);
    mods.entry(gpu)
        .or_insert_with(|| {
            if fb.bundle.is_empty() {
                return Err(hipErrorInvalidImage);
            }
            device()?.load_module(gpu, &fb.bundle).map_err(|e| {
                if e.to_string().contains("target") {
                    hipErrorNoBinaryForGpu
                } else {
                    crate::api::map_err(&e)
                }
            })
        })
        .clone()
}

/// The kernel of host stub `f` on GPU `gpu` (loading its fat binary there at first use).
fn host_kernel(f: *const c_void, gpu: usize) -> Result<Kernel, hipError_t> {
    let hf = lock(&HOST_FUNCTIONS)
        .as_ref()
        .and_then(|m| m.get(&(f as usize)).cloned())
        .ok_or(hipErrorInvalidDeviceFunction)?;
    if let Some(k) = lock(&hf.kernels).get(&gpu) {
        return Ok(k.clone());
    }
    let fb = FATBINS
        .get(hf.fatbin)
        .ok_or(hipErrorInvalidDeviceFunction)?;
    let module = fatbin_module(&fb, gpu)?;
    let k = module
        .kernel(&hf.name)
        .map_err(|_| hipErrorInvalidDeviceFunction)?;
    lock(&hf.kernels).insert(gpu, k.clone());
    Ok(k)
}

/// `hipDeviceReset` of GPU `gpu`: forget what is loaded there (fat binaries load again at
/// the next launch; modules of the module API are unloaded).
pub(crate) fn reset_gpu(gpu: usize) {
    GENERATION.fetch_add(1, Ordering::AcqRel);
    if let Some(m) = lock(&HOST_FUNCTIONS).as_ref() {
        for f in m.values() {
            lock(&f.kernels).remove(&gpu);
        }
    }
    for fb in FATBINS.all() {
        if let Some(Ok(m)) = lock(&fb.modules).remove(&gpu) {
            lock(&RETIRED).push(m);
        }
    }
    MODULES.retain(|m| m.gpu_index() != gpu);
    FUNCTIONS.retain(|f| f.kernel.gpu_index() != gpu);
}

// ---- arguments --------------------------------------------------------------------------

/// The explicit arguments of a kernel, read once from its metadata: (offset, size,
/// pointer?) in order.
#[derive(Clone, Default)]
struct ArgLayout(Vec<(u32, u32, bool)>);

impl ArgLayout {
    fn of(k: &Kernel) -> ArgLayout {
        let explicit = k
            .metadata()
            .args
            .iter()
            .filter(|a| !a.value_kind.is_hidden());
        ArgLayout(
            explicit
                .map(|a| {
                    let ptr = a.value_kind == ValueKind::GlobalBuffer && a.size == 8;
                    (a.offset, a.size, ptr)
                })
                .collect(),
        )
    }
}

/// The explicit arguments of `k`, each read by `bytes_of(index, offset, size)`.
fn build_args(
    k: &Kernel,
    bytes_of: impl FnMut(usize, u32, u32) -> Result<*const u8, hipError_t>,
) -> Result<KernelArgs, hipError_t> {
    let mut args = k.args();
    fill_args(&ArgLayout::of(k), &mut args, bytes_of)?;
    Ok(args)
}

/// Pushes the explicit arguments described by `layout` into the empty `args`; by-value
/// arguments of any size (kfdrt checks each against the kernel's metadata).
fn fill_args(
    layout: &ArgLayout,
    args: &mut KernelArgs,
    mut bytes_of: impl FnMut(usize, u32, u32) -> Result<*const u8, hipError_t>,
) -> Result<(), hipError_t> {
    for (i, &(offset, size, ptr)) in layout.0.iter().enumerate() {
        let p = bytes_of(i, offset, size)?;
        if ptr {
            // SAFETY: `bytes_of` returned a pointer to the argument's 8 bytes.
            let v = unsafe { (p as *const u64).read_unaligned() };
            args.ptr(v).hip()?;
        } else {
            // SAFETY: `bytes_of` returned a pointer to the argument's `size` bytes.
            let b = unsafe { std::slice::from_raw_parts(p, size as usize) };
            args.arg_bytes(b).hip()?;
        }
    }
    Ok(())
}

/// Arguments from `extra` (`HIP_LAUNCH_PARAM_BUFFER_POINTER, buf,
/// HIP_LAUNCH_PARAM_BUFFER_SIZE, &size, HIP_LAUNCH_PARAM_END`): the kernarg bytes laid
/// out at the metadata's offsets.
fn args_from_extra(k: &Kernel, extra: *mut *mut c_void) -> Result<KernelArgs, hipError_t> {
    let (mut buf, mut size) = (std::ptr::null::<u8>(), None::<usize>);
    for i in (0..64).step_by(2) {
        // SAFETY: `extra` is a key/value list ended by HIP_LAUNCH_PARAM_END (checked
        // before reading a value; bounded at 32 pairs).
        let key = unsafe { *extra.add(i) } as usize;
        match key {
            3 => break,
            // SAFETY: a value follows each key.
            1 => buf = unsafe { *extra.add(i + 1) } as *const u8,
            2 => {
                // SAFETY: the value of BUFFER_SIZE points at a size_t.
                let p = unsafe { *extra.add(i + 1) } as *const usize;
                if p.is_null() {
                    return Err(hipErrorInvalidValue);
                }
                // SAFETY: as above.
                size = Some(unsafe { p.read_unaligned() });
            }
            _ => return Err(hipErrorInvalidValue),
        }
    }
    let size = size.ok_or(hipErrorInvalidValue)?;
    if buf.is_null() {
        return Err(hipErrorInvalidValue);
    }
    build_args(k, |_, off, len| {
        if (off + len) as usize > size {
            return Err(hipErrorInvalidValue);
        }
        // SAFETY: inside the caller's `size`-byte buffer (checked above).
        Ok(unsafe { buf.add(off as usize) })
    })
}

fn launch(
    k: &Kernel,
    s: &kfdrt::Stream,
    grid: dim3,
    block: dim3,
    shared: usize,
    args: &KernelArgs,
) -> Result<(), hipError_t> {
    let shared = u32::try_from(shared).map_err(|_| hipErrorInvalidValue)?;
    s.launch(
        k,
        Dim3::new(grid.x, grid.y, grid.z),
        Dim3::new(block.x, block.y, block.z),
        shared,
        args,
    )
    .hip()
}

/// [`kfdrt::Stream::launch_params`] of HIP's `void *args[]`.
///
/// # Safety
/// `args` is null or holds one pointer per explicit argument of `k` (HIP's contract).
#[inline(always)]
unsafe fn launch_params(
    k: &Kernel,
    s: &kfdrt::Stream,
    grid: dim3,
    block: dim3,
    shared: usize,
    args: *mut *mut c_void,
) -> Result<(), hipError_t> {
    let shared = u32::try_from(shared).map_err(|_| hipErrorInvalidValue)?;
    // SAFETY: per the contract.
    unsafe {
        s.launch_params(
            k,
            Dim3::new(grid.x, grid.y, grid.z),
            Dim3::new(block.x, block.y, block.z),
            shared,
            args as *const *const c_void,
        )
    }
    .hip()
}

/// Bumped when registered kernels are forgotten (unregistration, reset), so per-thread
/// launch caches drop what they hold. Starts at 1: a zeroed [`WarmSlot`] (generation 0)
/// never matches.
static GENERATION: AtomicU64 = AtomicU64::new(1);

/// A warm launch target: (host stub, GPU), its kernel, and the (grid, block, dynamic
/// LDS) of its last launch on the thread, checked by kfdrt ([`kfdrt::LaunchShape`]).
pub(crate) struct Warm {
    stub: usize,
    gpu: usize,
    kernel: Kernel,
    shape: Option<(dim3, dim3, usize, kfdrt::LaunchShape)>,
}

/// A thread's warm launch targets (most recent first) and the registration generation
/// they belong to: a `<<<>>>` launch takes no lock, hashes nothing and allocates nothing
/// once warm. The first entry is mirrored in the thread's [`WarmSlot`], which is what a
/// launch checks.
#[derive(Default)]
pub(crate) struct LaunchCache {
    generation: u64,
    warm: Vec<Warm>,
}

/// The thread's warm launch target in its fixed-offset slot ([`crate::api::Fast`]): a
/// hit is three compares with no `RefCell` borrow, and a launch in the target's last
/// shape five more. `kernel` and `shape` point into the first entry of the thread's
/// [`LaunchCache`] (their owner): set by [`LaunchCache::promote`] and [`launch_reshape`],
/// the only code that changes that cache (they empty the slot first), and emptied when
/// the cache is dropped (`Tls::drop`). All-zero (thread start, [`WarmSlot::EMPTY`])
/// never matches: [`GENERATION`] is never 0. A null `shape` never matches either.
#[repr(C)]
pub(crate) struct WarmSlot {
    stub: usize,
    gpu: usize,
    generation: u64,
    kernel: *const Kernel,
    /// The shape's key: grid and block as [`dim3::packed`], dynamic LDS.
    grid: (u64, u32),
    block: (u64, u32),
    shared: usize,
    shape: *const kfdrt::LaunchShape,
}

impl WarmSlot {
    /// Nothing warm.
    pub(crate) const EMPTY: WarmSlot = WarmSlot {
        stub: 0,
        gpu: 0,
        generation: 0,
        kernel: std::ptr::null(),
        grid: (0, 0),
        block: (0, 0),
        shared: 0,
        shape: std::ptr::null(),
    };

    /// The slot naming `w` (the first entry of its cache) at `generation`.
    fn of(w: &Warm, generation: u64) -> WarmSlot {
        let (grid, block, shared, shape) = match &w.shape {
            Some((g, b, s, shape)) => (
                g.packed(),
                b.packed(),
                *s,
                shape as *const kfdrt::LaunchShape,
            ),
            None => (
                WarmSlot::EMPTY.grid,
                WarmSlot::EMPTY.block,
                0,
                std::ptr::null(),
            ),
        };
        WarmSlot {
            stub: w.stub,
            gpu: w.gpu,
            generation,
            kernel: &w.kernel,
            grid,
            block,
            shared,
            shape,
        }
    }
}

impl LaunchCache {
    /// An empty cache (const, for thread-locals).
    pub(crate) const fn new() -> Self {
        LaunchCache {
            generation: 0,
            warm: Vec::new(),
        }
    }

    /// Makes (stub, GPU) the first entry, resolving its kernel at its first use here, and
    /// the thread's [`WarmSlot`].
    #[cold]
    #[inline(never)]
    fn promote(&mut self, f: *const c_void, gpu: usize, generation: u64) -> Result<(), hipError_t> {
        let slot = crate::api::fast();
        // SAFETY: the calling thread's own slot; emptied before the entries it may point
        // at move or drop.
        unsafe { (*slot).warm = WarmSlot::EMPTY };
        if self.generation != generation {
            self.generation = generation;
            self.warm.clear();
        }
        let stub = f as usize;
        let i = match self
            .warm
            .iter()
            .position(|w| w.stub == stub && w.gpu == gpu)
        {
            Some(i) => i,
            None => {
                let kernel = host_kernel(f, gpu)?;
                self.warm.push(Warm {
                    stub,
                    gpu,
                    kernel,
                    shape: None,
                });
                self.warm.len() - 1
            }
        };
        self.warm.swap(0, i);
        // SAFETY: as above; the entry stays where it is until the next change of the
        // cache (or its drop), which empties the slot first.
        unsafe { (*slot).warm = WarmSlot::of(&self.warm[0], generation) };
        Ok(())
    }
}

/// The thread's warm launch target when it is host stub `f` on GPU `gpu` (registrations
/// unchanged since).
#[inline(always)]
fn warm_slot<'a>(fp: *mut crate::api::Fast, f: *const c_void, gpu: usize) -> Option<&'a WarmSlot> {
    // SAFETY: `fp` is the calling thread's own slot, used only before this entry point
    // returns, with no call that changes the launch cache.
    unsafe {
        let w = &(*fp).warm;
        (w.stub == f as usize && w.gpu == gpu && w.generation == GENERATION.load(Ordering::Acquire))
            .then_some(w)
    }
}

/// A launch whose target is not the thread's warm one: resolve it (once per stub and GPU
/// on the thread), make it warm and launch. Uncached while the thread's cache is in use
/// (not reached from C: no HIP call runs inside a launch on the same thread).
#[cold]
#[inline(never)]
fn launch_cold(
    f: *const c_void,
    st: &kfdrt::Stream,
    grid: dim3,
    block: dim3,
    args: *mut *mut c_void,
    shared: usize,
) -> Result<(), hipError_t> {
    let gpu = st.gpu_index();
    let promoted = crate::api::with_tls(|t| {
        let Ok(mut c) = t.launch_cache.try_borrow_mut() else {
            return Ok(false);
        };
        c.promote(f, gpu, GENERATION.load(Ordering::Acquire))
            .map(|()| true)
    })?;
    if !promoted {
        let k = host_kernel(f, gpu)?;
        // SAFETY: HIP's contract for `args` (one pointer per explicit argument).
        return unsafe { launch_params(&k, st, grid, block, shared, args) };
    }
    launch_reshape(f, st, grid, block, args, shared)
}

/// A launch of the thread's warm target in a shape other than its last: check the shape
/// (kfdrt), keep it with the target, and launch. A shape kfdrt refuses is launched
/// unshaped, which reports why.
#[cold]
#[inline(never)]
fn launch_reshape(
    f: *const c_void,
    st: &kfdrt::Stream,
    grid: dim3,
    block: dim3,
    args: *mut *mut c_void,
    shared: usize,
) -> Result<(), hipError_t> {
    crate::api::with_tls(|t| launch_reshape_in(t, f, st, grid, block, args, shared))
}

/// [`launch_reshape`] on the thread's [`crate::api::Tls`].
fn launch_reshape_in(
    t: &crate::api::Tls,
    f: *const c_void,
    st: &kfdrt::Stream,
    grid: dim3,
    block: dim3,
    args: *mut *mut c_void,
    shared: usize,
) -> Result<(), hipError_t> {
    let Ok(mut c) = t.launch_cache.try_borrow_mut() else {
        let k = host_kernel(f, st.gpu_index())?;
        // SAFETY: HIP's contract for `args` (one pointer per explicit argument).
        return unsafe { launch_params(&k, st, grid, block, shared, args) };
    };
    let generation = c.generation;
    // The warm target (the slot matched it, or `promote` just made it the first entry).
    let Some(w) = c.warm.first_mut() else {
        return Err(hipErrorInvalidDeviceFunction);
    };
    let slot = crate::api::fast();
    // SAFETY: the calling thread's own slot, emptied before the shape it may point at
    // changes.
    unsafe { (*slot).warm = WarmSlot::EMPTY };
    let shape = u32::try_from(shared).ok().and_then(|lds| {
        w.kernel.launch_shape(
            Dim3::new(grid.x, grid.y, grid.z),
            Dim3::new(block.x, block.y, block.z),
            lds,
        )
    });
    w.shape = shape.map(|sh| (grid, block, shared, sh));
    // SAFETY: as above; the entry stays where it is until the next change of the cache.
    unsafe { (*slot).warm = WarmSlot::of(w, generation) };
    match &w.shape {
        // SAFETY: HIP's contract for `args` (one pointer per explicit argument).
        Some((.., sh)) => {
            unsafe { st.launch_params_shaped(&w.kernel, sh, args as *const *const c_void) }.hip()
        }
        // SAFETY: as above.
        None => unsafe { launch_params(&w.kernel, st, grid, block, shared, args) },
    }
}

/// The launch of `hipLaunchKernel` on stream `st`.
///
/// # Safety
/// HIP's contract for `args` (one pointer per explicit argument of the kernel).
#[inline(always)]
unsafe fn launch_on(
    fp: *mut crate::api::Fast,
    f: *const c_void,
    st: &kfdrt::Stream,
    grid: dim3,
    block: dim3,
    args: *mut *mut c_void,
    shared: usize,
) -> Result<(), hipError_t> {
    let Some(w) = warm_slot(fp, f, st.gpu_index()) else {
        return launch_cold(f, st, grid, block, args, shared);
    };
    if w.shape.is_null()
        || w.grid != grid.packed()
        || w.block != block.packed()
        || w.shared != shared
    {
        return launch_reshape(f, st, grid, block, args, shared);
    }
    // SAFETY: a matching slot's kernel and shape are alive (see `WarmSlot`); `args` per
    // the contract.
    unsafe { st.launch_params_shaped(&*w.kernel, &*w.shape, args as *const *const c_void) }.hip()
}

/// `hipLaunchKernel`: the kernel registered for host stub `f`. The warm path (hot stream,
/// warm target) is inlined here whole.
#[no_mangle]
pub unsafe extern "C" fn hipLaunchKernel(
    f: *const c_void,
    grid: dim3,
    block: dim3,
    args: *mut *mut c_void,
    shared: usize,
    s: *mut c_void,
) -> hipError_t {
    let fp = crate::api::fast();
    if let Some((_, st)) = crate::api::hot_stream_in(fp, s) {
        // SAFETY: HIP's contract for `args`.
        let e = unsafe { launch_on(fp, f, st, grid, block, args, shared) }
            .err()
            .map_or(hipSuccess, |e| config_error(block, e));
        // SAFETY: the calling thread's own slot.
        unsafe { (*fp).last_error = e };
        return e;
    }
    launch_miss(f, grid, block, args, shared, s)
}

/// [`hipLaunchKernel`] on a stream that is not the thread's hot one (out of line, so
/// that the warm path keeps its arguments in registers; the entry point's signature and
/// a non-unwinding ABI, so that its call is a tail jump).
#[cold]
#[inline(never)]
extern "system" fn launch_miss(
    f: *const c_void,
    grid: dim3,
    block: dim3,
    args: *mut *mut c_void,
    shared: usize,
    s: *mut c_void,
) -> hipError_t {
    crate::api::ret_stream_miss(s, move |_, st| {
        // SAFETY: HIP's contract for `args`.
        unsafe { launch_on(crate::api::fast(), f, st, grid, block, args, shared) }
            .map_err(|e| config_error(block, e))
    })
}

/// The error of a refused launch as HIP names it: a block of more work-items than the
/// device's maximum is InvalidConfiguration (CLR 5.2 and CUDA), where kfdrt says
/// InvalidValue; any other refusal is kept. Only reached on the error path, so the warm
/// launch pays nothing for it.
#[cold]
#[inline(never)]
fn config_error(block: dim3, e: hipError_t) -> hipError_t {
    let threads = u64::from(block.x) * u64::from(block.y) * u64::from(block.z);
    if e == hipErrorInvalidValue && threads > crate::api::MAX_THREADS_PER_BLOCK as u64 {
        return hipErrorInvalidConfiguration;
    }
    e
}

/// `hipFuncAttributes` of a kernel on GPU `gpu`.
fn func_attributes(k: &Kernel, gpu: usize) -> Result<hipFuncAttributes, hipError_t> {
    let a = k.attributes();
    let lds = device()?.gpu(gpu).hip()?.lds_limit();
    let version = a.code_object_version as c_int * 10;
    Ok(hipFuncAttributes {
        binaryVersion: version,
        cacheModeCA: 0,
        constSizeBytes: 0,
        localSizeBytes: a.private_size_bytes as usize,
        maxDynamicSharedSizeBytes: lds.saturating_sub(a.shared_size_bytes) as c_int,
        maxThreadsPerBlock: a.max_threads_per_block as c_int,
        numRegs: a.num_vgprs as c_int,
        preferredShmemCarveout: 0,
        ptxVersion: version,
        sharedSizeBytes: a.shared_size_bytes as usize,
    })
}

/// `hipFuncGetAttributes`: for a host stub registered by a hipcc-compiled program, on the
/// current GPU.
#[no_mangle]
pub unsafe extern "C" fn hipFuncGetAttributes(
    attr: *mut hipFuncAttributes,
    f: *const c_void,
) -> hipError_t {
    ret((|| {
        if attr.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let gpu = crate::api::current_gpu();
        let k = host_kernel(f, gpu)?;
        out(attr, func_attributes(&k, gpu)?)
    })())
}

// ---- modules ----------------------------------------------------------------------------

fn new_module(m: *mut *mut c_void, r: kfdrt::Result<Module>) -> Result<(), hipError_t> {
    let module = r.map_err(|e| match e.kind() {
        kfdrt::ErrorKind::InvalidValue if e.to_string().contains("target") => {
            hipErrorNoBinaryForGpu
        }
        kfdrt::ErrorKind::InvalidValue => hipErrorInvalidImage,
        _ => crate::api::map_err(&e),
    })?;
    out(m, crate::api::register(&MODULES, module)?)
}

/// `hipModuleLoad`: a code object file (ELF or offload bundle) on the current GPU.
#[no_mangle]
pub unsafe extern "C" fn hipModuleLoad(m: *mut *mut c_void, fname: *const c_char) -> hipError_t {
    ret((|| {
        if m.is_null() || fname.is_null() {
            return Err(hipErrorInvalidValue);
        }
        // SAFETY: a NUL-terminated path from the caller.
        let path = unsafe { CStr::from_ptr(fname) }
            .to_string_lossy()
            .into_owned();
        let bytes = std::fs::read(&path).map_err(|_| hipErrorFileNotFound)?;
        if !is_code_object(&bytes) {
            return Err(hipErrorInvalidKernelFile);
        }
        new_module(m, device()?.load_module(crate::api::current_gpu(), &bytes))
    })())
}

/// `hipModuleLoadData`: a code object (ELF or offload bundle) in memory; its length comes
/// from its own headers.
#[no_mangle]
pub unsafe extern "C" fn hipModuleLoadData(
    m: *mut *mut c_void,
    image: *const c_void,
) -> hipError_t {
    ret((|| {
        if m.is_null() {
            return Err(hipErrorInvalidValue);
        }
        // SAFETY: the caller passes a complete image.
        let bytes = unsafe { image_bytes(image) }?;
        new_module(m, device()?.load_module(crate::api::current_gpu(), bytes))
    })())
}

/// `hipModuleLoadDataEx`: `hipModuleLoadData`; the JIT options are ignored, as CLR 5.2
/// ignores them (a code object needs no JIT).
#[no_mangle]
pub unsafe extern "C" fn hipModuleLoadDataEx(
    m: *mut *mut c_void,
    image: *const c_void,
    _num_options: c_uint,
    _options: *mut c_void,
    _values: *mut *mut c_void,
) -> hipError_t {
    // SAFETY: the caller's contract is hipModuleLoadData's.
    unsafe { hipModuleLoadData(m, image) }
}

/// `hipModuleUnload`: waits for every stream (work using the module completes), then the
/// module and the functions taken from it become invalid.
#[no_mangle]
pub extern "C" fn hipModuleUnload(m: *mut c_void) -> hipError_t {
    ret((|| {
        MODULES.get(m as usize).ok_or(hipErrorInvalidHandle)?;
        // Launches of its kernels may still be queued: their code and kernel descriptors
        // live in the module's memory, and unmapping it under them would fault them.
        crate::api::synchronize_all_streams();
        MODULES.remove(m as usize).ok_or(hipErrorInvalidHandle)?;
        FUNCTIONS.retain(|f| f.module != m as usize);
        Ok(())
    })())
}

/// `hipModuleGetFunction`.
#[no_mangle]
pub unsafe extern "C" fn hipModuleGetFunction(
    f: *mut *mut c_void,
    m: *mut c_void,
    name: *const c_char,
) -> hipError_t {
    ret((|| {
        if f.is_null() || name.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let module = MODULES.get(m as usize).ok_or(hipErrorInvalidHandle)?;
        // SAFETY: a NUL-terminated kernel name from the caller.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        let kernel = module.kernel(&name).map_err(|_| hipErrorNotFound)?;
        let t = crate::api::register(
            &FUNCTIONS,
            ModuleFunction {
                module: m as usize,
                kernel,
            },
        )?;
        out(f, t)
    })())
}

/// `hipModuleLaunchKernel`: arguments through `kernelParams` or `extra`.
#[no_mangle]
pub unsafe extern "C" fn hipModuleLaunchKernel(
    f: *mut c_void,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    shared: c_uint,
    s: *mut c_void,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> hipError_t {
    ret((|| {
        let func = FUNCTIONS
            .get(f as usize)
            .ok_or(hipErrorInvalidResourceHandle)?;
        let st = stream(s)?;
        let k = &func.kernel;
        let grid = dim3 {
            x: gx,
            y: gy,
            z: gz,
        };
        let block = dim3 {
            x: bx,
            y: by,
            z: bz,
        };
        match (params.is_null(), extra.is_null()) {
            // Null `kernelParams` and `extra` only for a kernel without arguments (kfdrt
            // checks).
            // SAFETY: HIP's contract for `kernelParams`.
            (_, true) => unsafe { launch_params(k, &st, grid, block, shared as usize, params) },
            (true, false) => {
                let args = args_from_extra(k, extra)?;
                launch(k, &st, grid, block, shared as usize, &args)
            }
            (false, false) => Err(hipErrorInvalidValue),
        }
        .map_err(|e| config_error(block, e))
    })())
}

// ---- symbols ----------------------------------------------------------------------------

/// `[va + offset, + size)` of device variable `sym` on the current GPU; InvalidValue when
/// it runs past the variable.
fn symbol_range(sym: *const c_void, offset: usize, size: usize) -> Result<u64, hipError_t> {
    let (va, len) = symbol(sym, crate::api::current_gpu())?;
    if offset.checked_add(size).is_none_or(|end| end > len) {
        return Err(hipErrorInvalidValue);
    }
    Ok(va + offset as u64)
}

/// `hipGetSymbolAddress`: the current GPU's address of a `__device__` variable.
#[no_mangle]
pub unsafe extern "C" fn hipGetSymbolAddress(
    p: *mut *mut c_void,
    sym: *const c_void,
) -> hipError_t {
    ret((|| {
        let (va, _) = symbol(sym, crate::api::current_gpu())?;
        out(p, va as *mut c_void)
    })())
}

/// `hipGetSymbolSize`: bytes of a `__device__` variable.
#[no_mangle]
pub unsafe extern "C" fn hipGetSymbolSize(size: *mut usize, sym: *const c_void) -> hipError_t {
    ret((|| {
        let (_, len) = symbol(sym, crate::api::current_gpu())?;
        out(size, len)
    })())
}

/// A waited-for copy entry point (`hipMemcpy` or `hipMemcpy_spt`).
type MemcpyFn = unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> hipError_t;

/// `size` bytes from `src` into the variable `sym` at `offset` through `copy`, after the
/// range is checked against the variable.
///
/// # Safety
/// `src` as `copy` requires (HIP's contract for the source).
unsafe fn to_symbol(
    sym: *const c_void,
    src: *const c_void,
    size: usize,
    offset: usize,
    kind: c_int,
    copy: MemcpyFn,
) -> hipError_t {
    ret((|| {
        let dst = symbol_range(sym, offset, size)?;
        // SAFETY: the caller's contract for the source; the destination is checked above.
        match unsafe { copy(dst as *mut c_void, src, size, kind) } {
            hipSuccess => Ok(()),
            e => Err(e),
        }
    })())
}

/// `size` bytes from the variable `sym` at `offset` into `dst` through `copy`, after the
/// range is checked against the variable.
///
/// # Safety
/// `dst` as `copy` requires (HIP's contract for the destination).
unsafe fn from_symbol(
    dst: *mut c_void,
    sym: *const c_void,
    size: usize,
    offset: usize,
    kind: c_int,
    copy: MemcpyFn,
) -> hipError_t {
    ret((|| {
        let src = symbol_range(sym, offset, size)?;
        // SAFETY: the caller's contract for the destination; the source is checked above.
        match unsafe { copy(dst, src as *const c_void, size, kind) } {
            hipSuccess => Ok(()),
            e => Err(e),
        }
    })())
}

/// `hipMemcpyToSymbol`: `size` bytes from `src` to the variable at `offset`, as
/// `hipMemcpy` (ordered on the current GPU's null stream, waited for).
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyToSymbol(
    sym: *const c_void,
    src: *const c_void,
    size: usize,
    offset: usize,
    kind: c_int,
) -> hipError_t {
    // SAFETY: HIP's contract for the source.
    unsafe { to_symbol(sym, src, size, offset, kind, crate::api::hipMemcpy) }
}

/// `hipMemcpyToSymbolAsync`: as `hipMemcpyAsync` on `stream`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyToSymbolAsync(
    sym: *const c_void,
    src: *const c_void,
    size: usize,
    offset: usize,
    kind: c_int,
    stream: *mut c_void,
) -> hipError_t {
    ret((|| {
        let dst = symbol_range(sym, offset, size)?;
        // SAFETY: as hipMemcpyAsync.
        match unsafe { crate::api::hipMemcpyAsync(dst as *mut c_void, src, size, kind, stream) } {
            hipSuccess => Ok(()),
            e => Err(e),
        }
    })())
}

/// `hipMemcpyFromSymbol`: `size` bytes of the variable from `offset` to `dst`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyFromSymbol(
    dst: *mut c_void,
    sym: *const c_void,
    size: usize,
    offset: usize,
    kind: c_int,
) -> hipError_t {
    // SAFETY: HIP's contract for the destination.
    unsafe { from_symbol(dst, sym, size, offset, kind, crate::api::hipMemcpy) }
}

/// `hipMemcpyFromSymbolAsync`: as `hipMemcpyAsync` on `stream`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyFromSymbolAsync(
    dst: *mut c_void,
    sym: *const c_void,
    size: usize,
    offset: usize,
    kind: c_int,
    stream: *mut c_void,
) -> hipError_t {
    ret((|| {
        let src = symbol_range(sym, offset, size)?;
        // SAFETY: as hipMemcpyAsync.
        match unsafe { crate::api::hipMemcpyAsync(dst, src as *const c_void, size, kind, stream) } {
            hipSuccess => Ok(()),
            e => Err(e),
        }
    })())
}

/// `hipLaunchKernel_spt`: a null stream is the thread's per-thread stream (what hipcc
/// `-fgpu-default-stream=per-thread` stubs call).
#[no_mangle]
pub unsafe extern "C" fn hipLaunchKernel_spt(
    f: *const c_void,
    grid: dim3,
    block: dim3,
    args: *mut *mut c_void,
    shared: usize,
    s: *mut c_void,
) -> hipError_t {
    // SAFETY: same contract.
    unsafe { hipLaunchKernel(f, grid, block, args, shared, crate::api::spt(s)) }
}

/// `hipMemcpyToSymbol_spt`: as `hipMemcpyToSymbol`, ordered on the per-thread stream and
/// waited for.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyToSymbol_spt(
    sym: *const c_void,
    src: *const c_void,
    size: usize,
    offset: usize,
    kind: c_int,
) -> hipError_t {
    // SAFETY: HIP's contract for the source.
    unsafe { to_symbol(sym, src, size, offset, kind, crate::api::hipMemcpy_spt) }
}

/// `hipMemcpyFromSymbol_spt`: as `hipMemcpyFromSymbol`, ordered on the per-thread stream
/// and waited for.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyFromSymbol_spt(
    dst: *mut c_void,
    sym: *const c_void,
    size: usize,
    offset: usize,
    kind: c_int,
) -> hipError_t {
    // SAFETY: HIP's contract for the destination.
    unsafe { from_symbol(dst, sym, size, offset, kind, crate::api::hipMemcpy_spt) }
}
