"""The protobuf behaviour ``apcore_a2a/upstream/long_strings.py`` answers: ``ParseDict``
searches every string it sets with a regular expression (for unpaired surrogates), which
costs about 65 ms per MB. A failure here means it no longer does: delete that file.
What the seam does for a caller is tested through a real server in
``tests/reliability/test_body_shape.py``.
"""

from __future__ import annotations

import re
import sys
from types import FrameType
from typing import Any

from a2a.types import SendMessageRequest
from google.protobuf.json_format import ParseDict

from apcore_a2a.upstream.long_strings import LONG


def test_parse_dict_searches_each_string_with_a_regex() -> None:
    searched: list[int] = []

    def profile(_frame: FrameType, event: str, arg: Any) -> None:
        is_search = event == "c_call" and getattr(arg, "__name__", "") == "search"
        if is_search and isinstance(getattr(arg, "__self__", None), re.Pattern):
            searched.append(1)

    text = {"message": {"messageId": "m", "parts": [{"text": "x" * LONG}]}}
    sys.setprofile(profile)
    try:
        parsed = ParseDict(text, SendMessageRequest())
    finally:
        sys.setprofile(None)
    assert parsed.message.parts[0].text == "x" * LONG
    assert searched
