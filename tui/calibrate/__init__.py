"""`tokentop calibrate`: how many streams this machine can time accurately, measured against the truth.

A load generator that cannot keep up stamps chunks late and reports the server as slower than it is. Here a
paced local server (`tui.sim.paced`: every stream one token per ``1 / token_rate`` s on its own timeline, each
chunk stamped with `time.perf_counter_ns()` just before its socket write) streams to the real engine
(`EngineHandle`, worker processes and all) at increasing stream counts. The requests log and the server's
truth log are joined on the ``x-tokentop-request-id`` header, and for every chunk after the first:

    client-added ITL error = (client gap between this chunk and the last) - (server gap between their writes)

Its median is the bias the client adds to ITL, its p99 (of the absolute value) the spread. A level is
*accurate* when p99 <= the budget (``--p99-budget-ms``, 3 by default), the median is within 0.1 ms and no
request failed. The engine's own self-diagnosis (event-loop lag p99, CPU share, the "saturated" flag) is shown
beside it, so one can see how well the cheap in-process signal predicts the measured error.

Streams are offered open-loop at a constant rate of ``streams / request duration``, so exactly ``streams``
are in flight in steady state, their starts spread evenly (a closed loop started all at once would start and
end every request in the same few milliseconds, forever: a herd that measures nothing but itself).
Levels double (25, 50, 100, ...) up to ``--max-streams`` until one fails, then two bisection steps narrow
the answer; each level takes about ``--step-duration`` + 5 s. The run is bounded: at most 12 levels.
"""
