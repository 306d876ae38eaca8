"""The seam: every correction of a2a-sdk, Starlette, uvicorn or sse-starlette, one file
each. Each file's docstring names the upstream behaviour it answers, and a test under
``tests/upstream/`` fails the day that behaviour changes."""
