"""metaprep_host's pinning without a GPU: a trace child gets the CPUs the process had
before its measuring thread was pinned, not the one it was pinned to."""

import argparse
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import metaprep_host as mh  # noqa: E402


class Pinning(unittest.TestCase):
    def setUp(self):
        self.allowed = os.sched_getaffinity(0)
        mh._state.pop("allowed", None)

    def tearDown(self):
        os.sched_setaffinity(0, self.allowed)
        mh._state.pop("allowed", None)

    def test_a_child_runs_on_the_cpus_from_before_the_pin(self):
        cpu = mh.pin_thread("auto", "test")
        self.assertEqual(cpu, max(self.allowed))
        self.assertEqual(os.sched_getaffinity(0), {cpu})
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "mask")
            mh.run_child([sys.executable, "-c",
                          f"import os; open({out!r}, 'w').write(repr(sorted(os.sched_getaffinity(0))))"])
            with open(out) as f:
                self.assertEqual(f.read(), repr(sorted(self.allowed)))

    def test_off_leaves_the_mask_and_a_cpu_outside_it_is_refused(self):
        self.assertIsNone(mh.pin_thread("off", "test"))
        self.assertEqual(os.sched_getaffinity(0), self.allowed)
        with self.assertRaises(SystemExit) as refused:
            mh.pin_thread(100_000, "test")
        self.assertIn("--cpu 100000 is not one of the CPUs", str(refused.exception))

    def test_cpu_choices_parse_as_metapreps(self):
        self.assertEqual(mh.cpu_choice("auto"), "auto")
        self.assertEqual(mh.cpu_choice("3"), 3)
        for bad in ("-1", "x"):
            with self.assertRaises(argparse.ArgumentTypeError):
                mh.cpu_choice(bad)


if __name__ == "__main__":
    unittest.main()


class PostWait(unittest.TestCase):
    """The same table and numbers as src/model/post_wait.rs's test: the script's arithmetic
    (which takes the post-wait cost off calibrate_torch.py's in-loop op costs) and the
    harness's (which adds it back in steps) must agree."""

    TABLE = {"gaps_us": [0, 100, 1000, 3000], "segment_ops": [1, 24, 24],
             "extra_us": [[0, 0, 0], [-4, 24, 12], [12, 60, 24], [26, 108, 48]]}

    def test_the_extra_follows_the_segment_and_the_wait(self):
        x = lambda gap, k: mh.post_wait_extra_us(self.TABLE, gap, k)  # noqa: E731
        self.assertEqual(x(0, 0), 0.0)
        self.assertEqual(x(3000, 0), 26.0)
        self.assertAlmostEqual(x(3000, 1), 4.5)
        self.assertAlmostEqual(x(3000, 24), 4.5)
        self.assertAlmostEqual(x(3000, 25), 2.0)
        self.assertEqual(x(3000, 49), 0.0)
        self.assertAlmostEqual(x(2000, 0), 19.0)
        self.assertAlmostEqual(x(550, 1), 1.0 + 0.5 * 1.5)
        self.assertEqual(x(50_000, 0), 26.0)
        # A negative extra counts as none.
        self.assertEqual(x(100, 0), 0.0)
        self.assertAlmostEqual(mh.post_wait_total_us(self.TABLE, 3000, 30), 26 + 24 * 4.5 + 5 * 2)

    def test_a_probe_becomes_a_table_moved_from_its_own_speed(self):
        probe = {**self.TABLE, "around_speed_us": 20.0, "host_speed_us": 15.0, "median_us": [],
                 "reps": 60}
        self.assertEqual(mh.post_wait_table(probe)["extra_us"][3], [26, 108, 48])
        # Measured at 20 µs per op, wanted at 10: half.
        moved = mh.post_wait_table(probe, 10.0)
        self.assertEqual(moved["extra_us"][3], [13.0, 54.0, 24.0])
        self.assertEqual(set(moved), {"gaps_us", "segment_ops", "extra_us"})
        # A record without the speed around it stays as measured (its pass's own
        # host_speed_us is another meter).
        old = {k: v for k, v in probe.items() if k != "around_speed_us"}
        self.assertEqual(mh.post_wait_table(old, 10.0)["extra_us"][3], [26, 108, 48])


class PostWaitRecord(unittest.TestCase):
    """post_wait_record reads each extra within its round, so a host-speed level switch
    during the probe (the H200 VM's levels are ~1.7x apart and switch within seconds) moves
    the extras by no more than the level's own scaling of them."""

    GAPS = (0, 1000, 3000)

    def rounds(self, levels, extra, noise=0.08, seed=7):
        """Rounds at the given host levels (a time multiplier each): segment 0 is one op of
        10 us, segment 1 a pass of 240 us; a wait of g adds extra[g] (relative) to each;
        each time jittered by up to +-noise, uniform."""
        import random as rnd
        rng = rnd.Random(seed)
        out = []
        for level in levels:
            out.append({g: [base * level * (1 + extra[g]) * (1 + noise * (2 * rng.random() - 1))
                            for base in (10.0, 240.0)] for g in self.GAPS})
        return out

    def test_a_level_switch_mid_probe_does_not_bias_the_extras(self):
        import statistics
        extra = {0: 0.0, 1000: 0.05, 3000: 0.10}
        # Half the rounds at a 1.7x slower level, and the switch inside round 99: its 1 ms
        # gap already ran slow. The medians of each gap then sit on either side of the gap
        # between the levels.
        levels = [1.0] * 100 + [1.7] * 100
        rounds = self.rounds(levels, extra)
        rounds[99][1000] = [v * 1.7 for v in rounds[99][1000]]
        rec = mh.post_wait_record(self.GAPS, 1, rounds, 21.0)
        for g, want in extra.items():
            ratio = rec["ratio"][self.GAPS.index(g)][1]
            self.assertAlmostEqual(ratio, 1 + want, delta=0.012, msg=(g, rec["ratio"]))
        # The estimator it replaced (a difference of medians) misses by far more there.
        med = {g: statistics.median(r[g][1] for r in rounds) for g in self.GAPS}
        self.assertGreater(abs(med[1000] / med[0] - 1 - 0.05), 0.1, med)
        # In µs at the probe's no-wait median (which the level mix sets: between 240 and 408).
        b = rec["median_us"][0][1]
        self.assertTrue(240 < b < 408, b)
        self.assertAlmostEqual(rec["extra_us"][2][1], 0.10 * b, delta=0.012 * b)
        self.assertEqual(rec["segment_ops"], [1, mh.MIXED_OPS])
        self.assertEqual(rec["reps"], 200)
        self.assertEqual(rec["around_speed_us"], 21.0)


class SpeedCommandTests(unittest.TestCase):
    def test_the_speed_line_gives_the_median_and_the_flag(self):
        line = mh.speed_line([8.0, 8.2, 7.9, 9.5, 8.1], "PyTorch 2.11 on H100")
        self.assertIn("host speed: 8.1 us per op (median of 5 probes, 7.900-9.500)", line)
        self.assertTrue(line.endswith("metaprep steps --host-speed-us 8.1"))

    def test_without_pytorch_it_exits_3_and_says_why(self):
        import contextlib
        import io as _io

        real = mh._torch

        def missing():
            raise ImportError("No module named 'torch'")

        mh._torch = missing
        err = _io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                code = mh.main(["--speed"])
        finally:
            mh._torch = real
        self.assertEqual(code, 3)
        self.assertIn("no PyTorch with CUDA", err.getvalue())
        self.assertEqual(mh.main(["--speed", "--probes", "0"]), 2)
