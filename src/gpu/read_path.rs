//! The three ways to bring device ints (a prep's `seq_lens`) to the host, one per
//! [`ReadPath`], each behind the capture guard:
//!
//! * pageable: `cuMemcpyDtoHAsync` into pageable memory, then `cuStreamSynchronize`
//!   (`seq_lens.tolist()`);
//! * pinned: the same copy into pinned memory, an event recorded after it, `cuEventSynchronize`
//!   (`x.to("cpu", non_blocking=True)` with `event.synchronize()`);
//! * mapped: a one-block kernel (`kernels/host_read.cu`) stores the ints and then a sequence
//!   number into mapped pinned memory, and the host polls the number with volatile reads
//!   until it is this read's, with no CUDA call in the wait.
//!
//! Why the mapped read polls instead of synchronising the stream: a stream sync returns when
//! the driver has seen the kernel complete, some µs after the flag's store reaches the host,
//! where the poll returns (docs/read-paths.md). A poll must not hang: every
//! [`STREAM_CHECK_EVERY`] it asks the stream whether its work is done (then the flag is read
//! once more, and a flag still stale is an error), and gives up after its timeout with an
//! error that says what the flag held.

use super::pinned_memory::HostMemory;
use super::{ensure_not_capturing, Gpu, KernelModule, Launch, StreamHandle};
use crate::axes::ReadPath;
use anyhow::{bail, Context, Result};
use cudarc::driver::{result, sys, CudaEvent, CudaStream};
use std::fmt;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a poll waits between asking the stream whether its work is done. Longer than
/// any read behind a prep (tens of µs), so those never pay a driver call inside the wait.
pub const STREAM_CHECK_EVERY: Duration = Duration::from_millis(1);
/// How long a mapped read waits for its flag while the stream is still busy: far beyond
/// any forward the step model runs (`--forward-us` is at most a second).
pub const MAPPED_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Flag polls between two looks at the clock.
const SPINS_PER_CLOCK: u32 = 64;
/// Word of the mapped buffer the flag is in, and the first word of the ints: 128 bytes
/// apart, so the host's polled line is not the one the ints' stores land in.
const FLAG_WORD: usize = 0;
const INTS_AT: usize = 32;
/// Argument index of the store kernel's sequence number.
const SEQ_ARG: usize = 4;
/// Threads of the store kernel's one block.
const STORE_THREADS: u32 = 256;

/// Why a poll ended without its sequence number.
#[derive(Debug)]
pub enum NoFlag {
    /// The stream finished its work and the flag still holds another number: nothing queued
    /// on it stores this sequence.
    StreamDone { held: u32 },
    /// The stream is still busy after the whole timeout.
    TimedOut { held: u32, waited: Duration },
    /// Asking the stream failed (a kernel before the store faulted, ...).
    Stream(anyhow::Error),
}

impl fmt::Display for NoFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoFlag::StreamDone { held } => write!(
                f,
                "the stream finished its work but the flag holds sequence {held}: nothing \
                 queued on it stores this read's"
            ),
            NoFlag::TimedOut { held, waited } => write!(
                f,
                "no store of this read's sequence within {waited:?} while the stream stayed \
                 busy (the flag holds {held}): the GPU never wrote the flag"
            ),
            NoFlag::Stream(e) => write!(f, "asking the stream whether it is done failed: {e:#}"),
        }
    }
}

/// Polls `flag` until it holds `expected`, then orders every later read after it. Every
/// [`STREAM_CHECK_EVERY`], `stream_done` says whether the stream's work has finished; if it
/// has, the flag gets one more look, and if the stream stays busy past `timeout` the poll
/// gives up. A flag holding any other number, the previous read's included, is never taken
/// for this one.
pub fn wait_for_sequence(
    flag: impl Fn() -> u32,
    expected: u32,
    timeout: Duration,
    mut stream_done: impl FnMut() -> Result<bool>,
) -> Result<(), NoFlag> {
    let start = Instant::now();
    let mut next_check = start + STREAM_CHECK_EVERY;
    let mut spins = 0u32;
    loop {
        let held = flag();
        if held == expected {
            // The ints were stored before the flag: keep the host's reads of them after it.
            fence(Ordering::Acquire);
            return Ok(());
        }
        spins = spins.wrapping_add(1);
        if !spins.is_multiple_of(SPINS_PER_CLOCK) {
            std::hint::spin_loop();
            continue;
        }
        let now = Instant::now();
        if now < next_check {
            continue;
        }
        if stream_done().map_err(NoFlag::Stream)? {
            // The stream's work, the store included, is done: the flag has its last value.
            let held = flag();
            if held == expected {
                fence(Ordering::Acquire);
                return Ok(());
            }
            return Err(NoFlag::StreamDone { held });
        }
        let waited = now - start;
        if waited >= timeout {
            return Err(NoFlag::TimedOut { held, waited });
        }
        next_check = now + STREAM_CHECK_EVERY;
    }
}

/// Whether every piece of work queued on `stream` has finished.
fn stream_done(stream: sys::CUstream) -> Result<bool> {
    // SAFETY: a status query of a live stream.
    match unsafe { sys::cuStreamQuery(stream) } {
        sys::CUresult::CUDA_SUCCESS => Ok(true),
        sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        other => Err(anyhow::anyhow!("cuStreamQuery returned {other:?}")),
    }
}

enum Way {
    Pageable,
    Pinned {
        buffer: HostMemory,
        done: CudaEvent,
    },
    Mapped {
        buffer: HostMemory,
        store: Launch,
        /// The last sequence number asked of the store kernel.
        seq: u32,
    },
}

/// One read path made ready for `len` ints at a device address: its buffers, event or
/// kernel allocated once, so a read allocates nothing.
pub struct HostReader {
    path: ReadPath,
    /// The read as the capture guard names it, made once rather than on every read.
    operation: String,
    stream: Arc<CudaStream>,
    src: u64,
    len: usize,
    way: Way,
}

impl HostReader {
    /// A reader of the `len` ints at device address `src`, by `path`.
    pub fn new(gpu: &Gpu, path: ReadPath, src: u64, len: usize) -> Result<Self> {
        let what = || format!("preparing the {path} read");
        let way = match path {
            ReadPath::Pageable => Way::Pageable,
            ReadPath::Pinned => Way::Pinned {
                buffer: HostMemory::pinned(gpu, len).with_context(what)?,
                // No timing: PyTorch's `torch.cuda.Event()` default, the cheaper event.
                done: gpu.ctx.new_event(None).with_context(what)?,
            },
            ReadPath::Mapped => {
                let buffer = HostMemory::mapped(gpu, INTS_AT + len).with_context(what)?;
                let device = |word| buffer.device_ptr(word).expect("mapped memory");
                let func = gpu.function(KernelModule::HostRead, "store_lengths_mapped")?;
                let store = Launch::new(
                    "store_lengths_mapped",
                    func,
                    (1, 1, 1),
                    (STORE_THREADS, 1, 1),
                )
                .arg(src)
                .arg(i32::try_from(len).context("too many ints for one mapped read")?)
                .arg(device(INTS_AT))
                .arg(device(FLAG_WORD))
                .arg(0u32);
                Way::Mapped {
                    buffer,
                    store,
                    seq: 0,
                }
            }
        };
        Ok(Self {
            path,
            operation: Self::operation(path),
            stream: gpu.stream.clone(),
            src,
            len,
            way,
        })
    }

    /// The read as the capture guard names it: "seq_lens.tolist() (the pageable read)".
    pub fn operation(path: ReadPath) -> String {
        format!("{} (the {path} read)", path.range().to_string_lossy())
    }

    /// Reads the ints into `out` (as many as the reader was made for) and returns once they
    /// are there, with when the read began and ended: the capture guard and the length
    /// check run before that window, so it holds the read alone. Refused while the stream
    /// is capturing: the data would not reach the host.
    pub fn read(&mut self, out: &mut [i32]) -> Result<(Instant, Instant)> {
        ensure_not_capturing(&self.stream, &self.operation)?;
        anyhow::ensure!(
            out.len() == self.len,
            "the {} read holds {} ints, not {}",
            self.path,
            self.len,
            out.len()
        );
        let stream = self.stream.cu_stream();
        let bytes = self.len * 4;
        let start = Instant::now();
        match &mut self.way {
            Way::Pageable => {
                // SAFETY: `out` holds len ints and src as many on the device; a pageable copy
                // has landed once the synchronize returns.
                unsafe {
                    result::memcpy_dtoh_async(out, self.src, stream)
                        .context("reading the ints to the host")?;
                    result::stream::synchronize(stream)
                        .context("waiting for the ints on the host")?;
                }
            }
            Way::Pinned { buffer, done } => {
                // SAFETY: the buffer holds len words and src len ints; the event's wait
                // returns once the copy before it has landed.
                unsafe {
                    sys::cuMemcpyDtoHAsync_v2(buffer.host_ptr(), self.src, bytes, stream)
                        .result()
                        .context("copying the ints into pinned memory")?;
                    result::event::record(done.cu_event(), stream)
                        .context("recording the copy's event")?;
                    result::event::synchronize(done.cu_event())
                        .context("waiting on the copy's event")?;
                }
                buffer.copy_to(0, out);
            }
            Way::Mapped { buffer, store, seq } => {
                // A fresh number each read: a flag left by the last one is never this one's.
                *seq = seq.wrapping_add(1);
                store.set_arg(SEQ_ARG, *seq);
                // The launch points at src (len ints, alive as long as its owner's plan) and
                // at the mapped buffer this reader owns, which outlives any store into it
                // (a read that gives up abandons it).
                store.issue(StreamHandle::of(&self.stream))?;
                poll(buffer, *seq, MAPPED_READ_TIMEOUT, stream)?;
                buffer.copy_to(INTS_AT, out);
            }
        }
        Ok((start, Instant::now()))
    }

    /// Polls the mapped buffer's flag for `seq` without launching anything, for at most
    /// `timeout`: what a read does after its launch. A test of the poll: for a sequence no
    /// kernel was launched for, this must fail, never hang and never return.
    pub fn poll_mapped(&mut self, seq: u32, timeout: Duration) -> Result<()> {
        let Way::Mapped { buffer, .. } = &mut self.way else {
            bail!("the {} read has no flag to poll", self.path);
        };
        poll(buffer, seq, timeout, self.stream.cu_stream())
    }
}

/// Waits for `seq` in `buffer`'s flag (see [`wait_for_sequence`]); on a timeout the buffer
/// is abandoned, since the store kernel may still land.
fn poll(buffer: &mut HostMemory, seq: u32, timeout: Duration, stream: sys::CUstream) -> Result<()> {
    match wait_for_sequence(
        || buffer.read(FLAG_WORD),
        seq,
        timeout,
        || stream_done(stream),
    ) {
        Ok(()) => Ok(()),
        Err(e) => {
            if matches!(e, NoFlag::TimedOut { .. }) {
                buffer.abandon();
            }
            bail!("the mapped read of sequence {seq}: {e}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn a_flag_that_already_holds_the_sequence_returns_at_once() {
        let mut asked = 0;
        wait_for_sequence(
            || 7,
            7,
            Duration::ZERO,
            || {
                asked += 1;
                Ok(false)
            },
        )
        .unwrap();
        assert_eq!(asked, 0, "no driver call when the flag is there");
    }

    #[test]
    fn the_previous_reads_sequence_is_never_taken_for_this_one() {
        // The flag still holds read 6's number while read 7's store has not landed: with the
        // stream busy the poll times out, and with the stream done it fails, both naming 6.
        let busy = wait_for_sequence(|| 6, 7, Duration::from_millis(5), || Ok(false));
        match busy {
            Err(e @ NoFlag::TimedOut { held: 6, .. }) => {
                assert!(e.to_string().contains("never wrote the flag"), "{e}")
            }
            other => panic!("{other:?}"),
        }
        let done = wait_for_sequence(|| 6, 7, Duration::from_secs(60), || Ok(true));
        assert!(
            matches!(done, Err(NoFlag::StreamDone { held: 6 })),
            "{done:?}"
        );
        // A flag one ahead (wrapped) is another read's too.
        let wrapped = wait_for_sequence(|| 0, u32::MAX, Duration::from_secs(60), || Ok(true));
        assert!(matches!(wrapped, Err(NoFlag::StreamDone { held: 0 })));
    }

    #[test]
    fn a_flag_stored_while_polling_ends_the_poll() {
        let flag = Arc::new(AtomicU32::new(41));
        let writer = {
            let flag = flag.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(3));
                flag.store(42, Ordering::Release);
            })
        };
        wait_for_sequence(
            || flag.load(Ordering::Relaxed),
            42,
            Duration::from_secs(60),
            || Ok(false),
        )
        .unwrap();
        writer.join().unwrap();
    }

    #[test]
    fn a_flag_seen_only_once_the_stream_is_done_still_counts() {
        // The store lands between the poll's last look and the stream's answer.
        let answered = std::cell::Cell::new(false);
        let flag = || if answered.get() { 9 } else { 8 };
        let stream_done = || {
            answered.set(true);
            Ok(true)
        };
        wait_for_sequence(flag, 9, Duration::from_secs(60), stream_done).unwrap();
    }

    #[test]
    fn a_failing_stream_query_ends_the_poll_with_its_error() {
        let e = wait_for_sequence(
            || 0,
            1,
            Duration::from_secs(60),
            || bail!("CUDA_ERROR_ILLEGAL_ADDRESS"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{e}");
    }
}
