//! Encode and decode errors.
use core::fmt;

/// Why a packet could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// The output buffer is shorter than the packet.
    BufferTooSmall {
        /// Dwords the packet needs.
        needed: usize,
        /// Dwords available.
        available: usize,
    },
    /// A field value does not fit its bit field or is not allowed.
    InvalidField {
        /// Field name (kernel/Mesa header spelling).
        field: &'static str,
        /// The offending value.
        value: u64,
    },
    /// An address is not aligned as the packet requires.
    Misaligned {
        /// Field name.
        field: &'static str,
        /// The offending address.
        value: u64,
        /// Required alignment in bytes.
        align: u64,
    },
    /// The packet or form does not exist on this family / SDMA version.
    Unsupported {
        /// What is unsupported.
        what: &'static str,
    },
}

impl core::error::Error for EncodeError {}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::BufferTooSmall { needed, available } => {
                write!(
                    f,
                    "buffer too small: need {needed} dwords, have {available}"
                )
            }
            EncodeError::InvalidField { field, value } => write!(f, "invalid {field}={value:#x}"),
            EncodeError::Misaligned {
                field,
                value,
                align,
            } => {
                write!(f, "{field}={value:#x} is not {align}-byte aligned")
            }
            EncodeError::Unsupported { what } => write!(f, "unsupported: {what}"),
        }
    }
}

/// Why a packet could not be decoded. Decoders never panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The buffer ends inside the packet (or is empty).
    Truncated {
        /// Dwords the packet needs.
        needed: usize,
        /// Dwords available.
        available: usize,
    },
    /// A PM4 header whose type (bits 31:30) is not 3.
    BadHeaderType {
        /// The header dword.
        header: u32,
        /// Its packet type.
        packet_type: u8,
    },
    /// A known opcode with a count (length) it never has.
    BadLength {
        /// Opcode.
        opcode: u8,
        /// Total dwords given by the header.
        dwords: usize,
    },
    /// Bits that are reserved (must be zero) are set.
    ReservedBits {
        /// Dword index inside the packet.
        dword: usize,
        /// The offending bits.
        bits: u32,
    },
    /// A field holds a value with no meaning.
    InvalidField {
        /// Field name.
        field: &'static str,
        /// The value.
        value: u64,
    },
    /// An SDMA opcode / sub-opcode this crate does not know; its length is
    /// unknown so decoding cannot continue past it.
    UnknownSdmaOpcode {
        /// Opcode (bits 7:0).
        op: u8,
        /// Sub-opcode (bits 15:8).
        sub_op: u8,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated { needed, available } => {
                write!(f, "truncated: need {needed} dwords, have {available}")
            }
            DecodeError::BadHeaderType {
                header,
                packet_type,
            } => {
                write!(f, "bad header type {packet_type} in {header:#010x}")
            }
            DecodeError::BadLength { opcode, dwords } => {
                write!(f, "opcode {opcode:#04x} cannot be {dwords} dwords long")
            }
            DecodeError::ReservedBits { dword, bits } => {
                write!(f, "reserved bits {bits:#010x} set in dword {dword}")
            }
            DecodeError::InvalidField { field, value } => write!(f, "invalid {field}={value:#x}"),
            DecodeError::UnknownSdmaOpcode { op, sub_op } => {
                write!(f, "unknown SDMA op={op} sub_op={sub_op}")
            }
        }
    }
}

/// Checks that `w & !known == 0`, else reports reserved bits in dword `dword`.
pub(crate) const fn check_reserved(w: u32, known: u32, dword: usize) -> Result<(), DecodeError> {
    if w & !known != 0 {
        Err(DecodeError::ReservedBits {
            dword,
            bits: w & !known,
        })
    } else {
        Ok(())
    }
}

/// Checks that `v` fits in `bits` bits, else reports an invalid field.
pub(crate) const fn check_width(field: &'static str, v: u64, bits: u32) -> Result<(), EncodeError> {
    if bits < 64 && v >> bits != 0 {
        Err(EncodeError::InvalidField { field, value: v })
    } else {
        Ok(())
    }
}

/// Checks an address alignment.
pub(crate) const fn check_align(
    field: &'static str,
    v: u64,
    align: u64,
) -> Result<(), EncodeError> {
    if v % align != 0 {
        Err(EncodeError::Misaligned {
            field,
            value: v,
            align,
        })
    } else {
        Ok(())
    }
}
