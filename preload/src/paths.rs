//! Which emulated object a path names.

use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;

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
    /// Not ours.
    Pass,
}

/// Classify `path`. Only device and topology paths touch the emulator (creating it on
/// first use); everything else returns `Pass` without allocating.
pub(crate) fn classify(path: &CStr) -> Result<Target, Errno> {
    let b = path.to_bytes();
    if b == b"/dev/kfd" {
        return Ok(Target::Kfd);
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
            return CString::new(p)
                .map(Target::Sysfs)
                .map_err(|_| Errno::NOENT);
        }
    }
    Ok(Target::Pass)
}
