"""calibrate_torch.py's op counting on hand-made Chrome events (no torch, no GPU):
a syncing upload is an op, never a read, exactly as `metaprep calibrate` counts it.

    python3 -m unittest discover -s scripts/tests
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import calibrate_torch as ct  # noqa: E402  (imports torch only in main())


def event(cat, name, ts, dur, corr=None):
    e = {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1}
    if corr is not None:
        e["args"] = {"correlation": corr}
    return e


def trace():
    """add (a launch), item (a DtoH copy and a sync: a read), to (an HtoD copy and a sync:
    an upload), inside the counted-call annotation."""
    return [
        event("user_annotation", ct.COUNT_MARK, 0, 100),
        event("cpu_op", "aten::add", 1, 10),
        event("cuda_runtime", "cudaLaunchKernel", 2, 2, corr=1),
        event("cpu_op", "aten::item", 20, 20),
        event("cuda_runtime", "cudaMemcpyAsync", 21, 2, corr=2),
        event("cuda_runtime", "cudaStreamSynchronize", 24, 10),
        event("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 30, 1, corr=2),
        event("cpu_op", "aten::to", 50, 20),
        event("cuda_runtime", "cudaMemcpyAsync", 51, 2, corr=3),
        event("cuda_runtime", "cudaStreamSynchronize", 54, 10),
        event("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 60, 1, corr=3),
    ]


class Tally(unittest.TestCase):
    def test_a_syncing_upload_is_an_op_and_a_dtoh_sync_a_read(self):
        t = ct.tally(trace())
        self.assertEqual(t["reads"], 1)
        self.assertEqual(t["ops"], 2, t["listing"])
        self.assertEqual(t["launches"], 1)
        self.assertEqual(t["ops_before_read"], 1)
        upload = next(i for i in t["listing"] if i["name"] == "aten::to")
        self.assertTrue(upload["syncs"] and upload["uploads"])

    def test_without_the_htod_copy_the_same_op_is_a_read(self):
        events = [e for e in trace() if not e["name"].startswith("Memcpy HtoD")]
        t = ct.tally(events)
        self.assertEqual((t["reads"], t["ops"]), (2, 1))

    def test_the_accept_length_formula(self):
        # (1 - a^(g+1)) / (1 - a), bonus token included (Leviathan et al. 2023).
        a = 0.7
        for g in (1, 3, 5, 8):
            self.assertAlmostEqual(ct.expected_accept_length(a, g), (1 - a ** (g + 1)) / (1 - a))
        self.assertAlmostEqual(ct.expected_accept_length(ct.ACCEPT_RATE, 5), 3.51, places=2)


if __name__ == "__main__":
    unittest.main()
