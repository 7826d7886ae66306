//! The activity API, one collection at a time: kernel, copy and memset records, each tagged
//! with the external id pushed around the launch that issued it.
//!
//! CUPTI hands buffers to two C callbacks that carry no user data, so the records gather in
//! one process-wide store; a [`Collector`] owns that store while it lives (a second one at
//! the same time is refused). External correlation records come with API records, so the
//! driver API kind is enabled too; its records are dropped while parsing.

use super::library::CuptiLibrary;
use super::records::{parse, Activity};
use anyhow::{bail, Context, Result};
use cudarc::cupti::result::{activity, get_timestamp, CuptiError};
use cudarc::cupti::sys::{
    CUptiResult, CUpti_Activity, CUpti_ActivityFlag, CUpti_ActivityKind as Kind,
    CUpti_ExternalCorrelationKind,
};
use cudarc::driver::sys::CUcontext;
use std::alloc::{alloc, dealloc, Layout};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// As CUPTI's own samples: 8 MiB buffers, 8-byte aligned.
const BUFFER_BYTES: usize = 8 << 20;
const BUFFER_ALIGN: usize = 8;

/// The kinds enabled while a collector lives.
const KINDS: [Kind; 5] = [
    Kind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    Kind::CUPTI_ACTIVITY_KIND_MEMCPY,
    Kind::CUPTI_ACTIVITY_KIND_MEMSET,
    Kind::CUPTI_ACTIVITY_KIND_DRIVER,
    Kind::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
];

const EXTERNAL_KIND: CUpti_ExternalCorrelationKind =
    CUpti_ExternalCorrelationKind::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

#[derive(Default)]
struct Store {
    /// A collector is running.
    active: bool,
    activities: Vec<Activity>,
    /// The first failure met inside a callback or a drop, reported by the next call that can.
    error: Option<String>,
}

static STORE: Mutex<Store> = Mutex::new(Store {
    active: false,
    activities: Vec::new(),
    error: None,
});

fn store() -> MutexGuard<'static, Store> {
    STORE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn buffer_layout() -> Layout {
    // Both constants are valid: a power-of-two alignment and a size far below isize::MAX.
    Layout::from_size_align(BUFFER_BYTES, BUFFER_ALIGN).unwrap_or_else(|_| unreachable!())
}

extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    // SAFETY: CUPTI passes valid out-pointers; the buffer is freed in buffer_completed.
    unsafe {
        let ptr = alloc(buffer_layout());
        *buffer = ptr;
        *size = if ptr.is_null() { 0 } else { BUFFER_BYTES };
        *max_records = 0; // as many as fit
    }
    // SAFETY: `buffer` is CUPTI's valid out-pointer, written just above.
    if unsafe { *buffer }.is_null() {
        store()
            .error
            .get_or_insert_with(|| "could not allocate a CUPTI activity buffer".into());
    }
}

extern "C" fn buffer_completed(
    _context: CUcontext,
    _stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    if buffer.is_null() {
        return;
    }
    let mut parsed = Vec::new();
    let mut record: *mut CUpti_Activity = std::ptr::null_mut();
    let failure = loop {
        // SAFETY: CUPTI filled `valid` bytes of a buffer it got from buffer_requested.
        match unsafe { activity::get_next_record(buffer, valid, &mut record) } {
            Ok(()) => parsed.extend(unsafe { parse(record) }),
            Err(CuptiError(CUptiResult::CUPTI_ERROR_MAX_LIMIT_REACHED)) => break None,
            Err(e) => break Some(format!("reading CUPTI activity records: {e}")),
        }
    };
    // SAFETY: allocated in buffer_requested with this layout; CUPTI is done with it.
    unsafe { dealloc(buffer, buffer_layout()) };
    let mut store = store();
    store.activities.extend(parsed);
    if let Some(failure) = failure {
        store.error.get_or_insert(failure);
    }
}

/// What one collection gathered: the records, and CUPTI's clock when it started.
#[derive(Debug)]
pub struct Collected {
    pub origin_ns: u64,
    pub activities: Vec<Activity>,
}

/// Collects activity records from [`Collector::start`] to [`Collector::finish`].
pub struct Collector {
    origin_ns: u64,
    finished: bool,
}

impl Collector {
    /// Registers the buffer callbacks, enables the kinds and takes CUPTI's clock as the
    /// origin. `_library` proves CUPTI was found and loaded (cudarc would panic otherwise).
    pub fn start(_library: &CuptiLibrary) -> Result<Collector> {
        {
            let mut store = store();
            if store.active {
                bail!("a CUPTI collection is already running in this process");
            }
            if let Some(previous) = store.error.take() {
                bail!("the previous CUPTI collection failed: {previous}");
            }
            store.activities.clear();
            store.active = true;
        }
        // From here on, Drop undoes whatever was enabled.
        let mut collector = Collector {
            origin_ns: 0,
            finished: false,
        };
        activity::register_callbacks(Some(buffer_requested), Some(buffer_completed))
            .context("registering CUPTI's activity buffers")?;
        for kind in KINDS {
            activity::enable(kind).with_context(|| {
                format!(
                    "enabling CUPTI activity {kind:?} (another profiler attached, or a driver \
                     older than this CUPTI?)"
                )
            })?;
        }
        // SAFETY: writes one u64.
        unsafe { get_timestamp(&mut collector.origin_ns) }.context("reading CUPTI's clock")?;
        Ok(collector)
    }

    /// Tags the API calls made until [`Collector::pop`] with `id`.
    pub fn push(&self, id: u64) -> Result<()> {
        activity::push_external_correlation_id(EXTERNAL_KIND, id)
            .context("pushing a CUPTI external correlation id")
    }

    pub fn pop(&self) -> Result<()> {
        let mut last = 0;
        // SAFETY: writes one u64.
        unsafe { activity::pop_external_correlation_id(EXTERNAL_KIND, &mut last) }
            .context("popping a CUPTI external correlation id")
    }

    /// Flushes every record of finished GPU work (synchronise first), stops collecting and
    /// returns what was gathered. Records CUPTI dropped for want of buffers are an error.
    pub fn finish(mut self) -> Result<Collected> {
        let flushed =
            activity::flush_all(CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED as u32)
                .context("flushing CUPTI's activity buffers");
        let mut dropped = 0usize;
        // SAFETY: a null context and stream 0 ask for the process's count; writes one usize.
        let counted =
            unsafe { activity::get_num_dropped_records(std::ptr::null_mut(), 0, &mut dropped) }
                .context("asking CUPTI for dropped records");
        let stopped = self.stop();
        self.finished = true;
        flushed?;
        counted?;
        stopped?;
        let mut store = store();
        if let Some(error) = store.error.take() {
            bail!("{error}");
        }
        if dropped > 0 {
            bail!("CUPTI dropped {dropped} activity records: the timeline would have holes");
        }
        Ok(Collected {
            origin_ns: self.origin_ns,
            activities: std::mem::take(&mut store.activities),
        })
    }

    /// Disables the kinds and frees the store for the next collector.
    fn stop(&self) -> Result<()> {
        let mut first_error = None;
        for kind in KINDS {
            if let Err(e) = activity::disable(kind) {
                first_error.get_or_insert(format!("disabling CUPTI activity {kind:?}: {e}"));
            }
        }
        store().active = false;
        first_error.map_or(Ok(()), |e| bail!("{e}"))
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        if !self.finished {
            if let Err(e) = self.stop() {
                store().error.get_or_insert(e.to_string());
            }
        }
    }
}
