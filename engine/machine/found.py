"""`python -m engine.machine.found`: one line naming the GPU devices llama.cpp found (the
set-up prints it after a GPU build), or why it runs on the CPU."""

from chatdb.kv.budget import format_size

from . import hardware


def found_line(report: hardware.HardwareReport) -> str:
    if report.gpu_offload and report.gpus:
        devices = "; ".join(f"{d.name} ({d.description}), {format_size(d.memory_free)} free"
                            for d in report.gpus)
        return f"llama.cpp ({', '.join(report.backends)}) found {devices}"
    return report.without_gpu() or "llama.cpp was built for the CPU only"


if __name__ == "__main__":
    print(found_line(hardware.detect()))
