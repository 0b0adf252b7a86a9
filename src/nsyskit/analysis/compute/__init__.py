"""Stage 2 of the analysis, computing: pure analyzers from the reader's columns to named-column tables, and metrics."""
