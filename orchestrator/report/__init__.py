"""Comparing runs (`orch runs|compare|diff|report`); run folders are read by `runs/reader.py`.

    plan_source    where `orch diff` reads a plan: a plan file, a run folder or a plan name
    figures, gpus  pure figures: model time, single stream, peak, knee, equal load, GPU counts
    percentiles    the `pNN_<metric>_ms` figures a level holds, whatever their list
    series         one host's benchmark of one run, labelled, in model time
    comparability  why series may not be read side by side
    distributions  per-request TTFT and latency at each run's knee (or highest level)
    server_load    the server's /metrics view of each level
    comparison     the series together, the baseline first; `to_json()`
    level_table    cells, ratios and the per-load-level table builder
    compare_tables, latency_tables, outcome_table, listing, plan_diff   the tables
    plot_canvas    what every plot shares;  plots, percentile_plots, distribution_plots,
                   server_plots   matplotlib PNGs
    html_report    the self-contained page

Tables are data (`orchestrator/tables.py`), rendered by rich for a terminal or as HTML.
"""
