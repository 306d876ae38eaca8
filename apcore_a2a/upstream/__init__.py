"""The seam: every correction of a2a-sdk, Starlette, uvicorn, sse-starlette, aiosqlite, apcore.

One file per correction; each names the spec section or upstream behaviour it answers,
and ``tests/upstream/`` has a test per file that fails the day upstream changes that
behaviour, so the correction can be deleted then. Outside this package no module reads
or writes a private name of those six packages (``tests/upstream/test_seam.py``). The
table of corrections is in ``docs/architecture.md`` (The seam).
"""
