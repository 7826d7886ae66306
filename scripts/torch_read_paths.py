#!/usr/bin/env python3
"""Measure PyTorch's pinned read of device lengths and write it into a host profile.

metaprep's eager-pinned arm reads seq_lens as

    host = seq_lens.to("cpu", non_blocking=True)   # a pinned tensor from PyTorch's host allocator
    done.record()                                  # done = torch.cuda.Event()
    done.synchronize()
    values = host.tolist()

and its step loop tops its own pinned read up to the host profile's `pinned_read_us`: what
that read costs the host with the GPU idle. This script measures it, and in the same process
`seq_lens.tolist()` (what the profile's `read_us` is), so the two stand side by side: the
host's speed is a property of the process (shared/GPU-NOTES.md), and only a pair measured
together compares the paths. It writes the profile given with `pinned_read_us` set to the
profile's `read_us` times the pair's ratio (both then hold the profile's host speed); every other
field stays as it was (`mapped_read_us` included: no PyTorch op reads through mapped memory,
so the mapped read's cost is metaprep's own, docs/read-paths.md).

    python3 scripts/torch_read_paths.py --profile host-profiles/pytorch.json --out FILE
    metaprep steps --host-profile FILE --arms eager-sync,eager-pinned,eager-mapped,eager-device,graph

The timing helpers are scripts/calibrate_torch.py's (its `host_times_us`, `summarize`,
`waits_for_stream`, `calibrate_sleep`; metaprep_host's `pin_thread`), so both scripts time
a call the same way.
"""

import argparse
import json
import os
import sys
import tempfile
from datetime import datetime, timezone

import calibrate_torch as calibrate


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--profile", required=True,
                   help="the host profile JSON to add pinned_read_us to (host-profiles/pytorch.json, "
                        "or calibrate_torch.py's host_profile.json)")
    p.add_argument("--out", required=True, help="where to write the profile (may be --profile)")
    p.add_argument("--reps", type=int, default=calibrate.FULL_REPS,
                   help="measured calls of each read, GPU idle before each")
    p.add_argument("--batch-size", type=int, default=1,
                   help="ints read (calibrate_torch.py measures read_us on int32[1])")
    p.add_argument("--cpu", type=calibrate.mh.cpu_choice, default="auto",
                   help="pin the measuring thread to this CPU (auto: the last allowed), or off")
    args = p.parse_args(argv)
    if args.reps < 10 or args.batch_size < 1:
        p.error("--reps must be at least 10 and --batch-size at least 1")
    return args


def write_json_atomic(path, value):
    """Writes `value` to `path` through a temporary file in the same folder, then renames it."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, suffix=".tmp") as f:
        json.dump(value, f, indent=2)
        f.write("\n")
    os.replace(f.name, path)


def main(argv=None):
    args = parse_args(argv)
    try:
        import numpy
        import torch
    except ImportError as e:
        print(f"torch_read_paths: {e}; it needs torch and numpy", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_read_paths: CUDA is not available to torch; run it on the GPU host",
              file=sys.stderr)
        return 2
    try:
        with open(args.profile) as f:
            profile = json.load(f)
    except (OSError, ValueError) as e:
        print(f"torch_read_paths: cannot read the profile {args.profile}: {e}", file=sys.stderr)
        return 2
    if not isinstance(profile, dict) or "read_us" not in profile:
        print(f"torch_read_paths: {args.profile} is not a host profile (no read_us)",
              file=sys.stderr)
        return 2
    calibrate.torch, calibrate.np = torch, numpy

    cycles_per_us, _ = calibrate.calibrate_sleep()  # before pinning, as calibrate_torch does
    cpu = calibrate.mh.pin_thread(args.cpu, "torch_read_paths")
    seq_lens = torch.arange(1, args.batch_size + 1, dtype=torch.int32, device="cuda")
    done = torch.cuda.Event()  # PyTorch's default: no timing, the cheaper event

    def pinned_read():
        host = seq_lens.to("cpu", non_blocking=True)
        done.record()
        done.synchronize()
        return host.tolist()

    expected = seq_lens.tolist()
    if pinned_read() != expected:
        raise RuntimeError("the pinned read brought other values than seq_lens holds")
    probe = calibrate.waits_for_stream(pinned_read, cycles_per_us)
    if not probe["waits"]:
        raise RuntimeError(f"sanity check failed: the pinned read behind a queued _sleep did not "
                           f"wait for it ({probe}): it would not be a read of that work's result")
    reads = {"pinned": calibrate.summarize(calibrate.host_times_us(pinned_read, args.reps)),
             "tolist": calibrate.summarize(calibrate.host_times_us(seq_lens.tolist, args.reps))}
    pinned, tolist = reads["pinned"], reads["tolist"]
    where = (f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
             f"{datetime.now(timezone.utc).strftime('%Y-%m-%d')}, "
             + (f"thread pinned to CPU {cpu}" if cpu is not None else "thread not pinned"))
    # The profile's read_us was measured in another process, at that process's host speed:
    # only the pair measured here compares the paths, so the pinned read enters the profile
    # as read_us times the ratio of the two.
    ratio = pinned["median"] / tolist["median"]
    read_us = profile["read_us"]["value"]
    profile["pinned_read_us"] = {
        "value": round(read_us * ratio, 3),
        "source": (f"scripts/torch_read_paths.py: the profile's read_us ({read_us} us) times "
                   f"the pinned read over seq_lens.tolist() measured together ({ratio:.4f}): "
                   f"median host time of seq_lens.to('cpu', non_blocking=True), "
                   f"event.record(), event.synchronize(), .tolist() on int32[{args.batch_size}], "
                   f"GPU idle, {pinned['reps']} reps, {pinned['median']} us (p10 {pinned['p10']}, "
                   f"p90 {pinned['p90']}); in the same process seq_lens.tolist() took "
                   f"{tolist['median']} us (p10 {tolist['p10']}, p90 {tolist['p90']}); {where}"),
    }
    write_json_atomic(args.out, profile)
    print(f"pinned read {pinned['median']} us (p10 {pinned['p10']}, p90 {pinned['p90']}), "
          f"tolist {tolist['median']} us (p10 {tolist['p10']}, p90 {tolist['p90']}) in the same "
          f"process; the profile's read_us is {profile['read_us']['value']} us; behind a "
          f"{calibrate.SLEEP_PROBE_US} us _sleep the pinned read took {probe['median_us']} us")
    print(json.dumps({"reads": reads, "behind_sleep": probe, "cpu": cpu}))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
