# SPDX-License-Identifier: Apache-2.0
"""bosch.select with Python evaluators: the same search as C++ (mask and log
compared exactly with bosch_python_reference), hints, batches, callbacks,
exceptions, Ctrl-C, checkpoints and resume."""

import io
import json
import signal
import sys
import traceback

import numpy as np
import pytest

import bosch

from conftest import run

LAYOUT = "12x8x4"


class Planted:
    """A planted objective in NumPy: per-head costs plus interactions of
    neighbouring heads, all multiples of 1/64, so that every sum is exact and
    NumPy's summation order gives the same double as the C++ loop."""

    def __init__(self, layout=LAYOUT, seed=0):
        self.layout = bosch.HeadLayout(layout)
        L, H = self.layout.shape
        rng = np.random.default_rng(seed)
        self.costs = rng.integers(1, 64, size=(L, H)) / 64.0
        self.pairs = rng.integers(-24, 25, size=(L, H - 1)) / 64.0
        self.calls = 0

    def __call__(self, mask):
        self.calls += 1
        return float(-self.costs[mask].sum() - self.pairs[mask[:, :-1] & mask[:, 1:]].sum())


def bits(mask):
    return "".join("1" if b else "0" for b in np.asarray(mask).ravel())


def cpp_reference(program, tmp_path, planted, options, batch=False, offsets=None):
    spec = {
        "layout": str(planted.layout),
        "costs": planted.costs.ravel().tolist(),
        "pairs": planted.pairs.ravel().tolist(),
        "options": json.loads(options.to_json()),
        "batch": batch,
    }
    if offsets is not None:
        spec["offsets"] = offsets
    src, out = tmp_path / "in.json", tmp_path / "out.json"
    src.write_text(json.dumps(spec))
    run([program, src, out])
    return json.loads(out.read_text())


def assert_same_as_reference(result, ref):
    assert bits(result.mask) == ref["mask"]
    assert result.score == ref["score"]
    assert result.normalized_score == ref["normalized_score"]
    assert result.evaluations == ref["evaluations"] == len(ref["log"]) - ref.get("eliminated", 0)
    assert result.layer_counts.tolist() == ref["layer_counts"]
    assert result.planned_counts.tolist() == ref["planned_counts"]
    assert [result.anchors.full, result.anchors.swa] == ref["anchors"]
    got = [(e.index, e.stage, bits(e.mask), e.score) for e in result.log]
    want = [(e["index"], e["stage"], e["mask"], e["score"]) for e in ref["log"]]
    assert got == want


def assert_same_result(a, b):
    assert bits(a.mask) == bits(b.mask)
    assert a.score == b.score or (np.isnan(a.score) and np.isnan(b.score))
    assert [(e.index, e.stage, bits(e.mask), e.score) for e in a.log] == \
           [(e.index, e.stage, bits(e.mask), e.score) for e in b.log]


@pytest.mark.parametrize(
    "options",
    [
        dict(seed=3),
        dict(seed=4, variant="single"),
        dict(seed=5, variant="multi", probe_budget=8),
        dict(seed=6, variant="layer"),
        dict(seed=7, inner_solver="penalized", group_rounds=2, chunk_budget=24),
        dict(seed=8, ratio_init="quantile", level_spread=1, max_evaluations=60),
        dict(seed=10, variant="full", mask_lists=True),
    ],
    ids=["full", "single", "multi", "layer", "penalized", "budget", "mask-lists"],
)
def test_numpy_evaluator_reaches_the_same_mask_and_log_as_cpp(reference_program, tmp_path, options):
    options = dict(options)
    if options.pop("mask_lists", False):
        # Every option that holds masks (warm starts) gets two, as NumPy arrays.
        warm = [bosch.layer_intr(LAYOUT, 0.5), bosch.layer_bme(LAYOUT, 0.25)]
        options.update({f["name"]: warm for f in bosch.Options.fields() if "ArrayLike" in f["type"]})
    planted = Planted(seed=options["seed"])
    result = bosch.select(planted, planted.layout, 0.5, **options)
    # The options it ran with (masks given the layout's query heads), to C++.
    ref = cpp_reference(reference_program, tmp_path, planted, result.options)
    assert_same_as_reference(result, ref)
    assert planted.calls == result.evaluator_calls == result.evaluations  # memoized: one call per mask
    assert json.loads(result.options.to_json()) == ref["options"]  # C++ read the same options


def test_batch_evaluator_matches_cpp_and_the_plain_evaluator(reference_program, tmp_path):
    planted = Planted(seed=9)
    sizes = []

    def evaluate_batch(masks):
        assert masks.dtype == np.bool_ and masks.shape[1:] == planted.layout.shape
        sizes.append(len(masks))
        return [planted(m) for m in masks]

    ref = cpp_reference(reference_program, tmp_path, planted, bosch.Options(seed=9, batch_size=5), batch=True)
    result = bosch.select(None, LAYOUT, 0.5, evaluate_batch=evaluate_batch, seed=9, batch_size=5)
    assert_same_as_reference(result, ref)
    assert max(sizes) == 5 and len(sizes) < result.evaluations
    assert_same_result(result, bosch.select(Planted(seed=9), LAYOUT, 0.5, seed=9))


class SampledPlanted(Planted):
    """Planted with per-sample scores, for racing (the C++ reference's
    SampledPlanted): sample s adds offsets[s] to the SWA heads' costs; the
    score is the mean over the samples (8: a power of two, so the division is
    exact too); cost() counts the per-sample scores computed."""

    def __init__(self, seed, samples=8):
        super().__init__(seed=seed)
        rng = np.random.default_rng(seed + 100)
        self.offsets = rng.integers(-40, 41, size=(samples,) + self.layout.shape) / 64.0
        self.scored = 0

    def sample_count(self):
        return len(self.offsets)

    def race_order(self):
        return list(range(len(self.offsets)))

    def score_samples(self, mask, samples):
        self.scored += len(samples)
        base = Planted.__call__(self, mask)
        return [base - self.offsets[s][mask].sum() for s in samples]

    @staticmethod
    def reduce(scores):
        total = 0.0
        for v in scores:
            total += v
        return total / len(scores)

    def __call__(self, mask):
        return self.reduce(self.score_samples(mask, range(len(self.offsets))))

    def cost(self):
        return float(self.scored)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_a_racing_python_evaluator_reaches_the_same_mask_log_and_cost_as_cpp(reference_program, tmp_path, seed):
    planted = SampledPlanted(seed)
    result = bosch.select(planted, planted.layout, 0.5, seed=seed, race=True, race_min_samples=2)
    ref = cpp_reference(reference_program, tmp_path, planted, result.options,
                        offsets=planted.offsets.ravel().tolist())
    assert_same_as_reference(result, ref)
    assert result.eliminated == ref["eliminated"] > 0  # the race stopped candidates
    assert result.forwards == ref["forwards"] == planted.scored
    assert [(e.eliminated, e.samples, e.forwards) for e in result.log] == \
           [(e["eliminated"], e["samples"], e["forwards"]) for e in ref["log"]]
    # Without the race the same evaluator scores every sample of every mask.
    plain = SampledPlanted(seed)
    whole = bosch.select(plain, plain.layout, 0.5, seed=seed, race=False)
    assert whole.eliminated == 0 and whole.forwards == 8 * whole.evaluations


def test_a_half_racing_protocol_and_wrong_sample_counts_are_clear_errors():
    class Half:
        layout = bosch.HeadLayout(LAYOUT)

        def evaluate(self, mask):
            return 0.0

        def sample_count(self):
            return 4

        def race_order(self):
            return [0, 1, 2, 3]

    with pytest.raises(TypeError, match="has sample_count, race_order but not score_samples, reduce"):
        bosch.select(Half(), None, 0.5)

    class Data(Planted):  # attributes that are no methods are no capabilities
        reduce = 3
        cost = np.ones(4)

    assert bosch.select(Data(seed=2), LAYOUT, 0.5, seed=2).mask.sum() == 24

    class Short(SampledPlanted):
        def score_samples(self, mask, samples):
            return super().score_samples(mask, samples)[:-1]

    with pytest.raises(ValueError, match="score_samples returned 7 scores for 8 samples"):
        bosch.select(Short(1), None, 0.5, race=True)

    class Unordered(SampledPlanted):
        def race_order(self):
            return [0, 0, 1, 2, 3, 4, 5, 6]

    with pytest.raises(bosch.Error, match="race_order.. is not a permutation of the 8 samples"):
        bosch.select(Unordered(1), None, 0.5, race=True)


def test_an_object_with_evaluate_evaluate_batch_and_layout():
    class Evaluator:
        layout = LAYOUT

        def __init__(self):
            self.planted = Planted(seed=2)
            self.batches = 0

        def evaluate(self, mask):
            return self.planted(mask)

        def evaluate_batch(self, masks):
            self.batches += 1
            return np.array([self.planted(m) for m in masks])

    e = Evaluator()
    result = bosch.select(e, ratio=0.25, seed=2)
    assert e.batches > 0
    assert result.layout == bosch.HeadLayout(LAYOUT)
    assert int(result.mask.sum()) == bosch.target_count(LAYOUT, 0.25)
    assert_same_result(result, bosch.select(Planted(seed=2), LAYOUT, 0.25, seed=2))


def test_the_hint_is_the_lowest_layer_that_differs_from_an_evaluated_mask():
    planted = Planted(seed=3)
    seen, hints = [], []

    def evaluate(mask, hint):
        hints.append(hint)
        assert isinstance(hint, int) and 0 <= hint <= planted.layout.num_layers
        if hint > 0:  # layers below the hint equal those of a mask evaluated before
            assert any(np.array_equal(m[:hint], mask[:hint]) for m in seen)
        seen.append(mask.copy())
        return planted(mask)

    result = bosch.select(evaluate, LAYOUT, 0.5, seed=3)
    assert max(hints) > 0
    assert_same_result(result, bosch.select(Planted(seed=3), LAYOUT, 0.5, seed=3))


def test_result_fields():
    planted = Planted(seed=1)
    r = bosch.select(planted, LAYOUT, 0.375, seed=1)
    L, H = planted.layout.shape
    assert r.mask.dtype == np.bool_ and r.mask.shape == (L, H)
    assert r.target_count == 18 == int(r.mask.sum()) == r.layer_counts.sum()
    assert np.array_equal(r.layer_ratios, r.layer_counts / H)
    assert r.layer_scores.shape == r.layer_drops.shape == (L,)
    assert sum(r.stage_evaluations.values()) == r.evaluations == len(r.log)
    assert r.anchors.full == planted(np.zeros((L, H), bool)) and r.anchors.swa == planted(np.ones((L, H), bool))
    assert r.normalized_score == pytest.approx((r.score - r.anchors.swa) / abs(r.anchors.full - r.anchors.swa))
    assert (r.variant, r.seed, r.target_ratio, r.stopped, r.budget_exhausted) == ("full", 1, 0.375, False, False)
    arrays = r.log_arrays()
    assert arrays["masks"].shape == (r.evaluations, L, H) and arrays["scores"].shape == (r.evaluations,)
    assert arrays["stages"][:2] == ["anchors", "anchors"]
    assert np.array_equal(arrays["masks"][5], r.log[5].mask)
    meta = r.metadata()
    assert meta["layout"] == "12x8x4" and meta["swa_heads"] == 18 and meta["kv_heads"] == 48
    assert meta["score"] == r.score and meta["evaluations"] == r.evaluations and meta["seed"] == 1
    assert r.eliminated == meta["eliminated"] == 0  # no racing, no screened probes
    assert meta["search_options"] == json.loads(r.options.to_json())
    assert meta["bosch_version"] == bosch.__version__


def test_callbacks_see_every_hook():
    planted = Planted(seed=4)
    events = []

    class Recorder:
        def begin_search(self, view):
            events.append(("begin_search", view.target_count))

        def begin_stage(self, view, stage):
            events.append(("begin_stage", stage))

        def end_stage(self, view, stage):
            events.append(("end_stage", stage))

        def on_evaluation(self, view, record):
            assert view.evaluations == record.index + 1 and view.stage == record.stage
            events.append(("on_evaluation", record.index))

        def on_improvement(self, view, record):
            assert view.best_score == record.score and int(record.mask.sum()) == view.target_count
            assert np.array_equal(view.best_mask, record.mask)
            events.append(("on_improvement", record.index))

        def end_search(self, view, result):
            events.append(("end_search", result.evaluations))

    out = io.StringIO()
    r = bosch.select(planted, LAYOUT, 0.5, seed=4, callbacks=[Recorder(), bosch.ProgressReporter(every=10, file=out)])
    assert events[0] == ("begin_search", 24) and events[-1] == ("end_search", r.evaluations)
    stages = [e[1] for e in events if e[0] == "begin_stage"]
    assert stages[:4] == ["anchors", "probes", "ratios", "groups"]
    assert [e[1] for e in events if e[0] == "on_evaluation"] == list(range(r.evaluations))
    improvements = [e[1] for e in events if e[0] == "on_improvement"]
    assert improvements and r.log[improvements[-1]].score == r.score
    assert "bosch [probes] 10/" in out.getvalue() and f"bosch: done, {r.evaluations} evaluations" in out.getvalue()


def test_a_callback_can_stop_the_search():
    class StopAt30:
        def on_evaluation(self, view, record):
            return record.index + 1 >= 30

    r = bosch.select(Planted(seed=4), LAYOUT, 0.5, seed=4, callbacks=StopAt30())
    assert r.stopped and r.evaluations == 30 and int(r.mask.sum()) == r.target_count
    native = bosch.select(Planted(seed=4), LAYOUT, 0.5, seed=4, callbacks=[bosch.EarlyStop(max_evaluations=30)])
    assert native.stopped and native.evaluations == 30
    assert_same_result(native, r)


class Boom(Exception):
    pass


def failing_evaluator(planted, at):
    def evaluate(mask):
        if planted.calls + 1 == at:
            raise Boom(f"evaluation {at} failed")
        return planted(mask)

    return evaluate


def checkpoint_records(path):
    return json.loads(path.read_text())["evaluations"]


@pytest.mark.parametrize("every", [0, 1, 7])
def test_an_exception_propagates_with_its_traceback_and_the_checkpoint_keeps_every_finished_evaluation(tmp_path, every):
    ck = tmp_path / "run.checkpoint"
    planted = Planted(seed=5)
    with pytest.raises(Boom, match="evaluation 40 failed") as e:
        bosch.select(failing_evaluator(planted, 40), LAYOUT, 0.5, seed=5, checkpoint=ck, checkpoint_every=every)
    frames = [f.name for f in traceback.extract_tb(e.value.__traceback__)]
    assert "evaluate" in frames  # the evaluator's own frame
    if sys.version_info >= (3, 11):
        assert "bosch.select: stopped after 39 evaluations" in e.value.__notes__[-1]
    assert len(checkpoint_records(ck)) == 39

    resumed = bosch.select(Planted(seed=5), LAYOUT, 0.5, seed=5, checkpoint=ck, resume=True)
    assert resumed.replayed == 39 and resumed.evaluator_calls == resumed.evaluations - 39
    assert_same_result(resumed, bosch.select(Planted(seed=5), LAYOUT, 0.5, seed=5))
    assert json.loads(ck.read_text())["complete"] is True


def test_ctrl_c_in_the_evaluator_stops_with_a_checkpoint_and_resumes_to_the_same_result(tmp_path, ctrl_c):
    ck = tmp_path / "run.checkpoint"
    planted = Planted(seed=6)

    def evaluate(mask):
        if planted.calls == 25:
            signal.raise_signal(signal.SIGINT)  # as if Ctrl-C were pressed now
        return planted(mask)

    with pytest.raises(KeyboardInterrupt):
        bosch.select(evaluate, LAYOUT, 0.5, seed=6, checkpoint=ck)
    assert len(checkpoint_records(ck)) == 25
    resumed = bosch.select(Planted(seed=6), LAYOUT, 0.5, seed=6, checkpoint=ck, resume=True)
    assert resumed.replayed == 25
    assert_same_result(resumed, bosch.select(Planted(seed=6), LAYOUT, 0.5, seed=6))


def test_an_exception_in_a_callback_propagates(tmp_path):
    class Failing:
        def on_evaluation(self, view, record):
            if record.index == 11:
                raise Boom("callback")

    ck = tmp_path / "c.checkpoint"
    with pytest.raises(Boom, match="callback"):
        bosch.select(Planted(), LAYOUT, 0.5, callbacks=[Failing()], checkpoint=ck, checkpoint_every=0)
    assert len(checkpoint_records(ck)) == 12  # the 12th evaluation had finished


def test_bad_scores_and_evaluators_are_clear_errors():
    with pytest.raises(TypeError, match="evaluate must return a float"):
        bosch.select(lambda m: "high", LAYOUT, 0.5)
    with pytest.raises(bosch.Error, match="non-finite score"):
        bosch.select(lambda m: float("nan"), LAYOUT, 0.5)
    with pytest.raises(bosch.Error, match="evaluate_batch returned 1 scores for 2 masks"):
        bosch.select(None, LAYOUT, 0.5, evaluate_batch=lambda ms: [0.0], batch_size=2)
    with pytest.raises(TypeError, match="expected a callable"):
        bosch.select(42, LAYOUT, 0.5)
    with pytest.raises(bosch.InvalidArgument, match="no layout"):
        bosch.select(lambda m: 0.0, None, 0.5)
    with pytest.raises(bosch.InvalidArgument, match="resume=True needs checkpoint"):
        bosch.select(lambda m: 0.0, LAYOUT, 0.5, resume=True)


def test_resume_refuses_a_checkpoint_of_another_search(tmp_path):
    ck = tmp_path / "run.checkpoint"
    bosch.select(Planted(), LAYOUT, 0.5, seed=1, checkpoint=ck, max_evaluations=20)
    with pytest.raises(bosch.InvalidArgument, match="seed 1 does not match Options::seed 2"):
        bosch.select(Planted(), LAYOUT, 0.5, seed=2, checkpoint=ck, resume=True)
    with pytest.raises(bosch.InvalidArgument, match="different options: probe_budget"):
        bosch.select(Planted(), LAYOUT, 0.5, seed=1, probe_budget=3, checkpoint=ck, resume=True)
    ck.write_text(ck.read_text().replace('"score"', '"scor"', 1))
    with pytest.raises(bosch.FormatError, match="checksum"):
        bosch.select(Planted(), LAYOUT, 0.5, seed=1, checkpoint=ck, resume=True)


def test_a_resume_stopped_during_its_replay_keeps_the_whole_checkpoint(tmp_path):
    ck = tmp_path / "run.checkpoint"
    bosch.select(Planted(), LAYOUT, 0.5, checkpoint=ck, callbacks=bosch.EarlyStop(max_evaluations=40))
    assert len(checkpoint_records(ck)) == 40
    r = bosch.select(Planted(), LAYOUT, 0.5, checkpoint=ck, resume=True, callbacks=bosch.EarlyStop(max_evaluations=5))
    assert r.stopped and r.evaluations == 5 and r.evaluator_calls == 0
    assert len(checkpoint_records(ck)) == 40
