//! `hipError_t` (HIP 5.2, `hip/hip_runtime_api.h`) and its names.
//!
//! HIP 5.2's `hipGetErrorString` returns the same text as `hipGetErrorName` (measured by
//! calling Debian's libamdhip64 5.2 for every value: `hip/abi/hip_error_t.tsv`); codes it
//! does not know are named `hipErrorUnknown`.

#![allow(non_upper_case_globals)]

use std::ffi::CStr;

/// `hipError_t`: a C `int`-sized enum.
pub type hipError_t = i32;

/// `hipSuccess`.
pub const hipSuccess: hipError_t = 0;
/// `hipErrorInvalidValue`.
pub const hipErrorInvalidValue: hipError_t = 1;
/// `hipErrorOutOfMemory`.
pub const hipErrorOutOfMemory: hipError_t = 2;
/// `hipErrorMemoryAllocation`.
pub const hipErrorMemoryAllocation: hipError_t = 2;
/// `hipErrorNotInitialized`.
pub const hipErrorNotInitialized: hipError_t = 3;
/// `hipErrorInitializationError`.
pub const hipErrorInitializationError: hipError_t = 3;
/// `hipErrorDeinitialized`.
pub const hipErrorDeinitialized: hipError_t = 4;
/// `hipErrorProfilerDisabled`.
pub const hipErrorProfilerDisabled: hipError_t = 5;
/// `hipErrorProfilerNotInitialized`.
pub const hipErrorProfilerNotInitialized: hipError_t = 6;
/// `hipErrorProfilerAlreadyStarted`.
pub const hipErrorProfilerAlreadyStarted: hipError_t = 7;
/// `hipErrorProfilerAlreadyStopped`.
pub const hipErrorProfilerAlreadyStopped: hipError_t = 8;
/// `hipErrorInvalidConfiguration`.
pub const hipErrorInvalidConfiguration: hipError_t = 9;
/// `hipErrorInvalidPitchValue`.
pub const hipErrorInvalidPitchValue: hipError_t = 12;
/// `hipErrorInvalidSymbol`.
pub const hipErrorInvalidSymbol: hipError_t = 13;
/// `hipErrorInvalidDevicePointer`.
pub const hipErrorInvalidDevicePointer: hipError_t = 17;
/// `hipErrorInvalidMemcpyDirection`.
pub const hipErrorInvalidMemcpyDirection: hipError_t = 21;
/// `hipErrorInsufficientDriver`.
pub const hipErrorInsufficientDriver: hipError_t = 35;
/// `hipErrorMissingConfiguration`.
pub const hipErrorMissingConfiguration: hipError_t = 52;
/// `hipErrorPriorLaunchFailure`.
pub const hipErrorPriorLaunchFailure: hipError_t = 53;
/// `hipErrorInvalidDeviceFunction`.
pub const hipErrorInvalidDeviceFunction: hipError_t = 98;
/// `hipErrorNoDevice`.
pub const hipErrorNoDevice: hipError_t = 100;
/// `hipErrorInvalidDevice`.
pub const hipErrorInvalidDevice: hipError_t = 101;
/// `hipErrorInvalidImage`.
pub const hipErrorInvalidImage: hipError_t = 200;
/// `hipErrorInvalidContext`.
pub const hipErrorInvalidContext: hipError_t = 201;
/// `hipErrorContextAlreadyCurrent`.
pub const hipErrorContextAlreadyCurrent: hipError_t = 202;
/// `hipErrorMapFailed`.
pub const hipErrorMapFailed: hipError_t = 205;
/// `hipErrorMapBufferObjectFailed`.
pub const hipErrorMapBufferObjectFailed: hipError_t = 205;
/// `hipErrorUnmapFailed`.
pub const hipErrorUnmapFailed: hipError_t = 206;
/// `hipErrorArrayIsMapped`.
pub const hipErrorArrayIsMapped: hipError_t = 207;
/// `hipErrorAlreadyMapped`.
pub const hipErrorAlreadyMapped: hipError_t = 208;
/// `hipErrorNoBinaryForGpu`.
pub const hipErrorNoBinaryForGpu: hipError_t = 209;
/// `hipErrorAlreadyAcquired`.
pub const hipErrorAlreadyAcquired: hipError_t = 210;
/// `hipErrorNotMapped`.
pub const hipErrorNotMapped: hipError_t = 211;
/// `hipErrorNotMappedAsArray`.
pub const hipErrorNotMappedAsArray: hipError_t = 212;
/// `hipErrorNotMappedAsPointer`.
pub const hipErrorNotMappedAsPointer: hipError_t = 213;
/// `hipErrorECCNotCorrectable`.
pub const hipErrorECCNotCorrectable: hipError_t = 214;
/// `hipErrorUnsupportedLimit`.
pub const hipErrorUnsupportedLimit: hipError_t = 215;
/// `hipErrorContextAlreadyInUse`.
pub const hipErrorContextAlreadyInUse: hipError_t = 216;
/// `hipErrorPeerAccessUnsupported`.
pub const hipErrorPeerAccessUnsupported: hipError_t = 217;
/// `hipErrorInvalidKernelFile`.
pub const hipErrorInvalidKernelFile: hipError_t = 218;
/// `hipErrorInvalidGraphicsContext`.
pub const hipErrorInvalidGraphicsContext: hipError_t = 219;
/// `hipErrorInvalidSource`.
pub const hipErrorInvalidSource: hipError_t = 300;
/// `hipErrorFileNotFound`.
pub const hipErrorFileNotFound: hipError_t = 301;
/// `hipErrorSharedObjectSymbolNotFound`.
pub const hipErrorSharedObjectSymbolNotFound: hipError_t = 302;
/// `hipErrorSharedObjectInitFailed`.
pub const hipErrorSharedObjectInitFailed: hipError_t = 303;
/// `hipErrorOperatingSystem`.
pub const hipErrorOperatingSystem: hipError_t = 304;
/// `hipErrorInvalidHandle`.
pub const hipErrorInvalidHandle: hipError_t = 400;
/// `hipErrorInvalidResourceHandle`.
pub const hipErrorInvalidResourceHandle: hipError_t = 400;
/// `hipErrorIllegalState`.
pub const hipErrorIllegalState: hipError_t = 401;
/// `hipErrorNotFound`.
pub const hipErrorNotFound: hipError_t = 500;
/// `hipErrorNotReady`.
pub const hipErrorNotReady: hipError_t = 600;
/// `hipErrorIllegalAddress`.
pub const hipErrorIllegalAddress: hipError_t = 700;
/// `hipErrorLaunchOutOfResources`.
pub const hipErrorLaunchOutOfResources: hipError_t = 701;
/// `hipErrorLaunchTimeOut`.
pub const hipErrorLaunchTimeOut: hipError_t = 702;
/// `hipErrorPeerAccessAlreadyEnabled`.
pub const hipErrorPeerAccessAlreadyEnabled: hipError_t = 704;
/// `hipErrorPeerAccessNotEnabled`.
pub const hipErrorPeerAccessNotEnabled: hipError_t = 705;
/// `hipErrorSetOnActiveProcess`.
pub const hipErrorSetOnActiveProcess: hipError_t = 708;
/// `hipErrorContextIsDestroyed`.
pub const hipErrorContextIsDestroyed: hipError_t = 709;
/// `hipErrorAssert`.
pub const hipErrorAssert: hipError_t = 710;
/// `hipErrorHostMemoryAlreadyRegistered`.
pub const hipErrorHostMemoryAlreadyRegistered: hipError_t = 712;
/// `hipErrorHostMemoryNotRegistered`.
pub const hipErrorHostMemoryNotRegistered: hipError_t = 713;
/// `hipErrorLaunchFailure`.
pub const hipErrorLaunchFailure: hipError_t = 719;
/// `hipErrorCooperativeLaunchTooLarge`.
pub const hipErrorCooperativeLaunchTooLarge: hipError_t = 720;
/// `hipErrorNotSupported`.
pub const hipErrorNotSupported: hipError_t = 801;
/// `hipErrorStreamCaptureUnsupported`.
pub const hipErrorStreamCaptureUnsupported: hipError_t = 900;
/// `hipErrorStreamCaptureInvalidated`.
pub const hipErrorStreamCaptureInvalidated: hipError_t = 901;
/// `hipErrorStreamCaptureMerge`.
pub const hipErrorStreamCaptureMerge: hipError_t = 902;
/// `hipErrorStreamCaptureUnmatched`.
pub const hipErrorStreamCaptureUnmatched: hipError_t = 903;
/// `hipErrorStreamCaptureUnjoined`.
pub const hipErrorStreamCaptureUnjoined: hipError_t = 904;
/// `hipErrorStreamCaptureIsolation`.
pub const hipErrorStreamCaptureIsolation: hipError_t = 905;
/// `hipErrorStreamCaptureImplicit`.
pub const hipErrorStreamCaptureImplicit: hipError_t = 906;
/// `hipErrorCapturedEvent`.
pub const hipErrorCapturedEvent: hipError_t = 907;
/// `hipErrorStreamCaptureWrongThread`.
pub const hipErrorStreamCaptureWrongThread: hipError_t = 908;
/// `hipErrorGraphExecUpdateFailure`.
pub const hipErrorGraphExecUpdateFailure: hipError_t = 910;
/// `hipErrorUnknown`.
pub const hipErrorUnknown: hipError_t = 999;
/// `hipErrorRuntimeMemory`.
pub const hipErrorRuntimeMemory: hipError_t = 1052;
/// `hipErrorRuntimeOther`.
pub const hipErrorRuntimeOther: hipError_t = 1053;
/// `hipErrorTbd`.
pub const hipErrorTbd: hipError_t = 1054;

/// The HIP 5.2 name of `e` (`hipErrorUnknown` for values HIP does not define).
pub fn name(e: hipError_t) -> &'static CStr {
    match e {
        0 => c"hipSuccess",
        1 => c"hipErrorInvalidValue",
        2 => c"hipErrorOutOfMemory",
        3 => c"hipErrorNotInitialized",
        4 => c"hipErrorDeinitialized",
        5 => c"hipErrorProfilerDisabled",
        6 => c"hipErrorProfilerNotInitialized",
        7 => c"hipErrorProfilerAlreadyStarted",
        8 => c"hipErrorProfilerAlreadyStopped",
        9 => c"hipErrorInvalidConfiguration",
        12 => c"hipErrorInvalidPitchValue",
        13 => c"hipErrorInvalidSymbol",
        17 => c"hipErrorInvalidDevicePointer",
        21 => c"hipErrorInvalidMemcpyDirection",
        35 => c"hipErrorInsufficientDriver",
        52 => c"hipErrorMissingConfiguration",
        53 => c"hipErrorPriorLaunchFailure",
        98 => c"hipErrorInvalidDeviceFunction",
        100 => c"hipErrorNoDevice",
        101 => c"hipErrorInvalidDevice",
        200 => c"hipErrorInvalidImage",
        201 => c"hipErrorInvalidContext",
        202 => c"hipErrorContextAlreadyCurrent",
        205 => c"hipErrorMapFailed",
        206 => c"hipErrorUnmapFailed",
        207 => c"hipErrorArrayIsMapped",
        208 => c"hipErrorAlreadyMapped",
        209 => c"hipErrorNoBinaryForGpu",
        210 => c"hipErrorAlreadyAcquired",
        211 => c"hipErrorNotMapped",
        212 => c"hipErrorNotMappedAsArray",
        213 => c"hipErrorNotMappedAsPointer",
        214 => c"hipErrorECCNotCorrectable",
        215 => c"hipErrorUnsupportedLimit",
        216 => c"hipErrorContextAlreadyInUse",
        217 => c"hipErrorPeerAccessUnsupported",
        218 => c"hipErrorInvalidKernelFile",
        219 => c"hipErrorInvalidGraphicsContext",
        300 => c"hipErrorInvalidSource",
        301 => c"hipErrorFileNotFound",
        302 => c"hipErrorSharedObjectSymbolNotFound",
        303 => c"hipErrorSharedObjectInitFailed",
        304 => c"hipErrorOperatingSystem",
        400 => c"hipErrorInvalidHandle",
        401 => c"hipErrorIllegalState",
        500 => c"hipErrorNotFound",
        600 => c"hipErrorNotReady",
        700 => c"hipErrorIllegalAddress",
        701 => c"hipErrorLaunchOutOfResources",
        702 => c"hipErrorLaunchTimeOut",
        704 => c"hipErrorPeerAccessAlreadyEnabled",
        705 => c"hipErrorPeerAccessNotEnabled",
        708 => c"hipErrorSetOnActiveProcess",
        709 => c"hipErrorContextIsDestroyed",
        710 => c"hipErrorAssert",
        712 => c"hipErrorHostMemoryAlreadyRegistered",
        713 => c"hipErrorHostMemoryNotRegistered",
        719 => c"hipErrorLaunchFailure",
        720 => c"hipErrorCooperativeLaunchTooLarge",
        801 => c"hipErrorNotSupported",
        900 => c"hipErrorStreamCaptureUnsupported",
        901 => c"hipErrorStreamCaptureInvalidated",
        902 => c"hipErrorStreamCaptureMerge",
        903 => c"hipErrorStreamCaptureUnmatched",
        904 => c"hipErrorStreamCaptureUnjoined",
        905 => c"hipErrorStreamCaptureIsolation",
        906 => c"hipErrorStreamCaptureImplicit",
        907 => c"hipErrorCapturedEvent",
        908 => c"hipErrorStreamCaptureWrongThread",
        910 => c"hipErrorGraphExecUpdateFailure",
        999 => c"hipErrorUnknown",
        1052 => c"hipErrorRuntimeMemory",
        1053 => c"hipErrorRuntimeOther",
        1054 => c"hipErrorTbd",
        _ => c"hipErrorUnknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `hipError_t` enumerator of the 5.2 header gets the name Debian's 5.2 library
    /// returns for it (`abi/hip_error_t.tsv`, measured), aliases included.
    #[test]
    fn names_match_debian_library() {
        let tsv = include_str!("../abi/hip_error_t.tsv");
        let mut n = 0;
        for line in tsv.lines().filter(|l| !l.starts_with('#')) {
            let f: Vec<&str> = line.split('\t').collect();
            let v: hipError_t = f[0].parse().expect("value");
            assert_eq!(name(v).to_str().expect("utf8"), f[2], "{}", f[1]);
            n += 1;
        }
        assert_eq!(n, 78);
        assert_eq!(name(12345).to_str().expect("utf8"), "hipErrorUnknown");
        assert_eq!(name(-1).to_str().expect("utf8"), "hipErrorUnknown");
    }
}
