//! The events timer: a CUDA event where each GPU item's work begins and one where it ends,
//! read against an anchor event on the device clock.

use super::{GpuSpan, ProgramItems, StepSpans, TimelineTimer};
use crate::gpu::{Event, Gpu};
use anyhow::{Context, Result};

pub struct EventsTimer<'g> {
    gpu: &'g Gpu,
    /// The GPU ordinal of each program item (`None`: a host item, not timed).
    ordinal: Vec<Option<usize>>,
    gpu_items: usize,
    anchor: Option<Event>,
    begin: Vec<Event>,
    end: Vec<Event>,
}

impl<'g> EventsTimer<'g> {
    pub fn new(gpu: &'g Gpu, items: ProgramItems) -> Result<Self> {
        let mut next = 0;
        let ordinal = items
            .gpu
            .iter()
            .map(|&g| {
                g.then(|| {
                    next += 1;
                    next - 1
                })
            })
            .collect();
        anyhow::ensure!(next > 0, "the host program has no GPU item to time");
        Ok(EventsTimer {
            gpu,
            ordinal,
            gpu_items: next,
            anchor: None,
            begin: Vec::new(),
            end: Vec::new(),
        })
    }

    /// The event index of `item` in `step`, `None` for a host item.
    fn index(&self, step: usize, item: usize) -> Option<usize> {
        self.ordinal[item].map(|o| step * self.gpu_items + o)
    }
}

impl TimelineTimer for EventsTimer<'_> {
    fn start(&mut self, steps: usize) -> Result<()> {
        let anchor = self.gpu.timing_events(1)?.remove(0);
        self.begin = self.gpu.timing_events(steps * self.gpu_items)?;
        self.end = self.gpu.timing_events(steps * self.gpu_items)?;
        anchor.record(&self.gpu.stream)?;
        anchor.synchronize()?;
        self.anchor = Some(anchor);
        Ok(())
    }

    fn enter(&mut self, _step: usize, _item: usize) -> Result<()> {
        Ok(())
    }

    fn gpu_start(&mut self, step: usize, item: usize) -> Result<()> {
        if let Some(i) = self.index(step, item) {
            self.begin[i].record(&self.gpu.stream)?;
        }
        Ok(())
    }

    fn leave(&mut self, step: usize, item: usize) -> Result<()> {
        if let Some(i) = self.index(step, item) {
            self.end[i].record(&self.gpu.stream)?;
        }
        Ok(())
    }

    fn wait_step(&mut self, step: usize) -> Result<()> {
        self.end[(step + 1) * self.gpu_items - 1].synchronize()?;
        Ok(())
    }

    fn finish(&mut self, steps: usize) -> Result<Vec<StepSpans>> {
        let anchor = self
            .anchor
            .as_ref()
            .context("the events timer finished a pass it never started")?;
        let device_us = |e: &Event| -> Result<f64> { Ok(anchor.elapsed_ms(e)? as f64 * 1e3) };
        (0..steps)
            .map(|step| {
                let mut spans = Vec::with_capacity(self.gpu_items);
                let timed = (0..self.ordinal.len())
                    .filter_map(|item| self.index(step, item).map(|i| (item, i)));
                for (item, i) in timed {
                    spans.push(GpuSpan {
                        item,
                        op: None,
                        stream: 0,
                        start_us: device_us(&self.begin[i])?,
                        end_us: device_us(&self.end[i])?,
                    });
                }
                let done_us = spans.last().map_or(0.0, |s| s.end_us);
                Ok(StepSpans { spans, done_us })
            })
            .collect()
    }
}
