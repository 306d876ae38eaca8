"""Pure adapters: schema facts, parts in/out, error mapping, sanitizing, settings."""

from __future__ import annotations

import base64

import pytest
from a2a.types import Part
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict

from apcore_a2a.adapters.errors import clean_for_log, map_error, sanitize
from apcore_a2a.adapters.parts import input_from_parts, output_to_parts
from apcore_a2a.adapters.schema import inline_refs, schema_facts
from apcore_a2a.settings import Settings, SettingsError

NESTED = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
        "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
    },
    "required": ["count"],
    "$defs": {"Item": {"type": "object", "properties": {"qty": {"type": "integer"}}}},
}


def data(value: object) -> Part:
    part = Part()
    if isinstance(value, dict):
        part.data.struct_value.update(value)
    else:
        part.data.list_value.extend(value)  # type: ignore[arg-type]
    return part


def test_inline_refs_and_cycles() -> None:
    inlined = inline_refs(NESTED)
    assert "$defs" not in inlined
    assert inlined["properties"]["items"]["items"]["properties"]["qty"] == {"type": "integer"}
    cyclic = {
        "$defs": {"N": {"properties": {"next": {"$ref": "#/$defs/N"}}}},
        "properties": {"root": {"$ref": "#/$defs/N"}},
    }
    out = inline_refs(cyclic)
    assert "recursive" in out["properties"]["root"]["properties"]["next"]["description"]


def test_integer_coercion_follows_schema() -> None:
    facts = schema_facts(NESTED)
    result = input_from_parts(
        [data({"count": 2, "ratio": 2, "items": [{"qty": 3}], "maybe": 4})], facts
    )
    assert result == {"count": 2, "ratio": 2.0, "items": [{"qty": 3}], "maybe": 4}
    assert type(result["count"]) is int and type(result["items"][0]["qty"]) is int
    assert type(result["ratio"]) is float
    # a non-integral value is left alone for apcore to reject
    assert input_from_parts([data({"count": 2.5})], facts)["count"] == 2.5


def test_integers_below_a_recursive_ref() -> None:
    tree = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "weight": {"type": "number"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
            }
        },
        "properties": {"root": {"$ref": "#/$defs/Node"}},
    }
    facts = schema_facts(tree)
    deep: dict[str, object] = {"value": 3, "weight": 1}
    for level in (2, 1):
        deep = {"value": level, "weight": 1, "children": [deep]}
    result = input_from_parts([data({"root": deep})], facts)
    node = result["root"]
    while True:
        assert type(node["value"]) is int and type(node["weight"]) is float
        if not node.get("children"):
            break
        node = node["children"][0]
    assert node["value"] == 3


def test_text_part_rules() -> None:
    one_string = schema_facts({"properties": {"text": {"type": "string"}}, "required": ["text"]})
    assert input_from_parts([Part(text="hi")], one_string) == {"text": "hi"}
    assert input_from_parts([Part(text='{"text": "json"}')], one_string) == {"text": "json"}
    numbers = schema_facts({"properties": {"a": {"type": "integer"}}, "required": ["a"]})
    assert input_from_parts([Part(text=' {"a": 1} ')], numbers) == {"a": 1}
    with pytest.raises(InvalidParamsError, match=r"\{a: integer\}"):
        input_from_parts([Part(text="one")], numbers)


def test_data_parts_merge_and_conflict() -> None:
    facts = schema_facts({"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}})
    assert input_from_parts([data({"a": 1}), data({"b": 2})], facts) == {"a": 1, "b": 2}
    with pytest.raises(InvalidParamsError, match="'a'"):
        input_from_parts([data({"a": 1}), data({"a": 2})], facts)


def test_file_parts_fill_binary_properties() -> None:
    facts = schema_facts(
        {
            "properties": {
                "doc": {"type": "object", "contentMediaType": "application/pdf"},
                "blob": {"type": "string", "contentEncoding": "base64"},
            }
        }
    )
    pdf = Part(raw=b"%PDF-1.4 data", filename="a.pdf", media_type="application/pdf")
    url = Part(url="https://example.com/x.bin")
    result = input_from_parts([pdf, url], facts)
    assert result["doc"] == {
        "bytes": base64.b64encode(b"%PDF-1.4 data").decode(),
        "name": "a.pdf",
        "mimeType": "application/pdf",
    }
    assert result["blob"] == "https://example.com/x.bin"
    optional = schema_facts(
        {"properties": {"f": {"anyOf": [{"type": "string", "format": "binary"}, {"type": "null"}]}}}
    )
    assert input_from_parts([Part(raw=b"hi")], optional) == {"f": "aGk="}


def test_output_parts() -> None:
    assert output_to_parts(None) == []
    assert [p.text for p in output_to_parts("hi")] == ["hi"]
    assert [p.text for p in output_to_parts({"result": "hi"}, wrapped_result=True)] == ["hi"]
    assert MessageToDict(output_to_parts([1, 2])[0]) == {"data": [1.0, 2.0]}
    assert MessageToDict(output_to_parts(True)[0]) == {"data": True}
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
    parts = output_to_parts({"image": png, "caption": "x"})
    assert MessageToDict(parts[0]) == {"data": {"caption": "x"}}
    assert parts[1].media_type == "image/png" and parts[1].filename == "image"
    import datetime

    when = output_to_parts({"at": datetime.date(2026, 1, 2)})
    assert MessageToDict(when[0]) == {"data": {"at": "2026-01-02"}}


def test_sanitize_and_log_cleaning() -> None:
    text = 'boom at /srv/app/secret/mod.py line 4\nTraceback (most recent call last):\n  File "x"'
    clean = sanitize(text)
    assert "/srv" not in clean and "Traceback" not in clean and "mod.py" not in clean
    assert len(sanitize("x" * 2000)) == 500
    logged = clean_for_log("a\x00b\x1b[31mc" + "y" * 2000)
    assert "\x00" not in logged and "\x1b" not in logged and len(logged) < 1100


def test_unknown_exception_maps_to_internal_error() -> None:
    mapped = map_error(RuntimeError("/etc/passwd exploded"))
    assert mapped.outcome == "failed"
    assert mapped.message == "Internal error"
    assert mapped.type == "InternalError"


def test_settings_precedence_and_types() -> None:
    env = {"A2A_PORT": "9001", "A2A_HOST": "0.0.0.0", "A2A_CLUSTER": "yes"}
    s = Settings.resolve({"port": 9002}, environ=env)
    assert (s.port, s.host, s.cluster) == (9002, "0.0.0.0", True)
    assert Settings.resolve({}, environ=env).port == 9001
    assert Settings.resolve({}, environ={}).port == 8000
    assert s.public_url() == "http://127.0.0.1:9002"
    with pytest.raises(SettingsError, match="A2A_PORT"):
        Settings.resolve({}, environ={"A2A_PORT": "eighty"})
    with pytest.raises(SettingsError, match=r"^unknown setting 'nope'$"):
        Settings.resolve({"nope": 1}, environ={})
    # serve(registry, extensions_dir=...) is refused, not ignored, with the right name
    with pytest.raises(SettingsError, match=r"'extensions_dir'; did you mean 'extensions_dirs'"):
        Settings.resolve({"extensions_dir": "ext"}, environ={})
    masked = Settings.resolve({"auth_key": "s3cret", "api_keys": ["k1"]}, environ={}).masked()
    assert masked["auth_key"] == "***" and masked["api_keys"] == ["***"]


def test_card_publishes_whole_numbers_as_integers() -> None:
    import json

    from apcore_a2a.adapters.agent_card import AgentCardBuilder, Binding, serialize_card
    from apcore_a2a.adapters.skills import skill_from_descriptor

    class Descriptor:
        module_id = "list.take"
        description = "Take items"
        input_schema = {
            "type": "object",
            "properties": {"items": {"type": "array", "maxItems": 8}, "ratio": {"default": 0.5}},
        }
        output_schema = {"type": "object"}

    spec = skill_from_descriptor(Descriptor())
    assert spec is not None
    card = AgentCardBuilder(
        name="n", description=None, version="1", bindings=[Binding("JSONRPC", "http://x/")]
    ).build([spec])
    document = serialize_card(card)
    for body in (document.body, document.legacy_body):
        params = json.loads(body)["capabilities"]["extensions"][0]["params"]
        schema = params["skills"]["list.take"]["inputSchema"]
        assert schema["properties"]["items"]["maxItems"] == 8
        assert type(schema["properties"]["items"]["maxItems"]) is int
        assert schema["properties"]["ratio"]["default"] == 0.5
    assert json.loads(document.body)["description"] == "apcore agent with 1 skills"
