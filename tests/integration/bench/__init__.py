"""Integration tests of the headless face, `tokentop bench`, against the simulator."""
