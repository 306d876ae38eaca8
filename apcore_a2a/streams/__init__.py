"""The answer side: what happens to an answer on its way out (error scrubbing, SSE event
ids and ``Last-Event-ID`` replay, cancel-on-drop)."""

from apcore_a2a.streams.answers import AnswerSide, cancel_on_drop

__all__ = ["AnswerSide", "cancel_on_drop"]
