"""nodeorder's one-row score functions (used when a placement changed a few rows) give
exactly the vectorised results."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tidesched.plugins.nodeorder import _balanced, _balanced_row, _least, _least_row, _most, _most_row

amount = st.one_of(st.just(0.0), st.floats(1e-3, 1e12, allow_nan=False), st.integers(0, 10**6).map(float))


@given(st.integers(2, 3).flatmap(lambda d: st.tuples(st.lists(amount, min_size=d, max_size=d),
                                                     st.lists(amount, min_size=d, max_size=d))))
def test_row_scores_equal_vector_scores(pair) -> None:
    alloc, req = pair
    a, r = np.array([alloc]), np.array([req])
    assert _balanced_row(alloc, req) == _balanced(a, r)[0]
    assert _least_row(alloc[:2], req[:2]) == _least(a[:, :2], r[:, :2])[0]
    assert _most_row(alloc[:2], req[:2]) == _most(a[:, :2], r[:, :2])[0]


@given(st.lists(amount, min_size=4, max_size=4))
def test_unrolled_two_dimension_scores_equal_row_scores(v) -> None:
    """The cpu+memory forms used per placement against the general row functions."""
    from tidesched.plugins.nodeorder import _balanced2, _least2, _most2

    a0, a1, r0, r1 = v
    assert _least2(a0, a1, r0, r1) == _least_row([a0, a1], [r0, r1])
    assert _most2(a0, a1, r0, r1) == _most_row([a0, a1], [r0, r1])
    assert _balanced2(a0, a1, r0, r1) == _balanced_row([a0, a1], [r0, r1])
