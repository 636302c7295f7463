//! Device selection: `KFDRT_DEVICE` / `--device` = `auto` | `hw` | `emu[:PRESET[*N][,...]]`.
//!
//! The emulator is the default cargo feature `emulator`; a build without it (embedded,
//! hardware only) answers every `emu` spec, and `auto` without `/dev/kfd`, with
//! `NotSupported` saying the emulator is not built in.

use std::sync::Arc;

use kfd::{Backend, HwBackend};

use crate::error::{Error, ErrorKind, Result};

/// The environment variable that selects the device.
pub const DEVICE_ENV: &str = "KFDRT_DEVICE";

/// Which device a spec asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSpec {
    /// Hardware when `/dev/kfd` can be opened, otherwise the default emulator.
    Auto,
    /// The hardware backend; fails when `/dev/kfd` is absent.
    Hardware,
    /// The emulator with the given spec (the whole string, e.g. `emu:mi300x*2`).
    Emulated(String),
}

impl DeviceSpec {
    /// Parse a device spec. Errors name the bad spec and list the accepted forms.
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim();
        match s {
            "" | "auto" => Ok(DeviceSpec::Auto),
            "hw" => Ok(DeviceSpec::Hardware),
            _ if s == "emu" || s.starts_with("emu:") => Ok(DeviceSpec::Emulated(s.to_string())),
            _ => Err(Error::new(
                ErrorKind::InvalidDevice,
                "DeviceSpec::parse",
                format!("unknown device spec {s:?}: expected auto, hw, emu or emu:PRESET[*N][,PRESET...]"),
            )),
        }
    }

    /// The spec from `KFDRT_DEVICE` (default `auto`).
    pub fn from_env() -> Result<Self> {
        match std::env::var(DEVICE_ENV) {
            Ok(v) => Self::parse(&v),
            Err(std::env::VarError::NotPresent) => Ok(DeviceSpec::Auto),
            Err(e) => Err(Error::new(
                ErrorKind::InvalidDevice,
                "DeviceSpec::from_env",
                format!("{DEVICE_ENV}: {e}"),
            )),
        }
    }
}

/// Open the backend a spec selects.
pub fn open_backend(spec: &DeviceSpec) -> Result<Arc<dyn Backend>> {
    match spec {
        DeviceSpec::Hardware => open_hw(),
        DeviceSpec::Auto => {
            if HwBackend::available() {
                open_hw()
            } else {
                open_emu("emu")
            }
        }
        DeviceSpec::Emulated(s) => open_emu(s),
    }
}

fn open_hw() -> Result<Arc<dyn Backend>> {
    HwBackend::open()
        .map(|b| Arc::new(b) as Arc<dyn Backend>)
        .map_err(|e| {
            Error::new(ErrorKind::NoDevice, "open_backend(hw)", e.to_string()).with_source(e)
        })
}

#[cfg(feature = "emulator")]
fn open_emu(spec: &str) -> Result<Arc<dyn Backend>> {
    kfd_emu::EmuBackend::from_spec(spec)
        .map(|b| Arc::new(b) as Arc<dyn Backend>)
        .map_err(|e| Error::new(ErrorKind::InvalidDevice, "open_backend(emu)", e.to_string()))
}

/// Built without the `emulator` feature (an embedded build): only hardware can be opened.
#[cfg(not(feature = "emulator"))]
fn open_emu(spec: &str) -> Result<Arc<dyn Backend>> {
    Err(Error::new(
        ErrorKind::NotSupported,
        "open_backend(emu)",
        format!(
            "device {spec:?}: the emulator is not built in (kfdrt was built without its \
             `emulator` feature); only hardware (/dev/kfd) can be opened, and `auto` \
             falls back to the emulator when it cannot"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without the `emulator` feature every emulator spec is refused by name; with it,
    /// the spec opens a device.
    #[test]
    fn emu_spec_opens_only_when_the_emulator_is_built_in() {
        let spec = DeviceSpec::parse("emu:mi300x").unwrap();
        let r = open_backend(&spec);
        if cfg!(feature = "emulator") {
            let b = r.unwrap();
            assert!(b.topology().gpu_nodes().count() == 1);
        } else {
            let e = r.err().expect("emu opened without the emulator built in");
            assert_eq!(e.kind(), ErrorKind::NotSupported);
            assert!(e.to_string().contains("emulator is not built in"), "{e}");
        }
    }
}
