"""A sequence of a context with a KV stream per sequence stores and restores the state a
one-sequence context has: the server's KV resumes in the console, and the console's in
the server (engine/llama/state_streams.py)."""

import numpy as np
import pytest

from engine.llama import state_streams
from engine.llama.model import ContextConfig, Model
from engine.llama.sampling import Sampler, SamplingSettings
from engine.llama.sequence import Sequence

PROMPT = ("<|im_start|>user\nName three rivers and say where each one starts.<|im_end|>\n"
          "<|im_start|>assistant\n")


def _model(path, n_seq, flash_attn=False):
    # One thread: two wait for each other at every layer, and stall whenever
    # another process (another test) holds one of the cores.
    return Model(str(path), ContextConfig(n_ctx=1024, n_batch=512, n_threads=1,
                                          flash_attn=flash_attn, n_seq_max=n_seq))


def _continue(model, seq, n=12) -> list[int]:
    """Greedy tokens after what the sequence holds (its last token recomputed for logits)."""
    last = seq.tokens[-1:]
    seq.keep(len(seq.tokens) - 1)
    seq.prefill(last)
    out = []
    with Sampler(SamplingSettings(temperature=0), model.n_vocab) as sampler:
        for _ in range(n):
            token = sampler.sample(model.ctx)
            out.append(token)
            seq.step(token)
    return out


def _filled(model, seq_id, prompt) -> Sequence:
    seq = Sequence(model, seq_id)
    seq.prefill(prompt)
    return seq


@pytest.mark.parametrize("flash_attn", [False, True], ids=["v-transposed", "v-rows"])
def test_states_move_between_a_context_of_streams_and_a_single_one(model_path, flash_attn):
    shared, single = _model(model_path, 3, flash_attn), _model(model_path, 1, flash_attn)
    seqs = []
    try:
        prompt = np.asarray(shared.tokenize(PROMPT), np.int32)
        seqs += [_filled(shared, 0, prompt), _filled(shared, 2, prompt), _filled(single, 0, prompt)]
        first, third, alone = (bytes(s.state()) for s in seqs)
        # Sequence 0 of the shared context gives the one-sequence context's very bytes;
        # sequence 2 the same but for the cells' sequence id.
        assert first == alone
        assert len(third) == len(alone) and third != alone
        assert np.count_nonzero(np.frombuffer(third, np.uint8) != np.frombuffer(alone, np.uint8)) \
            <= len(prompt) + 1
        here = Sequence(single, 0)
        assert here.load(third, prompt)                  # server to console
        back = Sequence(shared, 1)
        assert back.load(alone, prompt)                  # console to server
        seqs += [here, back]
        expected = _continue(single, seqs[2])
        assert _continue(single, here) == expected
        assert _continue(shared, back) == expected
        assert _continue(shared, seqs[1]) == expected
    finally:
        for seq in seqs:
            seq.close()
        shared.close()
        single.close()


def test_a_state_that_does_not_convert_is_refused(model_path):
    shared = _model(model_path, 2)
    try:
        seq = Sequence(shared, 1)
        assert not seq.load(b"\0" * 8 + b"not a state at all", [1, 2])
        assert shared.refusal and len(seq.tokens) == 0
    finally:
        shared.close()


def test_the_conversion_round_trips_and_checks_its_input(model_path):
    single = _model(model_path, 1)
    try:
        seq = _filled(single, 0, single.tokenize(PROMPT))
        state = np.frombuffer(bytes(seq.state()), np.uint8)
        spread = state_streams.to_streams(state, 4, parts=1)
        assert len(spread) == len(state) + 12
        assert state_streams.to_single(spread, 4, parts=1).tobytes() == state.tobytes()
        with pytest.raises(ValueError):
            state_streams.to_single(state, 4, parts=1)        # lists one stream, not four
        with pytest.raises(ValueError):
            state_streams.to_streams(state[:-3], 4, parts=1)  # cut short
        seq.close()
    finally:
        single.close()


def test_sliding_window_states_convert_too(gemma_path):
    """Gemma 3's state has two caches (full attention, then sliding window), each listing state_streams."""
    shared, single = _model(gemma_path, 2), _model(gemma_path, 1)
    seqs = []
    try:
        prompt = np.asarray(single.tokenize("<start_of_turn>user\nName a river.<end_of_turn>\n"
                                            "<start_of_turn>model\n"), np.int32)
        seqs += [_filled(shared, 0, prompt), _filled(single, 0, prompt)]
        assert bytes(seqs[0].state()) == bytes(seqs[1].state())
        moved = Sequence(shared, 1)
        seqs.append(moved)
        assert moved.load(seqs[1].state(), prompt)
        assert _continue(shared, moved) == _continue(single, seqs[1])
    finally:
        for seq in seqs:
            seq.close()
        shared.close()
        single.close()


def test_sequences_decoded_in_one_batch_answer_as_each_alone(model_path):
    """One forward pass per step for three sequences, one of them joining late with its
    whole prompt: each greedy answer is the one it gets alone (a KV stream each)."""
    from engine.llama.batch import MultiBatch

    prompts = [f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n"
               for q in ("Name a colour.", "Tell me about the sea.", "What is two plus two?")]
    single, shared = _model(model_path, 1), _model(model_path, 3)
    try:
        tokens = [np.asarray(single.tokenize(p), np.int32) for p in prompts]
        alone = []
        for t in tokens:
            seq = _filled(single, 0, t)
            alone.append(_continue(single, seq, 10))
            seq.keep(0)
            seq.close()
        batch, samplers = MultiBatch(shared, 512), [Sampler(SamplingSettings(temperature=0)) for _ in tokens]
        got, nxt, pos = [[], [], []], [None] * 3, [0] * 3
        for step in range(14):
            at = {}
            for i, t in enumerate(tokens):
                if i == 2 and step < 3:
                    continue                  # the third joins while the others decode
                if nxt[i] is None and not got[i]:
                    at[i] = batch.add(i, t.tolist(), 0, "last")
                    pos[i] = len(t)
                elif len(got[i]) < 10:
                    at[i] = batch.add(i, [nxt[i]], pos[i], "last")
                    pos[i] += 1
            batch.decode()
            for i, index in at.items():
                nxt[i] = samplers[i].sample(shared.ctx, index)
                got[i].append(nxt[i])
        assert batch.most_sequences == 3
        assert got == alone
        batch.close()
        for s in samplers:
            s.close()
    finally:
        single.close()
        shared.close()
