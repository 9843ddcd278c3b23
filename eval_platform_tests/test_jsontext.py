"""The hot path's JSON (`jsontext`): what Python's json reads and writes, at orjson's speed, with json's reading of
what orjson refuses; and cache entries that come back exactly as they were put."""

from __future__ import annotations

import json
import math
import random
import struct

import pytest

from eval_platform import jsontext
from eval_platform.llm.cache import ModelCache

# Texts both read alike, and texts only Python's json reads (NaN, infinities, a number past a double, a lone
# surrogate): `loads` must give what json gives for every one.
TEXTS = [
    '{"choices": [{"message": {"content": "{\\"score\\": 4}"}}], "usage": {"prompt_tokens": 12}}',
    '{"a": 1, "a": 2}',
    '{"reasoning": "caf\\u00e9 \u00e9\u2028\u4e2d", "score": -0.0}',
    '[1e-400, 1E5, 0.1, 17, -3, true, false, null, ""]',
    '{"score": NaN}',
    '{"score": Infinity, "other": -Infinity}',
    "1e400",
    '"\\ud800 lone surrogate"',
    '{"deep": ' * 40 + "1" + "}" * 40,
]


@pytest.mark.parametrize("text", TEXTS)
def test_loads_reads_what_json_reads(text):
    expected = json.loads(text)
    for data in (text, text.encode()):
        got = jsontext.loads(data)
        assert json.dumps(got) == json.dumps(expected)  # NaN == NaN only as text


@pytest.mark.parametrize("text", ['{"score": 4', "", "{'score': 4}", '{"score": 4} trailing', "\ufeff{}"])
def test_loads_refuses_what_json_refuses_with_its_error(text):
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        jsontext.loads(text)


def test_loads_reads_every_float_as_json_does():
    rng = random.Random(7)
    for _ in range(20_000):
        x = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
        if not math.isfinite(x):
            continue
        for text in (repr(x), f"{x:.17e}", f"{x:.6g}"):
            assert jsontext.loads(text) == json.loads(text), text


def test_dumps_writes_what_json_reads_back_as_the_same_values():
    values = [
        {"content": 'caf\u00e9 \u2028 \u4e2d \x00 "quoted" \\', "prompt_tokens": 2**63 - 1, "cost_usd": 0.1 + 0.2},
        {"content": "\ud800 a lone surrogate", "cost_usd": 1e-300},  # orjson refuses it: json writes it
        {"tokens": 2**70},  # past 64 bits: json writes it
        [None, True, False, [], {}, -0.0, 5e-324],
    ]
    for value in values:
        assert json.loads(jsontext.dumps(value)) == value
    # JSON has no NaN or infinity: written as null (Python's json would write NaN, which only Python reads)
    assert json.loads(jsontext.dumps({"cost_usd": math.nan, "x": math.inf})) == {"cost_usd": None, "x": None}


def test_cache_entries_come_back_from_the_file_exactly_as_they_were_put(tmp_path):
    entries = {
        "a" * 64: {"content": 'caf\u00e9 \u2028 \u4e2d {"score": 4}', "cost_usd": 0.1 + 0.2, "prompt_tokens": 240},
        "b" * 64: {"content": "\ud800 lone surrogate", "cost_usd": 1.2345678901234567e-7, "completion_tokens": 0},
        "c" * 64: {"content": "", "cost_usd": None, "provider_model": "m\u00fcnchen", "cached_prompt_tokens": 2**62},
    }
    cache = ModelCache(tmp_path)
    for key, entry in entries.items():
        cache.put(key, entry)
    cache.flush()
    fresh = ModelCache(tmp_path)  # another process's view: read from the file, not the writer's memory
    assert {key: fresh.get(key) for key in entries} == entries
