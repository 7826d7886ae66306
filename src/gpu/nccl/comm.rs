//! One rank's NCCL communicator and the collectives the step model issues on its stream.
//! Every call is enqueued on the rank's stream (and so can be captured into a graph).

use super::locate::{
    named_place, not_found, place_from_python, places_here, Place, NCCL_ENV, NCCL_SONAME,
};
use super::raw::{RawComm, RawNccl, UniqueId, NCCL_BFLOAT16, NCCL_FLOAT64, NCCL_MAX, NCCL_SUM};
use crate::gpu::library_search::named_file_problem;
use crate::gpu::DeviceBuffer;
use crate::gpu::{Gpu, GpuUnavailable};
use anyhow::{bail, ensure, Context, Result};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The loaded library, where it came from, and its version.
pub struct Nccl {
    raw: RawNccl,
    pub path: PathBuf,
    /// `2.27.3`.
    pub version: String,
}

impl Nccl {
    /// Loads NCCL from the first place of [`places_here`] holding a loadable file.
    pub fn load(explicit: Option<&Path>) -> Result<Arc<Nccl>> {
        let mut places = places_here(explicit);
        // A file named on purpose (--nccl-lib, METAPREP_NCCL, a rank's parent) is that file
        // or an error: never another NCCL found further down the search.
        if let Some(named) = places.first().filter(|p| p.is_named()) {
            return Nccl::open(&named.path).map(Arc::new).map_err(|e| {
                GpuUnavailable(format!(
                    "{}: {} does not load as NCCL ({e:#}); give a libnccl.so.2, or leave \
                     --nccl-lib and {NCCL_ENV} unset to search for one",
                    named.source,
                    named.path.display()
                ))
                .into()
            });
        }
        let mut failures = Vec::new();
        if let Some(n) = first_loadable(&places, &mut failures) {
            return Ok(n);
        }
        // Python is asked only once every cheaper place has failed.
        if let Some(p) = place_from_python().filter(|p| !places.contains(p)) {
            places.push(p);
            if let Some(n) = first_loadable(&places[places.len() - 1..], &mut failures) {
                return Ok(n);
            }
        }
        Err(GpuUnavailable(not_found(&places, &failures)).into())
    }

    fn open(path: &Path) -> Result<Nccl> {
        let raw = RawNccl::open(path)?;
        let mut code = 0;
        // SAFETY: an out-parameter query.
        raw.check(unsafe { (raw.get_version)(&mut code) }, "ncclGetVersion")?;
        // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
        let version = format!("{}.{}.{}", code / 10000, code / 100 % 100, code % 100);
        Ok(Nccl {
            raw,
            path: path.to_path_buf(),
            version,
        })
    }

    /// A fresh unique id (rank 0 makes it; the others join with it).
    pub fn unique_id(&self) -> Result<NcclId> {
        let mut id = UniqueId { internal: [0; 128] };
        // SAFETY: writes 128 bytes into `id`.
        self.raw.check(
            unsafe { (self.raw.get_unique_id)(&mut id) },
            "ncclGetUniqueId",
        )?;
        Ok(NcclId(id))
    }

    /// One line for notes: `NCCL 2.27.3 (/path/libnccl.so.2)`.
    pub fn describe(&self) -> String {
        format!("NCCL {} ({})", self.version, self.path.display())
    }
}

/// The first of `places` holding a file that loads as NCCL; failures to load are kept.
fn first_loadable(places: &[Place], failures: &mut Vec<String>) -> Option<Arc<Nccl>> {
    for place in places.iter().filter(|p| p.path.is_file()) {
        match Nccl::open(&place.path) {
            Ok(n) => return Some(Arc::new(n)),
            Err(e) => failures.push(format!("{e:#}")),
        }
    }
    None
}

/// The id every rank of one world joins with, as hex text for a file or a pipe.
#[derive(Clone, Copy)]
pub struct NcclId(UniqueId);

impl NcclId {
    pub fn to_hex(&self) -> String {
        self.0
            .internal
            .iter()
            .map(|&b| format!("{:02x}", b as u8))
            .collect()
    }

    pub fn from_hex(text: &str) -> Result<NcclId> {
        let text = text.trim();
        ensure!(
            text.len() == 256 && text.is_ascii(),
            "an NCCL id is 256 hex digits, got {} characters",
            text.len()
        );
        let mut id = UniqueId { internal: [0; 128] };
        for (i, byte) in id.internal.iter_mut().enumerate() {
            let pair = &text[2 * i..2 * i + 2];
            *byte = u8::from_str_radix(pair, 16)
                .with_context(|| format!("`{pair}` in an NCCL id is not hex"))?
                as std::ffi::c_char;
        }
        Ok(NcclId(id))
    }
}

/// One rank's communicator: destroyed on drop.
pub struct Comm {
    nccl: Arc<Nccl>,
    raw: RawComm,
    pub rank: usize,
    pub world: usize,
}

impl Comm {
    /// Joins world `id` as `rank` of `world` on `gpu`'s device; blocks until every rank has
    /// joined.
    pub fn join(nccl: Arc<Nccl>, gpu: &Gpu, id: NcclId, rank: usize, world: usize) -> Result<Comm> {
        ensure!(rank < world, "rank {rank} is not in a world of {world}");
        // NCCL takes the device from the thread's current context.
        gpu.ctx
            .bind_to_thread()
            .context("making the rank's context current for NCCL")?;
        let mut raw: RawComm = std::ptr::null_mut();
        // SAFETY: `raw` receives the communicator; the id is passed by value as nccl.h says.
        let code = unsafe { (nccl.raw.comm_init_rank)(&mut raw, world as i32, id.0, rank as i32) };
        nccl.raw
            .check(code, &format!("ncclCommInitRank (rank {rank} of {world})"))?;
        Ok(Comm {
            nccl,
            raw,
            rank,
            world,
        })
    }

    /// Sums the first `bytes` of `buf` (bf16 elements) over the ranks, in place, on `stream`.
    pub fn all_reduce_bf16(
        &self,
        buf: &mut DeviceBuffer<u8>,
        bytes: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        let mut view = buf.slice_mut().slice_mut(..bytes);
        let count = view.len() / 2;
        let (ptr, _sync) = view.device_ptr_mut(stream);
        let p = ptr as *mut std::ffi::c_void;
        // SAFETY: `view` is live device memory of `count` bf16 values on this rank's device.
        let code = unsafe {
            (self.nccl.raw.all_reduce)(
                p,
                p,
                count,
                NCCL_BFLOAT16,
                NCCL_SUM,
                self.raw,
                stream.cu_stream(),
            )
        };
        self.nccl.raw.check(code, "ncclAllReduce")
    }

    /// Expert parallelism's all-to-all: `per_peer` bytes from `send`'s slot of each other
    /// rank to it, and the same from it into `recv`'s slot, as one group of sends and
    /// receives (slot r is bytes [r·per_peer, (r+1)·per_peer)).
    pub fn all_to_all(
        &self,
        send: &DeviceBuffer<u8>,
        recv: &mut DeviceBuffer<u8>,
        per_peer: usize,
        stream: &CudaStream,
    ) -> Result<()> {
        ensure!(
            send.len() >= per_peer * self.world && recv.len() >= per_peer * self.world,
            "all-to-all buffers hold less than {per_peer} B for each of {} ranks",
            self.world
        );
        let (s, _s) = send.slice().device_ptr(stream);
        let (r, _r) = recv.slice_mut().device_ptr_mut(stream);
        let raw = &self.nccl.raw;
        let cu = stream.cu_stream();
        // SAFETY: group calls only bracket the enqueues below.
        raw.check(unsafe { (raw.group_start)() }, "ncclGroupStart")?;
        let mut result = Ok(());
        for peer in (0..self.world).filter(|&p| p != self.rank) {
            let off = (peer * per_peer) as u64;
            // SAFETY: both slots lie inside their buffers (checked above).
            let (a, b) = unsafe {
                (
                    (raw.send)(
                        (s + off) as *const _,
                        per_peer,
                        1,
                        peer as i32,
                        self.raw,
                        cu,
                    ),
                    (raw.recv)((r + off) as *mut _, per_peer, 1, peer as i32, self.raw, cu),
                )
            };
            result = result
                .and_then(|_| raw.check(a, "ncclSend"))
                .and_then(|_| raw.check(b, "ncclRecv"));
        }
        // SAFETY: closes the group opened above, whatever happened inside it.
        let end = raw.check(unsafe { (raw.group_end)() }, "ncclGroupEnd");
        result.and(end)
    }

    /// The maximum of each of `values` over every rank (waits for all of them): how ranks
    /// agree on anything that must stay in lock-step, and a barrier.
    pub fn agree_max(&self, gpu: &Gpu, values: &[f64]) -> Result<Vec<f64>> {
        let mut buf = gpu.upload(values)?;
        {
            let (ptr, _sync) = buf.slice_mut().device_ptr_mut(&gpu.stream);
            let p = ptr as *mut std::ffi::c_void;
            // SAFETY: `buf` holds values.len() f64 on this rank's device.
            let code = unsafe {
                (self.nccl.raw.all_reduce)(
                    p,
                    p,
                    values.len(),
                    NCCL_FLOAT64,
                    NCCL_MAX,
                    self.raw,
                    gpu.stream.cu_stream(),
                )
            };
            self.nccl.raw.check(code, "ncclAllReduce (agreement)")?;
        }
        gpu.download("the ranks' agreed values", &buf)
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        // SAFETY: the communicator was made by ncclCommInitRank and is destroyed once.
        let code = unsafe { (self.nccl.raw.comm_destroy)(self.raw) };
        if let Err(e) = self.nccl.raw.check(code, "ncclCommDestroy") {
            eprintln!("metaprep: warning: {e:#}");
        }
    }
}

/// The library named on purpose ([`named_place`]: `--nccl-lib`, else `$METAPREP_NCCL`) is a
/// file: a path that is none is bad input, refused before any GPU work (a search that finds
/// nothing is no bad input; it is reported where NCCL is loaded).
pub fn check_named(flag: Option<&Path>) -> Result<()> {
    match named_place(flag).and_then(|p| named_file_problem(p.source, &p.path, NCCL_SONAME)) {
        Some(problem) => bail!("{problem}"),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_hex() {
        let mut raw = UniqueId { internal: [0; 128] };
        for (i, b) in raw.internal.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37) as std::ffi::c_char;
        }
        let hex = NcclId(raw).to_hex();
        assert_eq!(hex.len(), 256);
        let back = NcclId::from_hex(&format!("{hex}\n")).unwrap();
        assert_eq!(back.0.internal, raw.internal);
        assert!(NcclId::from_hex("abc").is_err());
        assert!(NcclId::from_hex(&"zz".repeat(128)).is_err());
    }

    /// Where a libnccl.so.2 is installed (set METAPREP_NCCL to point at one), its version
    /// and a unique id load without a GPU; elsewhere this says so and checks nothing.
    #[test]
    fn an_installed_nccl_loads_and_makes_ids() {
        let nccl = match Nccl::load(None) {
            Ok(n) => n,
            Err(e) => {
                eprintln!("no NCCL on this machine, nothing to load: {e}");
                return;
            }
        };
        assert!(nccl.version.starts_with("2."), "{}", nccl.describe());
        let id = nccl.unique_id().unwrap().to_hex();
        assert_eq!(id.len(), 256);
        assert_ne!(id, "0".repeat(256), "an id carries the bootstrap address");
    }

    #[test]
    fn a_named_library_that_does_not_load_is_an_error_not_a_search() {
        let e = Nccl::load(Some(Path::new("/nonexistent/libnccl.so.2")));
        // Even where an NCCL is installed, the named file is the only one tried.
        {
            let e = e
                .err()
                .expect("a missing named file never loads another NCCL");
            let text = e.to_string();
            assert!(
                text.contains("--nccl-lib: /nonexistent/libnccl.so.2"),
                "{text}"
            );
            assert!(e.downcast_ref::<GpuUnavailable>().is_some());
        }
    }
}
