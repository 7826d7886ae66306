//! The floor, measured in the same run as the arms: the cheapest things a step can ask of
//! the GPU. An arm's cost is read against these.

use crate::axes::floor_item::{BUSY_BEFORE_READ_US, D2D_COPY_BYTES};
use crate::axes::FloorItem;
use crate::gpu::{capture_graph, Gpu, KernelModule, Launch};
use anyhow::{Context, Result};
use cudarc::driver::{result, CudaGraph, CudaSlice, DevicePtr, PinnedHostSlice};
use std::time::{Duration, Instant};

/// Ints in the small host-to-device copies: a host-built list like `[block] * bs`.
pub const SMALL_COPY_INTS: usize = 64;

pub struct Floor<'g> {
    gpu: &'g Gpu,
    empty: Launch,
    /// The GPU work the `d2h-int-busy` read is queued behind.
    busy: Launch,
    /// The empty-graph items' graphs: chains of empty kernels, by node count.
    empty_graphs: Vec<(u8, CudaGraph)>,
    device_ints: CudaSlice<i32>,
    /// Owns the pinned buffer `pinned_ptr` points into.
    _pinned: PinnedHostSlice<i32>,
    /// Taken once: PinnedHostSlice::as_slice waits on an event each call, which would turn
    /// an asynchronous copy into a synchronous one.
    pinned_ptr: *const i32,
    pageable: Vec<i32>,
    copy_src: CudaSlice<u8>,
    copy_dst: CudaSlice<u8>,
}

impl<'g> Floor<'g> {
    pub fn new(gpu: &'g Gpu) -> Result<Self> {
        let func = gpu.function(KernelModule::Floor, "empty_kernel")?;
        let empty = Launch::new("empty_kernel", func, (1, 1, 1), (1, 1, 1));
        // SAFETY: the empty kernel takes no arguments.
        unsafe { empty.issue(gpu.cu_stream())? };
        gpu.sync()?;
        let empty_graphs = FloorItem::ALL
            .iter()
            .filter_map(|item| match item {
                FloorItem::EmptyGraphNodes(n) => Some(*n),
                _ => None,
            })
            .map(|nodes| Ok((nodes, empty_chain(gpu, &empty, nodes)?)))
            .collect::<Result<_>>()?;
        // SAFETY: freshly allocated pinned memory, filled before any use.
        let mut pinned = unsafe { gpu.ctx.alloc_pinned::<i32>(SMALL_COPY_INTS) }
            .context("allocating pinned host memory")?;
        let pinned_slice = pinned.as_mut_slice().context("mapping pinned memory")?;
        pinned_slice.fill(5);
        let pinned_ptr = pinned_slice.as_ptr();
        Ok(Self {
            gpu,
            empty,
            busy: Launch::spin(gpu, BUSY_BEFORE_READ_US)?,
            empty_graphs,
            device_ints: gpu.alloc(SMALL_COPY_INTS)?,
            _pinned: pinned,
            pinned_ptr,
            pageable: vec![5; SMALL_COPY_INTS],
            copy_src: gpu.alloc(D2D_COPY_BYTES)?,
            copy_dst: gpu.alloc(D2D_COPY_BYTES)?,
        })
    }

    /// Runs `steps` of `item` back to back and returns the wall time until the GPU is done.
    pub fn batch(&mut self, item: FloorItem, steps: usize) -> Result<Duration> {
        let stream = self.gpu.cu_stream();
        let device = self.device_ints.device_ptr(&self.gpu.stream).0;
        let copy_src = self.copy_src.device_ptr(&self.gpu.stream).0;
        let copy_dst = self.copy_dst.device_ptr(&self.gpu.stream).0;
        // The graph an empty-graph item replays (other items replay none), found once,
        // outside the timed loop.
        let nodes = match item {
            FloorItem::EmptyGraphNodes(n) => n,
            _ => 1,
        };
        let graph = chain(&self.empty_graphs, nodes)?;
        // The work a read is queued behind (`d2h-int-busy` only), also chosen out of the loop.
        let before_read = (item == FloorItem::D2hIntBusy).then_some(&self.busy);
        let start = Instant::now();
        for _ in 0..steps {
            // SAFETY: every pointer is owned by self; the copy buffers hold D2D_COPY_BYTES,
            // the others SMALL_COPY_INTS; the spin kernel's one argument is set.
            unsafe {
                match item {
                    FloorItem::EmptyKernel => self.empty.issue(stream)?,
                    FloorItem::EmptyGraphNodes(_) => graph.launch()?,
                    FloorItem::D2hInt | FloorItem::D2hIntBusy => {
                        if let Some(busy) = before_read {
                            busy.issue(stream)?;
                        }
                        result::memcpy_dtoh_async(&mut self.pageable[..1], device, stream)?;
                        result::stream::synchronize(stream)?;
                    }
                    FloorItem::H2dPinned => {
                        let pinned = std::slice::from_raw_parts(self.pinned_ptr, SMALL_COPY_INTS);
                        result::memcpy_htod_async(device, pinned, stream)?;
                    }
                    FloorItem::H2dPageable => {
                        result::memcpy_htod_async(device, &self.pageable[..], stream)?
                    }
                    FloorItem::D2dCopy => {
                        result::memcpy_dtod_async(copy_dst, copy_src, D2D_COPY_BYTES, stream)?
                    }
                }
            }
        }
        self.gpu.sync()?;
        Ok(start.elapsed())
    }

    /// The empty graph as a step source, to time the harness's own per-step overhead.
    pub fn empty_graph(&self) -> Result<&CudaGraph> {
        chain(&self.empty_graphs, 1)
    }
}

/// The chain of `nodes` empty kernels among `graphs`.
fn chain(graphs: &[(u8, CudaGraph)], nodes: u8) -> Result<&CudaGraph> {
    graphs
        .iter()
        .find(|(n, _)| *n == nodes)
        .map(|(_, graph)| graph)
        .with_context(|| format!("no empty graph of {nodes} nodes in the floor"))
}

/// A graph of `nodes` empty kernels captured from one stream (so each depends on the one
/// before).
fn empty_chain(gpu: &Gpu, empty: &Launch, nodes: u8) -> Result<CudaGraph> {
    let what = format!("the empty-graph floor of {nodes} nodes");
    capture_graph(&gpu.stream, &what, || {
        for _ in 0..nodes {
            // SAFETY: the empty kernel takes no arguments.
            unsafe { empty.issue(gpu.cu_stream())? };
        }
        Ok(())
    })
}
