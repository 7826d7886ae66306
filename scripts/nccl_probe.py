#!/usr/bin/env python3
"""All-reduce latency and bus bandwidth between the GPUs of one host, through PyTorch's NCCL.

The reference figure for the step model's emulated collectives (`steps --link-gb-s`,
`--collective-latency-us`) and for metaprep's own NCCL ranks: one process per GPU, as
engines run them, each all-reducing a bf16 buffer on its own stream; every size is timed
with CUDA events over a captured CUDA graph of ITERS back-to-back all-reduces (graph replay,
as a decode step issues them), and also eagerly, after WARMUP untimed calls.

    python3 scripts/nccl_probe.py [--gpus N] [--out FILE.json]

Prints a markdown table (size, median µs per all-reduce, bus GB/s = 2 (n-1)/n x bytes /
time, as nccl-tests defines it) and writes the same as JSON. NCCL_NVLS_ENABLE=0 is set:
NVLink multicast stays off on the lent machines.
"""
import argparse
import json
import os
import statistics
import sys

SIZES = [8 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
WARMUP, ITERS, REPEATS = 20, 50, 15


def worker(rank, world, port, queue):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    stream = torch.cuda.Stream()
    rows = []
    for size in SIZES:
        buf = torch.ones(size // 2, dtype=torch.bfloat16, device="cuda")
        with torch.cuda.stream(stream):
            for _ in range(WARMUP):
                dist.all_reduce(buf)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(ITERS):
                dist.all_reduce(buf)
        torch.cuda.synchronize()
        per_call = {"graph": [], "eager": []}
        for _ in range(REPEATS):
            for mode in ("graph", "eager"):
                dist.barrier()
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                with torch.cuda.stream(stream):
                    start.record(stream)
                    if mode == "graph":
                        graph.replay()
                    else:
                        for _ in range(ITERS):
                            dist.all_reduce(buf)
                    end.record(stream)
                end.synchronize()
                per_call[mode].append(start.elapsed_time(end) * 1000.0 / ITERS)
        row = {"bytes": size}
        for mode, times in per_call.items():
            us = statistics.median(times)
            row[f"{mode}_us"] = us
            row[f"{mode}_us_min"] = min(times)
            row[f"{mode}_us_max"] = max(times)
            row[f"{mode}_bus_gb_s"] = 2 * (world - 1) / world * size / (us * 1e-6) / 1e9
        rows.append(row)
        del graph
    if rank == 0:
        queue.put({"world": world, "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                   "gpu": torch.cuda.get_device_name(0), "iters": ITERS, "repeats": REPEATS, "rows": rows})
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpus", type=int, default=0, help="ranks (default: every GPU)")
    parser.add_argument("--out", help="write the table as JSON here too")
    parser.add_argument("--port", type=int, default=29517)
    args = parser.parse_args()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    import torch
    import torch.multiprocessing as mp

    world = args.gpus or torch.cuda.device_count()
    if world < 2:
        sys.exit(f"nccl_probe: needs at least 2 GPUs, this host has {torch.cuda.device_count()}")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, world, args.port, queue)) for r in range(world)]
    for p in procs:
        p.start()
    result = queue.get(timeout=600)
    for p in procs:
        p.join()
        if p.exitcode != 0:
            sys.exit(f"nccl_probe: rank process exited with {p.exitcode}")
    print(f"# all-reduce, {world} x {result['gpu']}, torch {result['torch']}, NCCL {result['nccl']}, "
          f"bf16, median of {REPEATS} x {ITERS} calls\n")
    print("| bytes | graph µs | graph bus GB/s | eager µs | eager bus GB/s |")
    print("|---|---|---|---|---|")
    for r in result["rows"]:
        print(f"| {r['bytes']} | {r['graph_us']:.2f} | {r['graph_bus_gb_s']:.1f} | {r['eager_us']:.2f} | "
              f"{r['eager_bus_gb_s']:.1f} |")
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f, indent=1)
        os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
