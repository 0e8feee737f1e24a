"""`chatdb doctor`: what llama.cpp was built with, the devices it sees, the settings chosen."""

from chatdb.kv.budget import format_size
from chatdb.kv.report import stored

from .. import output
from ..model_options import add_model_options
from ..options import add_command, open_archive

DESCRIPTION = """\
Report the compute backends llama.cpp was built with (CUDA, ROCm/HIP, Metal,
Vulkan, SYCL, CPU), the devices present with their memory, and the settings
chosen for the model: layers offloaded, flash attention, threads, context
size, how KV state is stored, the threads chosen for decoding and prefill and
why (the cores free, the CPU quota), and the measured cost of a forward pass
that speculative decoding is sized by; the archive's KV budget and what it
stores."""


MEMORY = {"attention": "attention", "iswa": "attention with sliding-window layers",
          "recurrent": "recurrent", "hybrid": "attention and recurrent layers (hybrid)"}


def register(subparsers) -> None:
    parser = add_command(subparsers, "doctor", run, help="show backends, devices and settings",
                         description=DESCRIPTION)
    add_model_options(parser)


def run(args) -> int:
    from engine.chat import Engine

    with open_archive(args, create=True) as archive:
        integrity = archive.integrity_check()
        if integrity != "ok":   # said first: the model may then fail on the damage itself
            output.warning(f"{archive.db_path}: the archive is damaged (SQLite's integrity_check: "
                           f"{integrity}); `chatdb export` saves what can still be read")
        engine = Engine.open(archive, args.model, n_ctx=args.ctx, use_kv=False,
                             threads=args.threads, kv_type=args.kv_type)
        try:
            report = engine.describe()
        finally:
            engine.close()
        report["archive"] = {"path": str(archive.db_path), "integrity_check": integrity,
                             "encrypted": archive.encrypted}
        budget = archive.kv_budget.get()
        report["kv"].update(budget_bytes=budget.bytes, budget_source=budget.source,
                            budget=budget.describe(), stored_bytes=stored(archive.conn)[0])
    if args.json:
        output.print_json(report)
        return 0
    _print(report)
    return 0


def _print(report: dict) -> None:
    hw, model, settings, kv = report["hardware"], report["model"], report["settings"], report["kv"]
    p = output.print_text
    p(f"llama-cpp-python {hw['llama_cpp_python']}; backends: {', '.join(hw['backends'])}")
    for d in hw["devices"]:
        mem = f"{d['memory_free'] / 2**30:.1f} of {d['memory_total'] / 2**30:.1f} GiB free"
        p(f"  device {d['name']} ({d['type']}, {d['backend']}): {d['description']}; {mem}")
    if hw.get("cpu_fallback"):
        p(f"  {hw['cpu_fallback']}")
    p(f"cores: {hw['physical_cores']} physical, {hw['logical_cores']} logical; "
      f"GPU offload supported: {'yes' if hw['gpu_offload'] else 'no'}")
    p(f"model: {model['path']}")
    p(f"  {model['description']}, {model['size_bytes'] / 2**20:.0f} MiB, trained context "
      f"{model['n_ctx_train']}, chat template: {model['chat_template']}")
    p(f"settings: {settings['offload']}; context {settings['n_ctx']} tokens; "
      f"flash attention {'on' if settings['flash_attn'] else 'off'}")
    t = report["threads"]
    p(f"threads: {t['decode']} decoding, {t['batch']} prefill ({t['reason']})")
    c = report["cost_model"]
    p(f"forward-pass costs ({c['source']}, {c['timings']} timings, {c['turns']} turns): a step "
      f"{c['step_ms'][0]:.2f} ms at 0 tokens of context, {c['step_ms'][1]:.2f} ms at 4,096; "
      f"verifying 4 guesses at 1,000 costs {c['verify_4_at_1000']:.2f} steps")
    encrypted = "; encrypted (SQLCipher 4)" if report["archive"]["encrypted"] else "; not encrypted"
    p(f"archive: {report['archive']['path']} (integrity_check: "
      f"{report['archive']['integrity_check']}{encrypted})")
    per_token, window = kv["bytes_per_token"], kv.get("window")
    memory = MEMORY.get(kv.get("memory"), kv.get("memory"))
    p(f"KV state: {kv.get('stored_as', kv['mode'])}, {kv['type']} ({memory}"
      + (f", window {window} tokens)" if window else ")")
      + (f", {per_token} bytes per token" if per_token else "")
      + (f" + {kv['window_bytes_per_token']} per token of each message's last window" if window else "")
      + f"; held in {kv['held_in']}; fingerprint {kv['fingerprint']}")
    p(f"KV budget: {kv['budget']}; {format_size(kv['stored_bytes'])} stored (`chatdb kv` tells more)")
