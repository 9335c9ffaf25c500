"""A fake Anthropic Messages API on 127.0.0.1: ``POST /v1/messages`` streamed as named server-sent events
(``message_start``, ``content_block_delta``, ``message_delta``, ``message_stop``; ``error`` mid-stream)."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from .openai_server import FakeModelServer, Recorded, Reply

__all__ = ("FakeAnthropicServer", "Recorded", "Reply")

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


class FakeAnthropicServer(FakeModelServer):
    """Anthropic's streaming Messages endpoint."""

    routes = (("POST", "/v1/messages"),)

    @property
    def url(self) -> str:
        """The base URL to give the client."""
        return self.root

    def key_of(self, request: web.Request) -> str:
        # the API takes the key as x-api-key or, as this SDK generation sends it, a bearer token
        bearer = request.headers.get("Authorization", "").removeprefix("Bearer ")
        return request.headers.get("x-api-key") or bearer

    def auth_error(self, given: str) -> web.Response:
        body = {"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key {given}"}}
        return web.json_response(body, status=401)

    def error(self, reply: Reply) -> web.Response:
        kind = _ERROR_TYPES.get(reply.status, "api_error")
        body = {"type": "error", "error": {"type": kind, "message": reply.message}}
        return web.json_response(body, status=reply.status, headers=dict(reply.headers))

    async def stream(self, response: web.StreamResponse, reply: Reply, body: dict[str, Any]) -> None:
        async def send(event: str, data: dict[str, Any]) -> None:
            await response.write(f"event: {event}\ndata: {json.dumps({'type': event, **data})}\n\n".encode())

        input_tokens, output_tokens = reply.usage or (0, 0)
        message = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", ""),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {  # (input_tokens leaves out what the cache read, as the API reports it)
                "input_tokens": input_tokens - reply.cached,
                "cache_read_input_tokens": reply.cached,
                "output_tokens": 1,
            },
        }
        await send("message_start", {"message": message})
        block = 0
        if reply.reasoning:  # a thinking block first, as extended thinking streams it
            await send("content_block_start", {"index": 0, "content_block": {"type": "thinking", "thinking": ""}})
            for thought in reply.reasoning:
                await send(
                    "content_block_delta", {"index": 0, "delta": {"type": "thinking_delta", "thinking": thought}}
                )
            await send("content_block_delta", {"index": 0, "delta": {"type": "signature_delta", "signature": "c2ln"}})
            await send("content_block_stop", {"index": 0})
            block = 1
        await send("content_block_start", {"index": block, "content_block": {"type": "text", "text": ""}})
        await response.write(b'event: ping\ndata: {"type": "ping"}\n\n')
        for i, text in enumerate(reply.chunks):
            if reply.fail_after is not None and i == reply.fail_after:
                await send("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}})
                return
            await send("content_block_delta", {"index": block, "delta": {"type": "text_delta", "text": text}})
        await send("content_block_stop", {"index": block})
        await send(
            "message_delta",
            {"delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": output_tokens}},
        )
        await send("message_stop", {})
