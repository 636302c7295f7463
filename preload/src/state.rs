//! The process's emulated device: created on the first open of a device path, one per
//! process (a `fork`ed child that opens `/dev/kfd` gets a fresh device, as on KFD where
//! the child must open its own context).

use std::path::PathBuf;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::sync::Mutex;

use kfd_emu::{EmuBackend, Preset};
use rustix::io::Errno;

use crate::doorbell::Doorbells;

/// Environment variable holding the device string (`emu:mi300x*2`); default `emu`.
pub(crate) const DEVICE_ENV: &str = "KFDRT_EMU_DEVICE";

/// One emulated GPU as the preload sees it.
#[derive(Debug)]
pub(crate) struct GpuInfo {
    pub(crate) gpu_id: u32,
    pub(crate) render_minor: u32,
    pub(crate) preset: Preset,
}

/// The device of this process.
pub(crate) struct State {
    /// The process that created it.
    pub(crate) pid: u32,
    /// Generation stamped on this device's virtual fds.
    pub(crate) gen: u32,
    pub(crate) emu: EmuBackend,
    /// The emulator's sysfs tree (what `/sys/devices/virtual/kfd/kfd/topology` shows).
    pub(crate) sysfs_root: PathBuf,
    pub(crate) gpus: Vec<GpuInfo>,
    pub(crate) doorbells: Doorbells,
}

static STATE: AtomicPtr<State> = AtomicPtr::new(core::ptr::null_mut());
static INIT: Mutex<()> = Mutex::new(());
static GEN: AtomicU32 = AtomicU32::new(1);
/// The pid whose device creation failed (reported once, then `ENODEV` quietly).
static FAILED_PID: AtomicU32 = AtomicU32::new(0);

/// This process's device if it exists already.
pub(crate) fn current() -> Option<&'static State> {
    let p = STATE.load(Ordering::Acquire);
    // SAFETY: a published State is leaked (never freed), so the reference lives forever.
    let st = unsafe { p.as_ref() }?;
    (st.pid == std::process::id()).then_some(st)
}

/// This process's device, created on first use from `$KFDRT_EMU_DEVICE`.
pub(crate) fn get() -> Result<&'static State, Errno> {
    if let Some(st) = current() {
        return Ok(st);
    }
    let _g = INIT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(st) = current() {
        return Ok(st);
    }
    let pid = std::process::id();
    if FAILED_PID.load(Ordering::Relaxed) == pid {
        return Err(Errno::NODEV);
    }
    let spec = std::env::var(DEVICE_ENV).unwrap_or_else(|_| "emu".to_owned());
    let emu = match EmuBackend::from_spec(&spec) {
        Ok(e) => e,
        Err(e) => {
            FAILED_PID.store(pid, Ordering::Relaxed);
            eprintln!("kfdrt-preload: cannot create the emulated device {spec:?}: {e}");
            return Err(Errno::NODEV);
        }
    };
    let mut gpus = Vec::new();
    for (gpu_id, node) in emu.gpu_ids().into_iter().zip(
        kfd::Backend::topology(&emu)
            .nodes
            .iter()
            .filter(|n| n.gpu_id != 0),
    ) {
        let Some(preset) = emu.preset(gpu_id).cloned() else {
            continue;
        };
        gpus.push(GpuInfo {
            gpu_id,
            render_minor: node.properties.drm_render_minor,
            preset,
        });
    }
    let state = Box::new(State {
        pid,
        gen: GEN.fetch_add(1, Ordering::Relaxed) & 0x00ff_ffff,
        sysfs_root: emu.sysfs_root().to_path_buf(),
        emu,
        gpus,
        doorbells: Doorbells::default(),
    });
    let old = STATE.swap(Box::into_raw(state), Ordering::AcqRel);
    // An older State belongs to the parent of a fork: its engine threads do not exist
    // here, so it is leaked rather than dropped (dropping would wait for them).
    let _ = old;
    register_cleanup();
    current().ok_or(Errno::NODEV)
}

/// Remove the emulator's sysfs directory at exit (`Drop` never runs for the leaked
/// device). A process killed by a signal leaves it behind in `$TMPDIR`.
fn register_cleanup() {
    extern "C" fn cleanup() {
        if let Some(st) = current() {
            let _ = std::fs::remove_dir_all(&st.sysfs_root);
        }
    }
    // SAFETY: registering a plain extern "C" function with no captured state.
    unsafe {
        libc::atexit(cleanup);
    }
}

impl State {
    /// The GPU index for `gpu_id`.
    pub(crate) fn gpu_idx(&self, gpu_id: u32) -> Option<usize> {
        self.gpus.iter().position(|g| g.gpu_id == gpu_id)
    }

    /// The GPU index whose render node has `minor`.
    pub(crate) fn minor_idx(&self, minor: u32) -> Option<usize> {
        self.gpus.iter().position(|g| g.render_minor == minor)
    }
}

/// Size of a process's doorbell page on SOC15 GPUs (8 KiB: libhsakmt queues.c maps
/// `DOORBELLS_PAGE_SIZE(1024 * 8)` on gfx9+; the emulator's slice is the same size).
pub(crate) const DOORBELL_PAGE: u64 = 8192;

/// The mmap offset of the page holding a queue's doorbell (the low bits of the offset
/// CREATE_QUEUE returns are the doorbell's byte offset inside the page).
pub(crate) fn doorbell_page(offset: u64) -> u64 {
    offset & !(DOORBELL_PAGE - 1)
}
