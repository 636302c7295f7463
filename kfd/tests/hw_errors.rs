//! The hardware backend's error paths, exercised without a GPU: a missing `/dev/kfd`, and
//! an ioctl answered with an errno (a file that is not the KFD device answers ENOTTY).

use std::path::PathBuf;

use kfd::hw::OpenError;
use kfd::topology::{Node, Topology};
use kfd::{Backend, Errno, HwBackend};

/// A minimal topology tree (one CPU node) in a fresh temp dir.
fn cpu_only_tree(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kfdrt-hw-errors-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut node = Node {
        id: 0,
        name: String::new(),
        ..Default::default()
    };
    node.properties.cpu_cores_count = 4;
    let topo = Topology {
        nodes: vec![node],
        ..Default::default()
    };
    topo.to_sysfs(&dir).unwrap();
    dir
}

#[test]
fn missing_kfd_device_names_the_path_and_errno() {
    let tree = cpu_only_tree("missing");
    let err = HwBackend::open_with(std::path::Path::new("/nonexistent/kfd"), &tree).unwrap_err();
    let OpenError::Kfd(e) = &err else {
        panic!("expected a KFD open error, got {err:?}")
    };
    assert_eq!(e.errno, Errno::NOENT);
    let msg = err.to_string();
    assert!(msg.contains("open failed: ENOENT"), "{msg}");
    assert!(msg.contains("/nonexistent/kfd"), "{msg}");
    assert!(msg.contains("amdgpu driver"), "{msg}");
    let _ = std::fs::remove_dir_all(&tree);
}

#[test]
fn missing_topology_names_the_file() {
    let dir = std::env::temp_dir().join(format!("kfdrt-hw-errors-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let err = HwBackend::open_with(std::path::Path::new("/dev/null"), &dir).unwrap_err();
    assert!(matches!(err, OpenError::Topology(_)), "{err:?}");
    assert!(err.to_string().contains(dir.to_str().unwrap()), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ioctl_errno_is_reported_with_ioctl_name_and_arguments() {
    // /dev/null accepts open(O_RDWR) but answers every ioctl with ENOTTY: a real errno from
    // the real ioctl(2) path of the hardware backend.
    let tree = cpu_only_tree("ioctl");
    let b = HwBackend::open_with(std::path::Path::new("/dev/null"), &tree).unwrap();
    assert_eq!(b.kind(), kfd::BackendKind::Hardware);
    assert_eq!(b.topology().nodes.len(), 1);

    let e = kfd::ioctl::get_version(&b).unwrap_err();
    assert_eq!(e.call, "AMDKFD_IOC_GET_VERSION");
    assert_eq!(e.errno, Errno::NOTTY);
    assert!(
        e.to_string()
            .starts_with("AMDKFD_IOC_GET_VERSION failed: ENOTTY"),
        "{e}"
    );

    let mut args = kfd::abi::AllocMemoryOfGpuArgs {
        va_addr: 0x7f00_0000_0000,
        size: 0x20_0000,
        gpu_id: 0x1a2b,
        flags: kfd::abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM,
        ..Default::default()
    };
    let e = kfd::ioctl::alloc_memory_of_gpu(&b, &mut args).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("AMDKFD_IOC_ALLOC_MEMORY_OF_GPU"), "{msg}");
    assert!(
        msg.contains("gpu_id=0x1a2b") && msg.contains("size=0x200000"),
        "{msg}"
    );

    // Variable-length SVM call: the request code carries the attribute bytes.
    let mut attrs = [kfd::abi::SvmAttribute {
        type_: kfd::abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
        value: 0,
    }; 3];
    let e = kfd::ioctl::svm(
        &b,
        kfd::abi::KFD_IOCTL_SVM_OP_SET_ATTR,
        0x1000,
        0x1000,
        &mut attrs,
    )
    .unwrap_err();
    assert_eq!(e.errno, Errno::NOTTY);
    assert!(e.to_string().contains("nattr=3"), "{e}");

    // Inconsistent lengths are refused before reaching the kernel.
    let mut wa = kfd::abi::WaitEventsArgs {
        num_events: 4,
        ..Default::default()
    };
    let r = b.ioctl(kfd::Ioctl::WaitEvents {
        args: &mut wa,
        events: &mut [],
    });
    assert_eq!(r, Err(Errno::INVAL));
    let _ = std::fs::remove_dir_all(&tree);
}
