"""The seam: each module corrects a2a-sdk, Starlette, uvicorn, aiosqlite or apcore for our
agent only. ``README.md`` here is the table of corrections: what, why, and the tripwire test.
"""
