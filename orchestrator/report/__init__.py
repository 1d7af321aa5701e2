"""Comparing runs (`orch runs|compare|diff|report`); run folders are read by `runs/reader.py`.

    plan_source    where `orch diff` reads a plan: a plan file, a run folder or a plan name
    figures, gpus  pure figures: model time, single stream, peak, knee, equal load, GPU counts
    series         one host's benchmark of one run, labelled, in model time
    comparability  why series may not be read side by side
    comparison     the series together, the baseline first; `to_json()`
    tabular        tables as data, rendered by rich (terminal) or as HTML
    compare_tables, listing, plan_diff   the tables of compare, runs and diff
    plots          matplotlib PNGs;  html_report  the self-contained page
"""
