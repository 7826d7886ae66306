//! `metaprep collectives`: NCCL's own latency and bandwidth on this host, so the step
//! model's collective cost (α + bytes/β) can be set from a measurement. One process per
//! GPU, as `steps` with real ranks runs them; each times its stream's all-reduces (and,
//! with two ranks or more, the grouped all-to-alls of expert parallelism) with CUDA events
//! over a range of sizes; rank 0 prints the table and the α, β fit.

use crate::gpu::GpuChoice;
use crate::model::nccl_collectives::CollectiveBuffers;
use crate::model::profile::{CollectiveKind, CollectivePlan};
use crate::results::atomic::write_atomic;
use crate::runs::rank_world::{RankRole, RankWorld};
use crate::stats::summary::summarize;
use anyhow::{Context, Result};
use std::fmt::Write;
use std::path::PathBuf;

/// Untimed collectives before each size's samples.
const WARMUP: u32 = 5;

#[derive(Debug, Clone)]
pub struct CollectivesConfig {
    /// The first GPU and how it is opened; rank r runs on the r-th GPU from it.
    pub gpu: GpuChoice,
    pub role: RankRole,
    pub sizes: Vec<u64>,
    /// Collectives timed back to back per sample.
    pub iters: u32,
    pub samples: usize,
    /// Where rank 0 writes `collectives.csv` (besides the table it prints).
    pub out: Option<PathBuf>,
}

/// One size of one collective, over the samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    pub kind: CollectiveKind,
    /// The all-reduced buffer, or the bytes sent to each other rank.
    pub bytes: u64,
    pub median_us: f64,
    pub p10_us: f64,
    pub p90_us: f64,
    /// Bytes each rank moves over its links per collective: 2(n−1)/n of the buffer for a
    /// ring all-reduce (nccl-tests' "bus" bytes), (n−1) × bytes for an all-to-all.
    pub link_bytes: f64,
}

impl Timing {
    /// GB/s (10⁹ B/s) over the links.
    pub fn link_gb_s(&self) -> f64 {
        self.link_bytes / (self.median_us * 1e3)
    }
}

/// A least-squares line t = α + link bytes / β through `timings` of one kind: (α µs, β GB/s).
/// `None` with fewer than two sizes or a slope that is not positive.
pub fn fit(timings: &[&Timing]) -> Option<(f64, f64)> {
    let n = timings.len() as f64;
    if timings.len() < 2 {
        return None;
    }
    let (sx, sy) = timings
        .iter()
        .fold((0.0, 0.0), |(x, y), t| (x + t.link_bytes, y + t.median_us));
    let (mx, my) = (sx / n, sy / n);
    let (sxy, sxx) = timings.iter().fold((0.0, 0.0), |(a, b), t| {
        let dx = t.link_bytes - mx;
        (a + dx * (t.median_us - my), b + dx * dx)
    });
    let slope = sxy / sxx; // µs per byte
    (slope.is_finite() && slope > 0.0).then(|| (my - slope * mx, 1.0 / (slope * 1e3)))
}

/// Runs this process's rank; rank 0 returns the table it printed.
pub fn run_worker(config: &CollectivesConfig) -> Result<Option<String>> {
    let role = &config.role;
    let gpu = config.gpu.for_rank(role.rank).open()?;
    let world = RankWorld::join(role, &gpu)?;
    let comm = world.comm().context("a collectives worker joins a world")?;
    let kinds: &[CollectiveKind] = if role.world > 1 {
        &[CollectiveKind::AllReduce, CollectiveKind::AllToAll]
    } else {
        &[CollectiveKind::AllReduce]
    };
    let plan = |kind, bytes, count| CollectivePlan {
        kind,
        count,
        payload_bytes: bytes,
    };
    let largest: Vec<CollectivePlan> = kinds
        .iter()
        .map(|&k| plan(k, *config.sizes.iter().max().unwrap_or(&2), 1))
        .collect();
    let mut buffers = CollectiveBuffers::new(&gpu, &largest, role.world)?;
    let mut timings = Vec::new();
    for &kind in kinds {
        for &bytes in &config.sizes {
            buffers.issue(comm, &gpu, &plan(kind, bytes, WARMUP))?;
            let timed = plan(kind, bytes, config.iters);
            let mut samples = Vec::with_capacity(config.samples);
            for _ in 0..config.samples {
                world.barrier(&gpu)?;
                let events = gpu.timing_events(2)?;
                events[0].record(&gpu.stream)?;
                buffers.issue(comm, &gpu, &timed)?;
                events[1].record(&gpu.stream)?;
                events[1].synchronize()?;
                let ms = events[0].elapsed_ms(&events[1])? as f64;
                samples.push(ms * 1e3 / f64::from(config.iters));
            }
            let s = summarize(&samples).context("no finite collective time")?;
            timings.push(Timing {
                kind,
                bytes,
                median_us: s.median,
                p10_us: s.p10,
                p90_us: s.p90,
                link_bytes: kind.link_bytes(bytes, role.world as u32),
            });
        }
    }
    if role.rank != 0 {
        return Ok(None);
    }
    let nccl = world.nccl.clone().unwrap_or_default();
    let table = table(&timings, role.world, &gpu.info.name, &nccl);
    if let Some(dir) = &config.out {
        write_atomic(
            &dir.join("collectives.csv"),
            csv(&timings, role.world).as_bytes(),
        )?;
    }
    Ok(Some(table))
}

fn kind_name(kind: CollectiveKind) -> &'static str {
    match kind {
        CollectiveKind::AllReduce => "all-reduce",
        CollectiveKind::AllToAll => "all-to-all",
    }
}

/// The markdown table rank 0 prints, with each kind's α, β fit under it.
pub fn table(timings: &[Timing], world: usize, gpu: &str, nccl: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{world} rank(s) on {gpu}, {nccl}, one process per GPU, CUDA events on each rank's stream (rank 0's times)\n");
    let _ = writeln!(
        out,
        "| collective | bytes | median µs | p10–p90 µs | link bytes | link GB/s |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    for t in timings {
        let gb_s = match t.link_bytes > 0.0 {
            true => format!("{:.1}", t.link_gb_s()),
            false => "—".into(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.2} | {:.2}–{:.2} | {:.0} | {gb_s} |",
            kind_name(t.kind),
            t.bytes,
            t.median_us,
            t.p10_us,
            t.p90_us,
            t.link_bytes
        );
    }
    for kind in [CollectiveKind::AllReduce, CollectiveKind::AllToAll] {
        let of_kind: Vec<&Timing> = timings.iter().filter(|t| t.kind == kind).collect();
        if let Some((alpha, beta)) = fit(&of_kind) {
            let _ = writeln!(
                out,
                "\n{} fit: α = {alpha:.2} µs, β = {beta:.1} GB/s over link bytes (steps: \
                 --collective-latency-us {alpha:.2} --link-gb-s {beta:.0})",
                kind_name(kind)
            );
        }
    }
    out
}

fn csv(timings: &[Timing], world: usize) -> String {
    let mut out =
        "collective,ranks,bytes,median_us,p10_us,p90_us,link_bytes,link_gb_s\n".to_string();
    for t in timings {
        let _ = writeln!(
            out,
            "{},{world},{},{},{},{},{},{}",
            kind_name(t.kind),
            t.bytes,
            t.median_us,
            t.p10_us,
            t.p90_us,
            t.link_bytes,
            t.link_gb_s()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(bytes: u64, us: f64, world: usize) -> Timing {
        Timing {
            kind: CollectiveKind::AllReduce,
            bytes,
            median_us: us,
            p10_us: us,
            p90_us: us,
            link_bytes: CollectiveKind::AllReduce.link_bytes(bytes, world as u32),
        }
    }

    #[test]
    fn the_fit_recovers_latency_and_bandwidth() {
        // t = 8 µs + bytes / (200 GB/s): 200 GB/s is 200e3 bytes per µs.
        let ts: Vec<Timing> = [8192u64, 1 << 20, 1 << 26]
            .iter()
            .map(|&b| timing(b, 8.0 + b as f64 / 200e3, 2))
            .collect();
        let (alpha, beta) = fit(&ts.iter().collect::<Vec<_>>()).unwrap();
        assert!((alpha - 8.0).abs() < 1e-6, "{alpha}");
        assert!((beta - 200.0).abs() < 1e-6, "{beta}");
        assert_eq!(fit(&[&ts[0]]), None);
        let world_of_one: Vec<Timing> = (1..4).map(|i| timing(i << 20, 5.0, 1)).collect();
        assert_eq!(fit(&world_of_one.iter().collect::<Vec<_>>()), None);
    }

    #[test]
    fn the_table_prints_every_size_and_the_fit() {
        let at = |bytes: u64| timing(bytes, 10.0 + bytes as f64 / 300e3, 2);
        let ts = vec![at(3000), at(1 << 26)];
        let t = table(&ts, 2, "NVIDIA H200", "NCCL 2.27.3 (/x)");
        assert!(t.contains("| all-reduce | 3000 | 10.01 |"), "{t}");
        assert!(
            t.contains("all-reduce fit: α = 10.00 µs, β = 300.0 GB/s"),
            "{t}"
        );
        assert!(csv(&ts, 2).lines().count() == 3);
    }
}
