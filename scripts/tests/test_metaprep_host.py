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
