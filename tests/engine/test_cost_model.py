"""The forward-pass cost model: fitted from timings, measured once, stored, refined by turns."""

import random

import pytest

from engine.machine import cpu_costs, tuning
from engine.machine.cost_model import MAX_WEIGHT, CostModel
from engine.errors import EngineError
from engine.llama.sampling import SamplingSettings

TRUE = CostModel((8.0, 0.004), (5.0, 0.003, 2.5, 0.0012))   # a machine unlike the prior


def timings(model, contexts, rows=(1, 2, 5, 9, 17, 64), noise=0.03, seed=1):
    rng = random.Random(seed)
    measured = CostModel()
    for cells in contexts:
        for r in rows:
            for _ in range(3):
                measured.add(r, cells, model.batch(r, cells) * rng.uniform(1 - noise, 1 + noise))
    return measured


def test_the_fit_finds_the_machines_own_costs():
    fitted = timings(TRUE, (32, 544, 2000, 4000)).fitted(cpu_costs.PRIOR)
    for k in (1, 4, 16, 63):
        for cells in (100, 3000):
            assert abs(fitted.verify_cost(k, cells) / TRUE.verify_cost(k, cells) - 1) < 0.05
    assert abs(fitted.verify_cost(4, 1000) - cpu_costs.PRIOR.verify_cost(4, 1000)) > 0.2


def test_what_the_timings_cannot_tell_comes_from_the_prior_scaled():
    """Timings at one context length say nothing of the growth with context."""
    fitted = timings(TRUE, (32,), noise=0).fitted(cpu_costs.PRIOR)
    assert abs(fitted.step(32) / TRUE.step(32) - 1) < 0.02
    assert abs(fitted.batch(9, 32) / TRUE.batch(9, 32) - 1) < 0.05
    growth = fitted.step(4000) / fitted.step(32)
    prior_growth = cpu_costs.PRIOR.step(4000) / cpu_costs.PRIOR.step(32)
    assert abs(growth / prior_growth - 1) < 0.1


def test_new_timings_move_an_old_bin():
    model = CostModel()
    for _ in range(1000):
        model.add(1, 10, 10.0)
    assert model.bins["1:0"][0] == MAX_WEIGHT
    for _ in range(MAX_WEIGHT):
        model.add(1, 10, 20.0)
    assert model.bins["1:0"][2] > 16


def test_json_round_trip():
    fitted = timings(TRUE, (32, 544)).fitted(cpu_costs.PRIOR)
    again = CostModel.from_json(fitted.to_json())
    assert again.verify_cost(7, 900) == fitted.verify_cost(7, 900) and again.bins == fitted.bins


def counting_calibrations(monkeypatch):
    calls = []
    real = tuning.calibrate

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(tuning, "calibrate", counted)
    return calls


def test_measured_once_stored_and_reused(open_engine, monkeypatch):
    calls = counting_calibrations(monkeypatch)
    # The threads fixed: a cost model is stored per thread count, and one chosen from the
    # free cores could differ between the two engines on a busy machine (and be measured).
    archive, first = open_engine(draft="auto", threads=1)
    assert calls == [1] and first.tuning.cost_source == "measured"
    key = (first.tuning.key, first.tuning.machine, first.model.threads_decode)
    stored = archive.costs.get(*key)
    assert stored is not None and CostModel.from_json(stored[0]).bins
    _, second = open_engine(draft="auto", threads=1)
    assert calls == [1], "a second engine on the same archive measured again"
    assert second.tuning.cost_source == "archive"
    assert second.tuning.costs().to_json() == stored[0]


def test_no_measurement_without_drafting(open_engine, monkeypatch):
    calls = counting_calibrations(monkeypatch)
    _, engine = open_engine(draft="off")
    assert calls == [] and engine.tuning.cost_source == "prior"


def test_refined_from_real_turns(open_engine):
    archive, engine = open_engine(draft="auto")
    threads = engine.model.threads_decode
    before = sum(n for n, _, _ in engine.tuning.costs().bins.values())
    conv = archive.create_conversation("t")
    result = engine.reply(conv.id, "Count from one to twenty.",
                          sampling=SamplingSettings(temperature=0, max_tokens=32, seed=1))
    threads = engine.model.threads_decode   # the turn may have re-chosen them
    model = engine.tuning.costs()
    assert sum(n for n, _, _ in model.bins.values()) > before
    assert result.speculative["target_forwards"] >= 1
    json_text, turns = archive.costs.get(engine.tuning.key, engine.tuning.machine, threads)
    assert turns == 1 and json_text == model.to_json()


def test_pinned_to_the_prior_nothing_is_measured_learned_or_stored(open_engine, monkeypatch):
    monkeypatch.setenv(tuning.ENV, "prior")
    calls = counting_calibrations(monkeypatch)
    archive, engine = open_engine(draft="auto")
    conv = archive.create_conversation("t")
    engine.reply(conv.id, "Count from one to twenty.",
                 sampling=SamplingSettings(temperature=0, max_tokens=32, seed=1))
    assert calls == [] and engine.tuning.cost_source == f"prior, pinned by {tuning.ENV}"
    assert engine.tuning.costs() is cpu_costs.PRIOR
    threads = engine.model.threads_decode
    assert archive.costs.get(engine.tuning.key, engine.tuning.machine, threads) is None
    engine.tuning.shared.add(2, 2, 10.0)   # a shared pass timed: the prior stands
    assert engine.tuning.shared.bins == {}


def test_an_unknown_pin_is_one_clear_error(open_engine, monkeypatch):
    monkeypatch.setenv(tuning.ENV, "fast")
    with pytest.raises(EngineError, match=r"CHATDB_DRAFT_COSTS='fast': expected learn or prior"):
        open_engine(draft="auto")
