"""The seam: every correction of a2a-sdk, Starlette, uvicorn and sse-starlette.

One file per correction; each names the spec section or upstream behaviour it answers,
and ``tests/upstream/`` has a test per file that fails the day upstream changes that
behaviour, so the correction can be deleted then. Outside this package no module reads
or writes a private name of those four packages (``tests/upstream/test_seam.py``).

* ``error_answers``: a2a-sdk 1.3 answers six errors with other statuses than spec §5.4,
  and keeps its error answers in process-wide tables keyed by exact type; ours and the
  spec's are answered on our routes (request guard) and servicers only.
* ``file_bytes``: a2a-sdk 1.3's 0.3 proto conversions encode and decode inline file bytes
  twice (0.3 proto ``FilePart.file_with_bytes``); the spec's single encoding on REST/gRPC 0.3.
* ``grpc_version``: a2a-sdk 1.3's gRPC servicers ignore ``a2a-version`` (spec §3.6.2,
  GRPC-ERR-002).
* ``rest_media_type``: a2a-sdk 1.3 answers REST with ``application/a2a+json``; the
  HTTP+JSON binding says ``application/json`` (spec §11.1, HTTP_JSON-SVC-001).
* ``rest03_push_routes``: a2a-sdk 1.3's 0.3 REST push routes read the spec's body as the
  whole RPC request and have no ``DELETE`` (0.3 proto ``google.api.http``).
* ``uvicorn_signals``: uvicorn ends a graceful stop with the signal it stopped on (-15);
  ``serve()`` exits 0.
* ``parsed_body``: the SDK's JSON-RPC route parses the body itself; it is handed
  the body the request guard already parsed (off the event loop when large).
* ``rest03_streams``: the SDK's 0.3 REST streams report request errors after the
  ``200``; ours answer them before the stream starts.
* ``sql_task_rows``: a2a-sdk 1.3 builds a task's ``tasks`` row only inside ``save``
  (private ``_to_orm``); the group-commit writers need the row itself.
* ``task_version``: a2a-sdk 1.3's ``TaskVersion`` has no accessor for the number it wraps;
  the event log's positions need it.
* ``rest03_files``: the SDK's 0.3 REST routes base64 ``fileWithBytes`` twice.
"""
