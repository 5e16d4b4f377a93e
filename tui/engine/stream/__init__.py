"""Worker process, per request: SSE decoding, OpenAI request bodies and chunks, the streaming client.

Imported by the engine workers (and by the face only for the start-up probe); never imports the
aggregation side (`tui.engine.aggregate`, `tui.engine.host`).
"""
