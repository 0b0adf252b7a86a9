"""Stage 2 of the NCCL log analysis: the scanner's counts aggregated into result tables."""
