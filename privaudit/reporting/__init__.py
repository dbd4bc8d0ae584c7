"""Reports: the trade-off table, the iso-accuracy comparison and the self-contained HTML page."""
