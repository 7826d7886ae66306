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


if __name__ == "__main__":
    unittest.main()
