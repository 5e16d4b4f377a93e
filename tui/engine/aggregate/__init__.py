"""Face process: raw records -> bounded aggregates -> numpy metrics (store, series, levels, metrics).

Pure data in, plain views out: no I/O, no processes, no threads of its own.
"""
