"""Stage 3 of the analysis, judging: the findings that say what is wrong, and the diff of two runs."""
