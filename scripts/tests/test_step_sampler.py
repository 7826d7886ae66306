"""metaprep_host.StepSampler's arithmetic without a GPU: chunks of steps between probes,
the steps a probe disturbs left out, each chunk's speed from the probes around it, and the
chunk-mean estimator against a host speed that switches between two levels."""

import os
import random
import statistics
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import metaprep_host as mh  # noqa: E402


def world(levels, every=12, settle=2, chunks=40, seed=3, a=2100.0, b=60.0, jitter=0.08):
    """A synthetic run: the host speed holds one of `levels` (µs per op) and switches at a
    random step, a step takes a + b·speed (host-bound, linear) times a ±jitter factor, and a
    probe reads the level it ran at. Returns the sampler log and each step's true speed."""
    rng = random.Random(seed)
    log, t, truth, level = [], 0.0, [], rng.choice(levels)
    for c in range(chunks):
        log.append(("probe", level * rng.uniform(0.97, 1.03), None))
        for _ in range(every):
            if rng.random() < 0.3 / every:  # a switch at any step, ~0.3 per chunk
                level = rng.choice(levels)
            t += (a + b * level) * rng.uniform(1 - jitter, 1 + jitter)
            log.append(("step", t, True, None))
            truth.append(level)
    log.append(("probe", level, None))
    return log, truth


class Chunks(unittest.TestCase):
    def test_settle_steps_and_the_first_step_are_left_out(self):
        log = [("probe", 10.0, None)] + [("step", 100.0 * k, True, 5.0) for k in range(1, 6)]
        log += [("probe", 20.0, None)] + [("step", 1000.0 + 200.0 * k, True, None)
                                          for k in range(1, 5)]
        chunks = mh.chunks_from_log(log, settle=2)
        self.assertEqual(len(chunks), 2)
        # Steps 3..5 of the first chunk (100 µs each); the probe's and the next one left out.
        self.assertEqual(chunks[0]["steps"], [100.0, 100.0, 100.0])
        self.assertEqual(chunks[0]["forward"], [5.0, 5.0, 5.0])
        self.assertEqual(chunks[1]["steps"], [200.0, 200.0])
        # The first chunk's speed: the mean of the probes around it; the last, its own.
        self.assertEqual(chunks[0]["speed"], 15.0)
        self.assertEqual(chunks[1]["speed"], 20.0)

    def test_unmeasured_steps_and_empty_chunks_give_nothing(self):
        log = [("step", 1.0, False, None), ("step", 2.0, False, None), ("probe", 9.0, None),
               ("probe", 11.0, None)]
        self.assertEqual(mh.chunks_from_log(log, settle=0), [])


class Estimator(unittest.TestCase):
    def test_the_chunk_mean_follows_a_bimodal_speed_and_the_median_does_not(self):
        a, b = 2100.0, 60.0
        for seed in range(6):
            log, truth = world((12.0, 22.0), seed=seed, a=a, b=b)
            chunks = [(c["speed"], c["steps"]) for c in mh.chunks_from_log(log, settle=2)]
            measured = mh.chunk_mean(chunks)
            predicted = mh.chunk_mean(chunks, predict=lambda s: a + b * s)
            self.assertLess(abs(predicted / measured - 1), 0.02, (seed, predicted, measured))
        # The median of all steps against a prediction at the median speed: it misses
        # whenever the mix of levels puts the median step between or across the levels.
        misses = 0
        for seed in range(30):
            log, _ = world((12.0, 22.0), seed=seed, a=a, b=b, chunks=8)
            chunks = [(c["speed"], c["steps"]) for c in mh.chunks_from_log(log, settle=2)]
            steps = [v for _, st in chunks for v in st]
            at_median = a + b * statistics.median(s for s, _ in chunks)
            misses += abs(at_median / statistics.median(steps) - 1) > 0.05
            estimate = mh.chunk_mean(chunks, predict=lambda s: a + b * s)
            self.assertLess(abs(estimate / mh.chunk_mean(chunks) - 1), 0.03, seed)
        self.assertGreater(misses, 0, "the test world should make the median estimator miss")

    def test_a_row_carries_the_chunks_and_their_spread(self):
        chunks = [(12.0, [2800.0, 2810.0, 2790.0]), (22.0, [3400.0, 3420.0]),
                  (12.5, [2830.0, 2820.0])]
        steps = [v for _, st in chunks for v in st]
        row = mh.reference_row(1000, 1, 5, "eager-sync", steps, rounds=2, chunks=chunks,
                               forward_dev_us=1012.5, sm_clock_mhz=1980)
        self.assertEqual(row["host_speed_us"], 12.5)
        self.assertEqual(row["chunk_host_speed_us"], "12.0000;22.0000;12.5000")
        self.assertEqual(row["chunk_step_us"], "2800.000;3410.000;2825.000")
        self.assertLess(row["host_speed_p10"], row["host_speed_p90"])
        self.assertEqual((row["forward_dev_us"], row["sm_clock_mhz"]), (1012.5, 1980))
        self.assertEqual(set(row), set(mh.REFERENCE_COLUMNS))
        old = mh.reference_row(1000, 1, 5, "graph", steps, host_speed_us=12.0)
        self.assertEqual((old["host_speed_us"], old.get("chunk_step_us")), (12.0, None))

    def test_every_must_leave_measured_steps(self):
        with self.assertRaises(ValueError):
            mh.StepSampler(every=2, settle=2)

    def test_the_step_spanning_a_probe_is_never_used(self):
        # settle 0 would keep the step whose time holds the probe's ~2 ms.
        with self.assertRaises(ValueError):
            mh.StepSampler(every=12, settle=0)
        mh.StepSampler(every=12, settle=1)

    def test_a_cell_with_one_measured_step_gives_a_row(self):
        # Python before 3.13: statistics.quantiles refuses a single data point.
        row = mh.reference_row(1000, 1, 5, "graph", [2110.0], chunks=[(12.0, [2110.0])])
        self.assertEqual((row["step_us"], row["step_us_p10"], row["step_us_p90"]),
                         (2110.0, 2110.0, 2110.0))
        self.assertEqual(row["samples"], 1)
        with self.assertRaises(ValueError):
            mh.reference_row(1000, 1, 5, "graph", [])


class FakeCuda:
    """torch.cuda as far as StepSampler uses it, on the host clock."""

    class Event:
        def __init__(self, enable_timing=True):
            self.t = None

        def record(self):
            import time
            self.t = time.perf_counter()

        def elapsed_time(self, other):  # ms, as torch's
            return (other.t - self.t) * 1e3

    @staticmethod
    def synchronize():
        pass


class FakeTorch:
    cuda = FakeCuda


class SamplerWithoutAGpu(unittest.TestCase):
    def setUp(self):
        # torch, the probe's workloads and NVML replaced for each test, restored after it.
        saved = (mh._torch, mh._workloads, mh._state.get("nvml", "unset"))

        def restore():
            mh._torch, mh._workloads = saved[0], saved[1]
            if saved[2] == "unset":
                mh._state.pop("nvml", None)
            else:
                mh._state["nvml"] = saved[2]
        self.addCleanup(restore)
        mh._torch = lambda: FakeTorch
        mh._workloads = lambda: {"mixed": lambda: None}
        mh._state["nvml"] = None

    def test_the_event_path_gives_chunks_rows_and_forwards(self):
        s = mh.StepSampler(every=4, settle=2)
        for _ in range(2):
            s.begin_run()
            for k in range(2 + 8):
                s.before_step(measure=k >= 2)
                s.forward_begin()
                s.forward_end()
                s.after_step()
            s.end_run()
        # Per run: 2 warm-up steps, then 2 chunks of 4 with 2 used each.
        self.assertEqual((len(s.chunks), len(s.steps), len(s.forward), s.runs), (4, 8, 8, 2))
        row = s.row(1000, 1, 5, "graph")
        self.assertEqual(row["samples"], 8)
        self.assertEqual(len(row["chunk_step_us"].split(";")), 4)
        self.assertEqual(row["sm_clock_mhz"], "")

    def test_warm_up_steps_get_no_probe_and_do_not_count_toward_the_schedule(self):
        s = mh.StepSampler(every=4, settle=2)
        s.begin_run()
        for k in range(3 + 8):
            s.before_step(measure=k >= 3)
            s.after_step()
        probes = sum(1 for e in s._log if e[0] == "probe")
        s.end_run()
        # Probes before measured steps 0 and 4 only (counting from the warm-up's end, which a
        # schedule over every step would have put at loop steps 0, 4 and 8): 2 chunks of 2.
        self.assertEqual(probes, 2)
        self.assertEqual([len(c[1]) for c in s.chunks], [2, 2])


if __name__ == "__main__":
    unittest.main()
