//! How HIP's stream-memory-op conditions map onto the compare functions of the command
//! processor. The packets that carry them, and every per-family encoding choice, are in
//! the command buffer (`cmdbuf`).

use pm4::pkt3::CompareFn;

use crate::error::{Error, ErrorKind, Result};

/// `hipStreamWaitValueGte`.
pub const WAIT_VALUE_GTE: u32 = 0x0;
/// `hipStreamWaitValueEq`.
pub const WAIT_VALUE_EQ: u32 = 0x1;
/// `hipStreamWaitValueAnd`.
pub const WAIT_VALUE_AND: u32 = 0x2;
/// `hipStreamWaitValueNor`.
pub const WAIT_VALUE_NOR: u32 = 0x3;

/// The condition a wait-value command tests, already reduced to what the CP does:
/// `(*ptr & mask) FUNCTION reference`, or nothing to wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitCondition {
    /// Poll until `(*ptr & mask) function reference`.
    Poll {
        /// Compare function.
        function: CompareFn,
        /// Reference value.
        reference: u64,
        /// Mask.
        mask: u64,
    },
    /// The condition is true for every memory value: nothing to wait for.
    AlwaysTrue,
}

/// Map HIP's wait-value flags onto a CP compare, for `bits`-wide values (32 or 64).
///
/// - GTE: `(*ptr & mask) >= value` — unsigned, as the CP compares.
/// - EQ: `(*ptr & mask) == value`.
/// - AND: `((*ptr & mask) & value) != 0` — polled as `(*ptr & (mask & value)) != 0`.
/// - NOR: `~((*ptr & mask) | (value & mask)) != 0`, exactly as HIP defines it, over
///   `bits` bits. Any bit outside `mask` is 0 in both operands, so its complement is 1 and
///   the condition holds for every memory value unless `mask` is all ones. With a full
///   mask the condition is "some bit is clear in both `*ptr` and `value`", i.e.
///   `(*ptr & ~value) != ~value`, which is what the CP polls.
///
/// Unknown flags are InvalidValue.
pub fn wait_condition(flags: u32, value: u64, mask: u64, bits: u32) -> Result<WaitCondition> {
    let full = if bits == 32 { 0xffff_ffffu64 } else { u64::MAX };
    let (value, mask) = (value & full, mask & full);
    Ok(match flags {
        WAIT_VALUE_GTE => WaitCondition::Poll {
            function: CompareFn::GreaterEqual,
            reference: value,
            mask,
        },
        WAIT_VALUE_EQ => WaitCondition::Poll {
            function: CompareFn::Equal,
            reference: value,
            mask,
        },
        WAIT_VALUE_AND => WaitCondition::Poll {
            function: CompareFn::NotEqual,
            reference: 0,
            mask: mask & value,
        },
        WAIT_VALUE_NOR => {
            if mask != full {
                WaitCondition::AlwaysTrue
            } else {
                let nv = !value & full;
                WaitCondition::Poll {
                    function: CompareFn::NotEqual,
                    reference: nv,
                    mask: nv,
                }
            }
        }
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                "stream_wait_value",
                format!(
                "flags {flags:#x}: expected hipStreamWaitValueGte (0), Eq (1), And (2) or Nor (3)"
            ),
            ))
        }
    })
}

/// The condition evaluated on the host (tests, reference model).
pub fn condition_holds(c: WaitCondition, mem: u64) -> bool {
    match c {
        WaitCondition::AlwaysTrue => true,
        WaitCondition::Poll {
            function,
            reference,
            mask,
        } => {
            let v = mem & mask;
            match function {
                CompareFn::Always => true,
                CompareFn::Less => v < reference,
                CompareFn::LessEqual => v <= reference,
                CompareFn::Equal => v == reference,
                CompareFn::NotEqual => v != reference,
                CompareFn::GreaterEqual => v >= reference,
                CompareFn::Greater => v > reference,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmdbuf::barrier_value_for;
    use pm4::aql::AqlPacket;

    fn hip_reference(flags: u32, mem: u64, value: u64, mask: u64, bits: u32) -> bool {
        let full = if bits == 32 { 0xffff_ffffu64 } else { u64::MAX };
        let (mem, value, mask) = (mem & full, value & full, mask & full);
        match flags {
            WAIT_VALUE_GTE => mem & mask >= value,
            WAIT_VALUE_EQ => mem & mask == value,
            WAIT_VALUE_AND => (mem & mask) & value != 0,
            WAIT_VALUE_NOR => (!((mem & mask) | (value & mask)) & full) != 0,
            _ => unreachable!(),
        }
    }

    #[test]
    fn cp_conditions_match_the_hip_definitions() {
        let vals = [
            0u64,
            1,
            2,
            3,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_fffe,
            0xffff_ffff,
            1 << 40,
            u64::MAX,
            0x1234_5678_9abc_def0,
        ];
        let masks = [u64::MAX, 0xffff_ffff, 0xff, 0xf0f0_f0f0, 0, 1 << 40 | 1];
        for bits in [32, 64] {
            for flags in 0..4 {
                for &m in &masks {
                    for &v in &vals {
                        let c = wait_condition(flags, v, m, bits).unwrap();
                        for &mem in &vals {
                            assert_eq!(
                                condition_holds(
                                    c,
                                    mem & if bits == 32 { 0xffff_ffff } else { u64::MAX }
                                ),
                                hip_reference(flags, mem, v, m, bits),
                                "flags={flags} bits={bits} mem={mem:#x} value={v:#x} mask={m:#x}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// gfx9: every 64-bit condition maps onto BARRIER_VALUE (signed compare of the value
    /// at handle + 8) exactly, or is NotSupported (GTE over bit 63 with a reference that
    /// is not a power of two; never silently inexact).
    #[test]
    fn barrier_value_mapping_is_exact_on_gfx9() {
        let vals = [
            0u64,
            1,
            2,
            3,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_ffff,
            1 << 40,
            (1 << 63) - 1,
            1 << 63,
            (1 << 63) + 5,
            u64::MAX - 1,
            u64::MAX,
            0x1234_5678_9abc_def0,
        ];
        let masks = [
            u64::MAX,
            0xffff_ffff,
            0xff,
            0,
            1 << 40 | 1,
            1 << 63,
            (1 << 63) - 1,
        ];
        let mut unsupported = 0;
        for flags in 0..4 {
            for &m in &masks {
                for &v in &vals {
                    let c = wait_condition(flags, v, m, 64).unwrap();
                    if c == WaitCondition::AlwaysTrue {
                        continue;
                    }
                    let p = match barrier_value_for(0x1008, c, 0) {
                        Ok(AqlPacket::BarrierValue(b)) => b,
                        Ok(other) => panic!("{other:?}"),
                        Err(e) => {
                            assert_eq!(e.kind(), ErrorKind::NotSupported);
                            assert_eq!(flags, WAIT_VALUE_GTE, "{e}");
                            assert!(m & (1 << 63) != 0 && !v.is_power_of_two(), "{e}");
                            unsupported += 1;
                            continue;
                        }
                    };
                    assert_eq!(p.signal, 0x1000);
                    for &mem in &vals {
                        assert_eq!(
                            p.cond.test(mem as i64, p.mask, p.value),
                            hip_reference(flags, mem, v, m, 64),
                            "flags={flags} mem={mem:#x} value={v:#x} mask={m:#x}"
                        );
                    }
                }
            }
        }
        assert!(unsupported > 0);
    }

    #[test]
    fn invalid_flags_rejected() {
        let e = wait_condition(4, 0, 0, 32).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidValue);
    }
}
