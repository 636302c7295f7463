//! GPU families and SDMA versions.

/// Graphics IP family. Encodings that differ between generations take one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GfxFamily {
    /// gfx9: Vega and CDNA (gfx900, gfx906, gfx908, gfx90a, gfx940..gfx942, gfx950).
    Gfx9,
    /// gfx10: RDNA1/RDNA2 (gfx1010..gfx1036).
    Gfx10,
    /// gfx11: RDNA3 (gfx1100..gfx1153).
    Gfx11,
    /// gfx12: RDNA4 (gfx1200, gfx1201).
    Gfx12,
}

impl GfxFamily {
    /// Every family, oldest first.
    pub const ALL: [GfxFamily; 4] = [
        GfxFamily::Gfx9,
        GfxFamily::Gfx10,
        GfxFamily::Gfx11,
        GfxFamily::Gfx12,
    ];

    /// Family of a KFD `gfx_target_version` (major*10000 + minor*100 + stepping,
    /// e.g. 90010 = gfx90a, 90402 = gfx942, 110000 = gfx1100, 120001 = gfx1201).
    pub const fn from_gfx_target_version(v: u32) -> Option<Self> {
        match v / 10000 {
            9 => Some(GfxFamily::Gfx9),
            10 => Some(GfxFamily::Gfx10),
            11 => Some(GfxFamily::Gfx11),
            12 => Some(GfxFamily::Gfx12),
            _ => None,
        }
    }

    /// Family of an ISA name such as `"gfx942"`, `"gfx90a"`, `"gfx1100"`,
    /// `"gfx1201"` (an `amdgcn-amd-amdhsa--` prefix and `:feature` suffixes are
    /// accepted).
    pub fn from_name(name: &str) -> Option<Self> {
        let name = name.rsplit("--").next().unwrap_or(name);
        let name = name.split(':').next().unwrap_or(name);
        let digits = name.strip_prefix("gfx")?;
        if digits.len() < 3 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        // gfx9xx has a one-digit major; gfx10xx..gfx12xx have two digits.
        let major = if digits.len() == 3 {
            &digits[..1]
        } else {
            &digits[..digits.len() - 2]
        };
        match major {
            "9" => Some(GfxFamily::Gfx9),
            "10" => Some(GfxFamily::Gfx10),
            "11" => Some(GfxFamily::Gfx11),
            "12" => Some(GfxFamily::Gfx12),
            _ => None,
        }
    }

    /// Short lower-case name: `gfx9`, `gfx10`, `gfx11`, `gfx12`.
    pub const fn name(self) -> &'static str {
        match self {
            GfxFamily::Gfx9 => "gfx9",
            GfxFamily::Gfx10 => "gfx10",
            GfxFamily::Gfx11 => "gfx11",
            GfxFamily::Gfx12 => "gfx12",
        }
    }

    /// True for gfx10 and later (GCR cache control instead of CP_COHER_CNTL).
    pub const fn has_gcr(self) -> bool {
        !matches!(self, GfxFamily::Gfx9)
    }
}

/// SDMA engine major version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SdmaVersion {
    /// SDMA 4.x (gfx9: Vega, MI100, MI200, MI300).
    V4,
    /// SDMA 5.x (gfx10).
    V5,
    /// SDMA 6.x (gfx11).
    V6,
    /// SDMA 7.x (gfx12).
    V7,
}

impl SdmaVersion {
    /// Every version, oldest first.
    pub const ALL: [SdmaVersion; 4] = [
        SdmaVersion::V4,
        SdmaVersion::V5,
        SdmaVersion::V6,
        SdmaVersion::V7,
    ];

    /// The SDMA version paired with a graphics family.
    pub const fn for_family(f: GfxFamily) -> Self {
        match f {
            GfxFamily::Gfx9 => SdmaVersion::V4,
            GfxFamily::Gfx10 => SdmaVersion::V5,
            GfxFamily::Gfx11 => SdmaVersion::V6,
            GfxFamily::Gfx12 => SdmaVersion::V7,
        }
    }

    /// Width in bits of the COPY_LINEAR / CONST_FILL count field (22 on 4.x,
    /// 30 on 5.x and later).
    pub const fn count_bits(self) -> u32 {
        match self {
            SdmaVersion::V4 => 22,
            _ => 30,
        }
    }

    /// Largest byte count one COPY_LINEAR or CONST_FILL packet can carry
    /// (the count field holds bytes - 1).
    pub const fn max_copy_bytes(self) -> u32 {
        1u32 << self.count_bits()
    }

    /// Short name: `sdma4` .. `sdma7`.
    pub const fn name(self) -> &'static str {
        match self {
            SdmaVersion::V4 => "sdma4",
            SdmaVersion::V5 => "sdma5",
            SdmaVersion::V6 => "sdma6",
            SdmaVersion::V7 => "sdma7",
        }
    }
}
