"""Face process: the decisions, each a pure function or small state machine over the figures the
aggregation hands it: the auto ramp's next step, the guard that stops a load every request would fail, and
the checks that say a level is not what was asked. Whether the client is the limit is judged in
`tui.engine.aggregate.saturation`, which the store feeds every batch."""
