"""The answer side: what happens to an answer on its way out (error scrubbing, SSE event
ids and ``Last-Event-ID`` replay, cancel-on-drop)."""
