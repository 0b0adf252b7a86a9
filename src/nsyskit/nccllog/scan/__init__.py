"""Stage 1 of the NCCL log analysis, scanning: which files, blocks of lines, the line layouts, the scanner (Python and C)."""
