"""What llama.cpp was built with and what it can run on, read from ggml's backend registry.

The registry lists each compiled backend (CUDA, ROCm/HIP, Metal, Vulkan,
SYCL, CPU, ...) and its devices with their memory; settings are chosen from
that report, not guessed from the platform.
"""

import ctypes
import hashlib
import json
import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path

import llama_cpp

from ..llama.model import _quiet_log
from . import cpus

DEVICE_TYPES = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel", 4: "meta"}
# GPU backends by their library's name (lib/libggml-vulkan.so, ggml-cuda.dll, ...): what the
# build holds even where the backend registered no device (a driver missing or refused).
GPU_LIBRARIES = {"vulkan": "Vulkan", "cuda": "CUDA", "metal": "Metal", "hip": "ROCm",
                 "sycl": "SYCL", "opencl": "OpenCL", "musa": "MUSA", "cann": "CANN"}
VISIBLE_ENV = {"Vulkan": "GGML_VK_VISIBLE_DEVICES", "CUDA": "CUDA_VISIBLE_DEVICES",
               "ROCm": "HIP_VISIBLE_DEVICES"}


# Drivers that run a GPU API on the CPU, by the names they give their device.
SOFTWARE_DEVICES = ("llvmpipe", "lavapipe", "swiftshader", "softpipe")


@dataclass(frozen=True)
class Device:
    name: str
    description: str
    type: str
    backend: str
    memory_free: int
    memory_total: int

    @property
    def software(self) -> bool:
        """Whether the device is a driver running on the CPU (Mesa's llvmpipe, SwiftShader)."""
        return any(name in self.description.lower() for name in SOFTWARE_DEVICES)


@dataclass(frozen=True)
class HardwareReport:
    backends: list[str]
    devices: list[Device]
    gpu_offload: bool
    physical_cores: int
    logical_cores: int
    system_info: str
    llama_cpp_python: str = field(default=llama_cpp.__version__)
    built_for: list[str] = field(default_factory=list)   # GPU backends compiled in

    @property
    def gpus(self) -> list[Device]:
        return [d for d in self.devices if d.type in ("gpu", "igpu")]

    def without_gpu(self) -> "str | None":
        """One line where a GPU build found no device to use (hidden, or refused by its
        driver), and chatdb runs on the CPU; None otherwise."""
        if not self.built_for or (self.gpu_offload and self.gpus):
            return None
        backend = self.built_for[0]
        env = VISIBLE_ENV.get(backend)
        if env is not None and os.environ.get(env, None) == "":
            why = f"{env} is empty"
        elif backend == "Vulkan" and backend in self.backends:
            why = ("it found no Vulkan GPU (a software device, such as Mesa's llvmpipe, "
                   "only where GGML_VK_VISIBLE_DEVICES names it)")
        elif backend in self.backends:
            why = f"it found no {backend} device"
        else:
            why = f"its {backend} driver did not start"
        return f"llama.cpp was built for {backend} but {why}: running on the CPU"

    def to_dict(self) -> dict:
        return {**asdict(self), "machine_id": self.machine_id(), "cpu_fallback": self.without_gpu()}

    def machine_id(self) -> str:
        """What timings depend on: the CPU, the devices and the llama.cpp build (not the hostname)."""
        blob = json.dumps([platform.machine(), platform.system(), cpus.cpu_model(),
                           self.physical_cores, self.logical_cores, self.system_info,
                           self.llama_cpp_python, self.backends,
                           [(d.name, d.description, d.memory_total) for d in self.devices]])
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _ggml() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / _libname()))
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    signatures = {
        "ggml_backend_reg_count": ([], sz), "ggml_backend_reg_get": ([sz], vp),
        "ggml_backend_reg_name": ([vp], ctypes.c_char_p),
        "ggml_backend_dev_count": ([], sz), "ggml_backend_dev_get": ([sz], vp),
        "ggml_backend_dev_name": ([vp], ctypes.c_char_p),
        "ggml_backend_dev_description": ([vp], ctypes.c_char_p),
        "ggml_backend_dev_type": ([vp], ctypes.c_int),
        "ggml_backend_dev_backend_reg": ([vp], vp),
        "ggml_backend_dev_memory": ([vp, ctypes.POINTER(sz), ctypes.POINTER(sz)], None),
    }
    for name, (args, res) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    return lib


def _built_for() -> list[str]:
    names = [p.name.split(".")[0].removeprefix("lib").removeprefix("ggml-")
             for p in (Path(llama_cpp.__file__).parent / "lib").glob("*ggml-*")]
    return [GPU_LIBRARIES[n] for n in GPU_LIBRARIES if n in names]


def _libname() -> str:
    for name in ("libggml.so", "libggml.dylib", "ggml.dll"):
        if (Path(llama_cpp.__file__).parent / "lib" / name).exists():
            return name
    return "libggml.so"


def detect() -> HardwareReport:
    """Backends and devices llama.cpp sees right now, with free memory."""
    # Quiet before the backends load: they log what they find (ggml_vulkan: "Found 1
    # Vulkan devices", ...) to stderr otherwise; errors still show.
    llama_cpp.llama_log_set(_quiet_log, ctypes.c_void_p(0))
    llama_cpp.llama_backend_init()
    lib = _ggml()
    backends = [lib.ggml_backend_reg_name(lib.ggml_backend_reg_get(i)).decode()
                for i in range(lib.ggml_backend_reg_count())]
    devices = [_device(lib, lib.ggml_backend_dev_get(i)) for i in range(lib.ggml_backend_dev_count())]
    allowed = cpus.allowed_cpus()
    return HardwareReport(
        backends=backends, devices=devices,
        gpu_offload=bool(llama_cpp.llama_supports_gpu_offload()),
        physical_cores=cpus.physical_cores(allowed), logical_cores=len(allowed),
        system_info=llama_cpp.llama_print_system_info().decode().strip(),
        built_for=_built_for(),
    )


def _device(lib: ctypes.CDLL, dev) -> Device:
    free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
    lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
    reg = lib.ggml_backend_dev_backend_reg(dev)
    return Device(
        name=lib.ggml_backend_dev_name(dev).decode(),
        description=(lib.ggml_backend_dev_description(dev) or b"").decode(),
        type=DEVICE_TYPES.get(lib.ggml_backend_dev_type(dev), "unknown"),
        backend=lib.ggml_backend_reg_name(reg).decode() if reg else "",
        memory_free=free.value, memory_total=total.value,
    )

