#!/usr/bin/env python3
"""Hold metaprep's CPU reference (and, in a GPU dump, every arm) against SGLang's own code.

    metaprep check --dump DIR --cpu-only --seed 11          # no GPU needed
    python3 scripts/crosscheck_sglang.py DIR [--device cpu|cuda] [--limit N] [--out FILE]

SGLang comes from the environment (pip install sglang==0.5.23 --no-deps, plus the small
packages its modules import; never vendored here). With --device cpu (the default) the script
sets TRITON_INTERPRET=1 before torch and triton load, runs SGLang's torch functions on CPU
tensors and its Triton kernels in Triton's interpreter: tensors are CPU tensors of a subclass
that answers is_cuda=True, so SGLang's own wrappers (and their asserts) run unchanged. With
--device cuda the same calls run on the GPU.

What is called, per family (SGLang 0.5.23 paths in comments below):
* DSA decode / target verify / draft-extend v2, graph path: the fused Triton metadata kernels
  graph replay runs (fused_dsa_{decode,target_verify,draft_extend}_metadata) on buffers filled
  with metaprep's poison, at the padded batch with the graph runner's fill values already in
  the inputs; every buffer is compared whole against `graph/<output>`, so a cell either side
  writes and the other does not is a difference.
* DSA, eager path: the expressions of DeepseekSparseAttnBackend.init_forward_metadata with
  SGLang's own helpers (compute_cu_seqlens, seqlens_expand_triton, compute_dsa_seqlens,
  _transform_table_1_to_real); each result [rows, cols] must equal `eager/<output>`'s first
  cols columns, and the rest of the dump's row must be poison.
* DSpark draft block: init_forward_metadata_dspark_draft_block's chain
  (compute_uniform_extend_lengths, ExpandPrefillCausally, BuildPageTablePositions with
  max_seq_len = page_size, ComputeDsparkWindowGather with swa_valid_from,
  BuildDsparkSwaPageIndices) and the graph path's BuildBlockSeqLensCausal, each of the
  dispatching classes through both its torch and its triton implementation.

Prints, per (family, path, output), MATCH or DIFFER with the first differing cell, over all
cases; exits 1 on any DIFFER.
"""
import argparse
import json
import os
import struct
import sys
import types
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


class Host(torch.Tensor):
    """A CPU tensor that says it is on CUDA: SGLang's wrappers assert is_cuda and dispatch to
    their Triton kernels on it, which TRITON_INTERPRET=1 then runs on the host."""

    @property
    def is_cuda(self):
        return True


def dev(a):
    t = torch.from_numpy(np.array(a, dtype=np.int32))
    return t.cuda() if ARGS.device == "cuda" else t.as_subclass(Host)


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

    def prefix(self, key, case, got, dense, poison):
        """SGLang's eager result [rows, cols] is the dump's written prefix; the rest poison."""
        got = np.asarray(got)
        if got.ndim == 1:
            got = got[:, None]
        cols = got.shape[1]
        if cols > dense.shape[1]:
            self.cases[key] += 1
            self.first.setdefault(key, f"case {case}: {cols} columns, buffer {dense.shape[1]}")
            return
        rest = dense[:, cols:]
        self.same(key, case, np.concatenate([got, np.full_like(rest, poison)], axis=1), dense)


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


def dsa_eager(fam, ins, dump, poison, block, tally, case, a):
    """DeepseekSparseAttnBackend.init_forward_metadata (python/sglang/srt/layers/attention/
    dsa_backend.py) for decode, target verify and draft-extend v2, on SGLang's helpers."""
    from sglang.kernels.ops.attention.pad import seqlens_expand_triton
    from sglang.srt.layers.attention.dsa.dsa_backend_mtp_precompute import compute_cu_seqlens
    from sglang.srt.layers.attention.dsa.utils import compute_dsa_seqlens
    from sglang.srt.layers.attention.dsa_backend import DeepseekSparseAttnBackend
    seq, rp, r2t = dev(ins["seq_lens"]), dev(ins["req_pool_indices"]), dev(ins["req_to_token"])
    P = seq.shape[0]
    draft = block if fam == "dsa_target_verify" else 0
    cache = (seq + draft).to(torch.int32)
    cu_k = compute_cu_seqlens(cache)
    max_seqlen_k = int(host(seq).max()) + draft
    page_table = r2t[rp.long(), :max_seqlen_k]
    if fam == "dsa_decode":
        cu_q = torch.arange(0, P + 1, dtype=torch.int32)
        expanded = cache
    else:
        cu_q = torch.arange(0, P * block + 1, 1, dtype=torch.int32)
        expanded = seqlens_expand_triton(dev(np.full(P, block)), cache, P * block, block)
        page_table = torch.repeat_interleave(page_table, repeats=block, dim=0)
    dsa = compute_dsa_seqlens(expanded, a["topk"], index_kpool=1)
    got = {
        "cache_seqlens": cache, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k,
        "seqlens_expanded": expanded, "dsa_cache_seqlens": dsa,
        "dsa_cu_seqlens_k": compute_cu_seqlens(dsa), "page_table_1": page_table,
        "real_page_table": DeepseekSparseAttnBackend._transform_table_1_to_real(
            types.SimpleNamespace(physical_page_size=a["real_page"]), page_table),
    }
    for name in a["outputs"]:
        tally.prefix((fam, "eager (init_forward_metadata)", name), case, host(got[name]),
                     dump[f"eager/{name}"], poison)


def dspark(ins, dump, f2s, block, tally, case, a):
    """DeepseekV4AttnBackend.init_forward_metadata_dspark_draft_block (python/sglang/srt/
    layers/attention/deepseek_v4_backend.py) and its kernels (python/sglang/kernels/ops/
    speculative/dspark/dspark_attn_metadata.py, .../attention/dsv4/attn_metadata_kernels.py)."""
    from sglang.kernels.ops.attention.dsv4.attn_metadata_kernels import (
        BuildPageTablePositions, ExpandPrefillCausally)
    from sglang.kernels.ops.speculative.dspark.dspark_attn_metadata import (
        BuildBlockSeqLensCausal, BuildDsparkSwaPageIndices, ComputeDsparkWindowGather)
    from sglang.srt.layers.attention.deepseek_v4_backend import (
        PAGE_INDEX_ALIGNED_SIZE, SWA_WINDOW)
    from sglang.srt.speculative.ragged_verify import compute_uniform_extend_lengths
    seq, rp, r2t = dev(ins["seq_lens"]), dev(ins["req_pool_indices"]), dev(ins["req_to_token"])
    out_loc, valid_from = dev(ins["out_cache_loc"]), dev(ins["swa_valid_from"])
    lengths = compute_uniform_extend_lengths(
        seq_lens=seq, seq_lens_cpu=[int(x) for x in ins["seq_lens"]], extend_len=block)
    extend = dev(lengths.extend_seq_lens_cpu)
    want = lambda name: dump[f"graph/{name}"]  # DSpark writes alike on both paths
    key = lambda impl, name: ("dspark_draft_block", impl, name)
    tally.same(key("compute_uniform_extend_lengths", "extend_seq_lens"), case,
               host(extend)[:, None], want("extend_seq_lens"))
    tally.same(key("compute_uniform_extend_lengths", "seq_lens_extended"), case,
               host(lengths.seq_lens_extended)[:, None], want("seq_lens_extended"))
    for impl in ("torch", "triton"):
        expanded = getattr(ExpandPrefillCausally, impl)(
            req_pool_indices=rp, seq_lens=lengths.seq_lens_extended, extend_seq_lens=extend,
            extend_start_loc=None, seq_lens_cpu=lengths.seq_lens_cpu_extended,
            extend_seq_lens_cpu=lengths.extend_seq_lens_cpu, num_tokens=lengths.num_tokens,
            padded_num_tokens=out_loc.shape[0])
        causal, rp_rep = expanded.seq_lens_casual, expanded.req_pool_indices_repeated
        tally.same(key(f"ExpandPrefillCausally.{impl}", "seq_lens_causal"), case,
                   host(causal)[:, None], want("seq_lens_causal"))
        prep = getattr(BuildPageTablePositions, impl)(
            req_to_token=r2t, req_pool_indices_repeated=rp_rep, seq_lens_casual=causal,
            max_seq_len=a["page_size"], page_size=a["page_size"], swa_window=SWA_WINDOW)
        tally.same(key(f"BuildPageTablePositions.{impl}", "positions"), case,
                   host(prep.positions_casual)[:, None], want("positions"))
        tally.same(key(f"BuildPageTablePositions.{impl}", "page_table"), case,
                   host(prep.page_table), want("page_table"))
        gather = getattr(ComputeDsparkWindowGather, impl)(
            seq_lens_casual=causal, req_pool_indices_repeated=rp_rep, block_size=block,
            swa_window=SWA_WINDOW, valid_from=valid_from)
        swa, swa_lens = getattr(BuildDsparkSwaPageIndices, impl)(
            req_to_token=r2t, full_to_swa_mapping=f2s,
            req_pool_indices_per_request=gather.req_pool_indices_per_request,
            offsets=gather.offsets, invalid=gather.invalid, out_loc=out_loc[: gather.num_q],
            context_lens=gather.context_lens, block_size=block, swa_window=SWA_WINDOW,
            page_index_aligned_size=PAGE_INDEX_ALIGNED_SIZE)
        name = f"ComputeDsparkWindowGather + BuildDsparkSwaPageIndices.{impl}"
        tally.same(key(name, "swa_topk_lengths"), case, host(swa_lens)[:, None],
                   want("swa_topk_lengths"))
        tally.same(key(name, "swa_page_indices"), case, host(swa), want("swa_page_indices"))
        graph_causal = getattr(BuildBlockSeqLensCausal, impl)(
            seq_lens=seq, block_size=block, device=seq.device)
        tally.same(key(f"BuildBlockSeqLensCausal.{impl} (graph)", "seq_lens_causal"), case,
                   host(graph_causal)[:, None], want("seq_lens_causal"))


def arms_against_reference(meta, dump, tally, case):
    """A GPU dump's arm buffers against the reference of the path each arm stands for."""
    for arm in meta["arms"]:
        rule = "eager" if arm.startswith("eager") else "graph"
        for name in meta["outputs"]:
            tally.same((meta["family"], f"metaprep arm {arm} vs {rule} reference", name), case,
                       dump[f"arm/{arm}/{name}"], dump[f"{rule}/{name}"])


def main():
    import sglang
    index = json.load(open(os.path.join(ARGS.dump, "cases.json")))
    poison, consts = index["poison"], index["constants"]
    a_common = {"topk": consts["dsa_topk"], "real_page": consts["dsa_real_page_size"],
                "page_size": consts["page_size"]}
    f2s = dev(read_safetensors(os.path.join(ARGS.dump, "full_to_swa.safetensors"))["full_to_swa"])
    cases = index["cases"][: ARGS.limit]
    tally = Tally()
    notes = defaultdict(int)
    for n, meta in enumerate(cases):
        dump = read_safetensors(os.path.join(ARGS.dump, meta["file"]))
        ins = {k: dump[k] for k in ("seq_lens", "req_pool_indices", "req_to_token",
                                     "out_cache_loc", "swa_valid_from")}
        a = dict(a_common, outputs=meta["outputs"])
        fam, block, case = meta["family"], meta["block"], meta["id"]
        notes[meta["note"]] += 1
        if fam == "dspark_draft_block":
            dspark(ins, dump, f2s, block, tally, case, a)
        else:
            dsa_graph(fam, ins, dump, poison, block, tally, case, a)
            dsa_eager(fam, ins, dump, poison, block, tally, case, a)
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
