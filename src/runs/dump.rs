//! `metaprep check --dump DIR`: the inputs and every output of a fixed set of cases, written
//! for scripts/crosscheck_sglang.py to run SGLang's own metadata code on.
//!
//! The cases span batch 1–8, blocks 1–8 and lengths 0 to 131 073: the window (127..129), the
//! page (255..257), the DSA page sizes (63..65, 127..129 for the 128-column blocks), top-k
//! (2047..2049), the draft-extend clamp (N − 1 .. N + 1), long contexts up to 128k + 1, padding
//! rows (batch 3, 5, 6, 7 pad up) and, for DSpark, `swa_valid_from` other than 0.
//!
//! Format (language-neutral): `DIR/cases.json` indexes the cases and names the constants;
//! `DIR/full_to_swa.safetensors` holds the one `full_to_swa` map every case shares;
//! `DIR/case-NNNNN.safetensors` holds one case's int32 tensors:
//! * inputs `seq_lens [P]`, `req_pool_indices [P]`, `req_to_token [pool_rows, max_context]`,
//!   `out_cache_loc [P * block]`, `swa_valid_from [pool_rows]` (padding rows already hold the
//!   engine's fill values);
//! * the CPU reference's outputs `eager/<output>` and `graph/<output>`, each `[rows, width]`
//!   as the whole buffer a correct path leaves: the written cells, and the poison
//!   (`cases.json`'s `poison`) in every cell the path does not write (the eager path runs
//!   the live batch unpadded, so its padding rows are all poison);
//! * with a GPU, each arm's buffers after one poisoned step, `arm/<arm>/<output>`.
//!
//! `DIR/env.json` records the machine and what the dump holds (`settings`: its seed, case
//! count and arms; `src/cli/check.rs` writes it).

use crate::axes::{Arm, Family};
use crate::gpu::kernels::{
    DSA_GRAPH_COL_BLOCK, DSA_REAL_PAGE_SIZE, DSA_TOPK, PAGE_SIZE, SWA_ALIGN, SWA_WINDOW,
};
use crate::gpu::Gpu;
use crate::prep::accept::AcceptModel;
use crate::prep::family::{PageRule, Shape, POISON};
use crate::prep::inputs::{HostInputs, KV_SLOTS, PAD_SEQ_LEN, SWA_SLOTS};
use crate::prep::lengths::DeviceLengths;
use crate::prep::plan::PrepPlan;
use crate::prep::reference::{expected, Expected};
use crate::results::atomic::write_atomic;
use crate::results::atomic::Staging;
use crate::results::safetensors::Tensors;
use crate::stats::rng::SplitMix64;
use anyhow::{bail, Context, Result};
use serde_json::json;
use std::path::{Path, PathBuf};

/// Lengths where a formula changes branch or a block boundary falls.
const EDGES: [i32; 22] = [
    0, 1, 2, 3, 63, 64, 65, 127, 128, 129, 130, 255, 256, 257, 383, 384, 2047, 2048, 2049, 2050,
    4096, 4097,
];
/// Long contexts, up to 128k + 1.
const LONG: [i32; 6] = [65535, 65536, 65537, 131071, 131072, 131073];

/// One case: its shape and inputs, and which lengths it was built around.
pub struct DumpCase {
    pub shape: Shape,
    pub inputs: HostInputs,
    pub note: &'static str,
}

/// Case `k` of a dump seeded by `seed`, its `full_to_swa` the shared `full_to_swa`.
pub fn dump_case(seed: u64, k: usize, full_to_swa: &[i32]) -> Result<DumpCase> {
    let mut rng = SplitMix64::new(seed ^ (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let family = Family::ALL[k % Family::ALL.len()];
    let long = k % 16 == 15;
    // Long cases keep to eight page rows, so a dump stays a few hundred MB.
    let (bs, block) = if long {
        (1 + (k / 16) % 2, 1 + (k / 32) % 4)
    } else {
        (1 + (k / 4) % 8, 1 + (k / 32) % 8)
    };
    let n = block as i32;
    let clamp_edges = [n - 1, n, n + 1, n + 2];
    // Batch 3 (padded to 4) with every live length 0, in one 32-case stretch of four: the
    // eager page width's edge (the live lengths give 0 columns, or N for verify,
    // where the padding row's fill length would give more).
    let all_empty = bs == 3 && (k / 32) % 4 == 1;
    let lens: Vec<i32> = (0..bs)
        .map(|i| match (long && i == 0, rng.range(0, 3)) {
            _ if all_empty => 0,
            (true, _) => LONG[rng.range(0, LONG.len() as u64 - 1) as usize],
            (false, 0) => clamp_edges[rng.range(0, 3) as usize].max(0),
            (false, 1) => rng.range(0, 5000) as i32,
            _ => EDGES[rng.range(0, EDGES.len() as u64 - 1) as usize],
        })
        .collect();
    let longest = lens.iter().copied().max().unwrap_or(0) as u32;
    let min_context = 2 * (block as u32 + 1) + SWA_WINDOW as u32;
    let max_context = (longest + block as u32 + 2).max(min_context).div_ceil(256) * 256;
    let shape = Shape::new(family, bs as u32, block as u32, max_context)?;
    let padded = shape.padded_bs as usize;
    let pool_rows = bs + 1;
    let mut pool: Vec<i32> = (0..pool_rows as i32).collect();
    for j in (1..pool.len()).rev() {
        pool.swap(j, rng.range(0, j as u64) as usize);
    }
    let mut seq_lens = lens.clone();
    seq_lens.resize(padded, PAD_SEQ_LEN);
    let mut req_pool_indices = pool[..bs].to_vec();
    req_pool_indices.resize(padded, 0);
    let mut slot = || rng.range(0, KV_SLOTS as u64 - 1) as i32;
    let req_to_token = (0..pool_rows * max_context as usize)
        .map(|_| slot())
        .collect();
    let out_cache_loc = (0..padded * block)
        .map(|j| if j < bs * block { slot() } else { 0 })
        .collect();
    let mut swa_valid_from = vec![0; pool_rows];
    let with_valid_from = family == Family::DsparkDraftBlock && k % 8 >= 4;
    if with_valid_from {
        for (i, &l) in lens.iter().enumerate() {
            let choices = [
                0,
                l / 2,
                l - 1,
                l - 50,
                l + 3,
                rng.range(0, l as u64) as i32,
            ];
            swa_valid_from[pool[i] as usize] = choices[rng.range(0, 5) as usize].max(0);
        }
    }
    let note = match (long, with_valid_from, shape.padded_bs as usize > bs) {
        _ if all_empty => "padding rows, every length 0",
        (true, _, _) => "long context",
        (_, true, _) => "swa_valid_from",
        (_, _, true) => "padding rows",
        _ => "edges",
    };
    Ok(DumpCase {
        shape,
        inputs: HostInputs {
            seq_lens,
            req_pool_indices,
            req_to_token,
            out_cache_loc,
            full_to_swa: full_to_swa.to_vec(),
            swa_valid_from,
        },
        note,
    })
}

/// The one `full_to_swa` map of a dump.
pub fn shared_full_to_swa(seed: u64) -> Vec<i32> {
    let mut rng = SplitMix64::new(seed ^ 0x5a5a);
    (0..KV_SLOTS)
        .map(|_| rng.range(0, SWA_SLOTS as u64 - 1) as i32)
        .collect()
}

/// A case's CPU reference under each page rule, each computed once (the arms of one rule
/// share it).
struct References {
    eager: Vec<Expected>,
    graph: Vec<Expected>,
}

impl References {
    fn of_case(case: &DumpCase) -> Self {
        let under = |rule| expected(&case.shape, &case.inputs, rule);
        Self {
            eager: under(PageRule::Eager),
            graph: under(PageRule::Graph),
        }
    }

    /// The reference `arm` is checked against: its page rule's.
    fn of_arm(&self, arm: Arm) -> &[Expected] {
        match PageRule::of(arm) {
            PageRule::Eager => &self.eager,
            PageRule::Graph => &self.graph,
        }
    }

    /// Each rule's reference with the prefix its tensors are dumped under.
    fn named(&self) -> [(&'static str, &[Expected]); 2] {
        [("eager", &self.eager), ("graph", &self.graph)]
    }
}

/// One case's tensors: inputs, both reference paths, and each arm's buffers when given.
fn case_tensors(
    case: &DumpCase,
    references: &References,
    arms: &[(Arm, Vec<Vec<i32>>)],
) -> Result<Tensors> {
    let (shape, inputs) = (&case.shape, &case.inputs);
    let mut t = Tensors::default();
    let p = shape.padded_bs as usize;
    let pool_rows = inputs.swa_valid_from.len();
    t.add("seq_lens", &[p], &inputs.seq_lens)?;
    t.add("req_pool_indices", &[p], &inputs.req_pool_indices)?;
    let stride = shape.max_context as usize;
    t.add("req_to_token", &[pool_rows, stride], &inputs.req_to_token)?;
    t.add(
        "out_cache_loc",
        &[inputs.out_cache_loc.len()],
        &inputs.out_cache_loc,
    )?;
    t.add("swa_valid_from", &[pool_rows], &inputs.swa_valid_from)?;
    for (prefix, reference) in references.named() {
        for e in reference {
            let name = format!("{prefix}/{}", e.spec.name);
            t.add(name, &[e.spec.rows, e.spec.width], &e.dense())?;
        }
    }
    for (arm, buffers) in arms {
        for (spec, cells) in shape.outputs().iter().zip(buffers) {
            let name = format!("arm/{arm}/{}", spec.name);
            t.add(name, &[spec.rows, spec.width], cells)?;
        }
    }
    Ok(t)
}

/// Each arm's buffers after one poisoned step over `case`'s inputs.
fn run_arms(gpu: &Gpu, case: &DumpCase, arms: &[Arm]) -> Result<Vec<(Arm, Vec<Vec<i32>>)>> {
    let shape = case.shape;
    let live = shape.batch_size as usize;
    let accept = AcceptModel::with_probability(0.7, shape.block, 1, shape.max_seq_len());
    let lengths = DeviceLengths::new(gpu, &case.inputs.seq_lens, live, accept)?;
    let mut plan = PrepPlan::new(gpu, shape, &case.inputs, &lengths)?;
    let mut out = Vec::new();
    for &arm in arms {
        let prepared = plan.prepare(arm)?;
        out.push((arm, plan.poisoned_step(&prepared)?));
    }
    Ok(out)
}

/// What `format` in every dump's `cases.json` begins with: how a folder is known as a dump.
const FORMAT_MARK: &str = "metaprep check --dump";

/// The folder a dump goes to, checked before any GPU work, and the staging folder beside it
/// the dump is built in: it replaces the folder whole once every file is written, so a
/// failure leaves an earlier dump (or nothing) as it was, and a smaller dump never leaves an
/// earlier one's cases beside an index that does not list them.
pub struct DumpTarget {
    dir: PathBuf,
    staging: Staging,
    /// The dump it replaces: `(seed, cases)` from its index.
    pub replaces: Option<(u64, usize)>,
}

impl DumpTarget {
    /// Refuses a file, and a folder with files in it that is not a dump: `--dump` replaces
    /// the folder whole, and only a dump may be replaced.
    pub fn new(dir: &Path) -> Result<DumpTarget> {
        let shown = dir.display();
        let mut replaces = None;
        if dir.symlink_metadata().is_ok() {
            if !dir.is_dir() {
                bail!("--dump {shown} is a file: name a folder for the cases (a new one, or an earlier dump to replace)");
            }
            let mut entries = std::fs::read_dir(dir)
                .with_context(|| format!("--dump {shown}: cannot read the folder"))?;
            if entries.next().is_some() {
                replaces = Some(dump_index(dir).with_context(|| {
                    format!(
                        "--dump {shown} holds files and is not a dump (`check --dump` replaces \
                         the folder whole): name a new or empty folder, or an earlier dump"
                    )
                })?);
            }
        }
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if let Some(file) = parent.ancestors().find(|a| a.is_file()) {
            bail!(
                "--dump {shown}: {} is a file, so no folder can be made under it",
                file.display()
            );
        }
        std::fs::create_dir_all(parent).map_err(|e| {
            anyhow::anyhow!("--dump {shown}: cannot create {} ({e})", parent.display())
        })?;
        let name = dir
            .file_name()
            .with_context(|| format!("--dump {shown} names no folder"))?
            .to_string_lossy();
        let staging = Staging::new(parent, &format!("{name}.dump"), "--dump")?;
        Ok(DumpTarget {
            dir: dir.to_path_buf(),
            staging,
            replaces,
        })
    }

    /// Where the new dump is written.
    pub fn building(&self) -> PathBuf {
        self.staging.path().join("dump")
    }

    /// Puts the new dump in place of the folder.
    pub fn commit(self) -> Result<()> {
        let built = self.building();
        self.staging.commit(&[(built, self.dir)])
    }
}

/// The seed and case count of the dump in `dir`, from its index; an error when `dir` holds
/// no index a dump wrote.
fn dump_index(dir: &Path) -> Result<(u64, usize)> {
    let path = dir.join("cases.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let index: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let is_dump = index["format"]
        .as_str()
        .is_some_and(|f| f.starts_with(FORMAT_MARK));
    match (is_dump, index["seed"].as_u64(), index["cases"].as_array()) {
        (true, Some(seed), Some(cases)) => Ok((seed, cases.len())),
        _ => bail!("{} is not a dump's index", path.display()),
    }
}

/// A dump's differences between arms and the reference: (case, arm, cells differing, first).
pub type ArmMismatch = (usize, Arm, usize, String);

/// Writes `count` cases to `dir`; with a GPU, each of `arms` too, and returns where an arm
/// differs from the reference of its page rule.
pub fn write_dump(
    dir: &Path,
    seed: u64,
    count: usize,
    gpu: Option<&Gpu>,
    arms: &[Arm],
    mut on_case: impl FnMut(usize),
) -> Result<Vec<ArmMismatch>> {
    let full_to_swa = shared_full_to_swa(seed);
    let mut shared = Tensors::default();
    shared.add("full_to_swa", &[full_to_swa.len()], &full_to_swa)?;
    shared.write(&dir.join("full_to_swa.safetensors"), &[])?;
    let mut index = Vec::new();
    let mut mismatches = Vec::new();
    for k in 0..count {
        let case = dump_case(seed, k, &full_to_swa)?;
        let arm_buffers = match gpu {
            Some(gpu) => {
                run_arms(gpu, &case, arms).with_context(|| format!("case {k} on the GPU"))?
            }
            None => Vec::new(),
        };
        let references = References::of_case(&case);
        for (arm, buffers) in &arm_buffers {
            let want = references.of_arm(*arm);
            for (e, got) in want.iter().zip(buffers) {
                if let (count @ 1.., Some(first)) = e.compare(got) {
                    mismatches.push((k, *arm, count, first.to_string()));
                }
            }
        }
        let file = format!("case-{k:05}.safetensors");
        case_tensors(&case, &references, &arm_buffers)?
            .write(&dir.join(&file), &[("case", k.to_string())])?;
        let s = &case.shape;
        index.push(json!({
            "id": k,
            "file": file,
            "family": s.family.name(),
            "batch_size": s.batch_size,
            "padded_bs": s.padded_bs,
            "block": s.block,
            "max_context": s.max_context,
            "note": case.note,
            "outputs": s.outputs().iter().map(|o| o.name).collect::<Vec<_>>(),
            "arms": arm_buffers.iter().map(|(a, _)| a.name()).collect::<Vec<_>>(),
        }));
        on_case(k);
    }
    let doc = json!({
        "format": "metaprep check --dump: see src/runs/dump.rs. One safetensors file per case \
                   (int32 tensors: inputs, eager/<output> and graph/<output> from the CPU \
                   reference, arm/<arm>/<output> from the GPU), [rows, width] buffers with \
                   `poison` in every cell the path does not write; full_to_swa.safetensors \
                   shared by all cases.",
        "seed": seed,
        "poison": POISON,
        "constants": {
            "page_size": PAGE_SIZE,
            "swa_window": SWA_WINDOW,
            "swa_align": SWA_ALIGN,
            "dsa_topk": DSA_TOPK,
            "dsa_real_page_size": DSA_REAL_PAGE_SIZE,
            "dsa_graph_col_block": DSA_GRAPH_COL_BLOCK,
            "pad_seq_len": PAD_SEQ_LEN,
        },
        "cases": index,
    });
    let text = serde_json::to_string_pretty(&doc)?;
    write_atomic(&dir.join("cases.json"), text.as_bytes())?;
    Ok(mismatches)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_span_the_boundaries_the_issue_names() {
        let full_to_swa = vec![3; 16];
        let cases: Vec<_> = (0..512)
            .map(|k| dump_case(9, k, &full_to_swa).unwrap())
            .collect();
        let lens = || {
            cases
                .iter()
                .flat_map(|c| &c.inputs.seq_lens[..c.shape.batch_size as usize])
        };
        for want in [0, 128, 129, 256, 257, 2048, 2049, 131073] {
            assert!(lens().any(|&l| l == want), "no case holds length {want}");
        }
        for bs in 1..=8 {
            for block in 1..=8 {
                assert!(
                    cases
                        .iter()
                        .any(|c| c.shape.batch_size == bs && c.shape.block == block),
                    "no case at bs {bs} block {block}"
                );
            }
        }
        assert!(cases.iter().any(|c| c.shape.padded_bs > c.shape.batch_size));
        for family in Family::ALL {
            assert!(
                cases.iter().any(|c| c.shape.family == family
                    && c.shape.padded_bs > c.shape.batch_size
                    && c.inputs.seq_lens[..c.shape.batch_size as usize]
                        .iter()
                        .all(|&l| l == 0)),
                "no padded {family} case with every live length 0"
            );
        }
        assert!(cases
            .iter()
            .any(|c| c.inputs.swa_valid_from.iter().any(|&v| v != 0)));
        assert!(cases.iter().all(|c| c
            .inputs
            .seq_lens
            .iter()
            .all(|&l| l <= c.shape.max_seq_len())));
        let again = dump_case(9, 77, &full_to_swa).unwrap();
        assert_eq!(again.inputs, cases[77].inputs, "a seed replays its cases");
    }

    #[test]
    fn a_cpu_dump_writes_an_index_and_reference_buffers() {
        let dir = tempfile::tempdir().unwrap();
        let mismatches = write_dump(dir.path(), 5, 4, None, &Arm::ALL, |_| {}).unwrap();
        assert!(mismatches.is_empty());
        let index: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("cases.json")).unwrap()).unwrap();
        assert_eq!(index["cases"].as_array().unwrap().len(), 4);
        assert_eq!(index["poison"], POISON);
        assert_eq!(index["cases"][1]["family"], "dsa_decode");
        let bytes = std::fs::read(dir.path().join("case-00001.safetensors")).unwrap();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
        for name in [
            "seq_lens",
            "req_to_token",
            "eager/page_table_1",
            "graph/real_page_table",
        ] {
            assert_eq!(header[name]["dtype"], "I32", "{name}");
        }
        assert!(
            header.get("arm/graph/page_table_1").is_none(),
            "no GPU, no arm buffers"
        );
        assert!(dir.path().join("full_to_swa.safetensors").exists());
    }

    /// Every file under `dir` with its bytes.
    fn files(dir: &Path) -> Vec<(std::ffi::OsString, Vec<u8>)> {
        let mut all: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name(), std::fs::read(e.path()).unwrap())
            })
            .collect();
        all.sort();
        all
    }

    #[test]
    fn a_dump_that_fails_midway_leaves_the_earlier_dump_whole() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("dump");
        let target = DumpTarget::new(&dir).unwrap();
        assert_eq!(target.replaces, None);
        write_dump(&target.building(), 5, 6, None, &Arm::ALL, |_| {}).unwrap();
        target.commit().unwrap();
        let before = files(&dir);
        assert_eq!(before.len(), 8, "6 cases, the index, full_to_swa");
        assert_eq!(dump_index(&dir).unwrap(), (5, 6));

        let target = DumpTarget::new(&dir).unwrap();
        assert_eq!(target.replaces, Some((5, 6)));
        // A case that cannot be written: a folder where its file goes.
        std::fs::create_dir_all(target.building().join("case-00001.safetensors")).unwrap();
        assert!(write_dump(&target.building(), 9, 3, None, &Arm::ALL, |_| {}).is_err());
        drop(target);
        assert_eq!(files(&dir), before, "the earlier dump is whole");
        assert_eq!(
            std::fs::read_dir(parent.path()).unwrap().count(),
            1,
            "no staging left"
        );
    }

    #[test]
    fn only_an_empty_folder_or_a_dump_is_a_target() {
        let parent = tempfile::tempdir().unwrap();
        let empty = parent.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let target = DumpTarget::new(&empty).unwrap();
        write_dump(&target.building(), 1, 1, None, &Arm::ALL, |_| {}).unwrap();
        target.commit().unwrap();
        assert!(empty.join("cases.json").exists());
        let foreign = parent.path().join("foreign");
        std::fs::create_dir(&foreign).unwrap();
        std::fs::write(
            foreign.join("cases.json"),
            r#"{"format": "mine", "seed": 1, "cases": []}"#,
        )
        .unwrap();
        let error = DumpTarget::new(&foreign).err().unwrap();
        assert!(
            format!("{error:#}").contains("holds files and is not a dump"),
            "{error:#}"
        );
    }
}
