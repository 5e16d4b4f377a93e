"""The UI-free core: load generation, SSE parsing, per-request records, metrics, snapshots.

Never imports textual, rich or plotext (a test enforces it).
"""
