"""The machine the engine runs on: devices, CPUs and threads, the offload plan, forward-pass costs."""
