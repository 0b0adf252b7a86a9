"""Stage 3 of the NCCL log analysis: terminal tables, the HTML section and page, the files it writes."""
