#!/usr/bin/env python3
"""Hold metaprep's CPU reference (and, in a GPU dump, every arm) against SGLang's own code.

    metaprep check --dump DIR --cpu-only --seed 11          # no GPU needed
    python3 scripts/crosscheck_sglang.py DIR [--device cpu|cuda] [--limit N] [--out FILE]

SGLang comes from the environment (see results/2026-12-01-sglang-op-counts/README.md for
the install; never vendored here). With --device cpu (the default) the script sets
TRITON_INTERPRET=1 before torch and triton load and runs SGLang's code on CPU tensors that
answer is_cuda=True (scripts/sglang_standins.py), so its own wrappers take their CUDA
(Triton) paths and Triton's interpreter runs the kernels. With --device cuda the same calls
run on the GPU.

What is called, per family (SGLang 0.5.23; backends built by scripts/sglang_standins.py):
* DSA decode / target verify / draft-extend v2, eager path: the backend's own
  DeepseekSparseAttnBackend.init_forward_metadata on the live batch, unpadded (as the eager
  path runs it), with no host mirror (it reads the lengths); each result [rows, cols] must
  equal `eager/<output>` in its first rows and columns, and every other cell of the dump's
  buffer (padding rows, columns past the eager width) must be poison.
* DSA, graph path: the fused Triton metadata kernels graph replay runs
  (fused_dsa_{decode,target_verify,draft_extend}_metadata) on buffers filled with
  metaprep's poison, at the padded batch with the graph runner's fill values already in the
  inputs; every buffer is compared whole against `graph/<output>`.
* DSpark draft block: DeepseekV4AttnBackend.init_forward_metadata_dspark_draft_block, eager
  (live batch, `seq_lens_cpu=None`, extend lengths uploaded) against `eager/<output>`, and as
  the graph runner calls it (padded batch, glued, host mirror) against `graph/<output>`;
  `extend_seq_lens` and `seq_lens_extended` are the values the method computes on the way
  (compute_uniform_extend_lengths, _draft_block_extend_lens). The graph path's
  BuildBlockSeqLensCausal (DSpark target verify in the graph), torch and triton, too.

Prints, per (family, path, output), MATCH or DIFFER with the first differing cell, over all
cases; exits 1 on any DIFFER.
"""
import argparse
import json
import os
import struct
import sys
from collections import defaultdict


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dump", help="directory written by `metaprep check --dump`")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                   help="cpu: torch on CPU, Triton interpreted (default); cuda: on the GPU")
    p.add_argument("--limit", type=int, default=None, help="only the first N cases")
    p.add_argument("--out", default=None, help="also write the report (markdown) here")
    return p.parse_args()


ARGS = parse_args()
if ARGS.device == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"  # must precede the first triton import

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sglang_standins as sg  # noqa: E402


def read_safetensors(path):
    """name -> int32 numpy array (the dump holds int32 tensors only)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "I32", (path, name, info["dtype"])
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype="<i4").reshape(info["shape"])
    return out


def dev(a):
    return sg.dev(np.array(a, dtype=np.int32))


def host(t):
    return t.detach().cpu().as_subclass(torch.Tensor).numpy()


class Tally:
    """Per (family, path, output): cases compared and the first difference seen."""

    def __init__(self):
        self.cases = defaultdict(int)
        self.first = {}

    def same(self, key, case, got, want):
        """got (SGLang) and want (metaprep) must be equal arrays of one shape."""
        self.cases[key] += 1
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape:
            self.first.setdefault(key, f"case {case}: shape {got.shape} vs {want.shape}")
            return
        bad = np.argwhere(got != want)
        if len(bad):
            cell = tuple(int(x) for x in bad[0])
            self.first.setdefault(
                key, f"case {case}: cell {cell}: SGLang {got[cell]}, metaprep {want[cell]} "
                     f"({len(bad)} cells differ)")

    def written(self, key, case, got, dense, poison):
        """SGLang's result [rows, cols] is the top-left corner of the dump's buffer; every
        other cell (rows the path does not compute, columns past its width) is poison."""
        got = np.asarray(got)
        if got.ndim == 1:
            got = got[:, None]
        rows, cols = got.shape
        if rows > dense.shape[0] or cols > dense.shape[1]:
            self.cases[key] += 1
            self.first.setdefault(key, f"case {case}: result {got.shape}, buffer {dense.shape}")
            return
        want = np.full_like(dense, poison)
        want[:rows, :cols] = got
        self.same(key, case, want, dense)


def dsa_graph(fam, ins, dump, poison, block, tally, case, a):
    """The fused Triton kernels of graph replay (python/sglang/kernels/ops/attention/dsa/
    metadata.py; called from DeepseekSparseAttnBackend._apply_cuda_graph_metadata)."""
    from sglang.kernels.ops.attention.dsa.metadata import (
        fused_dsa_decode_metadata, fused_dsa_draft_extend_metadata,
        fused_dsa_target_verify_metadata)
    P = len(ins["seq_lens"])
    bufs = {name: dev(np.full(dump[f"graph/{name}"].shape, poison)) for name in a["outputs"]}
    flat = {k: (v.view(-1) if v.shape[1] == 1 else v) for k, v in bufs.items()}
    common = dict(seq_lens=dev(ins["seq_lens"]), req_pool_indices=dev(ins["req_pool_indices"]),
                  req_to_token=dev(ins["req_to_token"]), cache_seqlens=flat["cache_seqlens"],
                  cu_seqlens_k=flat["cu_seqlens_k"], page_table_1=flat["page_table_1"],
                  dsa_cache_seqlens=flat["dsa_cache_seqlens"],
                  dsa_cu_seqlens_k=flat["dsa_cu_seqlens_k"],
                  real_page_table=flat["real_page_table"], bs=P, dsa_index_topk=a["topk"],
                  physical_page_size=a["real_page"])
    width = ins["req_to_token"].shape[1]  # _graph_page_table_width: page_table_1.shape[1]
    if fam == "dsa_decode":
        fused_dsa_decode_metadata(max_len=width, **common)
        cu_q = torch.arange(0, P + 1, dtype=torch.int32)  # decode_cuda_graph_metadata
    elif fam == "dsa_target_verify":
        fused_dsa_target_verify_metadata(seqlens_expanded=flat["seqlens_expanded"],
                                         max_seqlen_k=width, next_n=block, **common)
        cu_q = torch.arange(0, P * block + 1, 1, dtype=torch.int32)
    else:
        fused_dsa_draft_extend_metadata(
            extend_seq_lens=dev(np.full(P, block)), seqlens_expanded=flat["seqlens_expanded"],
            total_len=P * block, max_seqlen_k=width, max_extend_len=block,
            max_total_len=P * block, static_extend_len=True, **common)
        cu_q = torch.arange(0, P * block + 1, 1, dtype=torch.int32)
    for name in a["outputs"]:
        got = host(cu_q)[:, None] if name == "cu_seqlens_q" else host(bufs[name])
        tally.same((fam, "graph (fused Triton)", name), case, got, dump[f"graph/{name}"])


DSA_MODES = {"dsa_decode": "DECODE", "dsa_target_verify": "TARGET_VERIFY",
             "dsa_draft_extend_v2": "DRAFT_EXTEND_V2"}


def live_batch(ins, live, block, with_swa=None):
    """The live requests' inputs, unpadded: what the eager path runs."""
    extra = {} if with_swa is None else dict(full_to_swa=with_swa,
                                             swa_valid_from=np.array(ins["swa_valid_from"]))
    return sg.Batch(seq_lens=np.array(ins["seq_lens"][:live]), block=block,
                    req_pool_indices=np.array(ins["req_pool_indices"][:live]),
                    req_to_token=np.array(ins["req_to_token"]),
                    out_cache_loc=np.array(ins["out_cache_loc"][: live * block]), **extra)


def dsa_eager(fam, ins, dump, poison, block, tally, case, a, live):
    """DeepseekSparseAttnBackend.init_forward_metadata (python/sglang/srt/layers/attention/
    dsa_backend.py:1095-1425) on the live batch, for decode, target verify, draft-extend v2."""
    batch = live_batch(ins, live, block)
    backend = sg.dsa_backend(block, batch.req_to_token, live)
    backend.dsa_index_topk, backend.physical_page_size = a["topk"], a["real_page"]
    with sg.placement():
        backend.init_forward_metadata(sg.forward_batch(batch, DSA_MODES[fam], mirror=False))
    m = backend.forward_metadata
    got = {
        "cache_seqlens": m.cache_seqlens_int32, "cu_seqlens_q": m.cu_seqlens_q,
        "cu_seqlens_k": m.cu_seqlens_k, "seqlens_expanded": m.dsa_seqlens_expanded,
        "dsa_cache_seqlens": m.dsa_cache_seqlens_int32, "dsa_cu_seqlens_k": m.dsa_cu_seqlens_k,
        "page_table_1": m.page_table_1, "real_page_table": m.real_page_table,
    }
    for name in a["outputs"]:
        tally.written((fam, "eager (init_forward_metadata, live batch)", name), case,
                      host(got[name]), dump[f"eager/{name}"], poison)


def dspark_method(ins, f2s, block, live, glued):
    """init_forward_metadata_dspark_draft_block's outputs on the first `live` requests: the
    metadata it returns and the lengths it computes on the way."""
    import sglang.srt.layers.attention.deepseek_v4_backend as v4_module
    batch = live_batch(ins, live, block, with_swa=f2s)
    backend = sg.dsv4_backend(block, batch.req_to_token, batch.full_to_swa, batch.valid_from)
    backend.draft_metadata_glued = glued
    seen = {}
    uniform, extend_lens = v4_module.compute_uniform_extend_lengths, backend._draft_block_extend_lens

    def record_lengths(**kwargs):
        seen["lengths"] = uniform(**kwargs)
        return seen["lengths"]

    def record_extend(lens):
        seen["extend"] = extend_lens(lens)
        return seen["extend"]

    v4_module.compute_uniform_extend_lengths = record_lengths
    backend._draft_block_extend_lens = record_extend
    try:
        with sg.placement():
            meta = backend.init_forward_metadata_dspark_draft_block(
                max_seq_len=batch.width, req_pool_indices=batch.req_pool_indices,
                seq_lens=batch.seq_lens, seq_lens_cpu=batch.seq_lens_cpu if glued else None,
                out_cache_loc=batch.out_cache_loc, block_size=block)
    finally:
        v4_module.compute_uniform_extend_lengths = uniform
    core = meta.core_attn_metadata
    return {
        "extend_seq_lens": seen["extend"], "seq_lens_extended": seen["lengths"].seq_lens_extended,
        "seq_lens_causal": core.seq_lens_casual, "positions": core.positions_casual,
        "swa_topk_lengths": core.swa_topk_lengths, "page_table": core.page_table,
        "swa_page_indices": core.swa_page_indices,
    }


def dspark(ins, dump, f2s, block, tally, case, a, live, poison):
    """DeepseekV4AttnBackend.init_forward_metadata_dspark_draft_block (python/sglang/srt/
    layers/attention/deepseek_v4_backend.py:2204-2240): eager on the live batch, and as the
    graph runner calls it (init_forward_metadata_out_graph L2756-2768) on the padded one; and
    the graph path's BuildBlockSeqLensCausal (python/sglang/kernels/ops/speculative/dspark/)."""
    from sglang.kernels.ops.speculative.dspark.dspark_attn_metadata import (
        BuildBlockSeqLensCausal)
    padded = len(ins["seq_lens"])
    for path, rows, glued, rule in (
            ("eager (live batch, reads, uploads)", live, False, "eager"),
            ("graph runner's call (padded, glued)", padded, True, "graph")):
        got = dspark_method(ins, f2s, block, rows, glued)
        for name in a["outputs"]:
            tally.written(("dspark_draft_block", f"init_forward_metadata_dspark_draft_block, "
                           f"{path}", name), case, host(got[name]), dump[f"{rule}/{name}"],
                          poison)
    seq = dev(ins["seq_lens"])
    for impl in ("torch", "triton"):
        with sg.placement():
            causal = getattr(BuildBlockSeqLensCausal, impl)(
                seq_lens=seq, block_size=block, device=seq.device)
        tally.same(("dspark_draft_block", f"BuildBlockSeqLensCausal.{impl} (graph)",
                    "seq_lens_causal"), case, host(causal)[:, None],
                   dump["graph/seq_lens_causal"])


def arms_against_reference(meta, dump, tally, case):
    """A GPU dump's arm buffers against the reference of the path each arm stands for."""
    for arm in meta["arms"]:
        rule = "eager" if arm.startswith("eager") else "graph"
        for name in meta["outputs"]:
            tally.same((meta["family"], f"metaprep arm {arm} vs {rule} reference", name), case,
                       dump[f"arm/{arm}/{name}"], dump[f"{rule}/{name}"])


def main():
    sg.configure(ARGS.device)
    import sglang
    index = json.load(open(os.path.join(ARGS.dump, "cases.json")))
    poison, consts = index["poison"], index["constants"]
    a_common = {"topk": consts["dsa_topk"], "real_page": consts["dsa_real_page_size"],
                "page_size": consts["page_size"]}
    f2s = np.array(read_safetensors(os.path.join(ARGS.dump, "full_to_swa.safetensors"))[
        "full_to_swa"])  # writable: torch warns on read-only arrays
    cases = index["cases"][: ARGS.limit]
    tally = Tally()
    notes = defaultdict(int)
    for n, meta in enumerate(cases):
        dump = read_safetensors(os.path.join(ARGS.dump, meta["file"]))
        ins = {k: dump[k] for k in ("seq_lens", "req_pool_indices", "req_to_token",
                                     "out_cache_loc", "swa_valid_from")}
        a = dict(a_common, outputs=meta["outputs"])
        fam, block, case = meta["family"], meta["block"], meta["id"]
        live = meta["batch_size"]
        notes[meta["note"]] += 1
        if fam == "dspark_draft_block":
            dspark(ins, dump, f2s, block, tally, case, a, live, poison)
        else:
            dsa_graph(fam, ins, dump, poison, block, tally, case, a)
            dsa_eager(fam, ins, dump, poison, block, tally, case, a, live)
        arms_against_reference(meta, dump, tally, case)
        if (n + 1) % 50 == 0:
            print(f"  {n + 1} of {len(cases)} cases", file=sys.stderr, flush=True)
    lines = [
        f"# SGLang cross-check of `{os.path.basename(os.path.normpath(ARGS.dump))}`",
        "",
        f"SGLang {sglang.__version__}, torch {torch.__version__}, "
        f"triton {__import__('triton').__version__}, device {ARGS.device}"
        + (" (Triton interpreted: TRITON_INTERPRET=1)" if ARGS.device == "cpu" else ""),
        f"{len(cases)} cases, dump seed {index['seed']}; by kind: "
        + ", ".join(f"{k} {v}" for k, v in sorted(notes.items())),
        f"batch sizes {sorted({c['batch_size'] for c in cases})}, "
        f"blocks {sorted({c['block'] for c in cases})}, "
        f"max_context up to {max(c['max_context'] for c in cases)}",
        "",
        "| family | SGLang path | output | cases | result |",
        "|---|---|---|---:|---|",
    ]
    for key in sorted(tally.cases):
        first = tally.first.get(key)
        verdict = "MATCH" if first is None else f"DIFFER: {first}"
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {tally.cases[key]} | {verdict} |")
    bad = len(tally.first)
    lines += ["", f"{len(tally.cases) - bad} of {len(tally.cases)} (family, path, output) "
              f"comparisons MATCH" + ("" if bad == 0 else f"; {bad} DIFFER")]
    report = "\n".join(lines) + "\n"
    print(report)
    if ARGS.out:
        with open(ARGS.out + ".tmp", "w") as f:
            f.write(report)
        os.replace(ARGS.out + ".tmp", ARGS.out)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
