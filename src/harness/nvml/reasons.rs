//! Clock-event (throttle) reason bits: their values, which mean a slowdown, their hex form.

use nvml_wrapper::bitmasks::device::ThrottleReasons;

// Clock-event (throttle) reason bits, `nvmlClocksEventReason*` in nvml.h; the values are the
// same under the deprecated `nvmlClocksThrottleReason*` names the wrapper exposes.
/// The GPU is idle: clocks are low because there is no work, not a slowdown.
pub const REASON_GPU_IDLE: u64 = ThrottleReasons::GPU_IDLE.bits();
/// Clocks follow the applications-clocks setting (the normal state under load on datacenter
/// parts); not a slowdown.
pub const REASON_APPLICATIONS_CLOCKS_SETTING: u64 =
    ThrottleReasons::APPLICATIONS_CLOCKS_SETTING.bits();
pub const REASON_SW_POWER_CAP: u64 = ThrottleReasons::SW_POWER_CAP.bits();
pub const REASON_HW_SLOWDOWN: u64 = ThrottleReasons::HW_SLOWDOWN.bits();
pub const REASON_SYNC_BOOST: u64 = ThrottleReasons::SYNC_BOOST.bits();
pub const REASON_SW_THERMAL_SLOWDOWN: u64 = ThrottleReasons::SW_THERMAL_SLOWDOWN.bits();
pub const REASON_HW_THERMAL_SLOWDOWN: u64 = ThrottleReasons::HW_THERMAL_SLOWDOWN.bits();
pub const REASON_HW_POWER_BRAKE_SLOWDOWN: u64 = ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN.bits();
pub const REASON_DISPLAY_CLOCK_SETTING: u64 = ThrottleReasons::DISPLAY_CLOCK_SETTING.bits();

/// Reasons that mean the clocks were held below what the workload asked for. Bits NVML may
/// add later are recorded in the hex column but not classified.
const THROTTLE_MASK: u64 = REASON_SW_POWER_CAP
    | REASON_HW_SLOWDOWN
    | REASON_SYNC_BOOST
    | REASON_SW_THERMAL_SLOWDOWN
    | REASON_HW_THERMAL_SLOWDOWN
    | REASON_HW_POWER_BRAKE_SLOWDOWN
    | REASON_DISPLAY_CLOCK_SETTING;

/// True when `reasons` holds any slowdown bit; idle and applications-clocks bits do not count.
pub fn is_throttled(reasons: u64) -> bool {
    reasons & THROTTLE_MASK != 0
}

/// Raw reason bits as the CSVs write them: `0x` and 16 hex digits.
pub fn reasons_hex(reasons: u64) -> String {
    format!("0x{reasons:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_bits_match_nvml_header() {
        // Values from nvml.h (`nvmlClocksEventReason*`).
        assert_eq!(REASON_GPU_IDLE, 0x1);
        assert_eq!(REASON_APPLICATIONS_CLOCKS_SETTING, 0x2);
        assert_eq!(REASON_SW_POWER_CAP, 0x4);
        assert_eq!(REASON_HW_SLOWDOWN, 0x8);
        assert_eq!(REASON_SYNC_BOOST, 0x10);
        assert_eq!(REASON_SW_THERMAL_SLOWDOWN, 0x20);
        assert_eq!(REASON_HW_THERMAL_SLOWDOWN, 0x40);
        assert_eq!(REASON_HW_POWER_BRAKE_SLOWDOWN, 0x80);
        assert_eq!(REASON_DISPLAY_CLOCK_SETTING, 0x100);
    }

    #[test]
    fn idle_and_application_clocks_are_not_throttling() {
        assert!(!is_throttled(0));
        assert!(!is_throttled(REASON_GPU_IDLE));
        assert!(!is_throttled(REASON_APPLICATIONS_CLOCKS_SETTING));
        assert!(!is_throttled(
            REASON_GPU_IDLE | REASON_APPLICATIONS_CLOCKS_SETTING
        ));
        // An unknown future bit is recorded but not classified.
        assert!(!is_throttled(1 << 40));
    }

    #[test]
    fn every_slowdown_bit_is_throttling() {
        for bit in [0x4, 0x8, 0x10, 0x20, 0x40, 0x80, 0x100] {
            assert!(is_throttled(bit), "{bit:#x}");
            assert!(is_throttled(bit | REASON_GPU_IDLE), "{bit:#x} with idle");
        }
    }

    #[test]
    fn hex_is_zero_padded_to_16_digits() {
        assert_eq!(reasons_hex(0), "0x0000000000000000");
        assert_eq!(reasons_hex(0x44), "0x0000000000000044");
        assert_eq!(reasons_hex(u64::MAX), "0xffffffffffffffff");
    }
}
