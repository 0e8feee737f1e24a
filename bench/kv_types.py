"""KV types: what q8_0 KV saves and costs against f16, on SmolLM2-135M and Gemma 3 270M.

For each model and each way of holding the KV cache, in the same run:

  f16                      chatdb's default on the CPU (no flash attention)
  f16, flash attention     the same values through flash attention (what a GPU runs)
  q8_0 K, f16 V            K quantized (llama.cpp allows it without flash attention)
  q8_0 K and V             chatdb's q8_0 (a quantized V needs flash attention)

it prints the bytes stored per token (a 1,000-token message cut and
compressed as the archive stores it), prefill speed (1,000 tokens), the
time of a 32-token question after 2,000 tokens of context (the batch a
resumed chat's question is: small, where ggml-cpu's flash attention is
slow), decode speed at 2,000 tokens, and the quality against f16: the share
of next-token choices equal to f16's along f16's own greedy continuations
(three prompts, 128 tokens each, teacher-forced), and the mean log-likelihood
of a text (README.md's first 768 tokens) per token against f16's. Speeds
are medians of --repeat runs, the configurations taken in turn within each
run; ratios are against f16 in the same run.

    python bench/kv_types.py [--quick] [--repeat 3] [--model PATH ...] [--gpu]
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import llama_cpp  # noqa: E402
import numpy as np  # noqa: E402

from chatdb.kv.store import encode  # noqa: E402
from engine.llama.decoder import Decoder  # noqa: E402
from engine.llama.model import ContextConfig, Model  # noqa: E402
from engine.llama.model_path import resolve_model_path  # noqa: E402
from engine.state import kvlayout  # noqa: E402

F16, Q8 = llama_cpp.GGML_TYPE_F16, llama_cpp.GGML_TYPE_Q8_0
CONFIGS = (("f16", F16, F16, False), ("f16, flash attention", F16, F16, True),
           ("q8_0 K, f16 V", Q8, F16, False), ("q8_0 K and V", Q8, Q8, True))
GEMMA = Path(sys.prefix) / "share" / "chatdb" / "models" / "gemma-3-270m-q4_k_m.gguf"   # make test-models
PROMPTS = ("The history of the printing press begins",
           "def merge_sorted(a, b):\n    \"\"\"Merge two sorted lists.\"\"\"\n",
           "Dear team, thank you for the meeting yesterday. To summarise the decisions:")
TEXT = (ROOT / "README.md").read_text()
THREADS = min(4, os.cpu_count() or 1)


def types_part(quick: bool = False, repeat: "int | None" = None, models=None, gpu: bool = False) -> None:
    repeat = repeat or (1 if quick else 3)
    sizes = {"message": 300 if quick else 1000, "context": 600 if quick else 2000,
             "question": 32, "steps": 16 if quick else 32, "continuation": 32 if quick else 128,
             "text": 256 if quick else 768}
    if not models:   # the default model (or $CHATDB_MODEL), and Gemma where it is installed
        models = [str(resolve_model_path())] + ([str(GEMMA)] if GEMMA.is_file() else [])
    for path in models:
        rows = measure(path, repeat, sizes, gpu)
        print_rows(Path(path).name, rows, sizes, repeat)


def teacher_forced(model: Model, decoder: Decoder, tokens: list[int]) -> np.ndarray:
    """The logits after every token of `tokens`, fed from position 0."""
    model.clear()
    out = []
    for start in range(0, len(tokens), model.config.n_batch):
        part = tokens[start: start + model.config.n_batch]
        decoder.verify(part, start)
        out.extend(model.logits(j).copy() for j in range(len(part)))
    model.clear()
    return np.array(out)


def greedy(model: Model, decoder: Decoder, prompt: list[int], n: int) -> list[int]:
    model.clear()
    decoder.prefill(prompt, 0)
    out = []
    for i in range(n):
        token = int(np.argmax(model.logits()))
        out.append(token)
        decoder.step(token, len(prompt) + i)
    model.clear()
    return out


def mean_nll(logits: np.ndarray, tokens: list[int]) -> float:
    """Mean negative log-likelihood of tokens[1:] given the logits after each one before."""
    x = logits[:-1].astype(np.float64)
    top = x.max(axis=1, keepdims=True)
    lse = (top + np.log(np.exp(x - top).sum(axis=1, keepdims=True)))[:, 0]
    return float(np.mean(lse - x[np.arange(len(x)), tokens[1:]]))


def measure(path: str, repeat: int, sizes: dict, gpu: bool) -> dict:
    rows = {name: {"prefill": [], "question": [], "decode": []} for name, *_ in CONFIGS}
    reference = {}   # f16's greedy continuations and its log-likelihood of the text
    for run in range(repeat):
        order = CONFIGS[run % len(CONFIGS):] + CONFIGS[:run % len(CONFIGS)]
        if run == 0:
            order = CONFIGS   # f16 first: the others are compared with it
        for name, type_k, type_v, flash in order:
            config = ContextConfig(n_ctx=4096, n_batch=512, n_threads=THREADS, flash_attn=flash,
                                   type_k=type_k, type_v=type_v, n_gpu_layers=-1 if gpu else 0)
            model = Model(path, config)
            decoder = Decoder(model)
            try:
                speeds(model, decoder, sizes, rows[name])
                if run == 0:
                    rows[name].update(quality(model, decoder, sizes, reference, type_k))
            finally:
                decoder.close()
                model.close()
    return rows


def speeds(model: Model, decoder: Decoder, sizes: dict, row: dict) -> None:
    tokens = model.tokenize(TEXT, special=False)
    context = tokens[: sizes["context"]]
    model.clear()
    started = time.perf_counter()
    decoder.prefill(context[: sizes["message"]], 0)
    row["prefill"].append(sizes["message"] / (time.perf_counter() - started))
    decoder.prefill(context[sizes["message"]:], sizes["message"])
    question = tokens[sizes["context"]: sizes["context"] + sizes["question"]]
    started = time.perf_counter()
    decoder.prefill(question, len(context))
    row["question"].append((time.perf_counter() - started) * 1000)
    at = len(context) + len(question)
    started = time.perf_counter()
    for i in range(sizes["steps"]):
        decoder.step(int(np.argmax(model.logits())), at + i)
    row["decode"].append(sizes["steps"] / (time.perf_counter() - started))
    model.clear()


def quality(model: Model, decoder: Decoder, sizes: dict, reference: dict, type_k: int) -> dict:
    """Bytes stored per token, and agreement with f16 (whose figures come first, into
    `reference`)."""
    tokens = model.tokenize(TEXT, special=False)
    model.clear()
    message = tokens[: sizes["message"]]
    decoder.prefill(message, 0)
    state = model.get_state()
    layout = kvlayout.parse(state, model.n_swa or None)
    blob = encode(kvlayout.cut(state, layout, 0, len(message)), 2 if type_k == F16 else 1).blob
    model.clear()
    prompts = [model.tokenize(p, special=False) for p in PROMPTS]
    if "continuations" not in reference:
        reference["continuations"] = [greedy(model, decoder, p, sizes["continuation"]) for p in prompts]
    agree, total = 0, 0
    for prompt, continuation in zip(prompts, reference["continuations"]):
        logits = teacher_forced(model, decoder, prompt + continuation)
        chosen = logits[len(prompt) - 1: -1].argmax(axis=1)
        agree += int((chosen == np.array(continuation)).sum())
        total += len(continuation)
    text = tokens[: sizes["text"]]
    nll = mean_nll(teacher_forced(model, decoder, text), text)
    reference.setdefault("nll", nll)
    return {"stored_per_token": len(blob) / len(message), "agreement": agree / total,
            "nll": nll, "nll_delta": nll - reference["nll"]}


def print_rows(name: str, rows: dict, sizes: dict, repeat: int) -> None:
    base = rows["f16"]
    med = {n: {k: statistics.median(v) for k, v in r.items() if isinstance(v, list)} for n, r in rows.items()}
    print(f"\npart 2: KV types, {name} (medians of {repeat}; ratios against f16 in the same run)")
    head = ("KV", "bytes/token stored", "vs f16", f"prefill {sizes['message']}",
            f"{sizes['question']}-token question at {sizes['context']:,}", f"decode at {sizes['context']:,}",
            "greedy agreement", "log-likelihood vs f16")
    table = [head]
    for kv, r in rows.items():
        m = med[kv]
        table.append((kv, f"{r['stored_per_token']:,.0f}", f"{r['stored_per_token'] / base['stored_per_token']:.3f}",
                      f"{m['prefill'] / med['f16']['prefill']:.2f}x speed",
                      f"{m['question'] / med['f16']['question']:.2f}x time",
                      f"{m['decode'] / med['f16']['decode']:.2f}x speed",
                      f"{r['agreement']:.3f}", f"{r['nll_delta']:+.4f} nats/token"))
    widths = [max(len(str(x)) for x in col) for col in zip(*table)]
    for row in table:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)))
    f16 = med["f16"]
    print(f"f16 itself: prefill {f16['prefill']:,.0f} tokens/s, the question {f16['question']:,.0f} ms, "
          f"decode {f16['decode']:,.1f} tokens/s; log-likelihood {base['nll']:.4f} nats/token")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int)
    parser.add_argument("--model", action="append", metavar="PATH")
    parser.add_argument("--gpu", action="store_true", help="every layer on the GPU")
    args = parser.parse_args()
    types_part(args.quick, args.repeat, args.model, args.gpu)


if __name__ == "__main__":
    main()
