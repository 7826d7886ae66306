//! Measuring: timers, stopping rule, statistics, NVML telemetry.
