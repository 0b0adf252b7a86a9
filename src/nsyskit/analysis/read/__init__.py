"""Stage 1 of the analysis, reading: the nsys CLI, SQLite file checks, the page reader, the export schema reader, runs."""
