"""mmbal: load balancing for multimodal LLM training, from Python.

The C++ library (header-only, ``include/mmbal``) through the pybind11 module ``mmbal._core``:
NumPy arrays in and out, the GIL released while C++ computes, every bad input raised as
:class:`mmbal.Error` (a ``ValueError``) with the library's message naming the argument and value.

Main entry points:

- :func:`balance` -> :class:`Assignment`: place items on ranks (same algorithm and cost specs
  as the ``mmbal`` tool);
- :func:`alltoall_plan` -> :class:`AllToAllPlan`: one rank's share of the all-to-all that moves
  the items from where they are to an assignment (split sizes, pack/unpack index arrays);
- :func:`balanced_partitions`: drop-in for verl's ``get_seqlen_balanced_partitions``;
- :class:`Workload` + :class:`Orchestrator` -> :class:`Orchestration`: every encoder phase and
  the LLM phase of a step, with per-rank phase plans and composed encoder->LLM plans;
- :func:`isf` (OmniBal's balanced dynamic mini-batches), :func:`distribute_tokens`
  (context-parallel token distribution), :func:`bitfield_mask` / :class:`BitfieldMask`
  (Cornstarch's mask, exported as FlexAttention block-mask arrays).

Every count of ranks is at most :data:`max_ranks` (2**24): plans hold per-rank state, so a
larger count raises :class:`Error` instead of exhausting memory.

See docs/DESIGN.md for the algorithms and the papers they come from.
"""

from __future__ import annotations

import numpy as _np

from . import _core
from ._core import AllToAllPlan, BitfieldMask, Error, Workload, max_ranks

__all__ = [
    "Error",
    "max_ranks",
    "Assignment",
    "AllToAllPlan",
    "balance",
    "alltoall_plan",
    "balanced_partitions",
    "Workload",
    "Orchestrator",
    "Orchestration",
    "ISFResult",
    "isf",
    "distribute_tokens",
    "BitfieldMask",
    "bitfield_mask",
    "FitResult",
    "fit_cost",
    "OnlineFit",
    "should_balance",
    "pipeline_orders",
]

_CONSTRAINTS = ("count_cap", "capacity", "groups", "bytes", "ranks_per_node")


def _flag(value, name: str) -> bool:
    """A flag argument: Python's or NumPy's bool (a 0-d bool array or tensor too), or the int 0
    or 1 (a string such as "no" would count as true). One rule, in ``_core.as_flag``."""
    return _core.as_flag(value, name)


def _assignment_from_state(rank, slot, ranks, loads, lower_bound, cost) -> "Assignment":
    return Assignment(rank, slot, ranks, loads=loads, lower_bound=lower_bound, cost=cost)


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
            # Copies: an assignment must not change when the caller's arrays do afterwards.
            self.rank = _np.array(rank, dtype=_np.int32)
            self.slot = _np.array(slot, dtype=_np.int32)
            self.ranks = int(ranks)
        self.rank.setflags(write=False)  # validated once: in-place edits would bypass that
        self.slot.setflags(write=False)
        self.loads = loads
        self.lower_bound = lower_bound
        self.cost = cost

    def __len__(self) -> int:
        return len(self.rank)

    def __reduce__(self):
        # Through the constructor (validated, copied, read-only again): pickle and deepcopy
        # would otherwise restore writable arrays.
        return (_assignment_from_state, (self.rank, self.slot, self.ranks, self.loads, self.lower_bound, self.cost))

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


def balance(lengths, ranks, *, algorithm=None, cost="tokens", origin=None, **constraints) -> Assignment:
    """Places items of the given lengths on ``ranks`` ranks, balancing their cost.

    Args:
        lengths: per-item length in tokens (1-D integers, each in [0, 2**32 - 1]; list, NumPy
            array or CPU torch tensor; contiguous int32 is read in place).
        ranks: number of ranks (int, 1 <= ranks <= :data:`max_ranks`).
        algorithm: spec as the ``mmbal`` tool takes it: ``lpt``, ``greedy-ascending``,
            ``padded``, ``tolerance:v=..``, ``conv``, ``kk``, ``migrate:eps=..``, each optionally
            followed by ``+refine``. Default (``None``): the best-quality setting for the cost,
            ``padded`` for a padded cost and ``lpt+refine`` for any other (as the orchestrator's
            phases; ``lpt`` alone is faster: 5-112x fewer microseconds with 8 items per rank,
            1.4-2.4x with 60, for a maximum 1-6 % or 0.05-0.1 % higher).
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
        Error: bad lengths (dtype, shape, negative or > 2**32 - 1), ranks outside [1,
            max_ranks], a spec that does not parse, an unknown constraint, an infeasible or
            unsupported constraint.

    Complexity: that of the algorithm (``lpt``: O(n log n); ``refine``: bounded by its work
    budgets, O(n log n) per pass); the GIL is released meanwhile.
    """
    for key in constraints:
        if key not in _CONSTRAINTS:
            raise Error(f"balance: unknown constraint {key}= (expected one of {', '.join(_CONSTRAINTS)})")
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


def balanced_partitions(seqlen_list, k_partitions, equal_size):
    """Drop-in for verl's ``get_seqlen_balanced_partitions`` (same parameter names and meaning).

    Splits the items of ``seqlen_list`` (their workloads: a list of ints, a NumPy array or a
    1-D integer torch tensor; each in [0, 2**53]) into ``k_partitions`` non-empty partitions
    of item indices, each sorted ascending, balancing the partitions' sums. With
    ``equal_size`` every partition holds ``len(seqlen_list) // k_partitions`` items.

    Algorithm: Karmarkar-Karp largest differencing with verl's exact tie-breaks (so never less
    balanced than verl's result), then a local search between the heaviest and the lightest
    partition (moves, or swaps with ``equal_size``) that never raises the maximum nor lowers the
    minimum. Sums are exact (128-bit). The GIL is released meanwhile.

    Returns:
        ``list[list[int]]``: ``k_partitions`` lists of item indices.

    Raises:
        Error: fewer items than ``k_partitions``, ``equal_size`` with a length not divisible
        by ``k_partitions`` (where verl asserts), a negative or > 2**53 weight, k_partitions < 1 or above :data:`max_ranks`,
        a non-integer or non-1-D input.
    """
    return _core.balanced_partitions(seqlen_list, k_partitions, equal_size)


class Orchestration:
    """One training step's plans, from :meth:`Orchestrator.plan` (OrchMLLM's global orchestrator).

    Phases (:attr:`phases`): every encoder modality with at least one segment, in order of first
    appearance in the workload, then ``"llm"`` (always last).

    Items of a phase: for ``"llm"`` the samples (weight = the sample's total LLM tokens, its
    whole interleaved sequence); for an encoder phase that modality's segments in workload order
    (weight = encoder length). :meth:`items` says which sample/segment every item is.

    Layouts (what the plans' rows mean):

    - phase forward plan (:meth:`phase_plan`): input = this rank's items of the phase *now*
      (on every rank, its items in ascending item id: samples in sample order, segments in
      workload order); output = the items :meth:`target` puts on this rank, in target-slot order.
    - composed plan (:meth:`composed_plan`, encoder -> LLM): input = the encoder phase's output
      on this rank (the encoder phase's destination order, i.e. the output of
      ``phase_plan(modality, rank)``); output = the same segments on their sample's LLM rank,
      in *assembly order*: for the samples the LLM phase puts on this rank, in their LLM slot
      order, each sample's segments of this modality in sequence order. Interleave them with
      the text rows (which travel with the sample in the ``"llm"`` phase) by walking each
      sample's segment list. Backward: ``plan.inverse()``.

    Sizes: ``sizes[i]`` = rows of item i (default: the orchestrator's item bytes, i.e. tokens x
    ``bytes_per_token``: encoder length for an encoder phase, LLM tokens for ``"llm"`` and for
    the composed plans).
    """

    __slots__ = ("_core",)

    def __init__(self, core):
        self._core = core

    @property
    def phases(self) -> list:
        """Phase names in plan order (encoders, then ``"llm"``)."""
        return self._core.phases

    @property
    def ranks(self) -> int:
        return self._core.ranks

    @property
    def fingerprint(self) -> int:
        """64-bit hash of every phase's and composed plan's layouts, sizes and policies; equal on
        every rank for the same step (compare it across ranks before exchanging)."""
        return self._core.fingerprint

    @property
    def composed_bytes(self) -> int:
        """Bytes the composed encoder->LLM plans move (sum over encoders)."""
        return self._core.composed_bytes

    @property
    def two_hop_bytes(self) -> int:
        """Bytes the two-hop reference (back to the origin, then on with the sample) would move."""
        return self._core.two_hop_bytes

    def items(self, phase: str):
        """``(sample, segment, length)`` int64 arrays, one entry per item of ``phase``:
        the item's sample, its row in the workload's segment arrays (-1 for ``"llm"``) and
        its weight (LLM tokens or encoder length)."""
        return self._core.items(phase)

    def origin(self, phase: str):
        """int32 array: the rank holding each item of ``phase`` now (its sample's rank)."""
        return self._core.target(phase)[0]

    def target(self, phase: str) -> Assignment:
        """Where every item of ``phase`` goes (after balancing and node-wise relabeling), with
        ``loads`` (per-rank cost under the phase's cost) and ``lower_bound``."""
        _, rank, slot, loads, lower, cost = self._core.target(phase)
        return Assignment(rank, slot, self._core.ranks, loads=loads, lower_bound=lower, cost=cost, _trusted=True)

    def composed_target(self, modality: str) -> Assignment:
        """Where the composed plan of ``modality`` puts every segment (the assembly layout on the
        LLM ranks)."""
        _, _, rank, slot = self._core.composed_layout(modality)
        return Assignment(rank, slot, self._core.ranks, _trusted=True)

    def report(self, phase: str) -> dict:
        """What balancing ``phase`` achieved: loads before/after (arrays), max, mean, lower
        bound, max/mean imbalance, moved items/bytes, inter-node bytes, the cost and algorithm
        names."""
        return self._core.report(phase)

    def phase_plan(self, phase: str, rank: int, sizes=None) -> AllToAllPlan:
        """The forward :class:`AllToAllPlan` of ``phase`` for ``rank`` (``sizes[i]`` rows for
        item i). O(n + rows of this rank)."""
        return self._core.phase_plan(phase, rank, sizes)

    def composed_plan(self, modality: str, rank: int, sizes=None) -> AllToAllPlan:
        """The composed encoder->LLM :class:`AllToAllPlan` of ``modality`` for ``rank``
        (``sizes[i]`` rows for segment item i of that phase, e.g. the encoder's output rows)."""
        return self._core.composed_plan(modality, rank, sizes)

    def __repr__(self) -> str:
        return f"Orchestration(ranks={self.ranks}, phases={self.phases}, fingerprint={self.fingerprint})"


class Orchestrator:
    """The multi-phase orchestrator: balances every encoder phase and the LLM phase of a
    workload, relabels ranks node-wise, and composes encoder->LLM plans.

    Args:
        ranks: data-parallel ranks (>= 1).
        ranks_per_node: ranks per node for inter-node traffic and relabeling (0 = one node).
        policies: ``{phase: (cost_spec, algorithm_spec)}`` or ``{phase: {"cost": ..,
            "algorithm": .., "count_cap": .., "capacity": .., "keep_groups": ..}}``; an empty
            spec or a missing phase keeps the default (``llm``:
            ``attention:alpha=1,beta=1.54e-5`` / ``lpt+refine``; ``audio``: ``padded`` /
            ``padded``; other encoders: ``tokens`` / ``lpt+refine``); a cost given without an
            algorithm runs that cost's default (``padded`` for a padded cost, else
            ``lpt+refine``).
        threads: threads that plan phases concurrently (None = all cores; the result is the
            same for every value).
        bytes_per_token: default item size unit (item sizes = tokens x this).
        relabel: node-wise relabeling of every phase (default True).

    Deterministic: the same workload and configuration give identical plans on every rank.
    Complexity per phase: the partitioner's (lpt: O(n log n), then refine's bounded search)
    plus O(n log n) for relabeling and composition. The GIL is released while planning.
    """

    __slots__ = ("_core",)

    def __init__(self, ranks, *, ranks_per_node=0, policies=None, threads=None, bytes_per_token=1, relabel=True):
        self._core = _core.Orchestrator(ranks, ranks_per_node, policies, threads, bytes_per_token, relabel)

    def policy(self, phase: str) -> tuple:
        """``(cost_spec, algorithm_spec)`` that ``phase`` runs with."""
        return self._core.policy(phase)

    def plan(self, workload: Workload) -> Orchestration:
        """Plans one step for ``workload`` (see :class:`Orchestration`). Raises :class:`Error`
        when a sample's rank is >= ranks or a policy cannot be applied."""
        if not isinstance(workload, Workload):
            raise Error(f"Orchestrator.plan: expected an mmbal.Workload, got {type(workload).__name__}")
        return Orchestration(self._core.plan(workload))


class ISFResult:
    """The output of :func:`isf`.

    Attributes:
        groups: list of int64 arrays, the sample indices of every group, in ISF's order (groups
            kept by round 1..T in draw order, then the final-pass groups, then one group per
            oversize singleton; the last two blocks sorted by descending load with
            ``sort_tail``). Deal consecutive groups to the ranks of a step.
        members, offsets: the same as flat int64 arrays: group g is
            ``members[offsets[g]:offsets[g + 1]]``.
        singletons: int64, oversize samples (each alone in one of the last groups), ascending.
        dropped: int64, samples in no group (only with ``oversize="drop"`` or ``drop_unfilled``).
        stats: dict with the resolved thresholds (qv, qt, qv_target, qt_target), iterations_run,
            kept_per_iteration, leftover_samples, final_groups.
    """

    __slots__ = ("members", "offsets", "singletons", "dropped", "stats")

    def __init__(self, members, offsets, singletons, dropped, stats):
        self.members, self.offsets, self.singletons, self.dropped, self.stats = (
            members, offsets, singletons, dropped, stats)

    @property
    def groups(self) -> list:
        return _np.split(self.members, self.offsets[1:-1]) if len(self.offsets) > 1 else []

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __repr__(self) -> str:
        return f"ISFResult(groups={len(self)}, singletons={len(self.singletons)}, dropped={len(self.dropped)})"


def isf(vision, text, *, qv, qt, qv_target=None, qt_target=None, iterations=10, seed=0, oversize="singleton",
        drop_unfilled=False, sort_tail=True) -> ISFResult:
    """OmniBal's Iterative Sampling and Filtering: balanced dynamic mini-batches whose vision
    size and LLM tokens both stay within a band, so every device of a step gets similar ViT and
    LLM loads.

    Args:
        vision: per-sample vision size (images or vision tokens; integers in [0, 2**32 - 1]).
        text: per-sample LLM tokens (same length as ``vision``).
        qv, qt: caps per group (Qv, Qt; > 0).
        qv_target, qt_target: Qv' (default Qv) and Qt' (default Qt - 128, or Qt when Qt <= 128);
            a round keeps groups with sum(v) >= Qv' or sum(t) >= Qt'.
        iterations: T sampling+filtering rounds (default 10; 0 = final pass only).
        seed: shuffle seed (the same seed gives the same groups on every rank).
        oversize: a sample alone above a cap: ``"singleton"`` (own group, default),
            ``"reject"`` (raise :class:`Error`) or ``"drop"``.
        drop_unfilled: drop final-pass groups that miss both targets.
        sort_tail: order the final-pass groups and the singletons by descending load.

    Guarantees: every group except oversize singletons has sum(v) <= Qv and sum(t) <= Qt;
    every sample is in exactly one group or in ``dropped``. Complexity O(n (T + 1)).
    @see OmniBal 4.1, Alg. 1.
    """
    return ISFResult(*_core.isf(vision, text, qv, qt, qv_target, qt_target, iterations, seed, oversize,
                                drop_unfilled, sort_tail))


def distribute_tokens(workloads, ranks, *, tokens=None, block=128, distributor="lpt", seed=0) -> dict:
    """Context-parallel token distribution: blocks of ``block`` consecutive tokens dealt to the
    ``ranks`` ranks of a CP group.

    Args:
        workloads: a :class:`BitfieldMask` (its exact per-block workloads are used and
            ``tokens`` = its size), or per-block workloads (integers >= 0, one per block of
            ``block`` tokens; then ``tokens`` is required and must give ceil(tokens/block) blocks).
        ranks: CP group size G (>= 1).
        distributor: ``"lpt"`` (workload-balanced, Cornstarch 4.3.2; default), ``"zigzag"``,
            ``"contiguous"`` (ring attention) or ``"random"`` (uses ``seed``).

    Returns:
        dict: ``rank_of_block`` (int32 per block), ``rank_tokens``, ``rank_workloads`` (int64 per
        rank), ``total_workload``, ``max_over_mean``, ``token_indices`` (per rank, the int64
        positions it holds, ascending), ``tokens``, ``block``, ``ranks``.

    Raises:
        Error: G = 0, block = 0, a block count that does not match, an unknown distributor,
        more than 2^28 tokens (``token_indices`` holds one int64 per token).
    """
    if isinstance(workloads, BitfieldMask):
        # tokens= is checked as an int by the same rule as with per-block workloads first: an
        # array or a float compared with != gave NumPy's or torch's errors, or passed.
        if tokens is not None and _core.as_index(tokens, "tokens") != workloads.size:
            raise Error(f"distribute_tokens: tokens = {tokens} but the mask has {workloads.size} tokens")
        tokens = workloads.size
        workloads = workloads.block_workloads(block)
    elif tokens is None:
        raise Error("distribute_tokens: tokens= is required with per-block workloads")
    return _core.distribute_tokens(workloads, tokens, ranks, block, distributor, seed)


def bitfield_mask(workload, samples=None, *, assign="modality", layout="embedded") -> BitfieldMask:
    """The bitfield attention mask of a workload's samples packed as consecutive documents.

    Args:
        workload: a :class:`Workload`.
        samples: the sample indices to pack, in order (default: all, in workload order) -- e.g.
            the samples the LLM phase put on this rank, in slot order.
        assign: ``"modality"`` (one bit per modality: the spans of a modality in a document
            attend each other) or ``"span"`` (one bit per span: a span attends only itself).
        layout: ``"embedded"`` (EE/MP: encoder outputs where they sit in the sequence) or
            ``"prefixed"`` (EP: encoder outputs first, then the text).

    Text tokens attend every earlier token of their document and themselves; modality tokens
    attend their span (or modality) bidirectionally. Export for FlexAttention with
    :meth:`BitfieldMask.block_mask`. O(T + segments). @see Cornstarch 4.3.1.
    """
    if not isinstance(workload, Workload):
        raise Error(f"bitfield_mask: expected an mmbal.Workload, got {type(workload).__name__}")
    return _core.bitfield_mask(workload, samples, assign, layout)


class FitResult:
    """A fitted per-sample cost c(L) = x L^2 + y L + z (x, y, z >= 0; LoongForge 2.1).

    Attributes: ``x``, ``y``, ``z``; ``cost``, the spec string every ``cost=`` argument takes
    (``balance``, ``Orchestrator`` policies, ``should_balance``); ``error_mean`` and
    ``error_max``, the relative errors of the predicted step times (max over ranks of the
    summed sample costs) on the fitted steps; ``objective`` (sum of squared relative errors),
    ``iterations`` (Gauss-Newton), ``initial`` (x, y, z of the heaviest-rank NNLS start).
    """

    __slots__ = ("x", "y", "z", "cost", "error_mean", "error_max", "objective", "iterations", "initial")

    def __init__(self, fields: dict):
        for key in self.__slots__:
            setattr(self, key, fields[key])

    def __repr__(self) -> str:
        return f"FitResult({self.cost!r}, error_mean={self.error_mean:.4g}, error_max={self.error_max:.4g})"


def fit_cost(steps, *, temperature=1e-4) -> FitResult:
    """Fits the per-sample cost c(L) = x L^2 + y L + z to measured training steps.

    Args:
        steps: a sequence of ``(ranks, step_time)`` pairs, one per measured step: ``ranks`` holds,
            for every data-parallel rank, the lengths of the samples it ran (a sequence of
            integer arrays); ``step_time`` the step's measured time (> 0, any unit: the
            coefficients take it).
        temperature: the relative temperature of the log-sum-exp that smooths the max over
            ranks while fitting (default 1e-4; the reported errors use the exact max).

    The step waits for its slowest rank, so the fit targets the max over ranks (initialised
    by non-negative least squares on every step's heaviest rank, then refined by projected
    Gauss-Newton). Deterministic. The GIL is released while fitting. @see LoongForge 2.1.

    Raises:
        Error: no steps, a step without ranks or samples, a step time that is not finite and
            > 0, a negative or non-integer length, a bad temperature.
    """
    return FitResult(_core.fit_cost(steps, temperature))


class OnlineFit:
    """The online refit of :func:`fit_cost` over the last ``window`` steps (default 64): add
    every measured step with :meth:`add_step`, read the current model with :meth:`fit` (refit
    only when steps arrived since the last call). Safe to share between threads. Pickles (a
    checkpoint: the window's reduced steps, O(window x ranks)); the restored fit gives the same
    model and names later steps by the same arrival index; a state that is not one raises
    :class:`Error`."""

    def __init__(self, window=64, *, temperature=1e-4):
        self._core = _core.OnlineFit(window, temperature)

    def add_step(self, ranks, step_time) -> None:
        """Adds one step (``ranks``, ``step_time`` as in :func:`fit_cost`); the oldest leaves
        once the window is full. Raises :class:`Error` naming the step by its arrival index."""
        self._core.add_step(ranks, step_time)

    def fit(self) -> FitResult:
        """The model fitted to the current window. Raises :class:`Error` before the first step."""
        return FitResult(self._core.fit())

    @property
    def window(self) -> int:
        return self._core.window

    @property
    def size(self) -> int:
        """Steps in the window now."""
        return self._core.size

    @property
    def steps_added(self) -> int:
        return self._core.steps_added


def should_balance(ranks, cost, *, threshold=0.02) -> dict:
    """LoongForge's trigger: whether rebalancing the current placement can pay off.

    Args:
        ranks: for every data-parallel rank, the lengths of the samples it holds now.
        cost: a fitted cost: a :class:`FitResult` or its ``cost`` spec (``fitted:x=..,y=..,z=..``).
        threshold: the least relative drop of the max worth a rebalance (default 0.02).

    Returns:
        dict: ``balance`` (bool), ``reason`` (``balance``, ``no_load``, ``dominant_sample`` or
        ``below_threshold``), ``max_load``, ``mean_load``, ``largest_sample``, ``imbalance``
        (max/mean - 1), ``gain_bound`` (no placement lowers the max by more), ``explanation``.

    No placement of the same samples has a max below max(mean, largest sample), so balancing
    is skipped when the max is within ``threshold`` of that bound. O(samples). @see LoongForge 2.3.
    """
    return _core.should_balance(ranks, cost.cost if isinstance(cost, FitResult) else cost, threshold)


def pipeline_orders(forward, backward, *, orders=("identity", "verl", "disttrain", "search"), schedule="1f1b",
                    hop=0.0, max_evaluations=0, seed=0) -> dict:
    """Orders of a pipeline's micro-batches and their simulated makespans (DistTrain 6.2).

    Args:
        forward, backward: stages x micro-batches arrays of times (finite, >= 0), micro-batches
            in their given order; e.g. measured, or from a cost model per stage.
        orders: names among ``identity``, ``verl`` (largest in the middle), ``disttrain``
            (DistTrain Alg. 3) and ``search`` (a deterministic simulator-driven search from the
            others: never worse than them).
        schedule: ``1f1b`` (default), ``interleaved:V`` or ``gpipe``.
        hop: communication time per stage hop (default 0).
        max_evaluations: the search's simulations (default 0: a budget that scales with p and m).
        seed: the search's perturbation seed.

    Returns:
        dict: ``orders`` (name -> (order, makespan); ``order`` a read-only int64 permutation of
        the micro-batches, run first to last), ``best`` (the name with the least makespan, the
        first listed on ties), ``lower_bound`` (no order does better), ``stages``,
        ``micro_batches``, ``schedule``.

    Deterministic; the GIL is released while the orders are computed. Bounded like the tool:
    p * m * V <= 2^22 simulated operations, and p * m^2 <= 2^26 for 1F1B and interleaved
    schedules (their lower bound, ``disttrain`` and ``search`` are quadratic in m). The search's
    time grows with ``max_evaluations`` (up to 2^32).
    """
    if isinstance(orders, str):
        orders = (orders,)
    return _core.pipeline_orders(forward, backward, orders, schedule, hop, max_evaluations, seed)

