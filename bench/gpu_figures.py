"""The GPU build on its device against the CPU, in one run: reopening a long chat, decoding.

Runs bench/resume.py (a chat of --size tokens reopened in a new process: its KV restored
from the archive against the whole chat re-read with --no-kv; time to first token) and
bench/decode.py (the idle decode rate) under two interpreters: this one (the GPU build, on
its device) and --cpu-python (the CPU build; by default this build with its devices
hidden), and prints one table: each side's resume ratio, and decode tokens/s on the device
against the CPU. Medians of --repeat runs, as the two benches take them.

    python bench/gpu_figures.py [--cpu-python .venv/bin/python] [--size 2000] [--repeat 3] [--tokens 64]
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HIDE = {"Vulkan": "GGML_VK_VISIBLE_DEVICES", "CUDA": "CUDA_VISIBLE_DEVICES"}


def run(python: str, env: dict, *argv) -> str:
    done = subprocess.run([python, *map(str, argv)], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, argv))} under {python} failed: {done.stderr[-2000:]}")
    return done.stdout


def resume_ratio(out: str) -> "tuple[float, float, float]":
    """(restored ms, re-read ms, their ratio) from bench/resume.py's one table row."""
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["tokens", "chatdb"])
    row = lines[header + 1].split()
    return float(row[1]), float(row[3]), float(row[3]) / float(row[1])


def decode_rate(out: str) -> float:
    line = next(x for x in out.splitlines() if "chatdb, --draft off" in x)
    return float(line.split("chatdb, --draft off")[1].split()[0])


def side(python: str, env: dict, args, model: str) -> dict:
    resume = run(python, env, "bench/resume.py", "--parts", "resume", "--sizes", args.size,
                 "--repeat", args.repeat, "--model", model)
    decode = run(python, env, "bench/decode.py", "--cases", "idle", "--repeat", args.repeat,
                 "--tokens", args.tokens)
    restored, reread, ratio = resume_ratio(resume)
    return {"restored": restored, "reread": reread, "ratio": ratio, "decode": decode_rate(decode)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cpu-python", help="the CPU build's interpreter (default: this one, devices hidden)")
    parser.add_argument("--size", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from engine.llama.model_path import resolve_model_path
    from engine.machine import hardware

    report = hardware.detect()
    if not report.gpus:
        raise SystemExit(report.without_gpu() or "llama.cpp was built for the CPU only")
    gpu = report.gpus[0]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    cpu_env = dict(env)
    if not args.cpu_python and gpu.backend in HIDE:
        cpu_env[HIDE[gpu.backend]] = ""
    model = str(resolve_model_path(None))
    device = side(sys.executable, env, args, model)
    cpu = side(args.cpu_python or sys.executable, cpu_env, args, model)
    print(f"\n{gpu.name} ({gpu.description}) against the CPU, {Path(model).name}, "
          f"median of {args.repeat}")
    print(f"{'':<44} {'device':>10} {'CPU':>10} {'device/CPU':>11}")
    print(f"{f'reopen a {args.size}-token chat: restored, ms':<44} {device['restored']:>10.0f} "
          f"{cpu['restored']:>10.0f} {device['restored'] / cpu['restored']:>10.2f}x")
    print(f"{'... re-read with --no-kv, ms':<44} {device['reread']:>10.0f} {cpu['reread']:>10.0f} "
          f"{device['reread'] / cpu['reread']:>10.2f}x")
    print(f"{'resume vs re-read (goal >= 10x on the device)':<44} {device['ratio']:>9.1f}x "
          f"{cpu['ratio']:>9.1f}x")
    print(f"{f'decode, {args.tokens} tokens, tokens/s':<44} {device['decode']:>10.1f} "
          f"{cpu['decode']:>10.1f} {device['decode'] / cpu['decode']:>10.3f}x")


if __name__ == "__main__":
    main()
