//! The CUPTI timer: every launch of a program item made under an external id naming its
//! step and item; kernel, copy and memset records come back with device times on CUPTI's
//! clock. One plain (untimed) event per step serves the one-step-ahead rule.

use super::{assign, external_id, ProgramItems, StepSpans, TimelineTimer};
use crate::gpu::cupti::{Collector, CuptiLibrary};
use crate::gpu::{Event, Gpu};
use anyhow::{Context, Result};

pub struct CuptiTimer<'g> {
    gpu: &'g Gpu,
    library: CuptiLibrary,
    items: usize,
    /// The item whose end completes a step.
    done_item: usize,
    collector: Option<Collector>,
    done: Vec<Event>,
}

impl<'g> CuptiTimer<'g> {
    pub fn new(gpu: &'g Gpu, items: ProgramItems, library: CuptiLibrary) -> Result<Self> {
        let done_item = items
            .last_gpu()
            .context("the host program has no GPU item to time")?;
        Ok(CuptiTimer {
            gpu,
            library,
            items: items.gpu.len(),
            done_item,
            collector: None,
            done: Vec::new(),
        })
    }

    fn collector(&self) -> Result<&Collector> {
        self.collector
            .as_ref()
            .context("the CUPTI timer was used outside a pass")
    }
}

impl TimelineTimer for CuptiTimer<'_> {
    fn start(&mut self, steps: usize) -> Result<()> {
        self.done = self
            .gpu
            .plain_events(steps)
            .context("creating a step event")?;
        self.collector = Some(Collector::start(&self.library)?);
        Ok(())
    }

    fn enter(&mut self, step: usize, item: usize) -> Result<()> {
        self.collector()?.push(external_id(step, item, self.items))
    }

    fn gpu_start(&mut self, _step: usize, _item: usize) -> Result<()> {
        Ok(())
    }

    fn leave(&mut self, step: usize, item: usize) -> Result<()> {
        self.collector()?.pop()?;
        if item == self.done_item {
            self.done[step].record(&self.gpu.stream)?;
        }
        Ok(())
    }

    fn wait_step(&mut self, step: usize) -> Result<()> {
        self.done[step].synchronize()?;
        Ok(())
    }

    fn finish(&mut self, steps: usize) -> Result<Vec<StepSpans>> {
        let collected = self
            .collector
            .take()
            .context("the CUPTI timer finished a pass it never started")?
            .finish()?;
        assign(
            &collected.activities,
            collected.origin_ns,
            steps,
            self.items,
            self.done_item,
        )
    }
}
