import pytest

from copilot.llm import NoJSONObject, extract_json_object


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"valid": true, "confidence": 0.8}', {"valid": True, "confidence": 0.8}),
        ('Sure! Here it is:\n```json\n{"a": 1}\n```\nHope it helps.', {"a": 1}),
        ("The verdict: {'valid': True, 'thought': None}", {"valid": True, "thought": None}),
        ('{"a": [1, 2,], "b": "x",}', {"a": [1, 2], "b": "x"}),
        ('noise {"text": "a } brace inside", "n": 2} more', {"text": "a } brace inside", "n": 2}),
        ('{"outer": {"inner": 1}}', {"outer": {"inner": 1}}),
        ('{"valid": true, "confidence": 0.7, "thought": "cut off', {"valid": True, "confidence": 0.7,
                                                                   "thought": "cut off"}),
        ('{bad} then {"ok": 1}', {"ok": 1}),
    ],
)
def test_extracts(reply: str, expected: dict) -> None:
    assert extract_json_object(reply) == expected


@pytest.mark.parametrize("reply", ["", "   ", "no json at all", "[1, 2, 3]", "{not: valid: json}"])
def test_refuses(reply: str) -> None:
    with pytest.raises(NoJSONObject):
        extract_json_object(reply)
