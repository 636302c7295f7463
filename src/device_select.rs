//! Device selection: `KFDRT_DEVICE` / `--device` = `auto` | `hw` | `emu[:PRESET[*N][,...]]`.

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

fn open_emu(spec: &str) -> Result<Arc<dyn Backend>> {
    kfd_emu::EmuBackend::from_spec(spec)
        .map(|b| Arc::new(b) as Arc<dyn Backend>)
        .map_err(|e| Error::new(ErrorKind::InvalidDevice, "open_backend(emu)", e.to_string()))
}
