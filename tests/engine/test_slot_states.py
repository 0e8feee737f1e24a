"""The slot's states, stepped one pass at a time: a turn, a second answer to its prompt, a
read-only (warm) job, a stop while the prompt is read.

The scheduler is driven by hand (Scheduler.step), so each state is seen as the slot is in
it between passes, on the real model and a real archive.
"""

import pytest

from engine.batching.job import Job
from engine.batching.slot import SlotState
from engine.batching.warming import Tally, WarmJob, WarmReport
from engine.errors import Cancelled

from .conftest import GREEDY, StopAfter

S = SlotState


def _states(scheduler, slot, steps=400) -> list:
    """The slot's state before the first step and after each, runs of one state as one."""
    seen = [slot.state]
    while scheduler.busy and steps:
        scheduler.step()
        steps -= 1
        if slot.state != seen[-1]:
            seen.append(slot.state)
    return seen


def test_a_turn_goes_through_reading_generating_and_storing(open_engine):
    archive, engine = open_engine(n_seq=2)   # two slots: the scheduler is paced
    scheduler = engine.scheduler
    conv = archive.create_conversation("states")
    question = archive.add_question(conv.id, "Name a colour. " * 30)
    job = engine.answer_job(conv.id, question.id, GREEDY)
    slot = scheduler.assign(job)
    assert slot.busy and slot.state == S.READING           # restored (nothing), reading next
    states = _states(scheduler, slot)
    assert states == [S.READING, S.GENERATING, S.STORING, S.IDLE]
    assert job.error is None and job.result.message_id is not None
    assert job.figures.prompt_passes >= 1 and job.figures.computed_tokens == len(job.prompt)
    engine.flush()
    # The answer's tail was fed in the storing pass: its KV is stored up to the answer.
    assert archive.kv.deepest_restorable(job.result.message_id, engine.fingerprint) is not None


def test_a_second_answer_waits_then_starts_from_the_first_ones_prompt(open_engine):
    archive, engine = open_engine(n_seq=2)
    scheduler = engine.scheduler
    prompt = engine.model.tokenize("<|im_start|>user\nName a fruit.<|im_end|>\n"
                                   "<|im_start|>assistant\n")
    first = engine.completion_job(prompt, GREEDY)
    second = engine.completion_job(prompt, GREEDY, follows=first)
    leader, follower = scheduler.assign(first), scheduler.assign(second)
    assert (leader.state, follower.state) == (S.READING, S.WAITING)
    scheduler.step()                                     # the prompt, in one pass
    assert (leader.state, follower.state) == (S.GENERATING, S.GENERATING)
    while scheduler.busy:
        scheduler.step()
    assert first.result.text == second.result.text         # greedy, from the same KV
    assert second.figures.computed_tokens == len(prompt)    # read once, by the first
    assert second.figures.prompt_passes == first.figures.prompt_passes == 1


def test_a_warm_job_reads_its_prompt_and_stores_without_generating(open_engine):
    archive, engine = open_engine()
    conv = archive.create_conversation("imported")
    archive.add_message(conv.id, "user", "What is rain?")
    archive.add_message(conv.id, "assistant", "Water falling from clouds.")
    tokens = engine.unstored_path(conv.id)
    report = WarmReport()
    job = WarmJob.of(conv.id, tokens, engine.writer, Tally(report, len(tokens.flat()), None))
    slot = engine.scheduler.assign(job)
    assert _states(engine.scheduler, slot) == [S.READING, S.IDLE]
    assert report.warmed == [conv.id] and report.computed_tokens == len(tokens.flat())
    engine.flush()
    assert engine.unstored_path(conv.id) is None             # its KV is stored to the head


def test_a_stop_while_reading_ends_the_job_with_nothing_said(open_engine):
    archive, engine = open_engine(n_ctx=2048)
    prompt = engine.model.tokenize("The lighthouse keeper climbed the stairs. " * 80)
    stop = StopAfter(50)
    job = Job(prompt, GREEDY, cancelled=stop)
    with pytest.raises(Cancelled) as raised:
        engine.scheduler.run(job)
    assert raised.value.done == 0 and 50 < stop.asked < 1000   # inside the first pass
    slot = engine.scheduler.slots[0]
    assert slot.state == S.IDLE and slot.cells == 0           # the stopped pass is not held
    again = engine.scheduler.run(Job(prompt, GREEDY.with_(max_tokens=4)))
    assert again.completion_tokens == 4 and again.kv_source == "none"
