#!/usr/bin/env python3
"""Count the framework ops, kernel launches, host reads and uploads of SGLang's own eager preps.

    python3 scripts/count_sglang_ops.py --out DIR                 # CPU, Triton interpreted
    python3 scripts/count_sglang_ops.py --device cuda --out DIR   # on a GPU: exact, and timed

SGLang comes from the environment (see results/2026-12-01-sglang-op-counts/README.md for the
install; never vendored here). The script builds SGLang 0.5.23's attention backends with
minimal stand-in state (`object.__new__` plus the attributes the prep reads, set as an H200
DeepSeek-V3.2 / DeepSeek-V4 DSpark server would set them: bf16 KV, fa3 DSA decode, top-k v2
off, no CP/DP attention, no kpool, no request window) and calls their own methods:

* dspark_draft_block: DeepseekV4AttnBackend.init_forward_metadata_dspark_draft_block.
  eager_sync: `seq_lens_cpu=None` (the method reads `seq_lens.tolist()`) and not glued (its
  extend lengths are uploaded each call). eager_device: glued (`draft_metadata_glued`, the
  extend lengths a cached device constant) with the host mirror as `seq_lens_cpu`: the
  device path SGLang's metadata glue captures, issued eagerly.
* dsa_decode, dsa_target_verify, dsa_draft_extend_v2: DeepseekSparseAttnBackend.
  eager_sync: init_forward_metadata with `seq_lens_cpu=None` (spec-v2 relay batches:
  `seq_lens.max().item()`; draft extend also `.cpu()` reads as spec-v2's gpu-only
  prepare_for_draft_extend leaves them). eager_mirror: the same with a host mirror
  (`seq_lens_cpu`), no read. eager_device: _apply_cuda_graph_metadata after one capture
  call, i.e. the replay prep graph replay issues eagerly before the graph (fused Triton
  metadata kernel, DeepGEMM schedule refresh), device lengths only.

Counting follows src/model/calibrate.rs: an item is a top-level `cpu_op` (one not inside
another); a syncing item that is not an upload is a read; an upload (host list to device)
that syncs is an op, not a read; launches = ops that launch a kernel; ops_before_read = ops
before the first read. Python-launched kernels outside every op (Triton, DeepGEMM) are no
`cpu_op`: the `profile` view counts each as one launching op (it costs the host a Python
launch), the `strict` view is what calibrate.rs sees in a CUDA trace (those launches not
counted as ops). Both views are written.

--device cuda reads launches, syncs and copy directions from the CUDA runtime events, as
calibrate.rs does. --device cpu (TRITON_INTERPRET=1, as scripts/crosscheck_sglang.py) runs the
same dispatches on CPU tensors of a subclass that answers is_cuda=True, and classifies by
rule instead (see `CPU_RULES` below); its output says which items the rules decided.

With --device cuda, each prep is also timed untraced (median host µs per call, GPU idle, at
each batch size), beside one framework op (`x.add_(1)` on int32[1]) in the same process.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cpu: CPU tensors, Triton interpreted (default); cuda: on the GPU")
    p.add_argument("--batch-sizes", default="1,8,64", help="comma separated (default 1,8,64)")
    p.add_argument("--blocks", default="3,5,8",
                   help="draft block sizes N, comma separated; counts must not depend on it")
    p.add_argument("--families", default="dspark_draft_block,dsa_decode,dsa_target_verify,"
                   "dsa_draft_extend_v2", help="comma separated (default: all four)")
    p.add_argument("--reps", type=int, default=300,
                   help="--device cuda: untraced calls timed per (family, arm, batch)")
    p.add_argument("--build-jit", action="store_true",
                   help="--device cuda: build SGLang's JIT top-k v2 module (nvcc, tvm-ffi and "
                        "its .cuh sources needed) instead of standing in for its one kernel")
    p.add_argument("--out", required=True, help="directory for counts-<device>.json")
    return p.parse_args()


ARGS = parse_args()
if ARGS.device == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"  # must precede the first triton import

import torch  # noqa: E402

import metaprep_host as mh  # noqa: E402
import sglang_standins as sg  # noqa: E402
from sglang_standins import AT, LAUNCH, ON_DEVICE, READ, UPLOAD  # noqa: E402

ON_CPU = ARGS.device == "cpu"
DEVICE = torch.device(ARGS.device)
COUNT_MARK = "count_sglang_ops: counted call"

# ----------------------------------------------------------------------------- CPU emulation

# CPU_RULES. On CPU, an item launches a kernel when it runs on device tensors (inside a
# metaprep.device range) and its subtree holds an op outside NO_KERNEL (views, allocations,
# metadata and no-op conversions launch nothing on CUDA; a same-dtype contiguous copy_ is a
# cudaMemcpyAsync there, not a launch, which the CPU run cannot tell: it counts it as one).
NO_KERNEL = frozenset(
    "aten::" + n for n in (
        "empty empty_strided empty_like view _reshape_alias reshape as_strided slice select "
        "unsqueeze squeeze expand flatten alias detach detach_ lift_fresh t transpose permute "
        "alias resolve_conj resolve_neg to _to_copy contiguous item _local_scalar_dense lift "
        "unbind split narrow chunk numel size stride is_nonzero result_type _unsafe_view dim "
        "view_as expand_as unflatten new_empty new_empty_strided").split())
# aten::alias is not counted at all on CPU (is_artifact).
# Reads: a device value to the host. CUDA's top-level items for each, from the ops PyTorch
# dispatches: tolist = resolve_conj, resolve_neg (no-ops) then aten::to (D2H, syncs);
# item / int() = aten::item (syncs); cpu() = aten::to (syncs).
READ_OPS = {"aten::to", "aten::item", "aten::_local_scalar_dense", "aten::copy_"}


# ----------------------------------------------------------------------------- the preps


def random_batch(bs, block, seed):
    """One batch: lengths 1..4095, a shuffled pool, random KV slots, a 4M-slot SWA map."""
    g = torch.Generator().manual_seed(seed)
    pool_rows = bs + 1
    slots = lambda *shape: torch.randint(0, 1 << 22, shape, generator=g, dtype=torch.int32)
    return sg.Batch(
        seq_lens=torch.randint(1, 4096, (bs,), generator=g, dtype=torch.int32),
        req_pool_indices=torch.randperm(pool_rows, generator=g)[:bs].to(torch.int32),
        req_to_token=slots(pool_rows, 8192), out_cache_loc=slots(bs * block), block=block,
        full_to_swa=torch.randint(0, 1 << 16, (1 << 22,), generator=g, dtype=torch.int32),
        swa_valid_from=torch.zeros(pool_rows, dtype=torch.int32))


DSA_MODES = {"dsa_decode": "DECODE", "dsa_target_verify": "TARGET_VERIFY",
             "dsa_draft_extend_v2": "DRAFT_EXTEND_V2"}
# Where each counted call lives in SGLang 0.5.23 (python/sglang/srt/layers/attention/).
SOURCES = {
    ("dspark_draft_block", "eager_sync"):
        "deepseek_v4_backend.py:2204-2240 init_forward_metadata_dspark_draft_block "
        "(seq_lens_cpu=None: L2215 seq_lens.tolist(); not glued: L1416-1420 "
        "_move_to_device), init_forward_metadata_prefill L1562-1713, make_core_attn_metadata "
        "L4746-4911, get_dspark_swa_page_indices L4913-4952",
    ("dspark_draft_block", "eager_device"):
        "the same method glued (L1401-1430: extend lengths a cached device constant) with "
        "the host mirror as seq_lens_cpu (L2217), as init_forward_metadata_out_graph "
        "L2756-2768 calls it for the metadata glue",
    ("dsa", "eager_sync"):
        "dsa_backend.py:1095-1425 init_forward_metadata with seq_lens_cpu=None "
        "(L1111-1116 seq_lens.max().item())",
    ("dsa", "eager_mirror"):
        "dsa_backend.py:1095-1425 init_forward_metadata with a host mirror seq_lens_cpu",
    ("dsa", "eager_device"):
        "dsa_backend.py:1797-2116 _apply_cuda_graph_metadata (replay, after one capture "
        "call L1815-1827): the fused metadata kernel and the DeepGEMM schedule refresh",
}


def calls(case, families):
    """(family, arm) -> make(): builds one call's fresh inputs (a ForwardBatch: the method
    writes into it) outside the counted region and returns the call itself."""
    out = {}
    if "dspark_draft_block" in families:
        out.update(dspark_calls(case))
    for family, mode in DSA_MODES.items():
        if family in families:
            out.update(dsa_calls(case, family, mode))
    return out


def dspark_calls(case):
    out = {}
    v4 = sg.dsv4_backend(case.block, case.req_to_token, case.full_to_swa, case.valid_from)

    def dspark(glued):
        def run():
            v4.draft_metadata_glued = glued
            return v4.init_forward_metadata_dspark_draft_block(
                max_seq_len=case.width, req_pool_indices=case.req_pool_indices,
                seq_lens=case.seq_lens,
                seq_lens_cpu=case.seq_lens_cpu if glued else None,
                out_cache_loc=case.out_cache_loc, block_size=case.block)
        return lambda: run

    out[("dspark_draft_block", "eager_sync")] = dspark(False)
    glued = dspark(True)
    glued()()  # fills the glue's cache of extend lengths, as the capture does
    out[("dspark_draft_block", "eager_device")] = glued
    return out


def dsa_calls(case, family, mode):
    b = sg.dsa_backend(case.block, case.req_to_token, case.bs)

    def eager(mirror):
        def make():
            fb = sg.forward_batch(case, mode, mirror)
            return lambda: b.init_forward_metadata(fb)
        return make

    def replay():
        fb = sg.forward_batch(case, mode, mirror=False)
        return lambda: b._apply_cuda_graph_metadata(
            bs=case.bs, req_pool_indices=fb.req_pool_indices, seq_lens=fb.seq_lens,
            seq_lens_cpu=None, forward_mode=fb.forward_mode, spec_info=None,
            out_cache_loc=fb.out_cache_loc)

    replay()()  # the capture call builds the static metadata (L1815-1827)
    return {(family, "eager_sync"): eager(False), (family, "eager_mirror"): eager(True),
            (family, "eager_device"): replay}


# ----------------------------------------------------------------------------- counting

SYNC_CALLS, LAUNCH_PREFIXES = mh.SYNC_CALLS, mh.LAUNCH_PREFIXES  # as metaprep calibrate reads them


def trace_of(make):
    """The Chrome trace (events) of one call that make() builds, inside COUNT_MARK."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if not ON_CPU:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with sg.placement():
        fn = make()
    with sg.tracing(), sg.placement():
        with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
            with torch.profiler.record_function(COUNT_MARK):
                fn()
            if not ON_CPU:
                torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            return json.load(f)["traceEvents"]
    finally:
        os.unlink(path)


class Node:
    def __init__(self, e):
        self.e, self.name, self.cat = e, e["name"], e.get("cat")
        self.ts, self.end = e["ts"], e["ts"] + e.get("dur", 0)
        self.children = []


def tree(events):
    """The COUNT_MARK annotation's host events (ops, annotations, runtime calls) nested by
    time on its thread, and the GPU copies' directions by correlation id."""
    mark = next(e for e in events
                if e.get("cat") == "user_annotation" and e.get("name") == COUNT_MARK)
    host = [e for e in events if e.get("ph") == "X" and e.get("pid") == mark["pid"]
            and e.get("tid") == mark["tid"]
            and e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")
            and mark["ts"] <= e["ts"] <= mark["ts"] + mark["dur"]]
    host.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
    root, stack = None, []
    for e in host:
        node = Node(e)
        while stack and node.ts >= stack[-1].end:
            stack.pop()
        if root is None:
            root = node
        else:
            stack[-1].children.append(node)
        stack.append(node)
    copies = {e.get("args", {}).get("correlation"): e["name"] for e in events
              if e.get("cat") == "gpu_memcpy"}
    return root, copies


def is_memcpy(node):
    """A copy_ CUDA does as cudaMemcpyAsync, not a kernel: same dtype, both contiguous."""
    if node.name != "aten::copy_":
        return False
    args = node.e.get("args", {})
    types_, dims, strides = (args.get(k, []) for k in ("Input type", "Input Dims",
                                                        "Input Strides"))
    if len(types_) < 2 or types_[0] != types_[1] or len(strides) < 2:
        return False

    def contiguous(shape, stride):
        expect = 1
        for size, st in zip(reversed(shape), reversed(stride)):
            if size != 1 and st != expect:
                return False
            expect *= size
        return True

    return all(contiguous(dims[k], strides[k]) for k in (0, 1))


def is_artifact(node):
    """aten::alias on CPU: what Dev's as_subclass conversions record; CUDA has none."""
    return ON_CPU and node.name == "aten::alias"


def top_ops(node):
    """The cpu_ops under `node` that no other cpu_op holds (annotations looked through)."""
    for c in node.children:
        if c.cat == "cpu_op":
            yield c
        elif c.cat == "user_annotation":
            yield from top_ops(c)


def subtree(node):
    yield node
    for c in node.children:
        yield from subtree(c)


def items_of(events):
    """The counted call's items in order: dicts with name, kind (op | read), launches,
    upload, syncs, decided (how it was classified), strict (counted in the strict view)."""
    root, copies = tree(events)
    items = []

    def op_item(node, on_device):
        if ON_CPU:
            compute = [n.name for n in subtree(node) if n.cat == "cpu_op"
                       and n.name.startswith("aten::") and n.name not in NO_KERNEL
                       and not is_memcpy(n)]
            return dict(name=node.name, kind="op", launches=int(on_device and bool(compute)),
                        upload=False, syncs=False, strict=True,
                        decided="rule: device op" if on_device else "rule: host op")
        rts = [n for n in subtree(node) if n.cat in ("cuda_runtime", "cuda_driver")]
        syncs = any(n.name in SYNC_CALLS for n in rts)
        dirs = [copies.get(n.e.get("args", {}).get("correlation"), "")
                for n in rts if n.name in ("cudaMemcpyAsync", "cudaMemcpy")]
        upload = bool(dirs) and all("HtoD" in d for d in dirs)
        launches = sum(n.name.startswith(LAUNCH_PREFIXES) for n in rts)
        kind = "read" if syncs and not upload else "op"
        return dict(name=node.name, kind=kind, launches=launches, upload=upload, syncs=syncs,
                    strict=True, decided="trace")

    def split(name, prefix):
        """An annotation's label after `prefix`, and its SGLang call site."""
        label, _, site = name[len(prefix):].partition("@")
        return label, site or None

    def add(item, site):
        item["source"] = site
        items.append(item)

    def walk(node, on_device, site):
        for c in node.children:
            if c.cat == "user_annotation" and c.name.startswith(LAUNCH):
                label, at = split(c.name, LAUNCH)
                add(dict(name=label, kind="op", launches=1, upload=False, syncs=False,
                         strict=False, decided="Python launch (no cpu_op)"), at or site)
                if label.startswith("ext:"):
                    for n in (n for n in top_ops(c) if not is_artifact(n)):
                        # the extension's own allocations, which calibrate.rs sees as ops
                        it = op_item(n, False)
                        it.update(strict=True, profile=False, decided="inside " + label)
                        add(it, at or site)
            elif c.cat == "user_annotation" and c.name.startswith((READ, UPLOAD)):
                prefix = READ if c.name.startswith(READ) else UPLOAD
                label, at = split(c.name, prefix)
                start = len(items)
                walk(c, True, at or site)
                inner = [it for it in items[start:] if it["name"] in READ_OPS]
                if prefix == READ:
                    if inner:
                        inner[-1].update(kind="read", launches=0, syncs=True,
                                         decided="rule: read")
                    else:
                        add(dict(name="aten::to (D2H, CUDA only)", kind="read", launches=0,
                                 upload=False, syncs=True, strict=True,
                                 decided=f"rule: read ({label})"), at or site)
                else:
                    syncs = label == "sync"
                    if inner:
                        inner[-1].update(kind="op", launches=0, upload=True, syncs=syncs,
                                         decided="rule: upload")
                    else:
                        add(dict(name="aten::to (H2D, CUDA only)", kind="op", launches=0,
                                 upload=True, syncs=syncs, strict=True,
                                 decided="rule: upload"), at or site)
            elif c.cat == "user_annotation" and c.name.startswith((ON_DEVICE, AT)):
                prefix = ON_DEVICE if c.name.startswith(ON_DEVICE) else AT
                walk(c, on_device or prefix == ON_DEVICE, split(c.name, prefix)[1] or site)
            elif c.cat == "user_annotation":
                walk(c, on_device, site)
            elif c.cat == "cpu_op" and not is_artifact(c):
                add(op_item(c, on_device), site)
            elif not ON_CPU and c.name in SYNC_CALLS:
                add(dict(name=c.name, kind="read", launches=0, upload=False, syncs=True,
                         strict=True, decided="trace: bare sync"), site)
            elif not ON_CPU and c.name.startswith(LAUNCH_PREFIXES):
                add(dict(name=c.name + " (bare)", kind="op", launches=1, upload=False,
                         syncs=False, strict=False, decided="trace: bare launch"), site)

    walk(root, False, None)
    return items


def counts(items, view):
    keep = [it for it in items if (it["strict"] if view == "strict" else it.get("profile", True))]
    read_at = [i for i, it in enumerate(keep) if it["kind"] == "read"]
    ops = [it for it in keep if it["kind"] == "op"]
    return {
        "ops": len(ops),
        "launches": sum(1 for it in ops if it["launches"]),
        "reads": len(read_at),
        "ops_before_read": (sum(1 for it in keep[: read_at[0]] if it["kind"] == "op")
                            if read_at else 0),
        "uploads": sum(1 for it in ops if it["upload"]),
        "syncing_uploads": sum(1 for it in ops if it["upload"] and it["syncs"]),
    }


# ----------------------------------------------------------------------------- timing


def host_us(make, reps):
    """Median and quartiles of the untraced host time of calls make() builds, GPU idle at
    each start."""
    times = []
    for _ in range(reps):
        fn = make()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    q = statistics.quantiles(times, n=4)
    return {"median_us": statistics.median(times), "q1_us": q[0], "q3_us": q[2], "n": reps}


# ----------------------------------------------------------------------------- output


def listing_markdown(doc):
    """Per (family, arm): its counts, then every item with its SGLang source line."""
    lines = [f"# SGLang {doc['versions']['sglang']} eager preps, item by item "
             f"(scripts/count_sglang_ops.py, --device {doc['device']})", "",
             "Items in call order, from one call at the first shape counted "
             f"(every shape of batch {doc['batch_sizes']} x block {doc['blocks']} gives "
             "the same counts unless a family says otherwise). `profile`: counted in the "
             "profile view; `strict`: in the view calibrate.rs takes of a CUDA trace. "
             "Sources are paths inside the installed `sglang` package.", ""]
    if doc["stand_ins"]:
        lines += ["Stand-ins: " + "; ".join(doc["stand_ins"]), ""]
    for key, items in doc["listing"].items():
        summary = doc["summary"][key]
        lines += [f"## {key}", "", f"{summary['source']}", "",
                  f"profile {summary['profile']}; strict {summary['strict']}"
                  + ("" if summary["same_at_every_shape"] else " (differs between shapes)"),
                  "", "| # | item | kind | launches | upload | syncs | views | how decided | "
                  "SGLang source |", "|---:|---|---|---:|---|---|---|---|---|"]
        for n, it in enumerate(items, 1):
            views = "+".join(v for v, keep in (("profile", it.get("profile", True)),
                                                ("strict", it["strict"])) if keep)
            lines.append(f"| {n} | `{it['name']}` | {it['kind']} | {it['launches']} | "
                         f"{'yes' if it['upload'] else ''} | {'yes' if it['syncs'] else ''} | "
                         f"{views} | {it['decided']} | {it['source'] or ''} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def write_atomic(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


# ----------------------------------------------------------------------------- main


def main():
    sg.configure(ARGS.device, build_jit=ARGS.build_jit)
    import sglang
    import sglang.srt.layers.attention.dsa_backend as dsa_module
    if ON_CPU:
        dsa_module.is_cuda = lambda: True  # take the CUDA branches (schedule, fused kernels)
    bss = [int(x) for x in ARGS.batch_sizes.split(",")]
    blocks = [int(x) for x in ARGS.blocks.split(",")]
    results, listings, timing = {}, {}, {}
    x = torch.zeros(1, dtype=torch.int32, device=DEVICE)
    timed = not ON_CPU and ARGS.reps > 0
    if timed:  # one framework op, before and after: the host's speed in this process
        timing["reference x.add_(1), before"] = {"1": host_us(lambda: lambda: x.add_(1), ARGS.reps)}
    shapes = []
    for block in blocks:
        for bs in bss:
            case = random_batch(bs, block, seed=bs * 100 + block)
            with sg.placement():
                preps = calls(case, ARGS.families.split(","))
            for make in preps.values():
                with sg.placement():
                    make()()  # warm: Triton compiles, caches fill
            shapes.append((block, bs, preps))
    # Every timing before the first profiler starts: a profiler leaves hooks behind that slow
    # this process's later CUDA calls (calibrate_torch's rule too).
    if timed:
        for block, bs, preps in shapes:
            if block == blocks[len(blocks) // 2]:
                for (family, arm), make in preps.items():
                    timing.setdefault(f"{family}/{arm}", {})[str(bs)] = host_us(make, ARGS.reps)
        timing["reference x.add_(1), after"] = {"1": host_us(lambda: lambda: x.add_(1), ARGS.reps)}
    for block, bs, preps in shapes:
        for (family, arm), make in preps.items():
            items = items_of(trace_of(make))
            key = f"{family}/{arm}"
            got = {view: counts(items, view) for view in ("profile", "strict")}
            results.setdefault(key, {})[f"bs{bs}/block{block}"] = got
            listings.setdefault(key, items)
            print(f"{key:40s} bs {bs:3d} block {block}: {got['profile']}", flush=True)
    summary = {}
    for key, per_shape in results.items():
        distinct = {json.dumps(v, sort_keys=True) for v in per_shape.values()}
        summary[key] = {"same_at_every_shape": len(distinct) == 1,
                        **next(iter(per_shape.values()))}
        fam = key.split("/")[0]
        src = SOURCES.get((fam, key.split("/")[1])) or SOURCES[("dsa", key.split("/")[1])]
        summary[key]["source"] = src
    doc = {
        "tool": "scripts/count_sglang_ops.py",
        "device": ARGS.device,
        "versions": {"sglang": sglang.__version__, "torch": torch.__version__,
                     "triton": __import__("triton").__version__,
                     "python": sys.version.split()[0]},
        "stand_ins": sg.STUBBED,
        "placeholder_calls": sorted(set(sg.PLACEHOLDER_CALLS)),
        "batch_sizes": bss, "blocks": blocks,
        "summary": summary,
        "per_shape": results,
        "timing": timing,
        "listing": listings,
    }
    os.makedirs(ARGS.out, exist_ok=True)
    path = os.path.join(ARGS.out, f"counts-{ARGS.device}.json")
    write_atomic(path, json.dumps(doc, indent=1) + "\n")
    write_atomic(os.path.join(ARGS.out, f"listing-{ARGS.device}.md"), listing_markdown(doc))
    print(f"wrote {path} and listing-{ARGS.device}.md")
    if doc["placeholder_calls"]:
        print("SGLang called placeholders of modules not installed here: "
              + ", ".join(doc["placeholder_calls"]), file=sys.stderr)
        sys.exit(1)
    bad = [k for k, v in summary.items() if not v["same_at_every_shape"]]
    if bad:
        print("counts differ between shapes for: " + ", ".join(bad), file=sys.stderr)


if __name__ == "__main__":
    main()
