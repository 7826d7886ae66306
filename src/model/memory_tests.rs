use super::*;

fn large() -> Profile {
    Profile::named("moe-large").unwrap()
}

fn draft() -> Profile {
    Profile::named("draft-small").unwrap()
}

const GB: f64 = 1e9;
/// The steps defaults: lengths 2048-8192, so 5120 tokens of context.
const CONTEXT: u32 = 5120;
/// What an H200 reports (cuDeviceTotalMem).
const H200: u64 = 150_754_820_096;

fn held(layout: Layout, bs: u32) -> GpuBytes {
    held_bytes(&large(), &draft(), layout, bs, CONTEXT)
}

#[test]
fn moe_large_holds_every_expert_not_only_those_read() {
    let p = large();
    // 61 layers of MLA + shared expert + 256 routed experts, FP8, then head and embedding
    // in bf16: about 705 GB, DeepSeek-V3's 671 B parameters plus the three dense layers
    // modelled as MoE layers and the bf16 vocabulary weights.
    let per_layer = 187_105_280 + 44_040_192 + 256 * 44_040_192;
    let vocab = 2 * 129_280 * 7168 * 2;
    let tp1 = p.held_bytes(Layout::Tp(1), 1, 0, true);
    assert_eq!(tp1.weights, 61 * per_layer + vocab);
    assert!((700e9..710e9).contains(&(tp1.weights as f64)), "{tp1:?}");
    assert!(tp1.weights > 10 * p.forward_bytes(Layout::Tp(1), 1, 0, 1).weights);
    // tp splits every weight; dep4 holds whole attention and a quarter of the experts.
    assert_eq!(
        p.held_bytes(Layout::Tp(4), 1, 0, true).weights,
        61 * (per_layer / 4) + vocab / 4
    );
    assert_eq!(
        p.held_bytes(Layout::Dep(4), 1, 0, true).weights,
        61 * (187_105_280 + 44_040_192 + 64 * 44_040_192) + vocab
    );
    assert_eq!(
        p.held_bytes(Layout::Tp(1), 1, 0, false).weights,
        61 * per_layer,
        "without its vocabulary weights"
    );
}

#[test]
fn held_kv_is_the_kv_a_forward_reads() {
    let (p, d) = (large(), Profile::custom(1_000_000, 4, 100, 4096).unwrap());
    for layout in Layout::all() {
        for profile in [&p, &d] {
            assert_eq!(
                profile.held_bytes(layout, 16, 4096, true).kv,
                profile.forward_bytes(layout, 16, 4096, 3).kv,
                "{layout}"
            );
        }
    }
}

#[test]
fn draft_adds_its_layer_and_uses_the_targets_vocabulary() {
    let (t, d) = (large(), draft());
    let both = held_bytes(&t, &d, Layout::Tp(8), 1, CONTEXT);
    let target = t.held_bytes(Layout::Tp(8), 1, CONTEXT, true);
    // One layer of MLA, shared expert, [embedding; hidden] projection and 256 experts.
    let draft_layer = 187_105_280 + 44_040_192 + 2 * 7168 * 7168 + 256 * 44_040_192;
    assert_eq!(both.weights, target.weights + draft_layer / 8);
    assert_eq!(both.kv, target.kv + CONTEXT as u64 * 1152);
    // Beside a target without a head (custom), the draft holds its own.
    let custom = Profile::custom(1_000_000, 4, 100, 4096).unwrap();
    let own = held_bytes(&custom, &d, Layout::Tp(1), 1, 0);
    assert_eq!(
        own.weights,
        custom.held_bytes(Layout::Tp(1), 1, 0, true).weights
            + d.held_bytes(Layout::Tp(1), 1, 0, true).weights
    );
}

#[test]
fn on_an_h200_only_tp8_holds_moe_large() {
    // The figures the README quotes, in GB per GPU at bs 1.
    let gb = |l| held(l, 1).total as f64 / GB;
    assert!(
        (717.0..718.0).contains(&gb(Layout::Tp(1))),
        "{}",
        gb(Layout::Tp(1))
    );
    assert!(
        (179.0..180.0).contains(&gb(Layout::Tp(4))),
        "{}",
        gb(Layout::Tp(4))
    );
    assert!(
        (192.0..194.0).contains(&gb(Layout::Dep(4))),
        "{}",
        gb(Layout::Dep(4))
    );
    assert!(
        (89.0..91.0).contains(&gb(Layout::Tp(8))),
        "{}",
        gb(Layout::Tp(8))
    );
    for memory in [GpuMemory::device(H200), GpuMemory::from_gib(141.0).unwrap()] {
        let fits: Vec<Layout> = Layout::all()
            .into_iter()
            .filter(|&l| check(&large(), &draft(), l, 1, CONTEXT, memory).is_ok())
            .collect();
        assert_eq!(fits, [Layout::Tp(8)], "{memory:?}");
    }
    // tp4's 167.3 GiB fit a GPU of 190 GiB, of which 171 GiB are usable.
    let big = GpuMemory::from_gib(190.0).unwrap();
    assert!(check(&large(), &draft(), Layout::Tp(4), 1, CONTEXT, big).is_ok());
}

#[test]
fn the_mla_cache_of_a_large_batch_outgrows_tp8() {
    let memory = GpuMemory::device(H200);
    let fits = |bs| check(&large(), &draft(), Layout::Tp(8), bs, CONTEXT, memory).is_ok();
    assert!(fits(1) && fits(8) && fits(64));
    // 256 x 5120 tokens x 1152 B x 62 layers = 93.6 GB of cache on every tp8 GPU.
    assert_eq!(held(Layout::Tp(8), 256).kv, 256 * 5120 * 1152 * 62);
    assert!(!fits(256));
}

#[test]
fn the_reserve_is_kept_out_of_the_memory() {
    let m = GpuMemory::device(1_000_000_000);
    assert_eq!(m.usable(), 900_000_000);
    assert_eq!(GpuMemory::from_gib(1.0).unwrap().bytes, 1 << 30);
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let e = GpuMemory::from_gib(bad).unwrap_err().to_string();
        assert!(e.contains("--gpu-memory-gib"), "{e}");
    }
}

fn plan(
    layouts: &[Layout],
    named: bool,
    batches: &[u32],
    gib: f64,
) -> Result<Deployment, NotDeployable> {
    let memory = GpuMemory::from_gib(gib).unwrap();
    Deployment::plan(&large(), &draft(), layouts, named, batches, CONTEXT, memory)
}

#[test]
fn the_default_grid_leaves_out_what_does_not_fit() {
    let d = plan(&Layout::all(), false, &[1, 8, 64, 256], 141.0).unwrap();
    assert_eq!(d.cells, [(Layout::Tp(8), vec![1, 8, 64])]);
    assert_eq!(d.layouts(), [Layout::Tp(8)]);
    assert!(d.holds(Layout::Tp(8), 64) && !d.holds(Layout::Tp(8), 256));
    assert!(!d.holds(Layout::Tp(1), 1));
    let note = d.note();
    assert!(note.starts_with(MEMORY_NOTE), "{note}");
    assert!(note.contains("141.0 GiB (--gpu-memory-gib)"), "{note}");
    assert!(note.contains(" tp1 (needs 668.2 GiB at bs 1)"), "{note}");
    assert!(note.contains(", dep4 (needs"), "{note}");
    assert!(
        note.contains(", tp8 at bs 256 (needs 170.7 GiB at bs 256)"),
        "{note}"
    );
    assert_eq!(note.lines().count(), 1);
    // A larger GPU keeps every cell.
    let all = plan(&Layout::all(), false, &[1, 8], 2000.0).unwrap();
    assert_eq!(all.cells.len(), 6);
    assert!(all.note().ends_with("every cell fits"), "{}", all.note());
}

#[test]
fn a_named_layout_that_holds_no_batch_is_refused() {
    let e = plan(&[Layout::Tp(1)], true, &[1, 8], 141.0).unwrap_err();
    assert_eq!((e.layout, e.batch_size), (Layout::Tp(1), 1));
    let message = e.to_string();
    for needle in [
        "tp1 at bs 1 needs 668.2 GiB per GPU for moe-large + draft-small",
        "126.9 GiB left for them on a GPU of 141.0 GiB (--gpu-memory-gib)",
        "--tp tp1 holds no batch of the run; use tp8, or pass --gpu-memory-gib",
    ] {
        assert!(message.contains(needle), "`{needle}` in {message}");
    }
    assert_eq!(message.lines().count(), 1);
    // Named and fitting some batches: the others are left out, not refused.
    let d = plan(&[Layout::Tp(8)], true, &[1, 256], 141.0).unwrap();
    assert_eq!(d.cells, [(Layout::Tp(8), vec![1])]);
    assert_eq!(d.left_out.len(), 1);
}

#[test]
fn a_grid_with_no_cell_that_fits_is_refused() {
    let e = plan(&Layout::all(), false, &[1], 80.0).unwrap_err();
    // The closest layout is named, and no layout is advised.
    assert_eq!(e.layout, Layout::Tp(8));
    assert!(e.advice.contains("no layout holds bs 1"), "{e}");
    let e = plan(&[Layout::Tp(2), Layout::Dep(2)], false, &[1, 8], 141.0).unwrap_err();
    assert!(
        e.to_string().contains("use tp8, or pass --gpu-memory-gib"),
        "{e}"
    );
}

#[test]
fn the_default_models_plan_on_an_h200_where_they_fit_no_layout_of_the_gpu() {
    let default = |gib: f64| {
        let memory = GpuMemory::from_gib(gib).unwrap();
        let batches = [1, 4, 16, 64];
        Deployment::plan_default(
            &large(),
            &draft(),
            &Layout::all(),
            &batches,
            CONTEXT,
            memory,
        )
        .unwrap()
    };
    for gib in [16.0, 40.0, 80.0] {
        let d = default(gib);
        assert_eq!(d.memory, Some(GpuMemory::stand_in()), "{gib}");
        assert_eq!(d.layouts(), [Layout::Tp(8)], "{gib}");
        let note = d.note();
        assert!(note.starts_with(MEMORY_NOTE), "{note}");
        assert!(
            note.contains(&format!("planned on an H200's 141 GiB a GPU: the default moe-large + draft-small holds no layout on a GPU of {gib:.1} GiB (--gpu-memory-gib; tp8 at bs 1 needs 83.8 GiB)")),
            "{note}"
        );
        assert!(note.contains("(an H200's, standing in)"), "{note}");
    }
    // Where it fits, the GPU's own plan, with no word of a stand-in.
    let fits = default(141.0);
    assert_eq!(
        (fits.replanned, fits.memory.unwrap().stand_in),
        (None, false)
    );
    // Named models and layouts are planned as named: an 80 GiB GPU holds none.
    assert!(plan(&Layout::all(), false, &[1], 80.0).is_err());
    assert!(plan(&[Layout::Tp(8)], true, &[1], 80.0).is_err());
}

#[test]
fn unchecked_keeps_every_cell() {
    let d = Deployment::unchecked(&[Layout::Tp(1), Layout::Dep(4)], &[1, 256]);
    assert!(d.holds(Layout::Tp(1), 256) && d.holds(Layout::Dep(4), 1));
    assert!(d.note().contains("not checked"), "{}", d.note());
}
