"""Random identifiers: letters and digits only, every one of the 62 drawn, the length asked."""

from __future__ import annotations

import collections

from proxy.base.ids import ALPHABET, random_alnum


def test_length_and_alphabet():
    for n in (0, 1, 9, 24, 100):
        value = random_alnum(n)
        assert len(value) == n
        assert set(value) <= set(ALPHABET)


def test_roughly_uniform():
    counts = collections.Counter("".join(random_alnum(24) for _ in range(5000)))
    assert set(counts) == set(ALPHABET)
    expected = 5000 * 24 / len(ALPHABET)  # about 1935 each; ±25% is > 10 standard deviations
    assert all(0.75 * expected < c < 1.25 * expected for c in counts.values())
