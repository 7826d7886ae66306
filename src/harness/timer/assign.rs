//! CUPTI's records of a timeline pass sorted into steps and program items: each launch was
//! made under an external id naming its step and item (see [`external_id`]), and its kernel
//! and copy records carry the launch's correlation id.

use super::{GpuSpan, StepSpans};
use crate::gpu::cupti::{Activity, GpuActivity};
use anyhow::{ensure, Result};
use std::collections::HashMap;

/// The external id of item `item` (of `items` per step) in step `step`; 0 is never used.
pub fn external_id(step: usize, item: usize, items: usize) -> u64 {
    (step * items + item) as u64 + 1
}

/// The spans of steps `0..steps`, each launch its own span, µs after `origin_ns`; a step is
/// done when the last span of item `done_item` ends. Records without an external id (work of
/// the harness outside the program) and of later steps are left out.
pub fn assign(
    activities: &[Activity],
    origin_ns: u64,
    steps: usize,
    items: usize,
    done_item: usize,
) -> Result<Vec<StepSpans>> {
    let externals: HashMap<u32, u64> = activities
        .iter()
        .filter_map(|a| match a {
            Activity::External {
                correlation,
                external,
            } => Some((*correlation, *external)),
            Activity::Gpu(_) => None,
        })
        .collect();
    let mut spans: Vec<Vec<GpuSpan>> = vec![Vec::new(); steps];
    let us = |ns: u64| (ns as f64 - origin_ns as f64) * 1e-3;
    for a in activities {
        let Activity::Gpu(GpuActivity {
            work,
            start_ns,
            end_ns,
            stream,
            correlation,
        }) = a
        else {
            continue;
        };
        let Some(&id) = externals.get(correlation) else {
            continue;
        };
        let index = (id - 1) as usize;
        let (step, item) = (index / items, index % items);
        if step >= steps {
            continue;
        }
        ensure!(
            end_ns >= start_ns,
            "CUPTI record of {} ends ({end_ns} ns) before it starts ({start_ns} ns)",
            work.name()
        );
        spans[step].push(GpuSpan {
            item,
            op: Some(work.name()),
            stream: *stream,
            start_us: us(*start_ns),
            end_us: us(*end_ns),
        });
    }
    spans
        .into_iter()
        .enumerate()
        .map(|(step, mut spans)| {
            spans.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
            let done = spans
                .iter()
                .filter(|s| s.item == done_item)
                .map(|s| s.end_us)
                .reduce(f64::max);
            let Some(done_us) = done else {
                anyhow::bail!(
                    "step {step}: CUPTI recorded no GPU work of program item {done_item}, \
                     which ends a step (was the pass synchronised before finishing?)"
                );
            };
            Ok(StepSpans { spans, done_us })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::cupti::GpuWork;

    fn kernel(name: &str, start: u64, end: u64, correlation: u32) -> Activity {
        Activity::Gpu(GpuActivity {
            work: GpuWork::Kernel(name.into()),
            start_ns: start,
            end_ns: end,
            stream: 7,
            correlation,
        })
    }

    fn tag(correlation: u32, step: usize, item: usize) -> Activity {
        Activity::External {
            correlation,
            external: external_id(step, item, 3),
        }
    }

    #[test]
    fn ids_are_unique_and_never_zero() {
        let ids: std::collections::BTreeSet<u64> = (0..4)
            .flat_map(|s| (0..3).map(move |i| external_id(s, i, 3)))
            .collect();
        assert_eq!(ids.len(), 12);
        assert!(!ids.contains(&0));
    }

    #[test]
    fn every_launch_is_its_own_span_in_its_step_and_item() {
        // Program of 3 items; item 2 ends a step. Origin at 1000 ns.
        let records = vec![
            tag(10, 0, 0),
            kernel("prep_a", 2_000, 3_000, 10),
            tag(11, 0, 0),
            kernel("prep_b", 5_000, 5_500, 11),
            tag(12, 0, 2),
            kernel("accept", 6_000, 7_000, 12),
            // A graph replay: two kernels, one launch.
            tag(13, 1, 1),
            kernel("fwd_1", 9_000, 9_500, 13),
            kernel("fwd_2", 9_500, 12_000, 13),
            tag(14, 1, 2),
            kernel("accept", 12_500, 13_000, 14),
            // Harness work without an id, and a step beyond the pass: left out.
            kernel("reset", 100, 200, 99),
            tag(15, 2, 2),
            kernel("accept", 20_000, 21_000, 15),
        ];
        let steps = assign(&records, 1_000, 2, 3, 2).unwrap();
        assert_eq!(steps.len(), 2);
        let names: Vec<(usize, &str)> = steps[0]
            .spans
            .iter()
            .map(|s| (s.item, s.op.as_deref().unwrap()))
            .collect();
        assert_eq!(names, vec![(0, "prep_a"), (0, "prep_b"), (2, "accept")]);
        assert_eq!(
            (steps[0].spans[1].start_us, steps[0].spans[1].end_us),
            (4.0, 4.5)
        );
        assert_eq!(steps[0].done_us, 6.0);
        assert_eq!(steps[1].spans.len(), 3);
        assert_eq!(steps[1].done_us, 12.0);
        assert_eq!(steps[1].spans[0].stream, 7);
    }

    #[test]
    fn the_gap_between_two_eager_launches_stays_a_gap() {
        let records = vec![
            tag(1, 0, 0),
            kernel("a", 0, 1_000, 1),
            tag(2, 0, 0),
            kernel("b", 4_000, 5_000, 2),
            tag(3, 0, 2),
            kernel("accept", 5_000, 6_000, 3),
        ];
        let steps = assign(&records, 0, 1, 3, 2).unwrap();
        let busy: Vec<(f64, f64)> = steps[0]
            .spans
            .iter()
            .map(|s| (s.start_us, s.end_us))
            .collect();
        assert_eq!(busy, vec![(0.0, 1.0), (4.0, 5.0), (5.0, 6.0)]);
    }

    #[test]
    fn a_step_without_its_last_item_is_an_error() {
        let records = vec![tag(1, 0, 0), kernel("a", 0, 1_000, 1)];
        let e = assign(&records, 0, 1, 3, 2).unwrap_err().to_string();
        assert!(
            e.contains("step 0: CUPTI recorded no GPU work of program item 2"),
            "{e}"
        );
    }

    #[test]
    fn a_backwards_record_is_an_error() {
        let records = vec![tag(1, 0, 2), kernel("a", 5, 1, 1)];
        let e = assign(&records, 0, 1, 3, 2).unwrap_err().to_string();
        assert!(e.contains("ends (1 ns) before it starts (5 ns)"), "{e}");
    }
}
