//! Which emulated object a path names.

use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use rustix::io::Errno;

use crate::state;

/// The KFD topology directory and its `/sys/class` alias (a symlink on real systems).
const TOPOLOGY_PREFIXES: [&[u8]; 2] = [
    b"/sys/devices/virtual/kfd/kfd/topology",
    b"/sys/class/kfd/kfd/topology",
];
const RENDER_PREFIX: &[u8] = b"/dev/dri/renderD";

/// What a path refers to.
pub(crate) enum Target {
    /// `/dev/kfd`.
    Kfd,
    /// `/dev/dri/renderD<minor>`.
    Render(u32),
    /// A path inside the topology tree, rewritten to the emulator's copy.
    Sysfs(CString),
    /// A file whose whole content the preload makes up (served from a memfd).
    Synth(Vec<u8>),
    /// Not ours.
    Pass,
}

/// The line `/proc/modules` shows for a loaded amdgpu (name, size, refcount, users,
/// state, address: kernel/module/procfs.c `m_show`).
const AMDGPU_MODULE_LINE: &[u8] = b"amdgpu 16384 0 - Live 0x0000000000000000\n";

/// `/proc/modules` with amdgpu listed: rocminfo runs `lsmod | grep amdgpu` before it
/// opens /dev/kfd, and `lsmod` (a child that inherits LD_PRELOAD) reads this file.
fn proc_modules() -> Vec<u8> {
    // A raw open (rustix), not std::fs: that would come back through our own hook.
    let mut v = Vec::new();
    if let Ok(fd) = rustix::fs::open(
        "/proc/modules",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = rustix::io::read(&fd, &mut buf) {
            v.extend_from_slice(&buf[..n]);
        }
    }
    if !v.split(|&c| c == b'\n').any(|l| l.starts_with(b"amdgpu ")) {
        v.extend_from_slice(AMDGPU_MODULE_LINE);
    }
    v
}

/// Classify `path`. Only device and topology paths touch the emulator (creating it on
/// first use); everything else returns `Pass` without allocating.
pub(crate) fn classify(path: &CStr) -> Result<Target, Errno> {
    let b = path.to_bytes();
    if b == b"/dev/kfd" {
        return Ok(Target::Kfd);
    }
    if b == b"/proc/modules" {
        return Ok(Target::Synth(proc_modules()));
    }
    if let Some(rest) = b.strip_prefix(RENDER_PREFIX) {
        if let Some(minor) = std::str::from_utf8(rest)
            .ok()
            .and_then(|s| s.parse::<u32>().ok())
        {
            return Ok(Target::Render(minor));
        }
        return Ok(Target::Pass);
    }
    if let Some(t) = drm_sysfs(b)? {
        return Ok(t);
    }
    for prefix in TOPOLOGY_PREFIXES {
        if let Some(rest) = b.strip_prefix(prefix) {
            if !(rest.is_empty() || rest.starts_with(b"/")) {
                continue;
            }
            let st = state::get()?;
            let mut p = st.sysfs_root.as_os_str().as_bytes().to_vec();
            p.extend_from_slice(rest);
            crate::trace(format_args!(
                "sysfs {} -> {}",
                String::from_utf8_lossy(b),
                OsStr::from_bytes(&p).to_string_lossy()
            ));
            return CString::new(p).map(Target::Sysfs).map_err(|_| Errno::NOENT);
        }
    }
    Ok(Target::Pass)
}

/// `/sys/dev/char/226:<minor>[/...]` and `/sys/class/drm/{renderD<minor>,card<i>}[/...]`
/// of an emulated GPU, rewritten into the preload's DRM sysfs tree.
fn drm_sysfs(b: &[u8]) -> Result<Option<Target>, Errno> {
    let (name, rest): (String, &[u8]) = if let Some(r) = b.strip_prefix(b"/sys/dev/char/226:") {
        let end = r.iter().position(|&c| c == b'/').unwrap_or(r.len());
        let Some(minor) = std::str::from_utf8(&r[..end])
            .ok()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            return Ok(None);
        };
        let name = if minor >= 128 {
            format!("render{minor}")
        } else {
            format!("card{minor}")
        };
        (name, &r[end..])
    } else if let Some(r) = b.strip_prefix(b"/sys/class/drm/") {
        let end = r.iter().position(|&c| c == b'/').unwrap_or(r.len());
        let Ok(entry) = std::str::from_utf8(&r[..end]) else {
            return Ok(None);
        };
        let name = if let Some(m) = entry.strip_prefix("renderD") {
            format!("render{m}")
        } else if entry.starts_with("card") && !entry.contains('-') {
            entry.to_owned()
        } else {
            return Ok(None);
        };
        (name, &r[end..])
    } else {
        return Ok(None);
    };
    let st = state::get()?;
    let dir = st.drm_root.join(&name);
    if !dir.exists() {
        return Ok(None);
    }
    let mut p = dir.into_os_string().into_vec();
    p.extend_from_slice(rest);
    crate::trace(format_args!(
        "drm sysfs {} -> {}",
        String::from_utf8_lossy(b),
        String::from_utf8_lossy(&p)
    ));
    CString::new(p)
        .map(|c| Some(Target::Sysfs(c)))
        .map_err(|_| Errno::NOENT)
}
