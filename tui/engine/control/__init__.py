"""Face process: the decisions, each a pure function or small state machine over the figures the
aggregation hands it: the auto ramp's next step, the guard that stops a load every request would fail, and
whether (and why) the client itself is the limit, and the checks that say a level is not what was asked."""
