"""Face process: the `EngineHandle` (spawns workers, reads their batches), the server probe, results, the
auto-ramp policy. What a face (app, bench, calibrate) talks to.
"""
