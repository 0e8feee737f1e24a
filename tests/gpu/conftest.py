"""The GPU suite: chatdb on a GPU build's device (`make test-gpu`; `make test` leaves it out).

Every check runs with the model's layers and its KV on the device: the `device` fixture
fails the suite where the build sees none, and `on_device` checks each engine's plan.
Many checks are the CPU suite's own, imported into these modules and run here on the
device, with its fixtures and helpers (the device's own run is each one's reference).

On a machine whose only Vulkan device is a software one (Mesa's llvmpipe, device type
CPU), llama.cpp uses none unless GGML_VK_VISIBLE_DEVICES names it: the suite names the
first device then, for itself and the chatdb processes it starts (they inherit it).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VISIBLE = "GGML_VK_VISIBLE_DEVICES"
PROBE = ("from engine.machine import hardware; r = hardware.detect(); "
         "print(len(r.gpus) if r.gpu_offload else 0, *r.built_for)")


def _probe(env: dict) -> "tuple[int, list[str]]":
    """(GPU devices llama.cpp uses, GPU backends built) in a new process under `env`."""
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    count, *built = (done.stdout.split() or ["0"])
    return int(count), built


if VISIBLE not in os.environ:
    _env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    _found, _built = _probe(_env)
    if _found == 0 and "Vulkan" in _built:
        os.environ[VISIBLE] = "0"   # the software device, where no card is

# The CPU suite's helpers and fixtures, imported after the variable is set (llama.cpp reads
# it once, when its backends first load).
from ..cli.conftest import Chatdb, chatdb, cli_env  # noqa: E402,F401
from ..engine.conftest import model_path, open_engine, run_chatdb  # noqa: E402,F401
from ..server.conftest import start_server  # noqa: E402,F401
from engine.machine.offload_plan import FLASH_ENV  # noqa: E402
import llama_cpp  # noqa: E402

from ..engine import conftest as engine_conftest, test_resume  # noqa: E402

# A software device decodes about twenty times slower than llama.cpp's CPU backend: the CPU
# suite's checks run here with answers of 8 tokens instead of 24 (they compare answers
# with each other, never with fixed text).
SHORT = 8
engine_conftest.GREEDY = engine_conftest.GREEDY.with_(max_tokens=SHORT)
test_resume.GREEDY_ARGS = ("--temperature", "0", "--seed", "1", "--max-tokens", str(SHORT))


def software(device) -> bool:
    """Whether the device is Mesa's llvmpipe (a Vulkan device of type CPU) or another driver
    on the CPU."""
    return device.software


@pytest.fixture(scope="session", autouse=True)
def device():
    """The first GPU device llama.cpp uses; the suite fails without one."""
    from engine.machine import hardware

    report = hardware.detect()
    if not (report.gpu_offload and report.gpus):
        pytest.fail("no GPU device for the GPU suite: "
                    f"{report.without_gpu() or 'llama.cpp was built for the CPU only'} "
                    "(`make test-gpu` builds for Vulkan)", pytrace=False)
    return report.gpus[0]


@pytest.fixture(autouse=True)
def on_device(monkeypatch, device):
    """Every engine a test opens in this process plans all its layers on the device."""
    from engine.chat import Engine

    opened = Engine.__init__

    def checked(self, archive, model, report, offload, *args, **kw):
        assert model.config.n_gpu_layers == -1 and device.name in offload, offload
        # As planned: on, but off by itself on a software device (its driver fails at it),
        # unless a quantized V cache needs it or the variable says otherwise.
        forced = os.environ.get(FLASH_ENV) in ("on", "off")
        quantized = model.config.type_v != llama_cpp.GGML_TYPE_F16
        assert forced or model.config.flash_attn == (quantized or not device.software), offload
        opened(self, archive, model, report, offload, *args, **kw)

    monkeypatch.setattr(Engine, "__init__", checked)


def cpu_python() -> "tuple[str, dict]":
    """(python, env) that run chatdb's code on the CPU: the CPU build where `make test-gpu`
    found one ($CHATDB_CPU_PYTHON), else this build with its devices hidden."""
    from ..chatdb_command import python_path

    python = os.environ.get("CHATDB_CPU_PYTHON") or sys.executable
    env = {**os.environ, "PYTHONPATH": python_path()}
    if python == sys.executable:
        env[VISIBLE] = ""
    return python, env


def run_on_cpu(*args, db, input=None) -> subprocess.CompletedProcess:
    """`chatdb ARGS` on the CPU (cpu_python), on the archive `db`."""
    from ..chatdb_command import DRAFT

    python, env = cpu_python()
    argv = [python, "-m", "cli.main", "--draft", DRAFT, "--db", str(db), *map(str, args)]
    return subprocess.run(argv, cwd=ROOT, env=env, input=input, capture_output=True, text=True,
                          timeout=300)
