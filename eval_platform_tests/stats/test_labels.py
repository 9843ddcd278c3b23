"""Coding label and id columns to integers: sorted codes, codes by first appearance, first occurrences."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from eval_platform.stats._labels import encode, first_occurrences, group_codes


def _texts(seed: int, n: int = 500, distinct: int = 40) -> list[str | None]:
    rng = np.random.default_rng(seed)
    return [None if rng.random() < 0.1 else f"id-{x}" for x in rng.integers(0, distinct, n)]


@pytest.mark.parametrize("seed", range(10))
def test_text_codes_follow_the_sorted_values(seed):
    texts = _texts(seed)
    [codes], categories = encode(texts)
    assert categories.tolist() == sorted({t for t in texts if t is not None})
    assert [None if c < 0 else categories[c] for c in codes] == texts


@pytest.mark.parametrize("seed", range(10))
def test_group_codes_give_each_distinct_value_one_code_in_order_of_appearance(seed):
    texts = _texts(seed)
    codes, distinct = group_codes(texts)
    appearing = list(dict.fromkeys(t for t in texts if t is not None))
    assert distinct.to_list() == appearing
    assert [None if c < 0 else distinct[int(c)] for c in codes] == texts


def test_group_codes_of_numbers_and_of_nothing():
    codes, distinct = group_codes(np.array([3.0, np.nan, 1.0, 3.0]))
    assert codes.tolist() == [1, -1, 0, 1] and distinct.to_list() == [1.0, 3.0]
    codes, distinct = group_codes(pl.Series([None, None], dtype=pl.String))
    assert codes.tolist() == [-1, -1] and distinct.len() == 0


@pytest.mark.parametrize("bound", [None, 50])
def test_first_occurrences_mark_the_first_row_of_each_key(bound):
    keys = np.random.default_rng(0).integers(0, 50, 200)
    expected = [list(keys).index(k) == i for i, k in enumerate(keys)]
    assert first_occurrences(keys, bound).tolist() == expected
    assert first_occurrences(np.arange(50), bound).all()
