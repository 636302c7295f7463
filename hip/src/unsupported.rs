//! Functions of Debian's HIP 5.2 library that kfdrt does not implement yet.
//!
//! Each is exported under its name and version node, so a program that references one
//! loads (instead of failing with "undefined symbol") and gets `hipErrorNotSupported`
//! (also the thread's last error) where it calls one. None reads its arguments: a C
//! caller passes them in registers or on its own stack frame, and a callee that ignores
//! them is sound for these non-variadic functions on the supported targets (x86-64
//! SysV, AArch64 AAPCS64: caller-cleaned, no callee-popped arguments). Every one of them
//! returns `hipError_t` in Debian's header; functions returning anything else are not
//! here. The hip/README coverage table lists them.

use crate::api::ret;
use crate::error::{hipErrorNotSupported, hipError_t};

macro_rules! not_supported {
    ($($name:ident),* $(,)?) => {
        $(
            #[doc = concat!("`", stringify!($name), "`: not implemented by kfdrt yet; ",
                "returns `hipErrorNotSupported` (and sets it as the last error).")]
            #[no_mangle]
            pub extern "C" fn $name() -> hipError_t {
                ret(Err(hipErrorNotSupported))
            }
        )*
        /// The names of this module's functions, for tests and the coverage table.
        pub const NOT_SUPPORTED: &[&str] = &[$(stringify!($name)),*];
    };
}

not_supported!(
    hipOccupancyMaxPotentialBlockSize,
    hipOccupancyMaxActiveBlocksPerMultiprocessor,
    hipOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
    hipModuleOccupancyMaxPotentialBlockSize,
    hipModuleOccupancyMaxPotentialBlockSizeWithFlags,
    hipModuleOccupancyMaxActiveBlocksPerMultiprocessor,
    hipModuleOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
    hipFuncGetAttribute,
    hipFuncSetAttribute,
    hipFuncSetCacheConfig,
    hipFuncSetSharedMemConfig,
    hipModuleGetGlobal,
    hipModuleGetTexRef,
    hipDeviceGetLimit,
    hipSetDeviceFlags,
    hipGetDeviceFlags,
    hipMemcpy2D,
    hipMemcpy2DAsync,
    hipMemcpy3D,
    hipMemcpy3DAsync,
    hipMemcpyParam2D,
    hipMemcpyParam2DAsync,
    hipMallocPitch,
    hipMemAllocPitch,
    hipMalloc3D,
    hipMemset2D,
    hipMemset2DAsync,
    hipMemset3D,
    hipMemset3DAsync,
    hipLaunchCooperativeKernel,
    hipLaunchCooperativeKernelMultiDevice,
    hipExtLaunchMultiKernelMultiDevice,
    hipPointerGetAttribute,
    hipDrvPointerGetAttributes,
    hipProfilerStart,
    hipProfilerStop,
    hipDeviceSetCacheConfig,
    hipDeviceGetCacheConfig,
    hipDeviceSetSharedMemConfig,
    hipDeviceGetSharedMemConfig,
    hipStreamBeginCapture,
    hipStreamEndCapture,
    hipStreamIsCapturing,
    hipStreamGetCaptureInfo,
    hipGraphCreate,
    hipGraphInstantiate,
    hipGraphLaunch,
    hipGraphExecDestroy,
    hipGraphDestroy,
    hipMallocArray,
    hipFreeArray,
    hipMalloc3DArray,
    hipMemcpyToArray,
    hipMemcpyFromArray,
    hipMemcpy2DToArray,
    hipMemcpy2DFromArray,
    hipCreateTextureObject,
    hipDestroyTextureObject,
    hipGetTextureObjectResourceDesc,
    hipBindTexture,
    hipUnbindTexture,
    hipTexRefSetAddress,
    hipMemcpyPeer,
    hipMemcpyPeerAsync,
    hipDeviceGetP2PAttribute,
    hipExtGetLinkTypeAndHopCount,
    hipDeviceGetByPCIBusId,
    hipDeviceGetPCIBusId,
    hipDeviceGet,
    hipDeviceGetUuid,
    hipCtxCreate,
    hipCtxDestroy,
    hipCtxGetCurrent,
    hipCtxSetCurrent,
    hipDevicePrimaryCtxRetain,
    hipDevicePrimaryCtxRelease,
    hipLaunchByPtr,
    hipConfigureCall,
    hipSetupArgument,
    hipImportExternalMemory,
    hipImportExternalSemaphore,
    hipSignalExternalSemaphoresAsync,
    hipWaitExternalSemaphoresAsync,
    hipDestroyExternalMemory,
    hipDestroyExternalSemaphore,
    hipExternalMemoryGetMappedBuffer,
    hipGLGetDevices,
);
