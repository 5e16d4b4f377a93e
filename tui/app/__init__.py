"""The live Textual app: renders engine snapshots, turns keys into load targets."""
