"""Worker process, per worker: the load runner that reconciles a target, the worker main loop, its health
probes (event-loop lag, CPU share). Never imports the aggregation side.
"""
