"""Stage 4 of the analysis, presenting: report sections, terminal tables, plots, the timeline, report.html."""
