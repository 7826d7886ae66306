//! Graph capture and the capture guard.
//!
//! A device-to-host copy issued while the stream is capturing can be accepted by the driver
//! and silently become a graph node: the host gets no data and the "graph" path quietly
//! contains the host read it exists to remove. Every host read in metaprep goes through
//! `ensure_not_capturing` first, so that case is an error naming the operation.

use anyhow::{bail, Context, Result};
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode, CUstreamCaptureStatus};
use cudarc::driver::{CudaGraph, CudaStream};
use std::sync::Arc;

/// Refuses a host read of device memory while `stream` is capturing.
pub fn ensure_not_capturing(stream: &CudaStream, operation: &str) -> Result<()> {
    let status = stream
        .capture_status()
        .context("querying the stream's capture status")?;
    if status != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
        bail!(
            "host read during CUDA graph capture: {operation} needs the data on the host now, \
             but the stream is capturing ({status:?}); a graph cannot contain a host read. \
             Capture only device-only prep (the graph and fused arms)"
        );
    }
    Ok(())
}

/// An instantiated CUDA graph, replayed as one launch on the stream it was captured from.
pub struct Graph(CudaGraph);

impl Graph {
    /// Replays the graph.
    pub fn launch(&self) -> Result<()> {
        Ok(self.0.launch()?)
    }
}

/// Captures what `body` issues on `stream` into an instantiated graph, uploaded so its first
/// replay pays no upload. If `body` fails, the capture is ended and discarded and the body's
/// error returned: never a partial graph, and never a silent fallback to eager launches.
pub fn capture_graph(
    stream: &Arc<CudaStream>,
    what: &str,
    body: impl FnOnce() -> Result<()>,
) -> Result<Graph> {
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .with_context(|| format!("beginning graph capture of {what}"))?;
    let body_result = body();
    let status = stream.capture_status();
    let end = stream.end_capture(CUgraphInstantiate_flags(0));
    body_result.with_context(|| format!("graph capture of {what} failed"))?;
    match status {
        Ok(CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE) => {}
        Ok(other) => bail!("graph capture of {what} was invalidated ({other:?})"),
        Err(e) => return Err(e).with_context(|| format!("graph capture of {what}")),
    }
    let Some(graph) = end.with_context(|| format!("ending graph capture of {what}"))? else {
        bail!("graph capture of {what} produced no graph");
    };
    graph
        .upload()
        .with_context(|| format!("uploading the graph of {what}"))?;
    Ok(Graph(graph))
}
