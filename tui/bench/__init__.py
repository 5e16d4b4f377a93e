"""The headless face, `tokentop bench`: `run` drives the levels, `progress` the line on stderr, `table` what
is printed at the end."""
