"""The engine's OpenAI-compatible HTTP server: `python -m engine serve --profile PROFILE.json`.

Server-only dependencies (fastapi, uvicorn, prometheus-client, jsonschema) are imported only
inside this package, so the engine core stays importable without them.
"""
