//! A discrete model of one host thread and one GPU stream running a step's host program (the
//! sequences of [`super::prep_sequence`]), with the host one step ahead: the tests use it to
//! pin down what the real run must show (a read exposes the host work after it and hides the
//! work before it), without a GPU.

use super::{prep_sequence, PrepStep};
use crate::axes::Arm;
use crate::axes::Drafter;
use crate::model::host_profile::{first_launching_op, prep_arm, HostProfile, Item};

/// GPU durations (µs) the simulation gives each kind of work.
#[derive(Debug, Clone, Copy)]
pub struct SimGpu {
    pub forward_us: f64,
    /// A real prep kernel, a framework op's kernel, the accept kernel.
    pub kernel_us: f64,
    /// A whole prep graph.
    pub replay_us: f64,
    /// Host time of a read with the GPU idle, before the profile's top-up (the same for
    /// every read path).
    pub read_us: f64,
}

/// What the simulation saw per step (µs, steady state).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimStep {
    pub step_us: f64,
    pub gpu_idle_us: f64,
}

/// Runs the host program of `arm` for `steps` steps on one host thread and one GPU
/// stream, with the host allowed one step ahead (it waits for step k−2 before step k), and
/// returns the last step's wall time and GPU idle time. Host items and ops cost what the
/// profile says; a read waits for the stream to drain, then costs `max(read_us, profile)`,
/// the profile's cost being that of `arm`'s read path (0 where the profile has none).
/// The program is the profile's DSpark one; [`simulate_items`] runs any other.
pub fn simulate(profile: &HostProfile, arm: Arm, gpu: SimGpu, steps: usize) -> SimStep {
    simulate_items(profile, Drafter::Dspark, &profile.program, arm, gpu, steps)
}

/// [`simulate`] over `items`, a step of `drafter` as [`HostProfile::step_items`] gives it
/// (each prep run as [`prep_arm`] says); every forward takes `gpu.forward_us`.
pub fn simulate_items(
    profile: &HostProfile,
    drafter: Drafter,
    items: &[Item],
    arm: Arm,
    gpu: SimGpu,
    steps: usize,
) -> SimStep {
    let mut host = 0.0f64;
    let mut stream = 0.0f64;
    let mut idle = 0.0f64;
    let mut done: Vec<f64> = Vec::with_capacity(steps);
    // Enqueues `us` of GPU work at host time `host`; counts the idle time before it.
    let launch = |host: f64, stream: &mut f64, idle: &mut f64, us: f64| {
        if host > *stream {
            *idle += host - *stream;
            *stream = host;
        }
        *stream += us;
    };
    let profile_read_us = arm
        .read_path()
        .and_then(|path| profile.read_cost(path))
        .map_or(0.0, |cost| cost.value);
    let read_us = gpu.read_us.max(profile_read_us);
    let mut idle_at_step = Vec::with_capacity(steps);
    for k in 0..steps {
        if k >= 2 {
            host = host.max(done[k - 2]);
        }
        for item in items {
            if let Some(phase) = item.prep_phase() {
                let arm = prep_arm(drafter, phase, arm);
                let op_us = profile.prep_op_us(phase, arm);
                for step in prep_sequence(arm, profile.arm_ops(phase, arm), 2) {
                    match step {
                        PrepStep::Read => host = host.max(stream) + read_us,
                        PrepStep::Op(l) => {
                            if l.is_some() {
                                launch(host, &mut stream, &mut idle, gpu.kernel_us);
                            }
                            host += op_us;
                        }
                        PrepStep::Kernel(_) => launch(host, &mut stream, &mut idle, gpu.kernel_us),
                        PrepStep::Upload => {
                            if profile.upload_syncs.value {
                                host = host.max(stream);
                            }
                            host += profile.upload_us.value;
                        }
                        PrepStep::Replay => {
                            launch(host, &mut stream, &mut idle, gpu.replay_us);
                            host += profile.graph_launch_us.value;
                        }
                    }
                }
                continue;
            }
            if item.forward_of().is_some() {
                launch(host, &mut stream, &mut idle, gpu.forward_us);
                host += profile.graph_launch_us.value;
                continue;
            }
            match item {
                Item::Host {
                    us, ops, launches, ..
                } => {
                    host += us;
                    let first_launch = first_launching_op(*ops, *launches);
                    for op in 0..*ops {
                        if op >= first_launch {
                            launch(host, &mut stream, &mut idle, gpu.kernel_us);
                        }
                        host += profile.op_us.value;
                    }
                }
                Item::Accept { ops } => {
                    launch(host, &mut stream, &mut idle, gpu.kernel_us);
                    host += f64::from((*ops).max(1)) * profile.op_us.value;
                }
                // Expanded by step_items before a step runs; a group left in runs nothing.
                _ => {}
            }
        }
        done.push(stream);
        idle_at_step.push(idle);
    }
    let last = steps - 1;
    SimStep {
        step_us: done[last] - done[last - 1],
        gpu_idle_us: idle_at_step[last] - idle_at_step[last - 1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::host_profile::{PrepOps, Sourced};
    use crate::model::program::tests::ops;
    use std::collections::BTreeMap;

    /// A profile with `after` ops following the read and `before` ops preceding it in each
    /// prep, `op_us` each, and `between` µs of host work between the phases.
    fn synthetic(before: u32, after: u32, op_us: f64, between: f64) -> HostProfile {
        let s = |v: f64| Sourced {
            value: v,
            source: "test".into(),
        };
        let prep = PrepOps {
            source: "test".into(),
            eager_sync: ops(before + after, 0, 1, before),
            eager_device: ops(before + after, 0, 0, 0),
            graph: ops(0, 0, 0, 0),
            graph_upload: None,
            kernel_us: None,
            kernel_us_by_batch: None,
        };
        HostProfile {
            name: "test".into(),
            source: "test".into(),
            op_us: s(op_us),
            kernel_us: s(0.0),
            read_us: s(0.0),
            graph_launch_us: s(0.0),
            upload_us: s(0.0),
            upload_syncs: Sourced {
                value: true,
                source: "test".into(),
            },
            host_speed_us: None,
            preps: BTreeMap::from([
                ("dspark_draft_block".into(), prep.clone()),
                ("dsa_target_verify".into(), prep),
            ]),
            program: vec![
                Item::DraftPrep,
                Item::DraftForward,
                Item::Host {
                    name: "between".into(),
                    us: between,
                    us_by_batch: None,
                    ops: 0,
                    launches: None,
                    source: String::new(),
                },
                Item::VerifyPrep,
                Item::VerifyForward,
                Item::Accept { ops: 0 },
            ],
            pinned_read_us: None,
            mapped_read_us: None,
            eagle_program: None,
            post_wait: None,
            arm_host_factors: None,
            post_wait_scale: None,
        }
    }

    const GPU: SimGpu = SimGpu {
        forward_us: 1000.0,
        kernel_us: 0.0,
        replay_us: 0.0,
        read_us: 10.0,
    };

    #[test]
    fn graph_hides_host_work_behind_the_forwards() {
        let p = synthetic(0, 20, 10.0, 100.0);
        let graph = simulate(&p, Arm::Graph, GPU, 20);
        assert_eq!(graph.step_us, 2000.0);
        assert_eq!(graph.gpu_idle_us, 0.0);
        let device = simulate(&p, Arm::EagerDevice, GPU, 20);
        assert_eq!(
            device.step_us, 2000.0,
            "400 µs of prep ops fit behind 2 ms of forwards"
        );
    }

    #[test]
    fn a_read_exposes_the_work_after_it_and_hides_the_work_before_it() {
        // Each read waits for the stream, then the read (10 µs) and the ops after it are
        // exposed: two preps x (10 + 20 x 10) µs.
        let after = simulate(&synthetic(0, 20, 10.0, 0.0), Arm::EagerSync, GPU, 20);
        assert_eq!(after.step_us, 2000.0 + 2.0 * (10.0 + 200.0));
        assert_eq!(after.gpu_idle_us, 2.0 * 210.0);
        // The same ops before the read overlap the forward: only the read shows.
        let before = simulate(&synthetic(20, 0, 10.0, 0.0), Arm::EagerSync, GPU, 20);
        assert_eq!(before.step_us, 2000.0 + 2.0 * 10.0);
    }

    #[test]
    fn the_read_penalty_grows_with_the_host_work_that_follows_it() {
        let penalty = |after: u32| {
            let p = synthetic(0, after, 10.0, 0.0);
            simulate(&p, Arm::EagerSync, GPU, 20).step_us
                - simulate(&p, Arm::Graph, GPU, 20).step_us
        };
        let seq: Vec<f64> = [0, 5, 10, 40].map(penalty).to_vec();
        assert!(seq.windows(2).all(|w| w[1] > w[0]), "{seq:?}");
        assert_eq!(seq[3] - seq[2], 2.0 * 30.0 * 10.0);
    }

    #[test]
    fn host_work_between_phases_shows_only_past_the_draft_forward() {
        // The verify prep's read waits for the draft forward (1000 µs); host work between
        // the phases overlaps it until it is longer.
        let short = simulate(&synthetic(0, 0, 10.0, 500.0), Arm::EagerSync, GPU, 20);
        let long = simulate(&synthetic(0, 0, 10.0, 1500.0), Arm::EagerSync, GPU, 20);
        assert_eq!(short.step_us, 2000.0 + 2.0 * 10.0);
        assert_eq!(long.step_us, 2000.0 + 2.0 * 10.0 + 500.0);
    }

    #[test]
    fn every_read_path_exposes_the_same_work_and_costs_its_own_read() {
        let mut p = synthetic(0, 20, 10.0, 0.0);
        let s = |v: f64| Sourced {
            value: v,
            source: "test".into(),
        };
        p.read_us = s(30.0);
        p.pinned_read_us = Some(s(15.0));
        let cost = |arm| simulate(&p, arm, GPU, 20).step_us;
        // The same 20 ops follow each read, exposed; only the read itself differs: 30 µs
        // pageable, 15 µs pinned, and the harness's own 10 µs where the profile has nothing.
        assert_eq!(cost(Arm::EagerSync), 2000.0 + 2.0 * (30.0 + 200.0));
        assert_eq!(cost(Arm::EagerPinned), 2000.0 + 2.0 * (15.0 + 200.0));
        assert_eq!(cost(Arm::EagerMapped), 2000.0 + 2.0 * (10.0 + 200.0));
        assert_eq!(
            prep_sequence(Arm::EagerMapped, ops(6, 4, 1, 2), 2),
            prep_sequence(Arm::EagerSync, ops(6, 4, 1, 2), 2),
            "one host program for every read path"
        );
    }

    /// `synthetic`'s costs with an EAGLE program: `host_us` of host work, the draft passes'
    /// decode preps, their forwards, verify, extend, accept; every EAGLE prep like the
    /// DSpark ones.
    fn synthetic_eagle(before: u32, after: u32, op_us: f64, host_us: f64) -> HostProfile {
        let mut p = synthetic(before, after, op_us, 0.0);
        let prep = p.preps["dsa_target_verify"].clone();
        p.preps.insert("dsa_decode".into(), prep.clone());
        p.preps.insert("dsa_draft_extend_v2".into(), prep);
        p.eagle_program = Some(vec![
            Item::Host {
                name: "seams".into(),
                us: host_us,
                us_by_batch: None,
                ops: 0,
                launches: None,
                source: String::new(),
            },
            Item::DraftPasses {
                items: vec![Item::DecodePrep],
            },
            Item::DraftPasses {
                items: vec![Item::DraftForward],
            },
            Item::VerifyPrep,
            Item::VerifyForward,
            Item::ExtendPrep,
            Item::ExtendForward,
            Item::Accept { ops: 0 },
        ]);
        p
    }

    fn eagle_step(p: &HostProfile, block: u32, arm: Arm) -> SimStep {
        let items = p.step_items(Drafter::Eagle, block, 1).unwrap();
        simulate_items(p, Drafter::Eagle, &items, arm, GPU, 20)
    }

    #[test]
    fn the_eagle_host_stays_off_the_critical_path_iff_its_loop_is_shorter_than_the_gpu_step() {
        // Block 4: two draft passes, then verify and extend: four 1000 µs forwards a step.
        // The graph arm's host loop is the seams' µs plus accept's one 10 µs op (its preps
        // and forwards launch at no host cost here).
        let gpu_step = 4.0 * GPU.forward_us;
        let host_loop = |seams: f64| seams + 10.0;
        for seams in [0.0, 0.5 * gpu_step, 0.99 * gpu_step] {
            assert!(host_loop(seams) < gpu_step);
            let s = eagle_step(&synthetic_eagle(0, 20, 10.0, seams), 4, Arm::Graph);
            assert_eq!(s.step_us, gpu_step, "host loop {} µs", host_loop(seams));
            assert_eq!(s.gpu_idle_us, 0.0, "host loop {} µs", host_loop(seams));
        }
        // Past the GPU's step the host loop is the step, and the GPU idles for the rest.
        for seams in [1.01 * gpu_step, 1.5 * gpu_step, 3.0 * gpu_step] {
            let s = eagle_step(&synthetic_eagle(0, 20, 10.0, seams), 4, Arm::Graph);
            let h = host_loop(seams);
            assert!((s.step_us - h).abs() < 1e-6, "{} vs {h}", s.step_us);
            assert!((s.gpu_idle_us - (h - gpu_step)).abs() < 1e-6, "{s:?}");
        }
        // More draft passes, more GPU step: block 6 has four passes, six forwards.
        let s = eagle_step(&synthetic_eagle(0, 20, 10.0, 5000.0), 6, Arm::Graph);
        assert_eq!(s.step_us, 6.0 * GPU.forward_us);
    }

    #[test]
    fn every_eagle_prep_s_read_exposes_the_work_after_it() {
        // Each read drains the stream, then it (10 µs) and the 20 ops of 10 µs after it are
        // exposed: k decode preps, the verify and the draft-extend, each 210 µs.
        let p = synthetic_eagle(0, 20, 10.0, 0.0);
        for (block, passes) in [(3, 1.0), (4, 2.0), (5, 3.0)] {
            let forwards = (passes + 2.0) * GPU.forward_us;
            let sync = eagle_step(&p, block, Arm::EagerSync);
            assert_eq!(
                sync.step_us,
                forwards + (passes + 2.0) * 210.0,
                "block {block}"
            );
            assert_eq!(sync.gpu_idle_us, (passes + 2.0) * 210.0, "block {block}");
            assert_eq!(eagle_step(&p, block, Arm::Graph).step_us, forwards);
            // eager-device issues the same ops with no read: the forwards hide them.
            assert_eq!(eagle_step(&p, block, Arm::EagerDevice).step_us, forwards);
        }
    }

    #[test]
    fn eagle_s_graph_upload_uploads_before_the_draft_extend_replay_alone() {
        // A syncing 15 µs upload: DSpark's graph-upload pays it before both its replays,
        // EAGLE's before the draft-extend replay only, whatever the number of passes.
        let mut p = synthetic_eagle(0, 0, 10.0, 0.0);
        p.upload_us.value = 15.0;
        assert_eq!(
            simulate(&p, Arm::GraphUpload, GPU, 20).step_us,
            2000.0 + 2.0 * 15.0
        );
        for (block, forwards) in [(3, 3000.0), (5, 5000.0)] {
            let up = eagle_step(&p, block, Arm::GraphUpload);
            assert_eq!(up.step_us, forwards + 15.0, "block {block}");
            assert_eq!(eagle_step(&p, block, Arm::Graph).step_us, forwards);
        }
    }

    #[test]
    fn the_pytorch_eagle_step_reads_and_uploads_where_sglang_does() {
        // Per step at block 5 (three passes): eager-sync reads once per decode prep
        // (seq_lens.max().item()), once in the verify and three times in the draft-extend;
        // graph-upload uploads once, before the draft-extend replay; graph neither.
        let p = HostProfile::load("pytorch").unwrap();
        let items = p.step_items(Drafter::Eagle, 5, 1).unwrap();
        let per_step = |arm: Arm, what: PrepStep| -> Vec<(String, usize)> {
            items
                .iter()
                .filter_map(|item| {
                    let phase = item.prep_phase()?;
                    let arm = prep_arm(Drafter::Eagle, phase, arm);
                    let seq = prep_sequence(arm, p.arm_ops(phase, arm), 2);
                    let n = seq.iter().filter(|&&s| s == what).count();
                    Some((item.label().to_string(), n))
                })
                .collect()
        };
        let at = |pairs: &[(&str, usize)]| -> Vec<(String, usize)> {
            pairs.iter().map(|&(l, n)| (l.to_string(), n)).collect()
        };
        for arm in [Arm::EagerSync, Arm::EagerPinned, Arm::EagerMapped] {
            assert_eq!(
                per_step(arm, PrepStep::Read),
                at(&[
                    ("decode prep", 1),
                    ("decode prep", 1),
                    ("decode prep", 1),
                    ("verify prep", 1),
                    ("extend prep", 3)
                ]),
                "{arm}"
            );
        }
        for arm in [Arm::EagerDevice, Arm::Graph, Arm::GraphUpload, Arm::Fused] {
            assert!(
                per_step(arm, PrepStep::Read).iter().all(|(_, n)| *n == 0),
                "{arm}"
            );
        }
        assert_eq!(
            per_step(Arm::GraphUpload, PrepStep::Upload),
            at(&[
                ("decode prep", 0),
                ("decode prep", 0),
                ("decode prep", 0),
                ("verify prep", 0),
                ("extend prep", 1)
            ])
        );
        assert!(per_step(Arm::Graph, PrepStep::Upload)
            .iter()
            .all(|(_, n)| *n == 0));
    }

    #[test]
    fn a_syncing_upload_before_each_replay_drains_the_stream_too() {
        let p = synthetic(0, 0, 10.0, 0.0);
        let mut syncing = p.clone();
        syncing.upload_us.value = 15.0;
        let up = simulate(&syncing, Arm::GraphUpload, GPU, 20);
        assert_eq!(up.step_us, 2000.0 + 2.0 * 15.0);
        syncing.upload_syncs.value = false;
        assert_eq!(
            simulate(&syncing, Arm::GraphUpload, GPU, 20).step_us,
            2000.0
        );
    }
}
