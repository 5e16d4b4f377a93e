"""A simulated OpenAI-compatible streaming server with a continuous-batching performance model.

Never imports textual, rich or plotext (a test enforces it).
"""
