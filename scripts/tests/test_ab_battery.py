import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import ab_battery  # noqa: E402


def row(arm, metric, call, family="dsa_decode", bs=8):
    return {"cell": {"arm": arm, "family": family, "batch_size": bs}, "metric": metric, "call": call}


class JudgeTests(unittest.TestCase):
    def test_an_a_a_passes_only_with_exit_0_and_no_call(self):
        quiet = {"rows": [row("graph", "step_us", "same")]}
        self.assertTrue(ab_battery.judge("aa", 0, quiet)[0])
        self.assertFalse(ab_battery.judge("aa", 1, quiet)[0])
        self.assertFalse(ab_battery.judge("aa", 0, {"rows": [row("graph", "step_us", "faster")]})[0])
        self.assertFalse(ab_battery.judge("aa", 0, None)[0])

    def test_a_host_plant_must_be_caught_on_eager_sync_alone(self):
        caught = {"rows": [row("eager-sync", "step_us", "slower"), row("eager-sync - eager-device", "read_cost_us", "slower")]}
        self.assertTrue(ab_battery.judge("host", 1, caught)[0])
        stray = {"rows": caught["rows"] + [row("graph", "host_issue_us", "slower")]}
        self.assertFalse(ab_battery.judge("host", 1, stray)[0])
        missed = {"rows": [row("eager-sync", "step_us", "uncertain")]}
        self.assertFalse(ab_battery.judge("host", 0, missed)[0])

    def test_a_forward_change_must_be_caught_on_the_gpu_paced_forward_rows(self):
        caught = {"rows": [row("graph", "step_fwd_us", "slower"), row("fused", "step_fwd_us", "slower"), row("eager-sync", "step_fwd_us", "uncertain")]}
        self.assertTrue(ab_battery.judge("gpu", 1, caught)[0])
        missed = {"rows": [row("graph", "step_fwd_us", "uncertain"), row("fused", "step_fwd_us", "slower")]}
        self.assertFalse(ab_battery.judge("gpu", 1, missed)[0])
        stray = {"rows": caught["rows"] + [row("graph", "step_us", "slower")]}
        self.assertFalse(ab_battery.judge("gpu", 1, stray)[0])


if __name__ == "__main__":
    unittest.main()
