"""The device as chatdb sees it: doctor names it, its memory and what runs on it; the plan
comes from the memory it reports; a device hidden or refused leaves the CPU, said once."""

import json

import pytest

from engine.llama.gguf_header import read_facts
from engine.machine.hardware import VISIBLE_ENV
from engine.machine.offload_plan import DEFAULT_MAX_CTX, MEMORY_ENV

GREEDY_ARGS = ("--temperature", "0", "--max-tokens", "8")


def _gpu(doc) -> dict:
    return next(d for d in doc["hardware"]["devices"] if d["type"] in ("gpu", "igpu"))


def test_doctor_names_the_device_its_memory_and_what_is_offloaded(chatdb, device, model_path):
    doc = chatdb("doctor", "--json").json()
    gpu, settings, n_layer = _gpu(doc), doc["settings"], read_facts(model_path).n_layer
    assert (gpu["name"], gpu["backend"]) == (device.name, device.backend)
    assert 0 < gpu["memory_free"] <= gpu["memory_total"]
    assert doc["hardware"]["cpu_fallback"] is None
    # Flash attention on, but off by itself on a software device (its driver fails at it).
    assert settings["n_gpu_layers"] == -1 and settings["flash_attn"] is not device.software
    assert settings["devices"] == [f"{gpu['name']}: {gpu['description']}"]
    assert settings["offload"] == f"all {n_layer} layers on {gpu['name']} ({gpu['description']})"
    assert doc["kv"]["held_in"] == f"{gpu['name']}'s memory"
    text = chatdb("doctor").stdout
    assert f"device {gpu['name']} (gpu, {gpu['backend']}): {gpu['description']}; " in text
    assert "GiB free" in text and settings["offload"] in text
    assert f"held in {gpu['name']}'s memory" in text


def test_a_smaller_budget_moves_layers_back_to_the_cpu_and_says_so(chatdb, model_path):
    facts = read_facts(model_path)
    full = (sum(facts.layer_bytes) + facts.output_bytes
            + facts.kv_bytes_per_token * min(DEFAULT_MAX_CTX, facts.n_ctx_train))
    half = chatdb("doctor", "--json", env={MEMORY_ENV: str(full // 2)}).json()
    layers = half["settings"]["n_gpu_layers"]
    assert 0 < layers < facts.n_layer
    assert half["settings"]["offload"].startswith(f"{layers} of {facts.n_layer} layers on ")
    assert f"the rest on the CPU: no more fit ({MEMORY_ENV} allows " in half["settings"]["offload"]
    assert half["kv"]["held_in"].endswith("host memory for the rest")
    # Planned partly on the CPU, it answers.
    answer = chatdb("ask", "--json", *GREEDY_ARGS, "Hello!", env={MEMORY_ENV: str(full // 2)}).json()
    assert answer["text"]

    none = chatdb("doctor", "--json", env={MEMORY_ENV: "1M"}).json()["settings"]
    assert none["n_gpu_layers"] == 0 and not none["flash_attn"]
    assert none["offload"].startswith("CPU only: no layer fits the memory of ")
    bad = chatdb("doctor", env={MEMORY_ENV: "lots"}).error()
    assert MEMORY_ENV in bad and "not a size" in bad


def test_a_hidden_device_leaves_the_cpu_said_in_one_line(chatdb, device):
    if device.backend not in VISIBLE_ENV:
        pytest.skip(f"{device.backend} has no variable that hides its devices")
    hidden = {VISIBLE_ENV[device.backend]: ""}
    result = chatdb("ask", "--json", *GREEDY_ARGS, "Hello!", env=hidden)
    assert result.returncode == 0, result.stderr
    assert result.stderr == (f"chatdb: warning: llama.cpp was built for {device.backend} but "
                             f"{VISIBLE_ENV[device.backend]} is empty: running on the CPU\n")
    doc = chatdb("doctor", "--json", env=hidden).json()
    assert doc["settings"]["n_gpu_layers"] == 0 and doc["settings"]["offload"] == "CPU only"
    assert "running on the CPU" in doc["hardware"]["cpu_fallback"]


def test_a_vulkan_loader_with_no_driver_leaves_the_cpu_said_in_one_line(chatdb, device, tmp_path):
    if device.backend != "Vulkan":
        pytest.skip("a Vulkan loader's drivers")
    nowhere = {"VK_DRIVER_FILES": str(tmp_path / "none.json"), "VK_ICD_FILENAMES": str(tmp_path / "none.json")}
    result = chatdb("ask", "--json", *GREEDY_ARGS, "Hello!", env=nowhere)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "running on the CPU" in lines[0], result.stderr
    assert json.loads(result.stdout)["text"]
