"""gaps_check reads the measured change within rounds of mirrored order, so a host that flips
between a fast and a slow state between rounds moves both sides of a pair. No torch, no GPU.

    python3 -m unittest discover -s scripts/tests
"""
import os
import statistics
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gaps_check as gc  # noqa: E402  (imports torch only when a loop runs)


def measured(host_slow_in, rounds=6, sync_us=1000.0, device_us=800.0, slow=1.4):
    """Block medians of a loop where eager-device saves 20%, its host `slow` times slower in the
    blocks `host_slow_in(k)` names (k counts the blocks in the order they ran)."""
    order = gc.round_order(("eager-sync", "eager-device"), rounds)
    blocks = {"eager-sync": [], "eager-device": []}
    for k, arm in enumerate(order):
        us = sync_us if arm == "eager-sync" else device_us
        blocks[arm].append(us * (slow if host_slow_in(k) else 1.0))
    return blocks


class WithinRounds(unittest.TestCase):
    def test_each_round_mirrors_the_last(self):
        self.assertEqual(gc.round_order(("s", "d"), 4), ["s", "d", "d", "s", "s", "d", "d", "s"])

    def test_a_steady_host_gives_the_change_and_no_drift(self):
        step, change, saved, drift = gc.within_rounds(measured(lambda k: False), "eager-device")
        self.assertAlmostEqual(change, -20.0)
        self.assertAlmostEqual(saved, 200.0)
        self.assertAlmostEqual(drift, 0.0)
        self.assertEqual(step, {"eager-sync": 1000.0, "eager-device": 800.0})

    def test_a_host_slow_for_whole_rounds_leaves_the_change_and_shows_as_drift(self):
        _, change, _, drift = gc.within_rounds(measured(lambda k: k >= 6), "eager-device")
        self.assertAlmostEqual(change, -20.0)
        self.assertAlmostEqual(drift, 40.0)  # the second half of the rounds 1.4x

    def test_a_flip_before_the_last_block_moves_two_halves_but_not_the_rounds(self):
        # Two mirrored halves (sync, device | device, sync) read the flip as the arms' change.
        halves = gc.within_rounds(measured(lambda k: k == 3, rounds=2), "eager-device")
        self.assertAlmostEqual(statistics.mean([-20.0, 800 / 1400 * 100 - 100]), halves[1])
        self.assertAlmostEqual(800 / statistics.mean([1000, 1400]) * 100 - 100, -33.3, places=1)
        _, change, _, _ = gc.within_rounds(measured(lambda k: k == 11), "eager-device")
        self.assertAlmostEqual(change, -20.0)

    def test_a_state_flip_inside_one_round_moves_one_pair_not_the_median(self):
        # Only the device block of the second round ran slow.
        _, change, saved, _ = gc.within_rounds(measured(lambda k: k == 2), "eager-device")
        self.assertAlmostEqual(change, -20.0)
        self.assertAlmostEqual(saved, 200.0)



FAKE_GAPS = '''#!/usr/bin/env python3
import json, sys
h = lambda itl, win, period: {"itl_change_pct": {"median": itl / 10},
                              "reads_and_uploads_itl_change_pct": {"median": itl},
                              "reads_and_uploads_win_us": {"median": win},
                              "period_us": {"median": period}}
g = {**h(-24.0, 240.0, 1000.0), "sites": [{"site": {"kind": "read", "op": "aten::item"},
                                          "calls_per_step": 1}],
     "profiler_event_costs_us": {"cpu_op": 1.5}, "every_sync_win_us": {"median": 250.0},
     "probe_fit": [{"workload": "cuda_add", "overhead_us": 2.0, "fitted_us": 4.0},
                   {"workload": "mixed", "overhead_us": 500.0, "fitted_us": 300.0}],
     "profiler_us": {"median": 300.0}, "as_traced": h(-30.0, 390.0, 1300.0)}
if "--untraced-step-us" in sys.argv:
    step = float(sys.argv[sys.argv.index("--untraced-step-us") + 1])
    g.update(h(-21.0, 231.0, step), host_scale=step / 1375.0)
print(json.dumps([g]))
'''


def reread_with_fake(more_columns, *rows):
    """`gc.reread` of an earlier CSV (the measured columns, then `more_columns`, one line a
    row) by FAKE_GAPS, with the trace of forward 1000 µs, bs 1 kept and no other."""
    import csv
    import tempfile
    with tempfile.TemporaryDirectory() as out:
        fake = os.path.join(out, "metaprep")
        with open(fake, "w") as fh:
            fh.write(FAKE_GAPS)
        os.chmod(fake, 0o755)
        open(os.path.join(out, "trace-f1000-bs1.json.gz"), "w").close()
        old = os.path.join(out, "old.csv")
        with open(old, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["forward_us", "batch_size", "eager_sync_step_us", "measured_change_pct",
                        "measured_win_us", "eager_sync_drift_pct", "nowait_change_pct",
                        *more_columns])
            w.writerows(rows)
        return gc.reread(fake, out, old)


class Reread(unittest.TestCase):
    """An earlier check's CSV re-read from the traces it kept: its measured columns stay, its
    gaps columns are made again (here by a stand-in for metaprep whose answer is known)."""

    def test_the_measured_columns_stay_and_the_predictions_are_read_again(self):
        rows = reread_with_fake(["reads_uploads_ratio"],
                                ["1000.0", "1", "1100.0", "-20.0", "200.0", "1.0", "", "9.99"],
                                ["3000.0", "1", "3100.0", "-10.0", "300.0", "0.5", "", "9.99"])
        self.assertEqual(len(rows), 1)  # forward 3000's trace was not kept
        r = rows[0]
        self.assertEqual((r["forward_us"], r["batch_size"]), (1000.0, 1))
        self.assertEqual(r["measured_change_pct"], -20.0)
        self.assertAlmostEqual(r["reads_uploads_ratio"], 1.2)  # -24% of -20%
        self.assertAlmostEqual(r["unprobed_reads_uploads_ratio"], 1.5)
        self.assertAlmostEqual(r["reads_uploads_win_ratio"], 1.2)  # 240 of 200 µs
        self.assertAlmostEqual(r["profiler_excess_us"], 200.0)  # 1300 traced, 1100 untraced
        self.assertEqual(r["probe_fit_largest"], "mixed")
        self.assertAlmostEqual(r["probe_fit_largest_miss_pct"], -40.0)
        self.assertEqual(r["sites"], "read aten::item")
        # Given the untraced eager-sync step (1100 µs), as a user gives their ITL.
        self.assertAlmostEqual(r["stepped_reads_uploads_ratio"], 1.05)  # -21% of -20%
        self.assertAlmostEqual(r["stepped_host_scale"], 0.8)  # the fake's 1100 / 1375


class Remeasure(unittest.TestCase):
    """A cell measured again after its trace: the measured side's spread, and the prediction
    held against the second measurement too."""

    def again(self, change):
        return {"measured_change_pct": change, "measured_win_us": 150.0,
                "eager_sync_drift_pct": 2.0, "eager_sync_step_us": 1050.0}

    def test_the_second_measurement_gives_the_spread_and_its_own_ratio(self):
        row = {"measured_change_pct": -20.0, "stepped_gaps_reads_uploads_change_pct": -21.0}
        r = gc.with_remeasure(row, self.again(-15.0))
        self.assertAlmostEqual(r["measured_spread_pct"], 5.0)
        self.assertAlmostEqual(r["stepped_after_ratio"], 1.4)  # -21% of -15%
        self.assertEqual((r["after_win_us"], r["after_drift_pct"]), (150.0, 2.0))
        self.assertEqual(r["after_eager_sync_step_us"], 1050.0)
        self.assertEqual(row["measured_change_pct"], -20.0)  # the first measurement stays

    def test_a_cell_whose_gaps_failed_has_the_spread_and_no_ratio(self):
        r = gc.with_remeasure({"measured_change_pct": -20.0}, self.again(-20.0))
        self.assertEqual(r["measured_spread_pct"], 0.0)
        self.assertNotIn("stepped_after_ratio", r)

    def test_a_reread_keeps_the_after_columns_and_makes_the_ratio_again(self):
        r = reread_with_fake(["after_change_pct", "after_win_us", "after_drift_pct",
                              "after_eager_sync_step_us", "stepped_after_ratio"],
                             ["1000.0", "1", "1100.0", "-20.0", "200.0", "1.0", "",
                              "-15.0", "150.0", "2.0", "1050.0", "9.99"])[0]
        self.assertEqual(r["after_change_pct"], -15.0)
        self.assertAlmostEqual(r["measured_spread_pct"], 5.0)
        self.assertAlmostEqual(r["stepped_after_ratio"], 1.4)  # the fake's -21% of -15%


class CutShort(unittest.TestCase):
    def test_a_run_stopped_after_a_cell_keeps_that_cells_row(self):
        import csv
        import tempfile

        def run_cell(f, bs):
            if (f, bs) == (1000.0, 8):
                raise KeyboardInterrupt  # the device call's time ran out here
            return {"forward_us": f, "batch_size": bs, "measured_change_pct": -10.0}

        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "gaps-check.csv")
            cells = [(100.0, 1), (100.0, 8), (1000.0, 8)]
            with self.assertRaises(KeyboardInterrupt):
                gc.check_cells(cells, run_cell, path)
            with open(path, newline="") as fh:
                rows = list(csv.DictReader(fh))
            self.assertEqual([(r["forward_us"], r["batch_size"]) for r in rows],
                             [("100.0", "1"), ("100.0", "8")])
            self.assertEqual(os.listdir(out), ["gaps-check.csv"])

    def test_a_failed_cell_ends_the_check_with_1(self):
        import tempfile
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "gaps-check.csv")
            self.assertEqual(gc.check_cells([(100.0, 1)], lambda f, bs: None, path), 1)
            self.assertFalse(os.path.exists(path))


if __name__ == "__main__":
    unittest.main()
