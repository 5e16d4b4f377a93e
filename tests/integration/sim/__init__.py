"""Integration tests against the simulator on its command line."""
