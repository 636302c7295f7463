//! Code objects loaded into GPU memory ([`Module`]) and their kernels ([`Kernel`]), as
//! `hipModuleLoadData` / `hipModuleGetFunction` / `hipFuncGetAttributes` do.
//!
//! Loading parses the ELF with the [`codeobj`] crate, checks its target ID against the
//! GPU's, allocates VRAM for the load image (where ROCr's loader puts a dGPU's code),
//! applies the AMDGPU relocations for that address and copies the image in. A kernel's `kernel_object` (what the AQL packet points
//! at) is the load address of its `.kd` symbol. See `firmware-notes/kernels.md`.

use std::sync::Arc;

use codeobj::{CodeObject, Feature, TargetId};

use crate::device::{Device, DeviceInner};
use crate::error::{Error, ErrorKind, Result};
use crate::memory::{Buffer, MemoryKind};

pub(crate) struct ModuleInner {
    pub(crate) dev: Arc<DeviceInner>,
    pub(crate) gpu_index: usize,
    pub(crate) code: CodeObject,
    pub(crate) image: Buffer,
}

/// A code object loaded on one GPU. Dropping it (and every [`Kernel`] taken from it)
/// frees its GPU memory; work using it must have completed by then.
#[derive(Clone)]
pub struct Module {
    pub(crate) inner: Arc<ModuleInner>,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Module(gpu={} target={} base={:#x} kernels={})",
            self.inner.gpu_index,
            self.inner.code.target,
            self.inner.image.va(),
            self.inner.code.kernels.len()
        )
    }
}

fn load_error(call: &'static str, e: codeobj::Error) -> Error {
    let kind = match e {
        codeobj::Error::Unsupported(_) => ErrorKind::NotSupported,
        _ => ErrorKind::InvalidValue,
    };
    Error::new(kind, call, e.to_string()).with_source(e)
}

impl crate::Gpu {
    /// The GPU's target ID: its processor, `sramecc+` when the topology reports SRAM ECC
    /// (`HSA_CAP_SRAM_EDCSUPPORTED`), and `xnack-` (kfdrt never enables XNACK replay).
    pub fn target_id(&self) -> TargetId {
        let caps = self.node.properties.capability.unwrap_or(0);
        let sramecc = if caps & kfd::topology::Capability::SRAM_EDCSUPPORTED.bits() != 0 {
            Feature::On
        } else {
            Feature::Off
        };
        TargetId::new(&self.gfx_name(), sramecc, Feature::Off)
    }

    /// LDS bytes a workgroup may use (`lds_size_in_kb`).
    pub fn lds_limit(&self) -> u32 {
        self.node.properties.lds_size_in_kb.saturating_mul(1024)
    }
}

impl Device {
    /// `hipModuleLoadData`: load a code object (an ELF, or a clang offload bundle holding
    /// one for this GPU) into GPU `gpu`'s memory. A malformed object or one built for
    /// another target is an InvalidValue naming the problem (and both targets).
    pub fn load_module(&self, gpu: usize, bytes: &[u8]) -> Result<Module> {
        let call = "hipModuleLoadData";
        let g = self.inner.gpu(gpu)?;
        let code = CodeObject::parse_for(bytes, &g.target_id()).map_err(|e| load_error(call, e))?;
        let size = code.image_size();
        if size == 0 {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                "empty load image",
            ));
        }
        // Code, descriptors and globals in VRAM, as ROCr's loader places a dGPU's code and
        // agent segments (coarse-grained local memory; firmware-notes/kernels.md).
        let image = Buffer::alloc(&self.inner.core, MemoryKind::Device, gpu, size as usize)?;
        let bytes = code
            .load_image(image.va())
            .map_err(|e| load_error(call, e))?;
        self.copy_to_vram(gpu, &image, &bytes)?;
        Ok(Module {
            inner: Arc::new(ModuleInner {
                dev: self.inner.clone(),
                gpu_index: gpu,
                code,
                image,
            }),
        })
    }

    /// Copies a load image into VRAM as ROCr's loader does (`RegionMemory::Freeze`): a
    /// CPU copy through the BAR when the VRAM is CPU-visible (the HDP is flushed before
    /// the next submission), else through the pinned staging buffers in GTT with GPU copies on a
    /// non-blocking stream of its own (so held user streams cannot stall the load).
    fn copy_to_vram(&self, gpu: usize, image: &Buffer, bytes: &[u8]) -> Result<()> {
        if image.is_cpu_visible() {
            return image.write(0, bytes);
        }
        let s = self.create_stream_with_flags(gpu, crate::StreamFlags::NON_BLOCKING)?;
        s.upload(image.va(), bytes)
    }

    /// `hipModuleLoad`: [`Device::load_module`] from a file.
    pub fn load_module_file(
        &self,
        gpu: usize,
        path: impl AsRef<std::path::Path>,
    ) -> Result<Module> {
        let p = path.as_ref();
        let b = std::fs::read(p).map_err(|e| {
            Error::new(
                ErrorKind::InvalidValue,
                "hipModuleLoad",
                format!("{}: {e}", p.display()),
            )
        })?;
        self.load_module(gpu, &b)
    }
}

impl Module {
    /// `hipModuleGetFunction`: the kernel named `name`; an unknown name is an
    /// InvalidValue listing the kernels the module has.
    pub fn kernel(&self, name: &str) -> Result<Kernel> {
        let k = self.inner.code.kernel(name).map_err(|e| {
            Error::new(
                ErrorKind::InvalidValue,
                "hipModuleGetFunction",
                e.to_string(),
            )
        })?;
        let index = self
            .inner
            .code
            .kernels
            .iter()
            .position(|x| std::ptr::eq(x, k))
            .unwrap_or(0);
        let explicit = k
            .meta
            .args
            .iter()
            .enumerate()
            .filter(|(_, a)| !a.value_kind.is_hidden())
            .map(|(i, _)| i)
            .collect();
        let hidden = k
            .meta
            .args
            .iter()
            .filter(|a| a.value_kind.is_hidden())
            .map(|a| (a.offset, a.size, a.value_kind.clone()))
            .collect();
        Ok(Kernel {
            module: self.inner.clone(),
            index,
            kernel_object: self.inner.image.va() + k.kd_offset,
            explicit,
            hidden,
        })
    }

    /// `hipModuleGetGlobal`: GPU address and size of a global variable.
    pub fn global(&self, name: &str) -> Result<(u64, usize)> {
        let s = self.inner.code.global(name).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidValue,
                "hipModuleGetGlobal",
                format!("no global variable {name:?} in the module"),
            )
        })?;
        Ok((self.inner.image.va() + s.address, s.size as usize))
    }

    /// The parsed code object.
    pub fn code_object(&self) -> &CodeObject {
        &self.inner.code
    }

    /// GPU address the image is loaded at.
    pub fn base(&self) -> u64 {
        self.inner.image.va()
    }

    /// What the load image is made of: [`MemoryKind::Device`] (VRAM), as ROCr's loader
    /// places a discrete GPU's code.
    pub fn memory_kind(&self) -> MemoryKind {
        self.inner.image.kind()
    }

    /// The GPU the module is loaded on.
    pub fn gpu_index(&self) -> usize {
        self.inner.gpu_index
    }
}

/// `hipFuncAttributes`-like facts about a kernel, from its descriptor and metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelAttributes {
    /// Largest workgroup (`.max_flat_workgroup_size`).
    pub max_threads_per_block: u32,
    /// Required workgroup size, when the kernel declares one.
    pub reqd_workgroup_size: Option<[u32; 3]>,
    /// Static LDS bytes.
    pub shared_size_bytes: u32,
    /// Static private (scratch) bytes per work-item.
    pub private_size_bytes: u32,
    /// Kernarg segment bytes (explicit and hidden arguments).
    pub kernarg_size_bytes: u32,
    /// SGPRs used.
    pub num_sgprs: u32,
    /// VGPRs used.
    pub num_vgprs: u32,
    /// AccVGPRs used (gfx90a/gfx94x).
    pub num_agprs: u32,
    /// Wavefront size.
    pub wavefront_size: u32,
    /// The kernel needs a dynamically sized stack.
    pub uses_dynamic_stack: bool,
    /// Explicit (caller-supplied) arguments.
    pub num_args: usize,
    /// Code object version.
    pub code_object_version: u32,
}

/// A kernel of a loaded [`Module`] (keeps the module alive).
#[derive(Clone)]
pub struct Kernel {
    pub(crate) module: Arc<ModuleInner>,
    pub(crate) index: usize,
    pub(crate) kernel_object: u64,
    /// Indices (in `meta.args`) of the explicit arguments.
    pub(crate) explicit: Vec<usize>,
    /// (offset, size, kind) of the hidden arguments, filled at launch.
    pub(crate) hidden: Vec<(u32, u32, codeobj::ValueKind)>,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kernel({} at {:#x})", self.name(), self.kernel_object)
    }
}

impl Kernel {
    pub(crate) fn info(&self) -> &codeobj::Kernel {
        &self.module.code.kernels[self.index]
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.info().name
    }

    /// GPU address of the kernel descriptor (the AQL `kernel_object`).
    pub fn kernel_object(&self) -> u64 {
        self.kernel_object
    }

    /// The kernel descriptor.
    pub fn descriptor(&self) -> &pm4::kd::KernelDescriptor {
        &self.info().descriptor
    }

    /// The metadata.
    pub fn metadata(&self) -> &codeobj::KernelMeta {
        &self.info().meta
    }

    /// The GPU the kernel's module is loaded on.
    pub fn gpu_index(&self) -> usize {
        self.module.gpu_index
    }

    /// `hipFuncGetAttributes`.
    pub fn attributes(&self) -> KernelAttributes {
        let m = self.metadata();
        KernelAttributes {
            max_threads_per_block: m.max_flat_workgroup_size,
            reqd_workgroup_size: m.reqd_workgroup_size,
            shared_size_bytes: self.descriptor().group_segment_fixed_size,
            private_size_bytes: self.descriptor().private_segment_fixed_size,
            kernarg_size_bytes: m.kernarg_segment_size,
            num_sgprs: m.sgpr_count,
            num_vgprs: m.vgpr_count,
            num_agprs: m.agpr_count,
            wavefront_size: m.wavefront_size,
            uses_dynamic_stack: m.uses_dynamic_stack,
            num_args: self.explicit.len(),
            code_object_version: self.module.code.version.number(),
        }
    }

    /// A new argument builder for this kernel.
    pub fn args(&self) -> crate::launch::KernelArgs {
        crate::launch::KernelArgs::new(self)
    }
}
