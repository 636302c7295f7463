//! Target IDs: `amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-` (LLVM AMDGPUUsage, "Target
//! ID"). A feature absent from a code object's target ID means "any" (the code runs with
//! either setting); `+`/`-` pin it.

use crate::Error;

/// A target feature setting (`sramecc`, `xnack`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Feature {
    /// Not specified: compatible with either setting.
    #[default]
    Any,
    /// `feature+`.
    On,
    /// `feature-`.
    Off,
}

impl Feature {
    /// Whether code built with `self` runs on a device whose setting is `device`.
    pub fn compatible_with(self, device: Feature) -> bool {
        self == Feature::Any || device == Feature::Any || self == device
    }

    fn suffix(self, name: &str) -> String {
        match self {
            Feature::Any => String::new(),
            Feature::On => format!(":{name}+"),
            Feature::Off => format!(":{name}-"),
        }
    }
}

/// A parsed target ID.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TargetId {
    /// The processor, for example `gfx942`.
    pub processor: String,
    /// The `sramecc` setting.
    pub sramecc: Feature,
    /// The `xnack` setting.
    pub xnack: Feature,
}

/// The triple every AMDHSA target ID starts with.
pub const AMDHSA_TRIPLE: &str = "amdgcn-amd-amdhsa";

impl TargetId {
    /// Parses `amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-`, or the processor part alone
    /// (`gfx942:xnack-`).
    pub fn parse(s: &str) -> Result<TargetId, Error> {
        let bad = |why: &str| Error::Target(format!("target ID {s:?}: {why}"));
        let rest = match s.strip_prefix(AMDHSA_TRIPLE) {
            // The environment component is empty: `amdgcn-amd-amdhsa--gfxNNN`.
            Some(r) => r
                .strip_prefix("--")
                .or_else(|| r.strip_prefix('-'))
                .ok_or_else(|| bad("expected `--` after the triple"))?,
            None if s.starts_with("gfx") => s,
            None => return Err(bad("not an amdgcn-amd-amdhsa target")),
        };
        let mut parts = rest.split(':');
        let processor = parts.next().unwrap_or_default();
        if !processor.starts_with("gfx")
            || processor.len() < 4
            || !processor[3..]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(bad("processor must be gfxNNN"));
        }
        let mut t = TargetId {
            processor: processor.to_string(),
            sramecc: Feature::Any,
            xnack: Feature::Any,
        };
        for f in parts {
            let (name, setting) = match f.as_bytes().last() {
                Some(b'+') => (&f[..f.len() - 1], Feature::On),
                Some(b'-') => (&f[..f.len() - 1], Feature::Off),
                _ => return Err(bad("feature must end in + or -")),
            };
            let slot = match name {
                "sramecc" => &mut t.sramecc,
                "xnack" => &mut t.xnack,
                _ => return Err(bad("unknown feature (want sramecc or xnack)")),
            };
            if *slot != Feature::Any {
                return Err(bad("feature given twice"));
            }
            *slot = setting;
        }
        Ok(t)
    }

    /// A device target: processor with concrete settings.
    pub fn new(processor: &str, sramecc: Feature, xnack: Feature) -> TargetId {
        TargetId {
            processor: processor.to_string(),
            sramecc,
            xnack,
        }
    }

    /// Whether code for `self` runs on `device` (same processor, compatible features).
    pub fn compatible_with(&self, device: &TargetId) -> bool {
        self.processor == device.processor
            && self.sramecc.compatible_with(device.sramecc)
            && self.xnack.compatible_with(device.xnack)
    }

    /// [`TargetId::compatible_with`] as a result whose error names both targets.
    pub fn check(&self, device: &TargetId) -> Result<(), Error> {
        if self.compatible_with(device) {
            Ok(())
        } else {
            Err(Error::TargetMismatch {
                code_object: self.to_string(),
                device: device.to_string(),
            })
        }
    }
}

impl std::fmt::Display for TargetId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Features in alphabetical order, as LLVM prints them.
        write!(
            f,
            "{AMDHSA_TRIPLE}--{}{}{}",
            self.processor,
            self.sramecc.suffix("sramecc"),
            self.xnack.suffix("xnack")
        )
    }
}

/// The processor named by an ELF `e_flags` EF_AMDGPU_MACH value (bits 0..7), for the
/// processors kfdrt models or commonly meets (LLVM `BinaryFormat/ELF.h`).
pub fn mach_name(mach: u32) -> Option<&'static str> {
    Some(match mach {
        0x2c => "gfx900",
        0x2f => "gfx906",
        0x30 => "gfx908",
        0x3f => "gfx90a",
        0x40 => "gfx940",
        0x4b => "gfx941",
        0x4c => "gfx942",
        0x4f => "gfx950",
        0x36 => "gfx1030",
        0x41 => "gfx1100",
        0x42 => "gfx1101",
        0x43 => "gfx1102",
        0x48 => "gfx1201",
        0x4e => "gfx1200",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        let t = TargetId::parse("amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-").unwrap();
        assert_eq!(t.processor, "gfx942");
        assert_eq!(t.sramecc, Feature::On);
        assert_eq!(t.xnack, Feature::Off);
        assert_eq!(t.to_string(), "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-");
        let any = TargetId::parse("amdgcn-amd-amdhsa--gfx90a").unwrap();
        assert_eq!((any.sramecc, any.xnack), (Feature::Any, Feature::Any));
        assert_eq!(TargetId::parse("gfx90a:xnack+").unwrap().xnack, Feature::On);
    }

    #[test]
    fn bad_ids() {
        for s in [
            "",
            "x86_64-unknown-linux-gnu",
            "amdgcn-amd-amdhsa--",
            "amdgcn-amd-amdhsa--gfx942:xnack",
            "amdgcn-amd-amdhsa--gfx942:foo+",
            "amdgcn-amd-amdhsa--gfx942:xnack+:xnack-",
            "gfx",
        ] {
            assert!(TargetId::parse(s).is_err(), "{s}");
        }
    }

    #[test]
    fn compatibility() {
        let dev = TargetId::new("gfx942", Feature::On, Feature::Off);
        let any = TargetId::parse("amdgcn-amd-amdhsa--gfx942").unwrap();
        assert!(any.compatible_with(&dev));
        let xn = TargetId::parse("amdgcn-amd-amdhsa--gfx942:xnack+").unwrap();
        let e = xn.check(&dev).unwrap_err().to_string();
        assert!(
            e.contains("gfx942:xnack+") && e.contains("gfx942:sramecc+:xnack-"),
            "{e}"
        );
        let other = TargetId::parse("amdgcn-amd-amdhsa--gfx90a").unwrap();
        let e = other.check(&dev).unwrap_err().to_string();
        assert!(e.contains("gfx90a") && e.contains("gfx942"), "{e}");
    }
}
