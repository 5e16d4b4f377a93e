"""The OpenAI Responses and Anthropic Messages answers: the same tokens in their named events.

Responses: ``response.created``, then ``response.reasoning_text.delta`` / ``response.output_text.delta``,
then ``response.completed`` with ``usage.input_tokens``/``output_tokens`` (``response.incomplete``, reason
``max_output_tokens``, when the cap cut it, as OpenAI does). Messages: ``message_start`` with the input usage
(cache reads apart, as Anthropic counts them), a ``thinking`` block then a ``text`` block of
``content_block_delta`` events, ``message_delta`` with the stop reason and the output usage, ``message_stop``.
Neither ends with ``[DONE]``. The deltas are templates, so the per-token hot path is as cheap as chat's.
"""

from __future__ import annotations

from typing import Any

import orjson

from tui.sim.openai_api import PLACEHOLDER, split_template

_END_OF_BODY = b"0\r\n\r\n"


def event_frame(name: str, obj: dict[str, Any]) -> bytes:
    """One named SSE event as one HTTP chunk."""
    payload = b"event: %s\ndata: %s\n\n" % (name.encode(), orjson.dumps(obj))
    return b"%x\r\n%b\r\n" % (len(payload), payload)


class Usage:
    """One request's counts, as each API reports them."""

    __slots__ = ("cached", "completion", "prompt", "reasoning")

    def __init__(self, prompt: int, completion: int, cached: int | None, reasoning: int) -> None:
        self.prompt, self.completion, self.cached, self.reasoning = prompt, completion, cached, reasoning

    def responses(self) -> dict[str, Any]:
        return {
            "input_tokens": self.prompt,
            "input_tokens_details": {"cached_tokens": self.cached or 0},
            "output_tokens": self.completion,
            "output_tokens_details": {"reasoning_tokens": self.reasoning},
            "total_tokens": self.prompt + self.completion,
        }

    def messages(self) -> dict[str, Any]:
        usage: dict[str, Any] = {"input_tokens": self.prompt - (self.cached or 0)}
        if self.cached is not None:
            usage["cache_read_input_tokens"] = self.cached
        usage["output_tokens"] = self.completion
        return usage


class EventStream:
    """The frames of one Responses or Messages answer."""

    __slots__ = ("api", "created", "model", "reasoning", "request_id")

    def __init__(self, api: str, request_id: str, model: str, created: int, *, reasoning: bool) -> None:
        self.api, self.request_id, self.model, self.created = api, request_id, model, created
        self.reasoning = reasoning
        """The answer opens with reasoning (a thinking block before the text one, in Messages)."""

    def templates(self) -> tuple[bytes, bytes, bytes, bytes]:
        """The answer's and the reasoning's delta events split around their text."""
        if self.api == "responses":
            answer: dict[str, Any] = {
                "type": "response.output_text.delta",
                "item_id": f"msg_{self.request_id}",
            }
            answer.update(output_index=int(self.reasoning), content_index=0, delta=PLACEHOLDER)
            thought: dict[str, Any] = {
                "type": "response.reasoning_text.delta",
                "item_id": f"rs_{self.request_id}",
            }
            thought.update(output_index=0, content_index=0, delta=PLACEHOLDER)
            return (
                *split_template(answer, "response.output_text.delta"),
                *split_template(thought, "response.reasoning_text.delta"),
            )
        text: dict[str, Any] = {"type": "content_block_delta", "index": int(self.reasoning)}
        text["delta"] = {"type": "text_delta", "text": PLACEHOLDER}
        thinking: dict[str, Any] = {"type": "content_block_delta", "index": 0}
        thinking["delta"] = {"type": "thinking_delta", "thinking": PLACEHOLDER}
        return (
            *split_template(text, "content_block_delta"),
            *split_template(thinking, "content_block_delta"),
        )

    def _response(self, status: str, usage: Usage | None, output: list[Any]) -> dict[str, Any]:
        return {
            "id": self.request_id,
            "object": "response",
            "created_at": self.created,
            "model": self.model,
            "status": status,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "output": output,
            "usage": usage.responses() if usage is not None else None,
        }

    def _message(self, usage: dict[str, Any], content: list[Any], stop: str | None) -> dict[str, Any]:
        return {
            "id": self.request_id,
            "type": "message",
            "role": "assistant",
            "content": content,
            "model": self.model,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }

    def head(self, usage: Usage) -> bytes:
        """What goes out with the first delta."""
        if self.api == "responses":
            return event_frame(
                "response.created",
                {"type": "response.created", "response": self._response("in_progress", None, [])},
            )
        start = self._message({**usage.messages(), "output_tokens": 0}, [], None)
        block = {"type": "thinking", "thinking": ""} if self.reasoning else {"type": "text", "text": ""}
        return event_frame("message_start", {"type": "message_start", "message": start}) + event_frame(
            "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
        )

    def switch(self) -> bytes:
        """Between the reasoning and the answer (Messages closes the thinking block, opens the text one)."""
        if self.api == "responses":
            return b""
        return event_frame("content_block_stop", {"type": "content_block_stop", "index": 0}) + event_frame(
            "content_block_start",
            {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        )

    def tail(self, finish_reason: str, usage: Usage) -> bytes:
        """The events that end the answer, and the end of the chunked body."""
        if self.api == "responses":
            status = "incomplete" if finish_reason == "length" else "completed"
            kind = f"response.{status}"
            return (
                event_frame(kind, {"type": kind, "response": self._response(status, usage, [])})
                + _END_OF_BODY
            )
        stop = "max_tokens" if finish_reason == "length" else "end_turn"
        index = int(self.reasoning)
        return (
            event_frame("content_block_stop", {"type": "content_block_stop", "index": index})
            + event_frame(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": usage.completion},
                },
            )
            + event_frame("message_stop", {"type": "message_stop"})
            + _END_OF_BODY
        )

    def whole(self, text: str, thought: str, finish_reason: str, usage: Usage) -> bytes:
        """The unstreamed answer's body."""
        if self.api == "responses":
            status = "incomplete" if finish_reason == "length" else "completed"
            output: list[Any] = []
            if thought:
                reasoning = [{"type": "reasoning_text", "text": thought}]
                output.append({"type": "reasoning", "id": f"rs_{self.request_id}", "content": reasoning})
            part = {"type": "output_text", "text": text, "annotations": []}
            output.append(
                {"type": "message", "id": f"msg_{self.request_id}", "role": "assistant", "content": [part]}
            )
            return orjson.dumps(self._response(status, usage, output))
        content: list[Any] = [{"type": "thinking", "thinking": thought}] if thought else []
        content.append({"type": "text", "text": text})
        stop = "max_tokens" if finish_reason == "length" else "end_turn"
        return orjson.dumps(self._message(usage.messages(), content, stop))


def embeddings_body(model: str, prompt_tokens: int, seed: int) -> bytes:
    """An embeddings answer: one vector (its values from ``seed``) and the prompt's usage."""
    dims = 64
    vector = [((seed * 2654435761 + i * 40503) % 1000 - 500) / 4000.0 for i in range(dims)]
    return orjson.dumps(
        {
            "object": "list",
            "data": [{"object": "embedding", "index": 0, "embedding": vector}],
            "model": model,
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
        }
    )
