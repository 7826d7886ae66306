//! CUPTI activity records turned into plain values, copied out of CUPTI's buffer.
//!
//! Which struct version CUPTI writes depends on the library found at run time (CUPTI 12
//! writes `CUpti_ActivityKernel9`, CUPTI 13 `Kernel10` or later). We read only the fields
//! every version since `Kernel4` / `Memcpy5` / `Memset4` keeps at the same offset (the tests
//! check the offsets against cudarc's bindings of NVIDIA's headers).

use cudarc::cupti::sys::{
    CUpti_Activity, CUpti_ActivityExternalCorrelation, CUpti_ActivityKernel4,
    CUpti_ActivityKind as Kind, CUpti_ActivityMemcpy5, CUpti_ActivityMemcpyKind as CopyKind,
    CUpti_ActivityMemset4,
};
use std::ffi::CStr;

/// What ran on the GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuWork {
    /// A kernel, by its function name.
    Kernel(String),
    /// A copy, by direction (`HtoD`, `DtoH`, `DtoD`, ...).
    Memcpy(&'static str),
    Memset,
}

impl GpuWork {
    /// The name a trace shows: the kernel's, `memcpy DtoH`, `memset`.
    pub fn name(&self) -> String {
        match self {
            GpuWork::Kernel(name) => name.clone(),
            GpuWork::Memcpy(direction) => format!("memcpy {direction}"),
            GpuWork::Memset => "memset".into(),
        }
    }
}

/// One piece of GPU work with its device times (ns, CUPTI's clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuActivity {
    pub work: GpuWork,
    pub start_ns: u64,
    pub end_ns: u64,
    pub stream: u32,
    /// The id of the API call that issued it (a graph's kernels share their launch's).
    pub correlation: u32,
}

/// The records the timeline uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activity {
    Gpu(GpuActivity),
    /// The external id pushed while the API call `correlation` was made.
    External {
        correlation: u32,
        external: u64,
    },
}

/// Reads one record; `None` for kinds the timeline does not use (API calls among them).
///
/// # Safety
/// `record` must point at a whole activity record of the kind its first field says, as
/// `cuptiActivityGetNextRecord` returns them; a kernel's name must be a C string or null.
pub unsafe fn parse(record: *const CUpti_Activity) -> Option<Activity> {
    // SAFETY (all reads): the caller vouches for the record; read_unaligned copies the packed
    // struct out before any field is touched.
    let kind = unsafe { std::ptr::read_unaligned(record) }.kind;
    match kind {
        Kind::CUPTI_ACTIVITY_KIND_KERNEL | Kind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => {
            let k = unsafe { std::ptr::read_unaligned(record.cast::<CUpti_ActivityKernel4>()) };
            let name = if k.name.is_null() {
                "(unnamed kernel)".to_string()
            } else {
                unsafe { CStr::from_ptr(k.name) }
                    .to_string_lossy()
                    .into_owned()
            };
            Some(Activity::Gpu(GpuActivity {
                work: GpuWork::Kernel(name),
                start_ns: k.start,
                end_ns: k.end,
                stream: k.streamId,
                correlation: k.correlationId,
            }))
        }
        Kind::CUPTI_ACTIVITY_KIND_MEMCPY => {
            let m = unsafe { std::ptr::read_unaligned(record.cast::<CUpti_ActivityMemcpy5>()) };
            Some(Activity::Gpu(GpuActivity {
                work: GpuWork::Memcpy(copy_direction(m.copyKind)),
                start_ns: m.start,
                end_ns: m.end,
                stream: m.streamId,
                correlation: m.correlationId,
            }))
        }
        Kind::CUPTI_ACTIVITY_KIND_MEMSET => {
            let m = unsafe { std::ptr::read_unaligned(record.cast::<CUpti_ActivityMemset4>()) };
            Some(Activity::Gpu(GpuActivity {
                work: GpuWork::Memset,
                start_ns: m.start,
                end_ns: m.end,
                stream: m.streamId,
                correlation: m.correlationId,
            }))
        }
        Kind::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION => {
            let e = unsafe {
                std::ptr::read_unaligned(record.cast::<CUpti_ActivityExternalCorrelation>())
            };
            Some(Activity::External {
                correlation: e.correlationId,
                external: e.externalId,
            })
        }
        _ => None,
    }
}

fn copy_direction(kind: u8) -> &'static str {
    const DIRECTIONS: [(CopyKind, &str); 5] = [
        (CopyKind::CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, "HtoD"),
        (CopyKind::CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, "DtoH"),
        (CopyKind::CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, "DtoD"),
        (CopyKind::CUPTI_ACTIVITY_MEMCPY_KIND_HTOH, "HtoH"),
        (CopyKind::CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, "PtoP"),
    ];
    DIRECTIONS
        .iter()
        .find(|(k, _)| *k as u8 == kind)
        .map_or("other", |(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::cupti::sys::{
        CUpti_ActivityAPI, CUpti_ActivityKernel10, CUpti_ActivityKernel9, CUpti_ActivityMemcpy6,
        CUpti_ExternalCorrelationKind,
    };
    use std::mem::{offset_of, MaybeUninit};

    /// A record of type `T` with every byte zero (a valid value for these C structs).
    fn zeroed<T>() -> T {
        // SAFETY: the activity structs are plain C data: integers, enums whose zero is a
        // variant, pointers (null) and unions of those.
        unsafe { MaybeUninit::<T>::zeroed().assume_init() }
    }

    #[test]
    fn fields_read_sit_where_every_kernel_version_has_them() {
        macro_rules! same {
            ($field:ident, $($t:ty),+) => {
                $(assert_eq!(
                    offset_of!(CUpti_ActivityKernel4, $field),
                    offset_of!($t, $field),
                    "{} in {}", stringify!($field), stringify!($t)
                );)+
            };
        }
        same!(start, CUpti_ActivityKernel9, CUpti_ActivityKernel10);
        same!(end, CUpti_ActivityKernel9, CUpti_ActivityKernel10);
        same!(streamId, CUpti_ActivityKernel9, CUpti_ActivityKernel10);
        same!(correlationId, CUpti_ActivityKernel9, CUpti_ActivityKernel10);
        same!(name, CUpti_ActivityKernel9, CUpti_ActivityKernel10);
        for (a, b) in [
            (
                offset_of!(CUpti_ActivityMemcpy5, copyKind),
                offset_of!(CUpti_ActivityMemcpy6, copyKind),
            ),
            (
                offset_of!(CUpti_ActivityMemcpy5, start),
                offset_of!(CUpti_ActivityMemcpy6, start),
            ),
            (
                offset_of!(CUpti_ActivityMemcpy5, end),
                offset_of!(CUpti_ActivityMemcpy6, end),
            ),
            (
                offset_of!(CUpti_ActivityMemcpy5, streamId),
                offset_of!(CUpti_ActivityMemcpy6, streamId),
            ),
            (
                offset_of!(CUpti_ActivityMemcpy5, correlationId),
                offset_of!(CUpti_ActivityMemcpy6, correlationId),
            ),
        ] {
            assert_eq!(a, b);
        }
    }

    #[test]
    fn a_kernel_record_gives_its_name_times_stream_and_correlation() {
        let name = c"dspark_draft_block";
        let mut k: CUpti_ActivityKernel10 = zeroed();
        k.kind = Kind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        k.start = 1_000;
        k.end = 3_500;
        k.streamId = 13;
        k.correlationId = 77;
        k.name = name.as_ptr();
        // SAFETY: a whole Kernel10 record with a C-string name.
        let parsed = unsafe { parse((&raw const k).cast()) };
        assert_eq!(
            parsed,
            Some(Activity::Gpu(GpuActivity {
                work: GpuWork::Kernel("dspark_draft_block".into()),
                start_ns: 1_000,
                end_ns: 3_500,
                stream: 13,
                correlation: 77,
            }))
        );
    }

    #[test]
    fn copies_sets_and_external_ids_parse_and_api_records_are_skipped() {
        let mut m: CUpti_ActivityMemcpy6 = zeroed();
        m.kind = Kind::CUPTI_ACTIVITY_KIND_MEMCPY;
        m.copyKind = CopyKind::CUPTI_ACTIVITY_MEMCPY_KIND_DTOH as u8;
        m.start = 10;
        m.end = 20;
        m.correlationId = 5;
        // SAFETY: whole records of the kinds they say.
        let copy = unsafe { parse((&raw const m).cast()) };
        match copy {
            Some(Activity::Gpu(a)) => {
                assert_eq!(a.work.name(), "memcpy DtoH");
                assert_eq!((a.start_ns, a.end_ns, a.correlation), (10, 20, 5));
            }
            other => panic!("{other:?}"),
        }
        let mut s: CUpti_ActivityMemset4 = zeroed();
        s.kind = Kind::CUPTI_ACTIVITY_KIND_MEMSET;
        s.correlationId = 6;
        let set = unsafe { parse((&raw const s).cast()) };
        assert!(matches!(
            set,
            Some(Activity::Gpu(GpuActivity {
                work: GpuWork::Memset,
                correlation: 6,
                ..
            }))
        ));
        let mut e: CUpti_ActivityExternalCorrelation = zeroed();
        e.kind = Kind::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
        e.externalKind = CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
        e.externalId = 42;
        e.correlationId = 5;
        let external = unsafe { parse((&raw const e).cast()) };
        assert_eq!(
            external,
            Some(Activity::External {
                correlation: 5,
                external: 42
            })
        );
        let mut api: CUpti_ActivityAPI = zeroed();
        api.kind = Kind::CUPTI_ACTIVITY_KIND_DRIVER;
        assert_eq!(unsafe { parse((&raw const api).cast()) }, None);
    }

    #[test]
    fn unknown_copy_directions_are_named_other() {
        assert_eq!(copy_direction(1), "HtoD");
        assert_eq!(copy_direction(200), "other");
    }
}
