"""``sbx mcp``: the worker's tools served to MCP clients (the official ``mcp`` SDK's server).

One MCP connection is one sbx session. Over stdio the session is the configured one
(``SBX_SESSION_ID``/``SBX_SESSION_TOKEN`` or config.yaml); over streamable HTTP each
request names its session in its ``Authorization`` header
(:mod:`worker.mcp_server.identity`). Every call goes to the workers through
:class:`~worker.client.SandboxClient`; a tool's result is exactly its tool-result JSON.

This is the MCP *server* side; the MCP servers whose tools the worker aggregates are
reached by the client side in ``registry/mcp*.py``.

Modules: ``identity`` (who is calling), ``sessions`` (a client per session), ``tools``
(definitions and results), ``server`` (the SDK server and its handlers), ``malformed``
(answers to stdio lines that are no message), ``http`` (the streamable HTTP app on
loopback).
"""
