"""What a slot runs (a Job), what it reports of it (SlotFigures), and what the turn tells its
caller (TurnResult).

A job is built whole before a slot takes it: its prompt fitted to the
context, its sampling settings, its callbacks. The slot (slot.py) moves it
through its states and, at the end, hands it what it did (its figures); the
job builds its result once, from that, and reports it (`on_end`), or its
error. Job itself is a completion: a prompt answered, nothing placed in the
archive; answer_job.py answers a message of the archive, warming.py only
reads prompts and stores their KV.

How a per-request feature plugs in:
- sampling (grammar, logit bias, penalties, log-probabilities): a field of
  SamplingSettings and its part of llama.cpp's chain (engine/llama/sampling.py).
  The slot builds one Sampler per job (`sampler`); what the sampler reads
  from the logits row as it samples (Sampler.last: log-probabilities) goes
  to the Stream with the token (`on_logprob`), before the next pass replaces
  the row. A job that samples otherwise overrides `sampler`.
- another end (store nothing, report otherwise): a subclass's `answered`
  (commit, and the tokens to feed before storing), `store` and `result`.
- answers sharing a prompt (n > 1): jobs whose `follows` is the first; their
  slots wait, then copy its KV (Sequence.copy_from) and sample from its
  logits once it has read the prompt.
- drafting per request: `draft` (a DraftMode the engine can do), else the slot's.
"""

import time
from dataclasses import dataclass, field

import numpy as np

from ..decode.modes import DraftMode, Finish
from ..decode.stream import Generation
from ..errors import Cancelled
from ..kv.cache import Restored
from ..llama.sampling import Sampler, SamplingSettings
from ..prompt.path_tokens import PathTokens


@dataclass(frozen=True)
class TurnResult:
    conversation_id: "int | None"    # None: a completion, not in the archive
    user_message_id: "int | None"    # the question answered (None: not a user message)
    message_id: "int | None"
    text: str
    status: str
    finish: str
    prompt_tokens: int
    completion_tokens: int
    restored_tokens: int
    kv_source: str
    computed_tokens: int
    restore_ms: float         # for a restore ahead of the turn, not part of ttft_ms
    ttft_ms: float
    decode_tokens_per_s: float
    total_ms: float
    left_out_messages: int = 0       # of the path after its system prompt, from the start
    window_first: "int | None" = None   # the first message after the system prompt in context
    path_messages: int = 0           # on the answer's path after its system prompt, it included
    restored_ahead: bool = False
    warnings: list = field(default_factory=list)
    speculative: dict = field(default_factory=dict)
    logprobs: list = field(default_factory=list)   # Generation.logprobs, where asked

    @classmethod
    def of(cls, conversation_id, user_message_id, message_id, gen: Generation, figures,
           prompt_tokens: int, started: float, warnings: list,
           left_out_messages: int = 0, window_first: "int | None" = None,
           path_messages: int = 0) -> "TurnResult":
        """The result of an answer `gen`, whose turn began at `started` (perf_counter) and
        whose slot reported `figures` (job.SlotFigures)."""
        end = time.perf_counter()
        restored = figures.restored
        return cls(
            conversation_id=conversation_id, user_message_id=user_message_id,
            message_id=message_id, text=gen.text, status=gen.status, finish=gen.finish,
            prompt_tokens=prompt_tokens, completion_tokens=len(gen.tokens),
            restored_tokens=restored.restored_tokens, kv_source=restored.source,
            computed_tokens=figures.computed_tokens, restore_ms=round(restored.restore_ms, 2),
            ttft_ms=round(((gen.first_token_at or end) - started) * 1000, 2),
            decode_tokens_per_s=round(gen.decode_tokens_per_s, 2),
            total_ms=round((end - started) * 1000, 2),
            left_out_messages=left_out_messages, window_first=window_first,
            path_messages=path_messages, restored_ahead=restored.ahead,
            warnings=list(warnings), speculative=dict(figures.speculative), logprobs=gen.logprobs)


@dataclass
class SlotFigures:
    """What a slot did for a job: where its prompt's KV came from, how it was batched, how
    drafting went."""
    sequence: int                                  # the slot's sequence id
    restored: "Restored | None" = None
    computed_tokens: int = 0
    most_sequences: int = 0                        # the most sequences one of its passes held
    prompt_passes: int = 0                         # passes that read its prompt
    prompt_least_sequences: int = 0                # the fewest sequences one of those held
    speculative: dict = field(default_factory=dict)

    def restored_by(self, restored: Restored, prompt_tokens: int) -> None:
        """The prompt's KV came from `restored`; the rest of its tokens is computed."""
        self.restored, self.computed_tokens = restored, prompt_tokens - restored.restored_tokens

    def drafted(self, speculative: dict) -> None:
        """How drafting went in the answer (DraftRun.figures)."""
        self.speculative = speculative

    def passed(self, sequences: int, reading: bool) -> None:
        """A forward pass holding `sequences` sequences computed the job's prompt or a token."""
        self.most_sequences = max(self.most_sequences, sequences)
        if reading:
            self.prompt_passes += 1
            least = self.prompt_least_sequences
            self.prompt_least_sequences = min(least, sequences) if least else sequences

    def read_alike(self, leader: "SlotFigures") -> None:
        """The prompt was another slot's, read by it (n > 1): its figures are this one's."""
        self.restored, self.computed_tokens = leader.restored, leader.computed_tokens
        self.prompt_passes = leader.prompt_passes
        self.prompt_least_sequences = leader.prompt_least_sequences

    def batch(self) -> dict:
        """How the job was batched, as the server reports it."""
        return {"most_sequences": self.most_sequences, "prompt_passes": self.prompt_passes,
                "prompt_least_sequences": self.prompt_least_sequences, "sequence": self.sequence}


@dataclass
class Job:
    prompt: np.ndarray                        # what the sequence must hold before answering
    sampling: "SamplingSettings | None"       # None: read the prompt and store it, no answer
    stop: list = field(default_factory=list)  # strings that end the answer (the model's turn
    #                                           markers among them: turn_markers.py)
    on_text: "object" = None                  # each piece of text as it is sampled
    on_logprob: "object" = None               # each token's log-probabilities, where asked
    cancelled: "object" = None                # () -> bool, asked at every token
    progress: "object" = None                 # (computed, to compute) as the prompt is read
    on_end: "object" = None                   # (job) once it has ended, done or failed
    follows: "Job | None" = None              # the job whose prompt (and KV) this answers too
    draft: "DraftMode | None" = None          # drafting for this job (None: the slot's)
    draft_cost: "object" = None               # (k, cells) -> cost the policy drafts by
    #                                           (None: the engine's measured one)
    path: "PathTokens | None" = None          # the prompt's messages: restored from, stored under
    window_key: "str | None" = None           # what a window's KV is stored under (window.py)
    question_end: "int | None" = None         # a message boundary whose state storing wants
    owner: "str | None" = None                # whose KV it may reuse (TurnRequest.owner)
    started: float = field(default_factory=time.perf_counter)
    result: "TurnResult | None" = None
    error: "BaseException | None" = None
    figures: "SlotFigures | None" = None      # what its slot did, once it has ended
    generation: "Generation | None" = None    # the answer as sampled (tests look at its tokens)

    def __post_init__(self):
        self.prompt = np.asarray(self.prompt, np.int32)

    @property
    def answers(self) -> bool:
        return self.sampling is not None

    @property
    def answering(self) -> "tuple[int, int] | None":
        """(conversation id, message id) of the archive's message answered (None: a
        completion, outside the tree); the archive drafter guesses from its relatives."""
        return None

    @property
    def restore_limit(self) -> int:
        """Tokens of the prompt a source may give: an answer computes the last one itself,
        for its logits."""
        return len(self.prompt) - 1 if self.answers else len(self.prompt)

    def is_cancelled(self) -> bool:
        return self.cancelled is not None and self.cancelled()

    def sampler(self, model) -> Sampler:
        """The job's own sampler chain, fed the prompt's tail where penalties ask for it."""
        settings = self.sampling
        sampler = Sampler(settings, model.n_vocab, model.vocab)
        if settings.penalised:
            sampler.accept(self.prompt[-settings.repeat_last_n:].tolist())
        return sampler

    # -- the slot's calls at the end -------------------------------------------------

    def answered(self, gen: Generation, figures: SlotFigures, held: int) -> "list[int] | None":
        """The answer ended (the sequence holds `held` tokens): build the result; the tokens
        to feed before storing, or None to store nothing."""
        self.generation = gen
        if gen.finish == Finish.CANCELLED and not gen.tokens:
            raise Cancelled()  # nothing was said: no empty answer is kept
        self.result = TurnResult.of(None, None, None, gen, figures, len(self.prompt),
                                    self.started, [])
        return None

    def store(self, cache, drafter_cache=None) -> None:
        """Store what the sequence holds now, where the job keeps anything (`cache`: the
        slot's KVCache; `drafter_cache`: its draft model's, if any)."""

    def read(self, done: int, total: int) -> None:
        """`done` of the `total` prompt tokens it computes are computed."""
        if self.progress is not None:
            self.progress(done, total)

    def end(self, error: "BaseException | None" = None,
            figures: "SlotFigures | None" = None) -> None:
        """The job is over (its result built, or `error`); `figures`: what its slot did.
        Its caller hears of it."""
        self.error, self.figures = error, figures
        if self.on_end is not None:
            self.on_end(self)

    def outcome(self) -> TurnResult:
        """The result, or the job's error raised."""
        if self.error is not None:
            raise self.error
        return self.result
