"""mmbal: load balancing for multimodal LLM training, from Python.

The C++ library (header-only, ``include/mmbal``) through the pybind11 module ``mmbal._core``:
NumPy arrays in and out, the GIL released while C++ computes, every bad input raised as
:class:`mmbal.Error` (a ``ValueError``) with the library's message naming the argument and value.

Main entry points:

- :func:`balance` -> :class:`Assignment`: place items on ranks (same algorithm and cost specs
  as the ``mmbal`` tool);
- :func:`alltoall_plan` -> :class:`AllToAllPlan`: one rank's share of the all-to-all that moves
  the items from where they are to an assignment (split sizes, pack/unpack index arrays);
- :func:`balanced_partitions`: drop-in for verl's ``get_seqlen_balanced_partitions``.

See docs/DESIGN.md for the algorithms and the papers they come from.
"""

from __future__ import annotations

import numpy as _np

from . import _core
from ._core import AllToAllPlan, Error

__all__ = [
    "Error",
    "Assignment",
    "AllToAllPlan",
    "balance",
    "alltoall_plan",
]

_CONSTRAINTS = ("count_cap", "capacity", "groups", "bytes", "ranks_per_node")


class Assignment:
    """Where every item goes: ``rank[i]`` and ``slot[i]`` (its position on that rank).

    Attributes:
        rank: int32 array, one entry per item.
        slot: int32 array, one entry per item; on every rank the slots are 0..k-1, each once.
        ranks: number of ranks (int).
        loads: float64 array, the cost of every rank (items folded in slot order) under
            ``cost``; ``None`` for an assignment built by hand (see :meth:`loads_for`).
        lower_bound: a lower bound on the best possible maximum load (``max(sum/ranks,
            largest item)``, or the equal-count bound when ``count_cap="equal"``); ``None`` for
            an assignment built by hand.
        cost: the cost spec ``loads`` were computed under (``None`` when built by hand).

    ``Assignment(rank, slot, ranks)`` builds one from your own placement (validated: raises
    :class:`Error` unless it is one). Complexity of the constructor: O(n + ranks).
    """

    __slots__ = ("rank", "slot", "ranks", "loads", "lower_bound", "cost")

    def __init__(self, rank, slot, ranks, *, loads=None, lower_bound=None, cost=None, _trusted=False):
        if _trusted:
            self.rank, self.slot, self.ranks = rank, slot, ranks
        else:
            _core.validate_assignment(rank, slot, ranks)
            self.rank = _np.ascontiguousarray(rank, dtype=_np.int32)
            self.slot = _np.ascontiguousarray(slot, dtype=_np.int32)
            self.ranks = int(ranks)
        self.loads = loads
        self.lower_bound = lower_bound
        self.cost = cost

    def __len__(self) -> int:
        return len(self.rank)

    def validate(self) -> None:
        """Raises :class:`Error` unless every rank is < ``ranks`` and every rank's slots are
        exactly 0..k-1, each used once (every item placed exactly once). O(n + ranks)."""
        _core.validate_assignment(self.rank, self.slot, self.ranks)

    def loads_for(self, lengths, cost: str = "tokens"):
        """The float64 per-rank cost of this assignment for items of ``lengths`` under cost
        spec ``cost`` (items folded in slot order). O(n + ranks)."""
        return _core.assignment_loads(self.rank, self.slot, self.ranks, lengths, cost)

    def items_by_rank(self) -> list:
        """Per rank, the item ids in slot order (a list of int64 arrays). O(n log n)."""
        order = _np.lexsort((self.slot, self.rank))
        counts = _np.bincount(self.rank, minlength=self.ranks)
        return _np.split(order.astype(_np.int64), _np.cumsum(counts)[:-1])

    def __repr__(self) -> str:
        return f"Assignment(items={len(self.rank)}, ranks={self.ranks}, cost={self.cost!r})"


def balance(lengths, ranks, *, algorithm="lpt", cost="tokens", origin=None, **constraints) -> Assignment:
    """Places items of the given lengths on ``ranks`` ranks, balancing their cost.

    Args:
        lengths: per-item length in tokens (1-D integers, each in [0, 2**32 - 1]; list, NumPy
            array or CPU torch tensor; contiguous int32 is read in place).
        ranks: number of ranks (int >= 1).
        algorithm: spec as the ``mmbal`` tool takes it: ``lpt`` (default), ``greedy-ascending``,
            ``padded``, ``tolerance:v=..``, ``conv``, ``kk``, ``migrate:eps=..``, each optionally
            followed by ``+refine``.
        cost: cost spec: ``tokens`` (default), ``padded``, ``attention:alpha=..,beta=..``,
            ``padded-attention:..``, ``conv:lambda=..``, ``fitted:x=..,y=..,z=..``, ``flops:..``.
        origin: the rank holding each item now (required by ``migrate``; raises otherwise).
        **constraints: ``count_cap`` (``"equal"`` or a max items per rank), ``capacity`` (hard
            per-rank cost cap), ``groups`` (group id per item; equal ids share a rank),
            ``bytes`` (bytes per item, used by ``migrate``), ``ranks_per_node`` (``migrate``).

    Returns:
        An :class:`Assignment` with ``loads`` under ``cost`` and ``lower_bound``. No items
        gives an empty assignment. Deterministic: the same arguments give the same result on
        every rank.

    Raises:
        Error: bad lengths (dtype, shape, negative or > 2**32 - 1), ranks <= 0, a spec that
            does not parse, an unknown constraint, an infeasible or unsupported constraint.

    Complexity: that of the algorithm (``lpt``: O(n log n)); the GIL is released meanwhile.
    """
    for key in constraints:
        if key not in _CONSTRAINTS:
            raise Error(f"balance: unknown constraint {key}= (expected one of {', '.join(_CONSTRAINTS)})")
    if not isinstance(algorithm, str):
        raise Error(f"balance: algorithm must be a spec string, got {algorithm!r}")
    if not isinstance(cost, str):
        raise Error(f"balance: cost must be a spec string, got {cost!r}")
    get = constraints.get
    rank, slot, loads, lower = _core.balance(
        lengths, ranks, algorithm, cost, origin, get("count_cap"), get("capacity"), get("groups"), get("bytes"),
        get("ranks_per_node"))
    return Assignment(rank, slot, int(ranks), loads=loads, lower_bound=lower, cost=cost, _trusted=True)


def alltoall_plan(source_rank, target, sizes, rank) -> AllToAllPlan:
    """One rank's share of the all-to-all that moves every item to ``target``.

    Args:
        source_rank: ``source_rank[i]`` is the rank holding item i now; its source slot is its
            position among that rank's items in ascending i.
        target: an :class:`Assignment` (where every item goes).
        sizes: ``sizes[i]`` is item i's size in rows (integers >= 0).
        rank: the rank this plan is for (0 <= rank < target.ranks).

    Returns:
        An :class:`AllToAllPlan`: ``send_splits``/``recv_splits`` for ``all_to_all_single``,
        ``pack_index`` (``send = x[pack_index]``), ``unpack_index`` (``out =
        recv[unpack_index]``), ``fingerprint`` (equal on every rank) and ``inverse()``.

    Raises:
        Error: sizes or source_rank whose length does not match the target, a rank out of
        range, negative sizes, an invalid target.

    Complexity: O(n + ranks + rows of this rank); every rank builds only its own plan.
    """
    if not isinstance(target, Assignment):
        raise Error(f"alltoall_plan: target must be an mmbal.Assignment, got {type(target).__name__}")
    return _core.alltoall_plan(source_rank, target.rank, target.slot, target.ranks, sizes, rank)
