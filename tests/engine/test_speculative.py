"""Speculative decoding: exact (greedy and sampled), adaptive, both drafters, resumable."""

import math
from collections import Counter

import numpy as np
import pytest

from chatdb.archive import Archive
from engine.machine import cpu_costs
from engine.decode.draft_policy import PAUSE_MIN, DraftPolicy, shared_cost
from engine.errors import EngineError
from engine.decode.modes import DraftMode
from engine.llama.sampling import SamplingSettings

from .conftest import run_chatdb

CODE = "\n".join(f"def area_{i}(width, height):\n    return width * height + {i}" for i in range(12))
COPY_TASK = f"Repeat this code exactly:\n```python\n{CODE}\n```"


def _prompt(engine, text):
    chat = [{"role": "user", "content": text}]
    return np.asarray(engine.prompts.piece_tokens([], chat[0])
                      + engine.model.tokenize(engine.chat_format.template.generation_prompt(chat)), np.int32)


class Drafted:
    """An answer's tokens and how drafting went (a completion of the prompt, `n` tokens)."""

    def __init__(self, engine, prompt, settings, draft, n):
        job = engine.completion_job(prompt, settings.with_(max_tokens=n), draft=draft,
                                    draft_cost=cpu_costs.verify_cost)
        result = engine.scheduler.run(job)
        self.tokens = job.generation.tokens
        self.drafted, self.accepted = result.speculative["drafted"], result.speculative["accepted"]
        self.target_forwards = result.speculative["target_forwards"]


def _generate(engine, prompt, settings, draft=DraftMode.OFF, n=120):
    return Drafted(engine, prompt, settings, draft, n)


def test_lookup_greedy_output_equals_plain_decoding(open_engine):
    _, engine = open_engine(draft="off")
    prompt = _prompt(engine, COPY_TASK)
    greedy = SamplingSettings(temperature=0)
    plain = _generate(engine, prompt, greedy)
    drafted = _generate(engine, prompt, greedy, DraftMode.LOOKUP)
    assert drafted.tokens == plain.tokens
    assert drafted.accepted > 0
    assert drafted.target_forwards < plain.target_forwards


def test_greedy_output_equals_plain_decoding_in_a_long_context(open_engine):
    # Over a few hundred cached tokens llama.cpp's llamafile matrix kernels
    # sum a batch differently from a single step, and near-ties flip; chatdb
    # builds llama.cpp without them (Makefile), so the two are the same.
    _, engine = open_engine(draft="off")
    code = "\n".join(f"def volume_{i}(width, height, depth):\n    return width * height * depth - {i}"
                     for i in range(40))
    prompt = _prompt(engine, f"Repeat this code, renaming volume to size:\n```python\n{code}\n```")
    assert len(prompt) > 800
    greedy = SamplingSettings(temperature=0)
    plain = _generate(engine, prompt, greedy, n=160)
    drafted = _generate(engine, prompt, greedy, DraftMode.LOOKUP, n=160)
    assert drafted.accepted > 0
    assert drafted.tokens == plain.tokens


def test_draft_model_greedy_output_equals_plain_decoding(open_engine, model_path):
    archive, engine = open_engine(draft="model", draft_model=model_path)
    conv = archive.create_conversation("d")
    with_draft = engine.reply(conv.id, "Write two sentences about autumn.")
    spec = with_draft.speculative
    assert spec["mode"] == "model" and spec["drafted"] > 0
    # The default model drafting for itself: its guesses are the target's own choices.
    assert spec["acceptance_rate"] >= 0.9
    _, plain_engine = open_engine(archive.db_path.parent / "plain.db", draft="off")
    plain_archive = plain_engine.archive
    plain_conv = plain_archive.create_conversation("p")
    plain = plain_engine.reply(plain_conv.id, "Write two sentences about autumn.")
    assert with_draft.text == plain.text
    assert plain.speculative["drafted"] == 0


def _chi_square_homogeneity(a: Counter, b: Counter, min_count: int = 5) -> tuple[float, int]:
    keys = [k for k in set(a) | set(b) if a[k] + b[k] >= min_count]
    other_a = sum(a.values()) - sum(a[k] for k in keys)
    other_b = sum(b.values()) - sum(b[k] for k in keys)
    rows = [(a[k], b[k]) for k in keys] + ([(other_a, other_b)] if other_a + other_b else [])
    na, nb = sum(a.values()), sum(b.values())
    stat = 0.0
    for x, y in rows:
        total = x + y
        for observed, n in ((x, na), (y, nb)):
            expected = total * n / (na + nb)
            stat += (observed - expected) ** 2 / expected
    return stat, len(rows) - 1


def _chi_square_critical(df: int, z: float = 3.09) -> float:
    """Upper 0.1% point of chi-square (Wilson-Hilferty)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def test_sampling_with_drafts_follows_the_target_distribution(open_engine, model_path):
    _, engine = open_engine(draft="model", draft_model=model_path)
    prompt = _prompt(engine, "Name an animal.")
    runs = 120
    plain, drafted = Counter(), Counter()
    for seed in range(runs):
        # The second token is the first one decided by verifying a guess.
        settings = SamplingSettings(temperature=1.0, top_k=4, top_p=1.0, min_p=0.0, seed=seed)
        plain[_generate(engine, prompt, settings, n=3).tokens[1]] += 1
        out = _generate(engine, prompt, settings, DraftMode.MODEL, n=3)
        assert out.drafted > 0
        drafted[out.tokens[1]] += 1
    stat, df = _chi_square_homogeneity(plain, drafted)
    assert df >= 3, "the prompt must leave several likely continuations"
    assert stat < _chi_square_critical(df), (stat, df, plain.most_common(5), drafted.most_common(5))
    # The same test tells a wrong acceptance rule apart: greedy guesses accepted blindly.
    greedy = Counter({_generate(engine, prompt, SamplingSettings(temperature=0), n=3).tokens[1]: runs})
    stat, df = _chi_square_homogeneity(plain, greedy)
    assert stat > _chi_square_critical(df)


def test_policy_switches_drafting_off_and_retries_later():
    policy = DraftPolicy(cpu_costs.verify_cost)
    assert policy.length(cells=100) > 0
    for _ in range(6):  # guesses never accepted
        policy.verified(4, 0)

    def run_of_zeros():
        zeros = 0
        while (k := policy.length()) == 0:
            zeros += 1
        return zeros, k

    first_pause, probe = run_of_zeros()
    assert first_pause >= PAUSE_MIN and probe >= 2, "pause, then try again"
    policy.verified(probe, 0)
    second_pause, _ = run_of_zeros()
    assert second_pause >= 2 * first_pause - 1, "each failed retry waits twice as long"
    # Good guesses bring drafting back, and longer.
    for _ in range(30):
        policy.verified(8, 8)
    assert policy.length(cells=100) >= 8


def test_draft_model_with_another_vocabulary_is_refused(open_engine, model_path, tmp_path):
    other = tmp_path / "other.gguf"
    data = bytearray(model_path.read_bytes())
    # Rename one token in the vocabulary: same size, different text.
    at = data.find(b"\x05\x00\x00\x00\x00\x00\x00\x00hello")
    assert at > 0
    data[at + 8: at + 13] = b"hxllo"
    other.write_bytes(bytes(data))
    with pytest.raises(EngineError, match="vocabulary differs"):
        open_engine(draft="model", draft_model=other)


def test_bad_draft_options_are_clear_errors(open_engine, db_path):
    _, proc = run_chatdb("ask", "--draft", "model", "hi", db=db_path, check=False)
    assert proc.returncode == 1 and "--draft-model" in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_resume_restores_the_draft_models_kv(tmp_path, model_path):
    db = tmp_path / "r.db"
    # Long enough for the policy's first probe: on a machine whose measured costs make
    # drafting not pay at first, it still drafts once PAUSE_MIN tokens have passed.
    args = ("--temperature", "0", "--max-tokens", str(PAUSE_MIN + 24), "--draft", "model",
            "--draft-model", str(model_path))
    first, _ = run_chatdb("ask", "--json", *args, "Count from one to fifty, in words.", db=db)
    second, _ = run_chatdb("ask", "--json", "-c", *args, "Again.", db=db)
    assert second["kv"]["source"] == "archive"
    draft_kv = second["speculative"]["draft_kv"]
    assert draft_kv["source"] == "archive"
    assert draft_kv["restored_tokens"] == second["kv"]["restored_tokens"]
    with Archive.open(db) as archive:
        fingerprints = archive.conn.execute(
            "SELECT count(DISTINCT fingerprint) FROM kv_segments").fetchone()[0]
    assert fingerprints == 2
    assert first["speculative"]["drafted"] > 0


def test_draft_length_follows_acceptance():
    lengths = [DraftPolicy(cpu_costs.verify_cost, acceptance=p).length(cells=1000)
               for p in (0.6, 0.8, 0.95, 0.995)]
    assert lengths == sorted(lengths) and lengths[0] < lengths[-1]
    # Guesses that rarely hold cost more to verify than they save: drafting pauses.
    assert DraftPolicy(cpu_costs.verify_cost, acceptance=0.3).length(cells=700) == 0


def test_the_draft_model_follows_the_threads_chosen_before_each_turn(open_engine, model_path):
    archive, engine = open_engine(draft="model", draft_model=model_path)
    engine.draft.model.set_threads(engine.model.threads_decode + 1, engine.model.threads_batch + 1)
    conv = archive.create_conversation("threads")
    engine.reply(conv.id, "Say hi.", sampling=SamplingSettings(temperature=0, max_tokens=4))
    assert (engine.draft.model.threads_decode, engine.draft.model.threads_batch) == \
        (engine.model.threads_decode, engine.model.threads_batch)



def test_in_a_shared_pass_drafting_waits_for_lengths_that_pay_beside_the_others():
    policy = DraftPolicy(cpu_costs.verify_cost)
    assert policy.length(cells=100) > 0                 # alone, a first guess pays
    assert policy.length(cells=100, shared=3) == 0      # beside three others it does not
    assert policy.paused_for == 0                       # and that is no reason to pause
    for _ in range(40):
        policy.verified(16, 16)                         # guesses that always hold
    k = policy.length(cells=100, shared=3)
    assert k > 0 and shared_cost(k, 100) < k + 1
