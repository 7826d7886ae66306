import csv
import os
import subprocess
import sys
import tempfile
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


class ResumeTests(unittest.TestCase):
    def test_a_battery_spread_over_sittings_runs_each_run_once(self):
        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, "metaprep")
            calls = os.path.join(d, "calls")
            # An `ab` that passes: writes an ab.json with no row called into --out.
            with open(fake, "w") as f:
                f.write(
                    "#!/bin/sh\n"
                    f"echo \"$*\" >> {calls}\n"
                    "while [ \"$1\" != --out ]; do shift; done\n"
                    "mkdir -p \"$2\" && echo '{\"rows\": [], \"redone\": 3}' > \"$2/ab.json\"\n"
                )
            os.chmod(fake, 0o755)
            out = os.path.join(d, "out")
            script = os.path.join(os.path.dirname(__file__), "..", "ab_battery.py")

            def sitting(runs):
                cmd = [sys.executable, script, fake, out, "--kinds", "aa", "--first", "1", "--runs", str(runs)]
                subprocess.run(cmd, check=True, capture_output=True)

            sitting(2)
            sitting(3)
            with open(os.path.join(out, "battery.csv"), newline="") as f:
                rows = list(csv.reader(f))
            self.assertEqual(rows[0][:2], ["kind", "run"])
            self.assertEqual([r[1] for r in rows[1:]], ["1", "2", "3"])
            self.assertTrue(all(r[4] == "True" for r in rows[1:]), rows)
            with open(calls) as f:
                self.assertEqual(len(f.readlines()), 3, "run 1 and 2 ran once each")


if __name__ == "__main__":
    unittest.main()
