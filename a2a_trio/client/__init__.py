"""A client for any A2A 1.0 agent, on trio and httpx.

::

    async with await A2AClient.connect("http://127.0.0.1:8000") as client:
        text = await answer_text(client.send("hello"))

It discovers the agent from ``{agent_url}/.well-known/agent-card.json``, picks
a binding from the card's ``supportedInterfaces`` (JSON-RPC first unless told
otherwise), sends ``A2A-Version: 1.0`` on every request, and raises the typed
protocol errors of :mod:`a2a_trio.protocol.errors`. Every send yields
StreamResponse events, blocking or streaming alike.
"""

from __future__ import annotations

from .agent import A2AClient
from .cards import fetch_jwks
from .texts import answer_text, text_of

__all__ = ["A2AClient", "answer_text", "fetch_jwks", "text_of"]
