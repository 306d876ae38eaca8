"""Corrections of a2a-sdk, Starlette, uvicorn and sse-starlette (filled below)."""
