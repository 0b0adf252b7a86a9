"""nsyskit: build, run and analyze Nsight Systems profiles of distributed PyTorch training."""

__version__ = "0.1.0"
