"""Offload planning from the model's own header and synthetic device reports."""

import pytest

from engine.errors import EngineError
from engine.llama.gguf_header import ModelFacts, read_facts
from engine.machine.hardware import Device, HardwareReport
from engine.machine.offload_plan import GPU_HEADROOM, MEMORY_ENV, MIN_FULL_CTX, plan_offload

MiB, GiB = 1 << 20, 1 << 30
FACTS = ModelFacts(arch="llama", n_layer=32, n_ctx_train=32768, kv_bytes_per_token=128 * 1024,
                   layer_bytes=[200 * MiB] * 32, output_bytes=400 * MiB, other_bytes=400 * MiB)


def report(*gpus_free, host_free=64 * GiB, offload=True):
    devices = [Device("CPU", "a CPU", "cpu", "CPU", host_free, 2 * host_free)]
    devices += [Device(f"CUDA{i}", f"GPU {i}", "gpu", "CUDA", free, free + GiB)
                for i, free in enumerate(gpus_free)]
    return HardwareReport(backends=["CUDA", "CPU"], devices=devices, gpu_offload=offload,
                          physical_cores=8, logical_cores=16, system_info="")


def gpu_bytes(config, facts=FACTS):
    """Weights and KV the plan puts on the GPUs."""
    layers = facts.n_layer if config.n_gpu_layers < 0 else config.n_gpu_layers
    weights = sum(facts.layer_bytes[facts.n_layer - layers:])
    weights += facts.output_bytes if config.n_gpu_layers < 0 else 0
    return weights + layers * facts.kv_bytes_per_token_layer() * config.n_ctx


def test_one_gpu_with_room_takes_every_layer_and_the_default_context():
    p = plan_offload(report(24 * GiB), FACTS)
    assert p.config.n_gpu_layers == -1 and p.config.n_ctx == 8192 and p.config.flash_attn
    assert p.offload == "all 32 layers on CUDA0 (GPU 0)"


def test_weights_that_fit_with_a_shorter_context_stay_whole_on_the_gpu():
    free = GPU_HEADROOM + 32 * 200 * MiB + 400 * MiB + 3000 * 128 * 1024
    p = plan_offload(report(free), FACTS)
    assert p.config.n_gpu_layers == -1
    assert MIN_FULL_CTX <= p.config.n_ctx < 8192 and p.config.n_ctx % 256 == 0
    assert gpu_bytes(p.config) <= free - GPU_HEADROOM


def test_a_gpu_too_small_takes_as_many_layers_as_fit():
    free = GPU_HEADROOM + 3 * GiB
    p = plan_offload(report(free), FACTS)
    layers = p.config.n_gpu_layers
    assert 0 < layers < 32 and p.config.n_ctx == 8192 and p.config.flash_attn
    assert gpu_bytes(p.config) <= free - GPU_HEADROOM
    one_more = p.config.__class__(**{**p.config.__dict__, "n_gpu_layers": layers + 1})
    assert gpu_bytes(one_more) > free - GPU_HEADROOM
    assert p.offload == f"{layers} of 32 layers on CUDA0 (GPU 0), the rest on the CPU: no more fit"


def test_a_requested_context_is_kept_and_costs_layers():
    free = GPU_HEADROOM + 8 * GiB
    assert plan_offload(report(free), FACTS).config.n_gpu_layers == -1
    p = plan_offload(report(free), FACTS, n_ctx=32768)
    assert p.config.n_ctx == 32768 and 0 < p.config.n_gpu_layers < 32


def test_two_gpus_together_hold_what_neither_holds_alone():
    each = GPU_HEADROOM + 4 * GiB
    assert plan_offload(report(each), FACTS).config.n_gpu_layers != -1
    p = plan_offload(report(each, each), FACTS)
    assert p.config.n_gpu_layers == -1
    assert p.offload == "all 32 layers on CUDA0 (GPU 0) and CUDA1 (GPU 1)"


def test_no_gpu_runs_on_the_cpu_with_a_context_host_memory_allows():
    p = plan_offload(report(), FACTS)
    assert p.config.n_gpu_layers == 0 and not p.config.flash_attn and p.offload == "CPU only"
    assert p.config.n_ctx == 8192
    small = plan_offload(report(host_free=2 * GiB), FACTS)   # a quarter of 2 GiB: 4,096 tokens of KV
    assert small.config.n_ctx == 4096


def test_a_build_without_gpu_offload_ignores_the_devices():
    assert plan_offload(report(24 * GiB, offload=False), FACTS).offload == "CPU only"


def test_a_memory_cap_plans_within_it_and_says_so(monkeypatch):
    monkeypatch.setenv(MEMORY_ENV, "3G")
    capped = plan_offload(report(24 * GiB), FACTS)
    assert 0 < capped.config.n_gpu_layers < 32 and gpu_bytes(capped.config) <= 3 * GiB
    assert capped.offload.endswith(f"the rest on the CPU: no more fit ({MEMORY_ENV} allows 3.0 GiB)")
    monkeypatch.setenv(MEMORY_ENV, "0")
    none = plan_offload(report(24 * GiB), FACTS)
    assert none.config.n_gpu_layers == 0 and not none.config.flash_attn
    assert none.offload == (f"CPU only: no layer fits the memory of CUDA0 (GPU 0) (24.0 GiB free) "
                            f"({MEMORY_ENV} allows 0 bytes)")
    monkeypatch.setenv(MEMORY_ENV, "unlimited")
    assert plan_offload(report(24 * GiB), FACTS).config.n_gpu_layers == -1
    monkeypatch.setenv(MEMORY_ENV, "lots")
    with pytest.raises(EngineError, match=MEMORY_ENV):
        plan_offload(report(24 * GiB), FACTS)


def test_the_plan_names_the_devices_that_compute_even_with_no_layer_on_them():
    assert plan_offload(report(24 * GiB), FACTS).config.devices == ("CUDA0: GPU 0",)
    small = plan_offload(report(GPU_HEADROOM // 2), FACTS)   # llama.cpp still offloads batches
    assert small.config.n_gpu_layers == 0 and small.config.devices == ("CUDA0: GPU 0",)
    assert small.offload.startswith("CPU only: no layer fits the memory of CUDA0 (GPU 0)")
    assert plan_offload(report(), FACTS).config.devices == ()
    assert plan_offload(report(24 * GiB, offload=False), FACTS).config.devices == ()


def test_the_context_never_exceeds_what_the_model_was_trained_for():
    short = ModelFacts(**{**FACTS.__dict__, "n_ctx_train": 2048})
    assert plan_offload(report(24 * GiB), short).config.n_ctx == 2048


def test_the_header_agrees_with_llama_cpp(open_engine, model_path):
    facts = read_facts(model_path)
    _, engine = open_engine(use_kv=False, draft="off")
    assert facts.n_layer == engine.model.n_layer
    assert facts.n_ctx_train == engine.model.n_ctx_train()
    assert facts.kv_bytes_per_token == engine.layout.bytes_per_token
    assert facts.weight_bytes == engine.model.size_bytes()
    assert facts.arch == engine.model.metadata()["general.architecture"]


def test_a_damaged_file_is_a_clear_error(tmp_path, model_path):
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(model_path.read_bytes()[:5000])
    with pytest.raises(EngineError, match="truncated"):
        read_facts(cut)
    other = tmp_path / "notes.gguf"
    other.write_text("hello")
    with pytest.raises(EngineError, match="not a GGUF file"):
        read_facts(other)


def test_a_gpu_build_without_a_device_says_why_it_runs_on_the_cpu(monkeypatch):
    monkeypatch.delenv("GGML_VK_VISIBLE_DEVICES", raising=False)

    def vulkan_build(backends, *gpus_free):
        devices = report(*gpus_free).devices
        return HardwareReport(backends=backends, devices=devices, gpu_offload=bool(gpus_free),
                              physical_cores=8, logical_cores=16, system_info="", built_for=["Vulkan"])

    assert report(24 * GiB).without_gpu() is None and report().without_gpu() is None  # CPU build
    assert vulkan_build(["Vulkan", "CPU"], 24 * GiB).without_gpu() is None
    found_none = vulkan_build(["Vulkan", "CPU"]).without_gpu()
    assert found_none.startswith("llama.cpp was built for Vulkan but it found no Vulkan GPU (")
    assert found_none.endswith(": running on the CPU") and "GGML_VK_VISIBLE_DEVICES" in found_none
    assert vulkan_build(["CPU"]).without_gpu() == \
        "llama.cpp was built for Vulkan but its Vulkan driver did not start: running on the CPU"
    monkeypatch.setenv("GGML_VK_VISIBLE_DEVICES", "")
    assert vulkan_build(["Vulkan", "CPU"]).without_gpu() == \
        "llama.cpp was built for Vulkan but GGML_VK_VISIBLE_DEVICES is empty: running on the CPU"


def test_flash_attention_follows_the_variable_where_it_is_set(monkeypatch):
    from engine.kv.kv_type import KV_TYPES
    from engine.machine.offload_plan import FLASH_ENV

    monkeypatch.setenv(FLASH_ENV, "off")
    assert not plan_offload(report(24 * GiB), FACTS).config.flash_attn
    with pytest.raises(EngineError, match="q8_0 KV needs flash attention"):
        plan_offload(report(24 * GiB), FACTS, kv_type=KV_TYPES["q8_0"])
    monkeypatch.setenv(FLASH_ENV, "on")
    assert plan_offload(report(), FACTS).config.flash_attn
    monkeypatch.setenv(FLASH_ENV, "sometimes")
    with pytest.raises(EngineError, match="on, off or auto"):
        plan_offload(report(), FACTS)


def test_flash_attention_is_off_by_itself_on_a_software_device(monkeypatch):
    """llvmpipe's flash attention crashes under drafting: auto leaves it off there, on a card
    it stays on; the variable still decides, and a quantized V cache still needs it."""
    from engine.kv.kv_type import KV_TYPES
    from engine.machine.offload_plan import FLASH_ENV

    monkeypatch.delenv(FLASH_ENV, raising=False)
    lavapipe = Device("Vulkan0", "llvmpipe (LLVM 15.0.6, 256 bits)", "gpu", "Vulkan",
                      8 * GiB, 9 * GiB)
    cpu = Device("CPU", "a CPU", "cpu", "CPU", 64 * GiB, 128 * GiB)
    software = HardwareReport(backends=["Vulkan", "CPU"], devices=[cpu, lavapipe],
                              gpu_offload=True, physical_cores=8, logical_cores=16, system_info="")
    plan = plan_offload(software, FACTS)
    assert plan.config.n_gpu_layers == -1 and not plan.config.flash_attn
    assert plan_offload(report(24 * GiB), FACTS).config.flash_attn
    assert plan_offload(software, FACTS, kv_type=KV_TYPES["q8_0"]).config.flash_attn
    monkeypatch.setenv(FLASH_ENV, "on")
    assert plan_offload(software, FACTS).config.flash_attn
