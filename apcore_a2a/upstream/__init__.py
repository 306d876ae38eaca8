"""Corrections of upstream libraries (a2a-sdk, Starlette), one file per correction.

Each file's docstring names the upstream behaviour or spec section it answers and the test
that fails the day upstream changes, so the correction can go. Only here
may a private attribute of an upstream library be read or written.

* :mod:`.parsed_body` -- the SDK's JSON-RPC route parses the body itself; it is handed
  the body the request guard already parsed (off the event loop when large).
* :mod:`.rest03_streams` -- the SDK's 0.3 REST streams report request errors after the
  ``200``; ours answer them before the stream starts.
* :mod:`.rest03_files` -- the SDK's 0.3 REST routes base64 ``fileWithBytes`` twice.
"""
