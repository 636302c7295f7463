//! Family and SDMA version selection (KFD gfx_target_version = major*10000 +
//! minor*100 + stepping, as in the kernel's kfd_topology.c / kfd_device.c).
use pm4::{GfxFamily, SdmaVersion};

#[test]
fn from_gfx_target_version() {
    let cases = [
        (90000, Some(GfxFamily::Gfx9)),
        (90010, Some(GfxFamily::Gfx9)),
        (90402, Some(GfxFamily::Gfx9)),
        (100300, Some(GfxFamily::Gfx10)),
        (110000, Some(GfxFamily::Gfx11)),
        (120001, Some(GfxFamily::Gfx12)),
        (80003, None),
        (0, None),
    ];
    for (v, f) in cases {
        assert_eq!(GfxFamily::from_gfx_target_version(v), f, "{v}");
    }
}

#[test]
fn from_name() {
    let cases = [
        ("gfx900", Some(GfxFamily::Gfx9)),
        ("gfx90a", Some(GfxFamily::Gfx9)),
        ("gfx942", Some(GfxFamily::Gfx9)),
        (
            "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
            Some(GfxFamily::Gfx9),
        ),
        ("gfx1030", Some(GfxFamily::Gfx10)),
        ("gfx1100", Some(GfxFamily::Gfx11)),
        ("gfx1151", Some(GfxFamily::Gfx11)),
        ("gfx1201", Some(GfxFamily::Gfx12)),
        ("gfx803", None),
        ("gfx", None),
        ("sm_90", None),
    ];
    for (n, f) in cases {
        assert_eq!(GfxFamily::from_name(n), f, "{n}");
    }
}

#[test]
fn sdma_for_family() {
    assert_eq!(SdmaVersion::for_family(GfxFamily::Gfx9), SdmaVersion::V4);
    assert_eq!(SdmaVersion::for_family(GfxFamily::Gfx10), SdmaVersion::V5);
    assert_eq!(SdmaVersion::for_family(GfxFamily::Gfx11), SdmaVersion::V6);
    assert_eq!(SdmaVersion::for_family(GfxFamily::Gfx12), SdmaVersion::V7);
    // vega10_sdma_pkt_open.h COPY_LINEAR count mask 0x003FFFFF; navi10: 0x3FFFFFFF.
    assert_eq!(SdmaVersion::V4.max_copy_bytes(), 0x40_0000);
    assert_eq!(SdmaVersion::V7.max_copy_bytes(), 0x4000_0000);
}
