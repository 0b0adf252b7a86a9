"""The map/reduce of the analysis: per-report part files (parts, partpack) and their merge into one run (reduce)."""
