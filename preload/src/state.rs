//! The process's emulated device: created on the first open of a device path, one per
//! process (a `fork`ed child that opens `/dev/kfd` gets a fresh device, as on KFD where
//! the child must open its own context).

use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::sync::Mutex;

use kfd::topology::SysfsTree;
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
    pub(crate) gpus: Vec<GpuInfo>,
    /// The DRM sysfs entries (`/sys/dev/char/226:N`, `/sys/class/drm/...`), in memory.
    pub(crate) drm_tree: SysfsTree,
    pub(crate) doorbells: Doorbells,
    /// Buffers this process exported through the IPC ioctls.
    pub(crate) ipc: crate::ipc::Exports,
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
    let drm_tree = drm_sysfs(&emu, &gpus);
    let state = Box::new(State {
        drm_tree,
        pid,
        gen: GEN.fetch_add(1, Ordering::Relaxed) & 0x00ff_ffff,
        emu,
        gpus,
        doorbells: Doorbells::default(),
        ipc: Default::default(),
    });
    let old = STATE.swap(Box::into_raw(state), Ordering::AcqRel);
    // An older State belongs to the parent of a fork: its engine threads do not exist
    // here, so it is leaked rather than dropped (dropping would wait for them).
    let _ = old;
    register_cleanup();
    current().ok_or(Errno::NODEV)
}

/// With `$KFDRT_PRELOAD_TRACE`, report each live queue's state at exit (`Drop` never
/// runs for the leaked device).
fn register_cleanup() {
    extern "C" fn cleanup() {
        if let Some(st) = current() {
            for q in st.doorbells.queues() {
                crate::trace(format_args!(
                    "at exit: queue {q} is {:?}",
                    st.emu.queue_status(q)
                ));
            }
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

/// The sysfs entries of each GPU's DRM minors, as libdrm reads them: `drmNodeIsDRM`
/// stats `/sys/dev/char/M:m/device/drm`, `drmGetMinorNameForFD` lists that directory,
/// `drmParsePciDeviceInfo`/`drmParsePciBusInfo` read `device/{vendor,device,revision,
/// subsystem_*}` and `device/uevent` (libdrm xf86drm.c). `render<minor>` is the render
/// node's entry, `card<i>` the primary node's (same device files).
fn drm_sysfs(emu: &EmuBackend, gpus: &[GpuInfo]) -> SysfsTree {
    let mut t = SysfsTree::new();
    let topo = kfd::Backend::topology(emu);
    for (i, g) in gpus.iter().enumerate() {
        let node = topo.nodes.iter().find(|n| n.gpu_id == g.gpu_id);
        let (domain, loc) =
            node.map_or((0, 0), |n| (n.properties.domain, n.properties.location_id));
        let slot = format!(
            "{:04x}:{:02x}:{:02x}.{}",
            domain,
            (loc >> 8) & 0xff,
            (loc >> 3) & 0x1f,
            loc & 7
        );
        let id = g.preset.device_id;
        let m = g.render_minor;
        let device_files = [
            ("vendor", "0x1002\n".to_owned()),
            ("device", format!("{id:#06x}\n")),
            ("subsystem_vendor", "0x1002\n".to_owned()),
            ("subsystem_device", format!("{id:#06x}\n")),
            ("revision", "0x00\n".to_owned()),
            (
                "uevent",
                format!(
                    "DRIVER=amdgpu\nPCI_CLASS=38000\nPCI_ID=1002:{id:04X}\nPCI_SUBSYS_ID=1002:{id:04X}\nPCI_SLOT_NAME={slot}\n"
                ),
            ),
        ];
        for (entry, dev) in [
            (format!("render{m}"), format!("226:{m}")),
            (format!("card{i}"), format!("226:{i}")),
        ] {
            for (f, v) in &device_files {
                t.insert(format!("{entry}/device/{f}"), v.as_bytes());
            }
            // The drm class directory of the device: one subdirectory per minor.
            t.insert(
                format!("{entry}/device/drm/renderD{m}/dev"),
                format!("226:{m}\n"),
            );
            t.insert(
                format!("{entry}/device/drm/card{i}/dev"),
                format!("226:{i}\n"),
            );
            t.insert(format!("{entry}/dev"), format!("{dev}\n"));
        }
        t.insert(
            format!("render{m}/uevent"),
            format!("MAJOR=226\nMINOR={m}\nDEVNAME=dri/renderD{m}\n"),
        );
        t.insert(
            format!("card{i}/uevent"),
            format!("MAJOR=226\nMINOR={i}\nDEVNAME=dri/card{i}\n"),
        );
    }
    t
}
