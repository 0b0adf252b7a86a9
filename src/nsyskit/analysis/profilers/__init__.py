"""The other profilers' readers and tables: Nsight Compute, the PyTorch profiler (with HTA), nsys recipes."""
