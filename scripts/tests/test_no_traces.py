"""Both reference loops take --no-traces (the untraced grid alone: a second reference, or the
one-cell fit file of `metaprep validate --fit`), off by default. No torch, no GPU.

    python3 -m unittest discover -s scripts/tests
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import calibrate_torch as ct  # noqa: E402  (imports torch only in main())
import reference_loop as rl  # noqa: E402  (imports torch only when first used)


class NoTraces(unittest.TestCase):
    def test_both_loops_take_it_and_trace_by_default(self):
        for parse in (ct.parse_args, rl.parse_args):
            self.assertFalse(parse(["--out", "d"]).no_traces, parse.__module__)
            fit = parse(["--out", "d", "--no-traces", "--forward-us", "100", "--batch-sizes", "1"])
            self.assertTrue(fit.no_traces, parse.__module__)
            self.assertEqual((fit.forward_us, fit.batch_sizes), ([100.0], [1]), parse.__module__)


if __name__ == "__main__":
    unittest.main()
