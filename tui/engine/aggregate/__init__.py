"""Face process: raw records -> bounded aggregates -> numpy metrics. `store` routes each worker batch to the
parts: lanes (live streams, request details), series, levels (per-level fold and views), saturation (with
its advice wording), live (rates), views (the costly views, published as one bundle); metrics and series are
the pure numpy underneath.

Pure data in, plain views out: no I/O, no processes, no threads of its own.
"""
