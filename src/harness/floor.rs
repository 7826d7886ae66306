//! The floor, measured in the same run as the arms: the cheapest things a step can ask of
//! the GPU. An arm's cost is read against these.

use crate::axes::floor_item::{BUSY_BEFORE_READ_US, D2D_COPY_BYTES};
use crate::axes::FloorItem;
use crate::gpu::{capture_graph, Gpu, Graph, KernelModule, Launch, SmallCopies};
use anyhow::{Context, Result};
use std::time::{Duration, Instant};

/// Ints in the small host-to-device copies: a host-built list like `[block] * bs`.
pub const SMALL_COPY_INTS: usize = 64;

pub struct Floor<'g> {
    gpu: &'g Gpu,
    empty: Launch,
    /// The GPU work the `d2h-int-busy` read is queued behind.
    busy: Launch,
    /// The empty-graph items' graphs: chains of empty kernels, by node count.
    empty_graphs: Vec<(u8, Graph)>,
    /// The copy items' buffers and copies.
    copies: SmallCopies,
}

impl<'g> Floor<'g> {
    pub fn new(gpu: &'g Gpu) -> Result<Self> {
        let func = gpu.function(KernelModule::Floor, "empty_kernel")?;
        let empty = Launch::new("empty_kernel", func, (1, 1, 1), (1, 1, 1));
        empty.issue(gpu.cu_stream())?;
        gpu.sync()?;
        let empty_graphs = FloorItem::ALL
            .iter()
            .filter_map(|item| match item {
                FloorItem::EmptyGraphNodes(n) => Some(*n),
                _ => None,
            })
            .map(|nodes| Ok((nodes, empty_chain(gpu, &empty, nodes)?)))
            .collect::<Result<_>>()?;
        Ok(Self {
            gpu,
            empty,
            busy: Launch::spin(gpu, BUSY_BEFORE_READ_US)?,
            empty_graphs,
            copies: SmallCopies::new(gpu, SMALL_COPY_INTS, 5, D2D_COPY_BYTES)?,
        })
    }

    /// Runs `steps` of `item` back to back and returns the wall time until the GPU is done.
    pub fn batch(&mut self, item: FloorItem, steps: usize) -> Result<Duration> {
        let stream = self.gpu.cu_stream();
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
            match item {
                FloorItem::EmptyKernel => self.empty.issue(stream)?,
                FloorItem::EmptyGraphNodes(_) => graph.launch()?,
                FloorItem::D2hInt | FloorItem::D2hIntBusy => {
                    if let Some(busy) = before_read {
                        busy.issue(stream)?;
                    }
                    self.copies.read_int()?;
                }
                FloorItem::H2dPinned => self.copies.write_pinned()?,
                FloorItem::H2dPageable => self.copies.write_pageable()?,
                FloorItem::D2dCopy => self.copies.copy_device()?,
            }
        }
        self.gpu.sync()?;
        Ok(start.elapsed())
    }

    /// The empty graph as a step source, to time the harness's own per-step overhead.
    pub fn empty_graph(&self) -> Result<&Graph> {
        chain(&self.empty_graphs, 1)
    }
}

/// The chain of `nodes` empty kernels among `graphs`.
fn chain(graphs: &[(u8, Graph)], nodes: u8) -> Result<&Graph> {
    graphs
        .iter()
        .find(|(n, _)| *n == nodes)
        .map(|(_, graph)| graph)
        .with_context(|| format!("no empty graph of {nodes} nodes in the floor"))
}

/// A graph of `nodes` empty kernels captured from one stream (so each depends on the one
/// before).
fn empty_chain(gpu: &Gpu, empty: &Launch, nodes: u8) -> Result<Graph> {
    let what = format!("the empty-graph floor of {nodes} nodes");
    capture_graph(&gpu.stream, &what, || {
        for _ in 0..nodes {
            empty.issue(gpu.cu_stream())?;
        }
        Ok(())
    })
}
