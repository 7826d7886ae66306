//! The host program of one step, item by item and op by op, and a simulation of it.
//!
//! The step loop (`run.rs`) runs these sequences for real on the GPU host. The same
//! sequences also drive [`simulate`], a discrete model of one host thread and one GPU
//! stream: the tests use it to pin down what the real run must show (a read exposes the
//! host work after it and hides the work before it), without a GPU.
//!
//! The sequences are here; the simulation is in `simulate`.

mod simulate;

pub use simulate::{simulate, simulate_items, SimGpu, SimStep};

use crate::axes::Arm;
use crate::model::host_profile::ArmOps;

/// One host action of a prep, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrepStep {
    /// A host read of device lengths (`.tolist()`, or the pinned or mapped read of
    /// eager-pinned and eager-mapped): waits for the GPU to drain.
    Read,
    /// One framework op: host time, and maybe a kernel launch.
    Op(Option<OpLaunch>),
    /// One of the plan's own kernels, launched with no framework op around it (native).
    Kernel(usize),
    /// graph-upload: `torch.tensor([N] * bs, device=...)` copied into the graph's input.
    Upload,
    /// One replay of the prep's graph.
    Replay,
}

/// What a framework op launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpLaunch {
    /// An op whose kernel the plan does not need (the framework's own small kernels).
    Empty,
    /// The plan's kernel with this index.
    Kernel(usize),
}

impl PrepStep {
    /// True when the step puts work on the GPU stream.
    pub fn launches(self) -> bool {
        matches!(
            self,
            PrepStep::Op(Some(_)) | PrepStep::Kernel(_) | PrepStep::Replay
        )
    }
}

/// The host actions of `arm`'s prep: `ops` framework ops, the last `launches` of which
/// launch a kernel, with the plan's `kernels` in the last launching slots (any that do not
/// fit follow the ops, as native launches). A reading arm (eager-sync, eager-pinned,
/// eager-mapped) makes its reads after `ops_before_read` ops, and never after its first real
/// kernel (those kernels read the host-built list). Graph arms run their ops, then graph-upload's copy, then the replay.
pub fn prep_sequence(arm: Arm, ops: ArmOps, kernels: usize) -> Vec<PrepStep> {
    let n = ops.ops as usize;
    let mut seq = Vec::with_capacity(n + kernels + ops.reads as usize + 2);
    if arm.uses_graph() {
        seq.extend(std::iter::repeat_n(PrepStep::Op(None), n));
        if arm == Arm::GraphUpload {
            seq.push(PrepStep::Upload);
        }
        seq.push(PrepStep::Replay);
        return seq;
    }
    let launching = (ops.launches as usize).min(n);
    let in_slots = kernels.min(launching);
    let first_launch = n - launching;
    let first_kernel_slot = n - in_slots;
    let reads = if arm.reads_host() {
        ops.reads.max(1) as usize
    } else {
        0
    };
    let read_at = (ops.ops_before_read as usize).min(first_kernel_slot);
    for slot in 0..n {
        if slot == read_at {
            seq.extend(std::iter::repeat_n(PrepStep::Read, reads));
        }
        let launch = if slot >= first_kernel_slot {
            Some(OpLaunch::Kernel(slot - first_kernel_slot))
        } else if slot >= first_launch {
            Some(OpLaunch::Empty)
        } else {
            None
        };
        seq.push(PrepStep::Op(launch));
    }
    if read_at >= n {
        seq.extend(std::iter::repeat_n(PrepStep::Read, reads));
    }
    seq.extend((in_slots..kernels).map(PrepStep::Kernel));
    seq
}

/// Where the prep's GPU span starts: the first launch after its last blocking step (a read
/// or a syncing upload), so the time the GPU waits for the host is not counted as prep.
pub fn span_start(seq: &[PrepStep], upload_syncs: bool) -> usize {
    let blocking = |s: &PrepStep| *s == PrepStep::Read || (upload_syncs && *s == PrepStep::Upload);
    let after = seq.iter().rposition(blocking).map_or(0, |i| i + 1);
    seq[after..]
        .iter()
        .position(|s| s.launches())
        .map_or(seq.len(), |i| after + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn ops(ops: u32, launches: u32, reads: u32, before: u32) -> ArmOps {
        ArmOps {
            ops,
            launches,
            reads,
            ops_before_read: before,
            op_us: None,
        }
    }

    #[test]
    fn native_eager_sync_reads_then_launches_the_plan() {
        let seq = prep_sequence(Arm::EagerSync, ops(0, 0, 1, 0), 3);
        use PrepStep::*;
        assert_eq!(seq, [Read, Kernel(0), Kernel(1), Kernel(2)]);
        assert_eq!(span_start(&seq, false), 1);
        let dev = prep_sequence(Arm::EagerDevice, ops(0, 0, 0, 0), 2);
        assert_eq!(dev, [Kernel(0), Kernel(1)]);
        assert_eq!(span_start(&dev, false), 0);
    }

    #[test]
    fn framework_ops_put_the_plan_kernels_in_the_last_launching_slots() {
        use OpLaunch::Empty;
        use PrepStep::{Op, Read};
        let k = |i| Op(Some(OpLaunch::Kernel(i)));
        // 6 ops, the last 4 launch, 2 real kernels; read after 2 ops.
        let seq = prep_sequence(Arm::EagerSync, ops(6, 4, 1, 2), 2);
        assert_eq!(
            seq,
            [
                Op(None),
                Op(None),
                Read,
                Op(Some(Empty)),
                Op(Some(Empty)),
                k(0),
                k(1)
            ]
        );
        assert_eq!(span_start(&seq, false), 3);
        // More kernels than launching slots: the rest follow, in order.
        let seq = prep_sequence(Arm::EagerDevice, ops(2, 1, 0, 0), 3);
        assert_eq!(
            seq,
            [Op(None), k(0), PrepStep::Kernel(1), PrepStep::Kernel(2)]
        );
    }

    #[test]
    fn a_read_never_comes_after_the_kernels_that_need_it() {
        let seq = prep_sequence(Arm::EagerSync, ops(4, 2, 2, 4), 2);
        let first_kernel = seq
            .iter()
            .position(|s| matches!(s, PrepStep::Op(Some(OpLaunch::Kernel(0)))))
            .unwrap();
        let reads: Vec<usize> = (0..seq.len())
            .filter(|&i| seq[i] == PrepStep::Read)
            .collect();
        assert_eq!(reads.len(), 2);
        assert!(reads.iter().all(|&r| r < first_kernel), "{seq:?}");
    }

    #[test]
    fn graph_arms_replay_after_their_ops_and_upload_before_the_replay() {
        use PrepStep::*;
        assert_eq!(
            prep_sequence(Arm::Graph, ops(1, 0, 0, 0), 3),
            [Op(None), Replay]
        );
        let up = prep_sequence(Arm::GraphUpload, ops(0, 0, 0, 0), 3);
        assert_eq!(up, [Upload, Replay]);
        assert_eq!(span_start(&up, true), 1);
        assert_eq!(prep_sequence(Arm::Fused, ops(0, 0, 0, 0), 1), [Replay]);
    }
}
