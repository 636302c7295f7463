//! Which emulated object a path names. Device files are emulated fds; the KFD topology
//! and the DRM sysfs entries are files and directories served from memory
//! (`kfd::topology::SysfsTree`): the emulator's topology tree and the preload's own DRM
//! tree. Nothing is written to disk.

use std::ffi::CStr;
use std::path::Path;

use kfd::topology::SysfsTree;
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
    /// A read-only file served from memory.
    File(Vec<u8>),
    /// A directory served from memory, with its sorted entries and which are directories.
    Dir(Vec<(String, bool)>),
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

/// Look `rest` (relative, may start with `/`) up in `tree`.
fn lookup(tree: &SysfsTree, rest: &[u8]) -> Result<Target, Errno> {
    let rel = std::str::from_utf8(rest).map_err(|_| Errno::NOENT)?;
    let rel = rel.trim_start_matches('/').trim_end_matches('/');
    let p = Path::new(rel);
    if let Some(f) = tree.read_file(p) {
        return Ok(Target::File(f.to_vec()));
    }
    let names = if rel.is_empty() {
        tree.list_dir(Path::new(""))
    } else {
        tree.list_dir(p)
    };
    match names {
        Some(names) => Ok(Target::Dir(
            names
                .into_iter()
                .map(|n| {
                    let child = p.join(&n);
                    let is_dir = tree.read_file(&child).is_none();
                    (n, is_dir)
                })
                .collect(),
        )),
        None => Err(Errno::NOENT),
    }
}

/// Classify `path`. Only device and sysfs paths touch the emulator (creating it on
/// first use); everything else returns `Pass` without allocating.
pub(crate) fn classify(path: &CStr) -> Result<Target, Errno> {
    let b = path.to_bytes();
    if b == b"/dev/kfd" {
        return Ok(Target::Kfd);
    }
    if b == b"/proc/modules" {
        return Ok(Target::File(proc_modules()));
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
    if let Some((name, rest)) = drm_sysfs(b) {
        let st = state::get()?;
        // Minors the emulated device does not have are the host's business.
        if !st.drm_tree.is_dir(Path::new(&name)) {
            return Ok(Target::Pass);
        }
        let mut rel = name.into_bytes();
        rel.extend_from_slice(rest);
        crate::trace(format_args!("drm sysfs {}", String::from_utf8_lossy(b)));
        return lookup(&st.drm_tree, &rel);
    }
    for prefix in TOPOLOGY_PREFIXES {
        if let Some(rest) = b.strip_prefix(prefix) {
            if !(rest.is_empty() || rest.starts_with(b"/")) {
                continue;
            }
            let st = state::get()?;
            crate::trace(format_args!("sysfs {}", String::from_utf8_lossy(b)));
            return lookup(st.emu.sysfs_tree(), rest);
        }
    }
    Ok(Target::Pass)
}

/// `/sys/dev/char/226:<minor>[/...]` and `/sys/class/drm/{renderD<minor>,card<i>}[/...]`:
/// the entry's name in the preload's DRM tree (`render<minor>` or `card<i>`) and the rest.
fn drm_sysfs(b: &[u8]) -> Option<(String, &[u8])> {
    if let Some(r) = b.strip_prefix(b"/sys/dev/char/226:") {
        let end = r.iter().position(|&c| c == b'/').unwrap_or(r.len());
        let minor = std::str::from_utf8(&r[..end]).ok()?.parse::<u32>().ok()?;
        let name = if minor >= 128 {
            format!("render{minor}")
        } else {
            format!("card{minor}")
        };
        return Some((name, &r[end..]));
    }
    let r = b.strip_prefix(b"/sys/class/drm/")?;
    let end = r.iter().position(|&c| c == b'/').unwrap_or(r.len());
    let entry = std::str::from_utf8(&r[..end]).ok()?;
    let name = if let Some(m) = entry.strip_prefix("renderD") {
        format!("render{m}")
    } else if entry.starts_with("card") && !entry.contains('-') {
        entry.to_owned()
    } else {
        return None;
    };
    Some((name, &r[end..]))
}
