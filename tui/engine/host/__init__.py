"""Face process: the engines a face (app, bench, calibrate) talks to, each on one `run_core`: the
`EngineHandle` (spawns workers, reads their batches), the `WatchEngine` (the server's signals only) and the
`PlaybackEngine` (a recorded session); beside them the server probe, the scrape and the worker pools.
"""
