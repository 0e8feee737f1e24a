"""What the exact CPU kernels cost (engine/llama/exact_kernels.py): llama.cpp's own kernels
(CHATDB_EXACT_KERNELS=off) against the exact ones, the same model, alternating runs.

Each kernel choice runs in a process of its own (llama.cpp reads its switch once per
process). Per run: reading a prompt of ~600 tokens in one batch, 40 one-token steps, 8
batches of 5 tokens (a verification of 4 guesses); and whether the logits of the same
tokens stepped alone and checked in batches are the same bits.

    python bench/exact_kernels.py [--model PATH] [--repeat 5]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE = "\n".join(f"def volume_{i}(width, height, depth):\n    return width * height * depth - {i}"
                 for i in range(25))


def measure(model_path: str) -> dict:
    """One process's timings (seconds) and whether batches gave the same logits."""
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from engine.llama.model import ContextConfig, Model
    from engine.llama.sequence import Sequence

    model = Model(model_path, ContextConfig(n_ctx=2048, n_batch=512, n_threads=2, flash_attn=False))
    prompt = model.tokenize(f"Here is a file:\n{CODE}\nRepeat it:\n")

    seq = Sequence(model)
    t = time.perf_counter()
    seq.prefill(prompt)
    read = time.perf_counter() - t
    t = time.perf_counter()
    alone = []
    for token in prompt[:40]:
        seq.step(token)
        alone.append(model.logits().copy())
    step = (time.perf_counter() - t) / 40
    seq.keep(len(prompt))
    t = time.perf_counter()
    batched = []
    for i in range(8):
        seq.verify(prompt[i * 5:(i + 1) * 5])
        batched += [model.logits(j).copy() for j in range(5)]
    verify = (time.perf_counter() - t) / 8
    same = all(np.array_equal(a, b) for a, b in zip(alone, batched))
    seq.close()
    model.close()
    return {"read": read, "step": step, "verify5": verify, "same": same, "tokens": len(prompt)}


def run(model_path: str, kernels: str) -> dict:
    env = {**os.environ, "CHATDB_EXACT_KERNELS": kernels}
    env.pop("GGML_CPU_TILED_MM", None)
    out = subprocess.run([sys.executable, __file__, "--child", model_path], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a GGUF file (default: Gemma 3 270M of the tests)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    model = args.model or str(Path(sys.prefix) / "share/chatdb/models/gemma-3-270m-q4_k_m.gguf")
    runs = {"off": [], "on": []}
    for _ in range(args.repeat):
        for kernels in runs:
            runs[kernels].append(run(model, kernels))
    print(f"\n{Path(model).name}: llama.cpp's kernels (off) against the exact ones (on), "
          f"medians of {args.repeat} alternating runs")
    print(f"{'':<24} {'off':>9} {'on':>9} {'on/off':>7}")
    for key, label in (("read", f"prompt of {runs['on'][0]['tokens']} tokens, ms"),
                       ("step", "one-token step, ms"), ("verify5", "batch of 5, ms")):
        off, on = (statistics.median(r[key] for r in runs[k]) * 1000 for k in ("off", "on"))
        print(f"{label:<24} {off:>9.2f} {on:>9.2f} {on / off:>6.2f}x")
    for kernels in runs:
        same = sum(r["same"] for r in runs[kernels])
        print(f"{kernels}: batches of 5 gave the logits of single steps in {same} of "
              f"{len(runs[kernels])} runs")


if __name__ == "__main__":
    main()
