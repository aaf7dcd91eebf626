"""PyTorch integration of mmbal: move rows of real tensors by mmbal plans inside a training step.

Pure Python on ``torch.distributed`` (no libtorch link in ``mmbal._core``). What it offers:

- :func:`exchange` -- a differentiable all-to-all of the rows of a tensor by an
  :class:`mmbal.AllToAllPlan` (backward is the inverse exchange).
- :func:`gather_metadata` -- every rank's per-sample segment lengths in one collective
  (:class:`LocalMetadata` in, :class:`GlobalMetadata` out).
- :class:`StepBalancer` -- what a trainer calls each step: gathers the metadata, balances every
  encoder phase by its own cost and the LLM phase by the attention cost, and returns a
  :class:`StepPlan` that moves encoder inputs, carries encoder outputs straight to their LLM rank
  (composed plan), moves per-sample tensors and puts results back (``restore``).
- :class:`TokenBudgetSampler` and :class:`ISFSampler` -- batch samplers for
  ``torch.utils.data.DataLoader`` that give every rank the same number of batches per epoch, lose
  and repeat no sample within an epoch, and resume mid-epoch exactly.

Conventions: "rows" are along dim 0. A rank's *source slot* order is the order of its items in
ascending global item index; the *destination slot* order is the ``slot`` of the target
assignment. Ranks are ranks within ``group`` (the default group when ``None``).
See docs/DESIGN.md (data movement) and OrchMLLM §5-§6 for the phases and the composed plan.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import math
import numbers
import threading
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.distributed as dist

import mmbal

__all__ = [
    "exchange",
    "LocalMetadata",
    "GlobalMetadata",
    "gather_metadata",
    "MetadataGatherer",
    "DEFAULT_MODALITIES",
    "StepBalancer",
    "StepPlan",
    "PhaseResult",
    "PrefetchingBalancer",
    "PrefetchedStep",
    "TokenBudgetSampler",
    "ISFSampler",
    "deal_groups",
]

# --------------------------------------------------------------------------------------------
# exchange
# --------------------------------------------------------------------------------------------

# Dtypes the gloo backend of torch 1.13 cannot move ("Invalid scalar type"): they travel as a
# dtype of the same width that it can. An all-to-all only copies bytes, so the reinterpretation
# is bit-exact (nothing is converted or rounded); a view, so it costs nothing on any backend.
_BIT_VIEWS = {torch.bool: torch.uint8, torch.bfloat16: torch.float16, torch.int16: torch.float16}


def _group_rank_and_size(group) -> Tuple[int, int]:
    if not dist.is_available() or not dist.is_initialized():
        raise mmbal.Error("mmbal.torch: torch.distributed is not initialized (call init_process_group first)")
    rank = dist.get_rank(group) if group is not None else dist.get_rank()
    size = dist.get_world_size(group) if group is not None else dist.get_world_size()
    if rank < 0:
        raise mmbal.Error("mmbal.torch: this process is not a member of the given group")
    return rank, size


class _Prepared:
    """What one plan needs at every call, converted once: split lists, index tensors (None
    when the order is the identity), and the inverse plan (for backward), built lazily."""

    __slots__ = ("plan", "rank", "ranks", "source_rows", "send_splits", "recv_splits", "pack", "unpack", "fingerprint", "_inverse")

    def __init__(self, plan):
        self.plan = plan  # keeps the plan alive, so its id() stays unique while cached
        self.rank = int(plan.rank)
        self.ranks = int(plan.ranks)
        self.source_rows = int(plan.source_rows)
        self.send_splits = [int(v) for v in plan.send_splits]
        self.recv_splits = [int(v) for v in plan.recv_splits]
        self.pack = _index_tensor(plan.pack_index)
        self.unpack = _index_tensor(plan.unpack_index)
        self.fingerprint = int(plan.fingerprint)  # of the global plan: equal on every rank
        self._inverse = None

    def inverse(self) -> "_Prepared":
        if self._inverse is None:
            self._inverse = _Prepared(self.plan.inverse())
        return self._inverse


def _index_tensor(index) -> Optional[torch.Tensor]:
    a = np.ascontiguousarray(index, dtype=np.int64)
    if np.array_equal(a, np.arange(a.shape[0], dtype=np.int64)):
        return None
    # The plan's arrays are read-only, which torch.from_numpy warns about: one copy per plan
    # (plans are prepared once and cached).
    return torch.from_numpy(a.copy())


# id(plan) -> _Prepared, most recent last; bounded (a step uses a handful of plans).
_PREPARED: "Dict[int, _Prepared]" = {}
_PREPARED_MAX = 64


def _prepare(plan, where: str) -> _Prepared:
    hit = _PREPARED.pop(id(plan), None)
    if hit is None or hit.plan is not plan:
        for attr in ("rank", "ranks", "send_splits", "recv_splits", "source_rows", "pack_index", "unpack_index", "fingerprint", "inverse"):
            if not hasattr(plan, attr):
                raise mmbal.Error(f"{where}: plan ({type(plan).__name__}) has no attribute '{attr}' (need mmbal.AllToAllPlan)")
        hit = _Prepared(plan)
    _PREPARED[id(plan)] = hit
    while len(_PREPARED) > _PREPARED_MAX:
        del _PREPARED[next(iter(_PREPARED))]
    return hit


def _check_plan(x, plan, group, where: str) -> _Prepared:
    """Every check :func:`exchange` makes before its collective (raises :class:`mmbal.Error`)."""
    if not isinstance(x, torch.Tensor):
        raise mmbal.Error(f"{where}: x must be a torch.Tensor, got {type(x).__name__}")
    if x.layout != torch.strided:
        raise mmbal.Error(f"{where}: x has layout {x.layout}; only dense (strided) tensors move (call x.to_dense())")
    prep = _prepare(plan, where)
    rank, size = _group_rank_and_size(group)
    if prep.ranks != size:
        raise mmbal.Error(f"{where}: plan.ranks = {prep.ranks} but the group has {size} ranks")
    if prep.rank != rank:
        raise mmbal.Error(f"{where}: plan.rank = {prep.rank} but this process is rank {rank} in the group")
    if x.dim() == 0:
        raise mmbal.Error(f"{where}: x must have at least one dimension (rows along dim 0), got a 0-d tensor")
    if x.shape[0] != prep.source_rows:
        raise mmbal.Error(f"{where}: x has {x.shape[0]} rows (dim 0) but the plan expects source_rows = {prep.source_rows} on rank {rank}")
    if x.is_complex():
        raise mmbal.Error(f"{where}: complex dtype {x.dtype} is not supported (move torch.view_as_real(x))")
    return prep


def _exchange_rows(x: torch.Tensor, prep: _Prepared, group) -> torch.Tensor:
    """The collective itself (no autograd, checks done): pack, all_to_all_single, unpack."""
    x = x.contiguous()
    dtype = x.dtype
    wire = _BIT_VIEWS.get(dtype)
    if wire is not None:
        x = x.view(wire)
    # The gathers are skipped when the plan keeps the order (e.g. a rank sending everything
    # to one peer in slot order): memory is then exactly input + output. Advanced indexing,
    # not index_select: on CPU (torch 1.13) x[index] copies rows faster.
    send = x if prep.pack is None else x[prep.pack]
    recv = torch.empty((sum(prep.recv_splits),) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.all_to_all_single(recv, send, output_split_sizes=prep.recv_splits, input_split_sizes=prep.send_splits, group=group)
    del send
    out = recv if prep.unpack is None else recv[prep.unpack]
    if wire is not None:
        out = out.view(dtype)
    return out


class _Exchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, prep, group):  # type: ignore[override]
        ctx.prep = prep
        ctx.group = group
        return _exchange_rows(x, prep, group)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        # Through apply, not _exchange_rows: the backward is itself differentiable (double
        # backward, gradient penalties), its backward being the forward exchange again.
        return _Exchange.apply(grad, ctx.prep.inverse(), ctx.group), None, None


# Dtype codes of the cross-rank check; index = code.
_CHECK_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128)
_CHECK_DIMS = 12  # trailing dims compared one by one; beyond them ndim and the row size


def _gather_rows(row: torch.Tensor, group) -> torch.Tensor:
    """Every rank's ``row`` (a 1-D int64 tensor of the same length on every rank), stacked in
    rank order: one ``all_gather``, the small collective behind every cross-rank check."""
    _, size = _group_rank_and_size(group)
    parts = [torch.empty_like(row) for _ in range(size)]
    dist.all_gather(parts, row, group=group)
    return torch.stack(parts)


def _describe_rows(x, prep: Optional[_Prepared]) -> torch.Tensor:
    """[failed, plan fingerprint, dtype code, ndim, elements per row, trailing dims...] of this
    rank's input (``prep`` None: its own checks failed)."""
    desc = torch.full((5 + _CHECK_DIMS,), -1, dtype=torch.int64)
    desc[0] = int(prep is None)
    if prep is not None:
        desc[1] = prep.fingerprint - (1 << 64) if prep.fingerprint >= (1 << 63) else prep.fingerprint  # as int64
        desc[2] = _CHECK_DTYPES.index(x.dtype) if x.dtype in _CHECK_DTYPES else len(_CHECK_DTYPES)
        desc[3] = x.dim()
        desc[4] = math.prod(x.shape[1:])
        for k, extent in enumerate(x.shape[1 : 1 + _CHECK_DIMS]):
            desc[5 + k] = extent
    return desc


def _check_across_ranks(x, prep: Optional[_Prepared], error: Optional[mmbal.Error], group, where: str) -> None:
    """All-gathers every rank's verdict, plan fingerprint and row layout (one small fixed-size
    collective) and raises the same decision on every rank: the local error where there is
    one, otherwise an error naming the first rank that failed, holds another global plan, or
    passes another dtype or row shape than rank 0."""
    table = _gather_rows(_describe_rows(x, None if error is not None else prep), group)
    if error is not None:
        raise error
    failed = torch.nonzero(table[:, 0]).view(-1).tolist()
    if failed:
        raise mmbal.Error(f"{where}: rank {failed[0]} refused its input (its own error names the value); no rank moved anything")
    plans = torch.nonzero(table[:, 1] != table[0, 1]).view(-1).tolist()
    if plans:
        r = plans[0]
        raise mmbal.Error(f"{where}: rank {r} holds another global plan than rank 0 (fingerprints {int(table[r, 1]) & ((1 << 64) - 1):#018x} vs {int(table[0, 1]) & ((1 << 64) - 1):#018x}: other placements or sizes); every rank must pass its share of one plan")
    differs = torch.nonzero((table[:, 2:] != table[0, 2:]).any(dim=1)).view(-1).tolist()
    if differs:
        r = differs[0]
        raise mmbal.Error(f"{where}: rank {r} passes rows of (dtype code, dims, row size) = {table[r, 2:5].tolist()} but rank 0 passes {table[0, 2:5].tolist()} (trailing shapes {table[r, 5:].tolist()} vs {table[0, 5:].tolist()}); every rank must pass the same dtype and row shape")


def exchange(x: torch.Tensor, plan, group=None, check: bool = False) -> torch.Tensor:
    """Moves the rows of ``x`` by ``plan`` with one ``all_to_all_single`` (differentiable).

    ``x`` holds this rank's items' rows back to back in source-slot order (dim 0; any trailing
    shape); the result holds the rows of the items this rank receives, in destination-slot
    order, with the same trailing shape and dtype. Every rank of ``group`` must call it with
    its own plan of the same global rearrangement (collective).

    Checks, on this rank, before any collective: ``x`` is a tensor with >= 1 dimension,
    ``plan.ranks`` equals the group size, ``plan.rank`` equals this process's rank in
    ``group``, and ``x.shape[0] == plan.source_rows``; otherwise raises :class:`mmbal.Error`
    naming the value. The other ranks are by then inside the collective and wait for the
    process group's timeout (``init_process_group(timeout=...)``): a bad input is a bug of the
    caller that fails loudly on the rank that has it, never silently wrong rows.

    ``check=True`` adds one small all-gather before the exchange so that a bad input fails on
    EVERY rank with :class:`mmbal.Error` instead of leaving the others in the collective: a
    rank whose own checks fail raises its message, the others name that rank; ranks whose plan
    is another global plan (its ``fingerprint``: other placements or sizes, whose splits would
    not match) or whose dtype or row shape (``x.shape[1:]``) differ from rank 0's all raise. Without it, such a
    mismatch is not detectable locally: gloo aborts the process (different bytes per row) or
    reinterprets the bytes (same width). Every rank must pass the same ``check``. Default off
    (one more collective per call); :class:`StepBalancer` ``(verify=True)`` turns it on for its
    moves.

    Backward: the gradient moves by ``plan.inverse()`` (the exact reverse permutation of rows;
    differentiable again, so double backward works).
    The backward is a collective too: every rank must run it, so on every rank ``x`` must
    require grad when it does on any, and the output must be part of the loss's graph (a rank
    that does not use its rows adds ``0 * y.sum()``); several exchanges must be backwarded in
    the same order on every rank (true when they are chained, as in :class:`StepPlan`).
    Dtypes: every real dtype; bool, bfloat16 and int16 (which gloo lacks) travel bit-exactly
    as uint8 / float16 / float16 views. Complex tensors: pass ``torch.view_as_real(x)``.
    Zero-row items, uneven splits and ranks that send or receive nothing are fine.

    Memory: input + send buffer (= input) + receive buffer + output (= received), the send
    buffer and output skipped when the pack or unpack order is the identity; O(rows) for the
    index arrays, converted once per plan (the 64 most recent plans are kept). Time: two row
    gathers plus the collective (bench/python/bench_exchange.py).
    @see OrchMLLM §5.2 (all-to-all communicator).
    """
    where = "mmbal.torch.exchange"
    if not _as_flag(check, "check", where):
        return _Exchange.apply(x, _check_plan(x, plan, group, where), group)
    prep, error = None, None
    try:
        prep = _check_plan(x, plan, group, where)
    except mmbal.Error as e:
        error = e
    _check_across_ranks(x, prep, error, group, where)
    return _Exchange.apply(x, prep, group)


# --------------------------------------------------------------------------------------------
# metadata
# --------------------------------------------------------------------------------------------

#: Modality ids used by the metadata arrays; 0 is text (no encoder phase). Index = id.
DEFAULT_MODALITIES: Tuple[str, ...] = ("text", "image", "audio", "video")


def _as_int(value, name: str, where: str) -> int:
    """An integral argument (int, NumPy integer, 0-d integer tensor; not bool) as int."""
    if isinstance(value, torch.Tensor) and value.dim() == 0 and not (value.is_floating_point() or value.is_complex() or value.dtype == torch.bool):
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise mmbal.Error(f"{where}: {name} = {value!r} must be an integer")
    return int(value)


def _as_flag(value, name: str, where: str) -> bool:
    """A flag argument, as :mod:`mmbal` takes them: a bool, NumPy bool, or the int 0 or 1 (a
    string such as "no" would otherwise count as true)."""
    return mmbal._flag(value, f"{where}: {name}")


def _is_list_like(value) -> bool:
    """A sequence, array or tensor (with at least one dimension), not a string."""
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return value.ndim > 0
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _as_array(value, name: str, where: str) -> np.ndarray:
    """``np.asarray(value)`` for a user's column, refusing what NumPy would misread: a masked
    array (its hidden values would be used) and ragged nesting (a plain ValueError)."""
    if isinstance(value, np.ma.MaskedArray):
        raise mmbal.Error(f"{where}: {name} is a masked array (numpy.ma); pass its .compressed() or .filled() values")
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as e:
        raise mmbal.Error(f"{where}: {name} cannot be read as an array ({e})") from None


def _check_rank(rank, ranks: int, where: str) -> int:
    r = _as_int(rank, "rank", where)
    if not 0 <= r < ranks:
        raise mmbal.Error(f"{where}: rank = {r} not in [0, {ranks})")
    return r


def _int_array(name: str, value, where: str) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
            raise mmbal.Error(f"{where}: {name} must be an integer tensor, got dtype {value.dtype}")
        value = value.detach().cpu().numpy()
    arr = _as_array(value, name, where)
    if arr.size == 0:
        arr = arr.reshape(0)
        if arr.dtype.kind not in "iu":
            arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise mmbal.Error(f"{where}: {name} must hold integers, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise mmbal.Error(f"{where}: {name} must be 1-D, got shape {tuple(arr.shape)}")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise mmbal.Error(f"{where}: {name} has a value {int(arr.max())} beyond int64")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and int(arr.min()) < 0:
        i = int(np.argmin(arr))
        raise mmbal.Error(f"{where}: {name}[{i}] = {int(arr[i])} is negative")
    return arr


_MAX_SAMPLES = (1 << 32) - 1  # the library's item limit (mmbal.balance and the orchestrator)


@dataclasses.dataclass
class LocalMetadata:
    """This rank's samples as segments (the layout of ``mmbal.Workload``, local indices).

    - ``samples``: number of local samples (a sample may have no segment: a zero-length item).
    - ``segment_sample[j]``: local sample of segment j, non-decreasing (segments of a sample are
      consecutive, in their order in the sequence).
    - ``segment_modality[j]``: modality id (0 = text; see :data:`DEFAULT_MODALITIES`).
    - ``segment_tokens[j]``: LLM tokens of segment j (text tokens, or the encoder's output tokens).
    - ``segment_encoder_len[j]``: encoder input length (patches, frames; 0 for text).
    """

    samples: int
    segment_sample: np.ndarray
    segment_modality: np.ndarray
    segment_tokens: np.ndarray
    segment_encoder_len: np.ndarray

    def __post_init__(self) -> None:
        where = "mmbal.torch.LocalMetadata"
        if isinstance(self.samples, bool) or not isinstance(self.samples, (int, np.integer)):
            raise mmbal.Error(f"{where}: samples must be an int, got {self.samples!r}")
        self.samples = int(self.samples)
        if not 0 <= self.samples <= _MAX_SAMPLES:
            raise mmbal.Error(f"{where}: samples = {self.samples} is out of range [0, {_MAX_SAMPLES}] (a step's items are counted in 32 bits)")
        self.segment_sample = _int_array("segment_sample", self.segment_sample, where)
        self.segment_modality = _int_array("segment_modality", self.segment_modality, where)
        self.segment_tokens = _int_array("segment_tokens", self.segment_tokens, where)
        self.segment_encoder_len = _int_array("segment_encoder_len", self.segment_encoder_len, where)
        m = self.segment_sample.shape[0]
        for name in ("segment_modality", "segment_tokens", "segment_encoder_len"):
            if getattr(self, name).shape[0] != m:
                raise mmbal.Error(f"{where}: {name} has {getattr(self, name).shape[0]} entries but segment_sample has {m}")
        if m:
            bad = np.nonzero(self.segment_sample >= self.samples)[0]
            if bad.size:
                j = int(bad[0])
                raise mmbal.Error(f"{where}: segment_sample[{j}] = {int(self.segment_sample[j])} >= samples = {self.samples}")
            dec = np.nonzero(np.diff(self.segment_sample) < 0)[0]
            if dec.size:
                j = int(dec[0]) + 1
                raise mmbal.Error(f"{where}: segment_sample[{j}] = {int(self.segment_sample[j])} decreases (segments of a sample must be consecutive)")
            if int(self.segment_modality.max()) > 255:
                raise mmbal.Error(f"{where}: segment_modality has id {int(self.segment_modality.max())} > 255")

    @staticmethod
    def from_samples(samples: Sequence[Sequence[Tuple[int, int, int]]]) -> "LocalMetadata":
        """From a list of samples, each a list of ``(modality, tokens, encoder_len)`` segments of
        integers (ints, NumPy integers or 0-d integer tensors; anything else raises
        :class:`mmbal.Error` naming the sample and segment)."""
        where = "mmbal.torch.LocalMetadata.from_samples"
        seg_sample, mod, tok, enc = [], [], [], []
        if not _is_list_like(samples):
            raise mmbal.Error(f"{where}: samples must be a list of samples, got {type(samples).__name__}")
        for i, segs in enumerate(samples):
            if not _is_list_like(segs):
                raise mmbal.Error(f"{where}: sample {i} = {segs!r} is not a list of segments")
            for j, seg in enumerate(segs):
                try:
                    fields = tuple(seg)
                except TypeError:
                    fields = ()
                if len(fields) != 3:
                    raise mmbal.Error(f"{where}: sample {i} has segment {j} = {seg!r}; need (modality, tokens, encoder_len)")
                values = [_as_int(v, name, f"{where}: sample {i}, segment {j}") for name, v in zip(("modality", "tokens", "encoder_len"), fields)]
                for name, v in zip(("modality", "tokens", "encoder_len"), values):
                    if not 0 <= v <= np.iinfo(np.int64).max:
                        raise mmbal.Error(f"{where}: sample {i}, segment {j}: {name} = {v} is out of range [0, 2^63 - 1]")
                seg_sample.append(i)
                mod.append(values[0])
                tok.append(values[1])
                enc.append(values[2])
        return LocalMetadata(len(samples), np.array(seg_sample, np.int64), np.array(mod, np.int64), np.array(tok, np.int64), np.array(enc, np.int64))


@dataclasses.dataclass
class GlobalMetadata:
    """Every rank's :class:`LocalMetadata` concatenated in rank order (global sample index =
    rank-major; segments in sample order). Identical on every rank."""

    ranks: int
    sample_rank: np.ndarray  # int64 [n]
    rank_offsets: np.ndarray  # int64 [ranks + 1]: samples of rank r are [off[r], off[r+1])
    segment_sample: np.ndarray  # int64 [m], global sample index
    segment_modality: np.ndarray
    segment_tokens: np.ndarray
    segment_encoder_len: np.ndarray

    @property
    def samples(self) -> int:
        return int(self.sample_rank.shape[0])

    def sample_tokens(self) -> np.ndarray:
        """LLM tokens of every sample (its whole interleaved sequence)."""
        return np.bincount(self.segment_sample, weights=self.segment_tokens, minlength=self.samples).astype(np.int64)

    def workload(self, modalities: Sequence[str] = ("text", "image", "audio", "video")):
        """This batch as :class:`mmbal.Workload` (modality ids named by ``modalities``)."""
        if int(self.segment_modality.max(initial=0)) >= len(modalities):
            raise mmbal.Error(f"mmbal.torch.GlobalMetadata.workload: modality id {int(self.segment_modality.max())} has no name in {list(modalities)}")
        names = [modalities[m] for m in self.segment_modality.tolist()]
        return mmbal.Workload(self.sample_rank, self.segment_sample, names, self.segment_tokens, self.segment_encoder_len)


_HEADER = 3  # [samples, segments, capacity needed] per rank
# A negative `samples` in a rank's header says it has no metadata to give this step; it still
# takes part in the collective, so that every rank reaches the same decision instead of
# waiting for it.
_FAILED = -1  # its step raised before the gather
_ENDED = -2  # its data has ended


class MetadataGatherer:
    """Gathers :class:`LocalMetadata` of every rank with ONE ``all_gather`` in the steady state.

    Each rank packs ``[samples, segments, needed] + per-sample nothing + 4 columns of segments``
    into an int64 buffer of an agreed ``capacity`` (entries) and all ranks all-gather it. A
    rank whose data does not fit sends only its header; every rank then sees the largest
    ``needed``, all grow the capacity to the next power of two at least that, and all repeat
    the gather (a second collective, only on growth; at most log2 of the final size over the
    run). Because the decision is made from gathered data, every rank makes the same number
    of calls: no hang. Why not "all_gather the sizes, then all_gather padded data": that is two
    collectives every step; a fixed capacity that only grows makes it one.
    A rank that has no metadata to give (``local`` is not a :class:`LocalMetadata`) still takes
    part with a mark in its header, and every rank raises :class:`mmbal.Error` naming it.
    Every rank must start from the same ``initial_capacity`` and keep its gatherer across the
    same steps (different capacities make the backend abort; ``StepBalancer(verify=True)``
    checks them). Memory: ranks × capacity × 8 bytes. Complexity O(ranks × capacity).
    """

    def __init__(self, group=None, initial_capacity: int = 1024):
        self.group = group
        self.capacity = max(_as_int(initial_capacity, "initial_capacity", "mmbal.torch.MetadataGatherer"), 4 + _HEADER)

    def gather(self, local: LocalMetadata) -> GlobalMetadata:
        if isinstance(local, LocalMetadata):
            return self._gather_step(local)
        return self._gather_step(None, mmbal.Error(f"mmbal.torch.gather_metadata: local must be a LocalMetadata, got {type(local).__name__}"))

    def _gather_step(self, local: Optional[LocalMetadata], error: Optional[BaseException] = None) -> Optional[GlobalMetadata]:
        """The collective of one step. ``local`` None: this rank has nothing to give, because
        of ``error`` (re-raised here, :class:`mmbal.Error` on every other rank) or, without
        one, because its data has ended. Returns None when every rank's data has ended;
        raises on every rank when only some have."""
        _, size = _group_rank_and_size(self.group)
        m = 0 if local is None else local.segment_sample.shape[0]
        needed = _HEADER + 4 * m
        while True:
            buf = torch.zeros(self.capacity, dtype=torch.int64)
            buf[0] = local.samples if local is not None else _FAILED if error is not None else _ENDED
            buf[1], buf[2] = m, needed
            if local is not None and needed <= self.capacity:
                body = np.concatenate([local.segment_sample, local.segment_modality, local.segment_tokens, local.segment_encoder_len])
                buf[_HEADER:needed] = torch.from_numpy(body)
            parts = [torch.empty_like(buf) for _ in range(size)]
            dist.all_gather(parts, buf, group=self.group)
            table = torch.stack(parts).numpy()
            most = int(table[:, 2].max())
            if most <= self.capacity:
                break
            self.capacity = 1 << (most - 1).bit_length()
        failed = np.nonzero(table[:, 0] == _FAILED)[0].tolist()
        if failed:
            if error is not None:
                raise error
            raise mmbal.Error(f"mmbal.torch.gather_metadata: rank(s) {failed} raised before the metadata gather of this step (see their error)")
        ended = np.nonzero(table[:, 0] == _ENDED)[0].tolist()
        if len(ended) == size:
            return None
        if ended:
            raise mmbal.Error(f"mmbal.torch.gather_metadata: the data of rank(s) {ended} ended while the other ranks still have a step; every rank must end at the same step")
        return _assemble(table, size)


def _assemble(table: np.ndarray, size: int) -> GlobalMetadata:
    samples = table[:, 0].astype(np.int64)
    # The same table on every rank, so every rank raises: nobody is left in a collective.
    if int(samples.sum()) > _MAX_SAMPLES:
        raise mmbal.Error(f"mmbal.torch.gather_metadata: the ranks hold {int(samples.sum())} samples in all, above {_MAX_SAMPLES} (a step's items are counted in 32 bits)")
    offsets = np.zeros(size + 1, np.int64)
    np.cumsum(samples, out=offsets[1:])
    cols = [[], [], [], []]
    for r in range(size):
        m = int(table[r, 1])
        body = table[r, _HEADER : _HEADER + 4 * m].reshape(4, m)
        cols[0].append(body[0] + offsets[r])
        for k in range(1, 4):
            cols[k].append(body[k])
    cat = [np.concatenate(c).astype(np.int64) if c else np.zeros(0, np.int64) for c in cols]
    return GlobalMetadata(size, np.repeat(np.arange(size, dtype=np.int64), samples), offsets, *cat)


def gather_metadata(local: LocalMetadata, group=None) -> GlobalMetadata:
    """Every rank's per-sample segment lengths, gathered with one collective when they fit the
    default capacity (see :class:`MetadataGatherer`; keep one gatherer across steps so that
    its grown capacity is kept). Raises :class:`mmbal.Error` for bad metadata before any
    collective."""
    return MetadataGatherer(group).gather(local)


# --------------------------------------------------------------------------------------------
# step balancer
# --------------------------------------------------------------------------------------------


def _as_plan_array(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


def _rank_slots(rank: np.ndarray, key: np.ndarray, ranks: int) -> np.ndarray:
    """Slot of every item: its position among the items of its rank ordered by ``key``
    (ties by item index). O(n log n)."""
    n = rank.shape[0]
    order = np.lexsort((np.arange(n), key, rank))
    slot = np.empty(n, np.int64)
    counts = np.bincount(rank, minlength=ranks)
    starts = np.zeros(ranks, np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    slot[order] = np.arange(n, dtype=np.int64) - starts[rank[order]]
    return slot


@dataclasses.dataclass
class PhaseResult:
    """One balanced phase: its items (global sample or segment ids), their lengths under the
    phase's measure, where they are now and the target assignment."""

    name: str
    items: np.ndarray  # global ids: samples (llm) or segments (encoder phases)
    lengths: np.ndarray  # the lengths the phase was balanced on
    origin: np.ndarray  # rank holding each item now
    target: object  # mmbal.Assignment
    cost: str
    algorithm: str


class StepPlan:
    """Everything one step's data movement needs on this rank (built by :meth:`StepBalancer.plan`).

    Row orders, all derived from the gathered metadata (identical on every rank):

    - encoder inputs of modality m: on the origin rank, its segments of m in local order
      (ascending global segment id); after :meth:`move_encoder_inputs`, the segments of
      :meth:`encoder_segments` (m) in that order.
    - encoder outputs after :meth:`move_encoder_outputs`: :meth:`llm_segments` (m) -- for each
      sample of :meth:`llm_samples` in order, its segments of m in sequence order (the LLM's
      assembly order), moved in ONE hop from the encoder rank (composed plan).
    - per-sample tensors after :meth:`move_samples`: :meth:`llm_samples` order;
      :meth:`restore` moves per-sample results back to their origin rank in local order.

    Plans are built lazily per (kind, modality, sizes) and cached: O(items) each.
    """

    def __init__(self, meta: GlobalMetadata, modalities: Sequence[str], phases: Dict[str, PhaseResult], rank: int, group, orchestration=None, check: bool = False):
        self.meta = meta
        self.check = check  # exchange(check=True) on every move (StepBalancer(verify=True))
        self.orchestration = orchestration  # mmbal.Orchestration, or None (python engine)
        self.modalities = tuple(modalities)
        self.phases = phases
        self.rank = _check_rank(rank, meta.ranks, "mmbal.torch.StepPlan")
        self.ranks = meta.ranks
        self.group = group
        self._cache: Dict[tuple, object] = {}

    # -- orders ------------------------------------------------------------------------------
    @property
    def llm(self) -> PhaseResult:
        return self.phases["llm"]

    def phase(self, name: str) -> PhaseResult:
        """The phase ``name`` (``"llm"`` or an encoder modality of this step)."""
        if name not in self.phases:
            raise mmbal.Error(f"mmbal.torch.StepPlan: no phase {name!r} in this step (phases: {sorted(self.phases)})")
        return self.phases[name]

    def _rank(self, rank: Optional[int]) -> int:
        return self.rank if rank is None else _check_rank(rank, self.ranks, "mmbal.torch.StepPlan")

    def encoder_phase(self, modality: str) -> PhaseResult:
        if modality == "llm" or modality not in self.phases:
            raise mmbal.Error(f"mmbal.torch.StepPlan: no encoder phase '{modality}' in this step (phases: {sorted(self.phases)})")
        return self.phases[modality]

    def _ordered(self, phase: PhaseResult, rank: int) -> np.ndarray:
        t = phase.target
        rk = np.asarray(t.rank)
        sel = np.nonzero(rk == rank)[0]
        return phase.items[sel[np.argsort(np.asarray(t.slot)[sel], kind="stable")]]

    def llm_samples(self, rank: Optional[int] = None) -> np.ndarray:
        """Global sample ids on ``rank`` (default: this rank) after balancing, in slot order."""
        return self._ordered(self.llm, self._rank(rank))

    def encoder_segments(self, modality: str, rank: Optional[int] = None) -> np.ndarray:
        """Global segment ids of ``modality`` encoded on ``rank``, in encoder order."""
        return self._ordered(self.encoder_phase(modality), self._rank(rank))

    def llm_segments(self, modality: str, rank: Optional[int] = None) -> np.ndarray:
        """Global segment ids of ``modality`` whose outputs reach ``rank`` for the LLM, in
        assembly order (samples in :meth:`llm_samples` order, segments in sequence order)."""
        # LLM items are the samples in global order (item i = sample i; both engines).
        seg = self.encoder_phase(modality).items
        owner = np.asarray(self.llm.target.rank)[self.meta.segment_sample[seg]]
        mine = seg[owner == self._rank(rank)]
        order = np.lexsort((mine, self._llm_position()[self.meta.segment_sample[mine]]))
        return mine[order]

    def _llm_position(self) -> np.ndarray:
        return np.asarray(self.llm.target.slot).astype(np.int64)

    def local_segments(self, modality: Optional[str] = None) -> np.ndarray:
        """Global ids of the segments this rank holds now (of ``modality``, or all)."""
        lo, hi = int(self.meta.rank_offsets[self.rank]), int(self.meta.rank_offsets[self.rank + 1])
        s = self.meta.segment_sample
        mask = (s >= lo) & (s < hi)
        if modality is not None:
            if modality not in self.modalities:
                raise mmbal.Error(f"mmbal.torch.StepPlan.local_segments: modality {modality!r} is not one of {list(self.modalities)}")
            mask &= self.meta.segment_modality == self.modalities.index(modality)
        return np.nonzero(mask)[0]

    # -- plans -------------------------------------------------------------------------------
    def _sizes(self, sizes, default: np.ndarray, count: int, what: str) -> np.ndarray:
        if sizes is None:
            return default
        arr = _int_array("sizes", sizes, f"mmbal.torch.StepPlan.{what}")
        if arr.shape[0] != count:
            raise mmbal.Error(f"mmbal.torch.StepPlan.{what}: sizes has {arr.shape[0]} entries but the phase has {count} items")
        return arr

    def _cached(self, key: tuple, build):
        plan = self._cache.get(key)
        if plan is None:
            plan = build()
            self._cache[key] = plan
        return plan

    def llm_plan(self, sizes=None):
        """AllToAllPlan of per-sample tensors (sizes[i] = rows of global sample i; default its
        LLM tokens) from the origin ranks to the LLM ranks."""
        phase = self.llm
        sz = self._sizes(sizes, phase.lengths, phase.items.shape[0], "llm_plan")
        return self._cached(("llm", sz.tobytes()), lambda: self._phase_plan("llm", phase, sz))

    def encoder_plan(self, modality: str, sizes=None):
        """AllToAllPlan of encoder inputs of ``modality`` (sizes per segment of the phase, in
        ascending global segment id; default the encoder lengths) to the encoder ranks."""
        phase = self.encoder_phase(modality)
        sz = self._sizes(sizes, phase.lengths, phase.items.shape[0], "encoder_plan")
        return self._cached(("enc", modality, sz.tobytes()), lambda: self._phase_plan(modality, phase, sz))

    def _phase_plan(self, name: str, phase: PhaseResult, sizes: np.ndarray):
        if self.orchestration is not None:
            return self.orchestration.phase_plan(name, self.rank, sizes)
        return mmbal.alltoall_plan(_as_plan_array(phase.origin), phase.target, sizes, self.rank)

    def composed_plan(self, modality: str, sizes=None):
        """AllToAllPlan that carries encoder outputs of ``modality`` from the encoder ranks
        straight to the LLM ranks, in assembly order (sizes per segment of the phase in
        ascending global segment id; default the segments' LLM tokens).

        Built from the two assignments: items are renumbered in (encoder rank, encoder slot)
        order, so that each encoder rank's items in ascending index are its outputs in encoder
        order, and targeted at (LLM rank of the sample, assembly position). O(m log m). With
        the orchestrator engine, the orchestration's composed plan (the same layout, in C++)."""
        phase = self.encoder_phase(modality)
        seg_tokens = self.meta.segment_tokens[phase.items]
        sz = self._sizes(sizes, seg_tokens, phase.items.shape[0], "composed_plan")

        if self.orchestration is not None:
            return self._cached(("composed", modality, sz.tobytes()), lambda: self.orchestration.composed_plan(modality, self.rank, sz))

        def build():
            enc_rank = np.asarray(phase.target.rank).astype(np.int64)
            enc_slot = np.asarray(phase.target.slot).astype(np.int64)
            perm = np.lexsort((enc_slot, enc_rank))  # new item k = phase item perm[k]
            seg = phase.items[perm]
            sample = self.meta.segment_sample[seg]
            llm_rank = np.asarray(self.llm.target.rank).astype(np.int64)[sample]
            llm_slot = self._llm_position()[sample]
            # assembly key within the LLM rank: (sample slot, segment id)
            key = llm_slot * (int(seg.max()) + 1 if seg.size else 1) + seg
            slot = _rank_slots(llm_rank, key, self.ranks)
            target = mmbal.Assignment(llm_rank.astype(np.int32), slot.astype(np.int32), self.ranks)
            return mmbal.alltoall_plan(_as_plan_array(enc_rank[perm]), target, _as_plan_array(sz[perm]), self.rank)

        return self._cached(("composed", modality, sz.tobytes()), build)

    # -- movement ----------------------------------------------------------------------------
    def move_encoder_inputs(self, modality: str, x: torch.Tensor, sizes=None) -> torch.Tensor:
        """Encoder inputs of this rank's ``modality`` segments (local order) -> the inputs of
        :meth:`encoder_segments` (differentiable)."""
        return exchange(x, self.encoder_plan(modality, sizes), self.group, self.check)

    def move_encoder_outputs(self, modality: str, y: torch.Tensor, sizes=None) -> torch.Tensor:
        """Encoder outputs in encoder order -> the LLM ranks in assembly order, one hop."""
        return exchange(y, self.composed_plan(modality, sizes), self.group, self.check)

    def move_samples(self, x: torch.Tensor, sizes=None) -> torch.Tensor:
        """Per-sample rows (local sample order) -> :meth:`llm_samples` order on the LLM rank."""
        return exchange(x, self.llm_plan(sizes), self.group, self.check)

    def restore(self, y: torch.Tensor, sizes=None) -> torch.Tensor:
        """Per-sample results in :meth:`llm_samples` order -> back to each sample's origin rank,
        in local sample order (the inverse of :meth:`move_samples`; differentiable)."""
        return exchange(y, self.llm_plan(sizes).inverse(), self.group, self.check)

    # -- report ------------------------------------------------------------------------------
    @property
    def fingerprint(self) -> int:
        """A 63-bit fingerprint of every phase's placement (equal on every rank for the same
        step): the orchestration's plan fingerprint, or with the python engine a BLAKE2b hash
        of the target ranks and slots and the specs."""
        if self.orchestration is not None:
            return int(self.orchestration.fingerprint) & ((1 << 63) - 1)
        import hashlib

        h = hashlib.blake2b(digest_size=8)
        for name in sorted(self.phases):
            p = self.phases[name]
            h.update(f"{name}|{p.cost}|{p.algorithm}|".encode())
            h.update(np.ascontiguousarray(p.target.rank, dtype=np.int32).tobytes())
            h.update(np.ascontiguousarray(p.target.slot, dtype=np.int32).tobytes())
        return int.from_bytes(h.digest(), "little") & ((1 << 63) - 1)

    def loads(self, phase: str) -> Tuple[np.ndarray, np.ndarray]:
        """Per-rank cost of ``phase`` under its cost spec: before (where the items are now,
        each rank's items in ascending id) and after (the target). O(n + ranks)."""
        p = self.phase(phase)
        origin = p.origin.astype(np.int64)
        slot = _rank_slots(origin, np.zeros_like(origin), self.ranks)
        before = mmbal.Assignment(origin.astype(np.int32), slot.astype(np.int32), self.ranks).loads_for(p.lengths, p.cost)
        return np.asarray(before, np.float64), np.asarray(p.target.loads_for(p.lengths, p.cost), np.float64)

    def tokens_per_rank(self, phase: str) -> Tuple[np.ndarray, np.ndarray]:
        """Σ lengths per rank of ``phase`` before (origin) and after (target)."""
        p = self.phase(phase)
        before = np.bincount(p.origin, weights=p.lengths, minlength=self.ranks)
        after = np.bincount(np.asarray(p.target.rank).astype(np.int64), weights=p.lengths, minlength=self.ranks)
        return before, after


def _verify_same_plan(plan: StepPlan, group) -> None:
    """All-gathers the plan fingerprints; raises on every rank (the same decision everywhere,
    so nobody is left in a collective) when they differ."""
    values = _gather_rows(torch.tensor([plan.fingerprint], dtype=torch.int64), group)[:, 0].tolist()
    if len(set(values)) != 1:
        raise mmbal.Error(f"mmbal.torch.StepBalancer: ranks planned different steps (fingerprints per rank: {[hex(v) for v in values]})")


def _verify_same_capacity(gatherer: MetadataGatherer, group) -> None:
    """All-gathers the gatherers' capacities (a fixed-size collective) and raises on every
    rank when they differ: the metadata gather itself would abort in the backend."""
    values = _gather_rows(torch.tensor([gatherer.capacity], dtype=torch.int64), group)[:, 0].tolist()
    if len(set(values)) != 1:
        raise mmbal.Error(f"mmbal.torch.StepBalancer: the ranks' metadata capacities differ ({values}); pass the same metadata_capacity on every rank")


class StepBalancer:
    """What a trainer calls each step: gather metadata, balance every phase, plan the moves.

    - ``modalities``: names by modality id (id 0 = ``"text"``: no encoder phase).
    - ``policies``: per phase (``"llm"`` or a modality name), ``(cost_spec, algorithm_spec)``
      or a dict, exactly as :class:`mmbal.Orchestrator` takes them, with its defaults (LLM:
      the attention cost, OrchMLLM eq. 5; encoders: their own cost over encoder lengths).
    - ``engine``: ``"orchestrator"`` (default) plans with :class:`mmbal.Orchestrator` (C++,
      node-wise relabeling with ``ranks_per_node``, composed plans, GIL released);
      ``"python"`` plans each phase with :func:`mmbal.balance` (cost and algorithm of the
      policy only; no relabeling) and composes encoder -> LLM plans in NumPy (a reference and a
      fallback). Both give the same row layouts (see :class:`StepPlan`).
    - ``threads``: planning threads of the orchestrator (default 1: the trainer's cores are
      busy with the model).
    - ``verify``: a debugging mode of small extra collectives that turn mistakes of one rank
      into :class:`mmbal.Error` on every rank instead of a hang or an abort: before the
      metadata gather, the gatherers' capacities are compared (they differ when ranks pass
      different ``metadata_capacity``); after planning, every rank's plan fingerprint (e.g.
      ranks running different mmbal versions or configurations); and every move of the
      :class:`StepPlan` runs :func:`exchange` with ``check=True``. Default off.
    - ``metadata_group``: the process group of the metadata gather and of ``verify``'s
      planning checks (default: ``group``); the same ranks in the same order as ``group``.
      Give it a group of its own (``torch.distributed.new_group()``) to plan on another thread
      while the trainer's collectives run (:class:`PrefetchingBalancer`).

    Construct it after ``init_process_group`` (it reads the group size). :meth:`plan` is
    collective (one metadata gather in the steady state, see
    :class:`MetadataGatherer`); planning itself is local and deterministic, so every rank
    derives the same global plans (compare ``StepPlan.fingerprint`` across ranks when in
    doubt). Complexity: the partitioner's per phase (lpt: O(n log n)) + O(n log n).
    @see OrchMLLM §6 (global orchestrator), §5.2 (composed encoder -> LLM plan).
    """

    ENGINES = ("orchestrator", "python")

    def __init__(
        self,
        group=None,
        *,
        modalities: Sequence[str] = DEFAULT_MODALITIES,
        policies: Optional[Mapping[str, object]] = None,
        engine: str = "orchestrator",
        ranks_per_node: int = 0,
        relabel: bool = True,
        threads: int = 1,
        metadata_capacity: int = 1024,
        verify: bool = False,
        metadata_group=None,
    ):
        where = "mmbal.torch.StepBalancer"
        modalities = tuple(modalities)
        if not modalities or modalities[0] != "text":
            raise mmbal.Error(f"{where}: modalities[0] must be 'text', got {list(modalities)!r}")
        if len(set(modalities)) != len(modalities) or "llm" in modalities or not all(isinstance(m, str) and m for m in modalities):
            raise mmbal.Error(f"{where}: modalities {list(modalities)!r} must be distinct non-empty names other than 'llm'")
        if engine not in self.ENGINES:
            raise mmbal.Error(f"{where}: engine = {engine!r} (expected one of {', '.join(self.ENGINES)})")
        self.policies = dict(policies or {})
        for name in self.policies:
            if name != "llm" and name not in modalities[1:]:
                raise mmbal.Error(f"{where}: policies names phase '{name}', not 'llm' nor one of {list(modalities[1:])}")
        self.group = group
        self.metadata_group = group if metadata_group is None else metadata_group
        self.modalities = modalities
        self.engine = engine
        rank, size = _group_rank_and_size(group)
        meta_rank, meta_size = _group_rank_and_size(self.metadata_group)
        if (meta_rank, meta_size) != (rank, size):
            raise mmbal.Error(f"{where}: metadata_group has this process as rank {meta_rank} of {meta_size}, group as rank {rank} of {size}; they must hold the same ranks in the same order")
        # The orchestrator also resolves the policies (defaults in one place) for the python engine.
        self.orchestrator = mmbal.Orchestrator(size, ranks_per_node=ranks_per_node, policies=self.policies, threads=threads, relabel=relabel)
        self.gatherer = MetadataGatherer(self.metadata_group, metadata_capacity)
        self.verify = _as_flag(verify, "verify", where)
        self._prefetch_thread: Optional[threading.Thread] = None  # set while a PrefetchingBalancer owns it

    def plan(self, local: LocalMetadata) -> StepPlan:
        """Gathers every rank's metadata (collective) and plans this step. Bad local metadata
        (not a :class:`LocalMetadata`, or a modality id without a name) raises
        :class:`mmbal.Error` here; this rank still takes part in the gather, so every other
        rank raises too instead of waiting for it."""
        error = None
        if not isinstance(local, LocalMetadata):
            error = mmbal.Error(f"mmbal.torch.StepBalancer.plan: local must be a LocalMetadata, got {type(local).__name__}")
        elif local.segment_modality.size and int(local.segment_modality.max()) >= len(self.modalities):
            bad = int(local.segment_modality.max())
            error = mmbal.Error(f"mmbal.torch.StepBalancer.plan: segment_modality id {bad} has no name (modalities: {list(self.modalities)})")
        return self._plan_step(None if error else local, error)

    def _plan_step(self, local: Optional[LocalMetadata], error: Optional[BaseException] = None) -> Optional[StepPlan]:
        """The collectives and the plan of one step. ``local`` None: this rank has nothing to
        plan, because of ``error`` (raised here and as :class:`mmbal.Error` on the other
        ranks) or, without one, because its data has ended (None once every rank's has; see
        :meth:`MetadataGatherer._gather_step`)."""
        owner = self._prefetch_thread
        if owner is not None and owner is not threading.current_thread():
            # Two threads' gathers on one group pair up differently on different ranks: each
            # rank would plan with another rank's metadata, without any error.
            raise mmbal.Error("mmbal.torch.StepBalancer.plan: this balancer belongs to a running PrefetchingBalancer (its thread gathers on the same group); stop the prefetcher first or use another balancer")
        rank, _ = _group_rank_and_size(self.group)
        if self.verify:
            _verify_same_capacity(self.gatherer, self.metadata_group)
        meta = self.gatherer._gather_step(local, error)
        if meta is None:
            return None
        plan = self.plan_global(meta, rank)
        if self.verify:
            _verify_same_plan(plan, self.metadata_group)
        return plan

    def plan_global(self, meta: GlobalMetadata, rank: int) -> StepPlan:
        """Plans from already gathered metadata (local, no collective)."""
        _check_rank(rank, meta.ranks, "mmbal.torch.StepBalancer.plan_global")
        if int(meta.segment_modality.max(initial=0)) >= len(self.modalities):
            raise mmbal.Error(f"mmbal.torch.StepBalancer: segment_modality id {int(meta.segment_modality.max())} has no name (modalities: {list(self.modalities)})")
        if self.engine == "orchestrator":
            return self._plan_orchestrator(meta, rank)
        return self._plan_python(meta, rank)

    def _plan_orchestrator(self, meta: GlobalMetadata, rank: int) -> StepPlan:
        orch = self.orchestrator.plan(meta.workload(self.modalities))
        phases: Dict[str, PhaseResult] = {}
        for name in orch.phases:
            sample, segment, length = orch.items(name)
            items = np.asarray(sample if name == "llm" else segment, dtype=np.int64)
            if name == "llm" and not np.array_equal(items, np.arange(meta.samples)):
                raise mmbal.Error("mmbal.torch.StepBalancer: the orchestrator's LLM items are not the samples in order")
            cost, algorithm = self.orchestrator.policy(name)
            origin = np.asarray(orch.origin(name)).astype(np.int64)
            phases[name] = PhaseResult(name, items, np.asarray(length, np.int64), origin, orch.target(name), cost, algorithm)
        return StepPlan(meta, self.modalities, phases, rank, self.group, orchestration=orch, check=self.verify)

    def _plan_python(self, meta: GlobalMetadata, rank: int) -> StepPlan:
        phases: Dict[str, PhaseResult] = {}
        for mid in sorted(set(int(m) for m in np.unique(meta.segment_modality)) - {0}):
            name = self.modalities[mid]
            cost, algorithm = self.orchestrator.policy(name)
            seg = np.nonzero(meta.segment_modality == mid)[0]
            lengths = meta.segment_encoder_len[seg]
            origin = meta.sample_rank[meta.segment_sample[seg]]
            target = mmbal.balance(lengths, meta.ranks, algorithm=algorithm, cost=cost, origin=origin)
            phases[name] = PhaseResult(name, seg, lengths, origin, target, cost, algorithm)
        cost, algorithm = self.orchestrator.policy("llm")
        lengths = meta.sample_tokens()
        target = mmbal.balance(lengths, meta.ranks, algorithm=algorithm, cost=cost, origin=meta.sample_rank)
        phases["llm"] = PhaseResult("llm", np.arange(meta.samples, dtype=np.int64), lengths, meta.sample_rank, target, cost, algorithm)
        return StepPlan(meta, self.modalities, phases, rank, self.group, check=self.verify)


@dataclasses.dataclass
class PrefetchedStep:
    """One step handed out by :class:`PrefetchingBalancer`: its number (0, 1, 2, ...), this
    rank's metadata as the source gave it, and the plan (equal to ``balancer.plan(local)``)."""

    index: int
    local: LocalMetadata
    plan: StepPlan


def _same_group(a, b) -> bool:
    world = dist.group.WORLD
    return (world if a is None else a) is (world if b is None else b)


class PrefetchingBalancer:
    """Plans step k+1 on a background thread while the trainer runs step k (OrchMLLM §6; the
    Python counterpart of ``orchestrate::prefetching_planner``).

    A producer thread calls ``source(k)`` for k = 0, 1, 2, ... (this rank's
    :class:`LocalMetadata` of step k, or None at the end of its data), plans it with
    ``balancer`` (a collective metadata gather, then local planning with the GIL released in
    the orchestrator) and queues the :class:`PrefetchedStep`. Step k is planned once the
    trainer has taken step k - ``depth`` (1 or 2, default 1), so with depth 1 step k+1 is
    gathered and planned during step k, and at most ``depth`` steps wait or are being planned.
    Iterate it (or call :meth:`next`)::

        balancer = StepBalancer(group, metadata_group=dist.new_group(), modalities=...)
        with PrefetchingBalancer(balancer, lambda k: loader_metadata(k)) as steps:
            for step in steps:
                x = step.plan.move_samples(...)

    Contract:

    - ``balancer.metadata_group`` must be a group of its own, neither its exchange ``group`` nor
      the default group: the producer's gather runs while the trainer's collectives run, and
      two threads' collectives on one group would pair up differently on different ranks
      (refused with :class:`mmbal.Error`).
    - Steps arrive in order with consecutive indices; each plan equals ``balancer.plan(local)``
      called inline (same ``fingerprint``). The balancer belongs to the producer until it
      exits: ``balancer.plan`` from another thread, or a second prefetcher, raises
      :class:`mmbal.Error` (their gathers would pair up with the producer's).
    - An exception of ``source`` or of planning step k on any rank is raised by the
      :meth:`next` that would return step k, after steps 0 .. k-1: the exception itself on its
      rank, :class:`mmbal.Error` naming that rank on the others (the failing rank still takes
      part in the gather, so nobody waits for it). The stream is over after it.
    - ``source`` returning None on every rank at the same step ends the stream; on only some
      ranks, :class:`mmbal.Error` on every rank.
    - :meth:`stop` (also on leaving a ``with`` block) wakes a producer waiting for room, waits
      for a running ``source``/plan call, joins the thread and drops the queued steps. A step
      that already had room is still planned, even after ``stop``: another rank's producer may
      be in its gather, which needs this rank. So a stop never leaves a collective waiting as
      long as every rank has taken the same number of steps, as a training loop does. A
      process that exits while its producer waits in a gather another rank never joins (a
      training step that raised on one rank) ends with SIGABRT instead of its exit status:
      a thread inside a collective cannot be unwound.
    - One consumer thread calls :meth:`next`, :meth:`stop` and iterates; ``source`` runs on the
      producer only, sequentially, in step order, and may poll :attr:`stop_requested`.
    """

    def __init__(self, balancer: StepBalancer, source: Callable[[int], Optional[LocalMetadata]], depth: int = 1):
        where = "mmbal.torch.PrefetchingBalancer"
        if not isinstance(balancer, StepBalancer):
            raise mmbal.Error(f"{where}: balancer must be a StepBalancer, got {type(balancer).__name__}")
        if not callable(source):
            raise mmbal.Error(f"{where}: source must be callable (step -> LocalMetadata or None), got {type(source).__name__}")
        self.depth = _as_int(depth, "depth", where)
        if self.depth not in (1, 2):
            raise mmbal.Error(f"{where}: depth = {self.depth} (must be 1 or 2)")
        if _same_group(balancer.group, balancer.metadata_group) or _same_group(None, balancer.metadata_group):
            raise mmbal.Error(f"{where}: the balancer gathers metadata on its exchange group or the default group, which the training step's collectives use; build it with StepBalancer(group, metadata_group=torch.distributed.new_group(...)) so that the prefetch thread's collectives never interleave with them")
        if balancer._prefetch_thread is not None:
            raise mmbal.Error(f"{where}: the balancer already belongs to a running PrefetchingBalancer")
        self._balancer = balancer
        self._source = source
        self._cv = threading.Condition()
        self._ready: collections.deque = collections.deque()
        self._taken = 0  # steps handed to the consumer
        self._error: Optional[BaseException] = None
        self._finished = False  # the producer has exited (end of data, error or stop)
        self._stopping = False
        self._thread = threading.Thread(target=self._produce, name="mmbal-prefetch", daemon=True)
        balancer._prefetch_thread = self._thread
        self._thread.start()

    @property
    def stop_requested(self) -> bool:
        """Whether :meth:`stop` was called (a long source may poll it)."""
        return self._stopping

    def _step_metadata(self, k: int) -> Tuple[Optional[LocalMetadata], Optional[BaseException]]:
        try:
            local = self._source(k)
        except BaseException as e:  # re-raised by next() on this rank, after the gather
            return None, e
        if local is not None and not isinstance(local, LocalMetadata):
            return None, mmbal.Error(f"mmbal.torch.PrefetchingBalancer: source({k}) returned {type(local).__name__}, not a LocalMetadata or None")
        return local, None

    def _produce(self) -> None:
        k = 0
        try:
            while True:
                with self._cv:
                    # Room for step k; a stop skips only a step without room (see the class doc).
                    self._cv.wait_for(lambda: k < self._taken + self.depth or self._stopping)
                    if k >= self._taken + self.depth:
                        return
                local, error = self._step_metadata(k)
                plan = self._balancer._plan_step(local, error)
                if plan is None:
                    return
                with self._cv:
                    self._ready.append(PrefetchedStep(k, local, plan))
                    self._cv.notify_all()
                k += 1
        except BaseException as e:
            with self._cv:
                self._error = e
        finally:
            self._balancer._prefetch_thread = None
            with self._cv:
                self._finished = True
                self._cv.notify_all()

    def next(self) -> Optional[PrefetchedStep]:
        """The next planned step, blocking until it is ready; None once the data has ended,
        after :meth:`stop`, or after an error was raised. Raises the producer's exception of
        that step (see the class doc)."""
        with self._cv:
            self._cv.wait_for(lambda: self._ready or self._finished or self._stopping)
            if self._stopping:
                return None
            if self._ready:
                self._taken += 1
                self._cv.notify_all()
                return self._ready.popleft()
            error, self._error = self._error, None
        if error is not None:
            raise error
        return None

    def __iter__(self) -> Iterator[PrefetchedStep]:
        return self

    def __next__(self) -> PrefetchedStep:
        step = self.next()
        if step is None:
            raise StopIteration
        return step

    def stop(self) -> None:
        """Ends the stream: wakes the producer, waits for its running step, joins it and
        drops the queued steps. Idempotent."""
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join()
        with self._cv:
            self._ready.clear()

    def __enter__(self) -> "PrefetchingBalancer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------
# batch samplers
# --------------------------------------------------------------------------------------------


def deal_groups(groups: Sequence[Sequence[int]], ranks: int, costs: Sequence[float], fits: Optional[Callable[[List[int]], bool]] = None) -> List[List[int]]:
    """Makes the number of groups a multiple of ``ranks`` without losing or repeating a sample,
    so that every rank gets the same number of batches. Step s gives rank r the group
    ``s * ranks + r``. Deterministic.

    - With at least ``ranks`` groups: merges the two cheapest groups (ties: earlier position;
      the merged group takes the earlier one's place) until the count divides — at most
      ``ranks - 1`` merges, each of two groups no dearer than the others. ``fits(members)``
      (default: always) may refuse a merge, e.g. one above a sampler's token budget: then,
      instead, the group with most samples (ties: earlier) is split in halves until the count
      reaches the next multiple, and when no group has two samples left, empty groups make
      up the rest.
    - With fewer: splits that way until there are ``ranks`` groups or every group is a single
      sample, then appends empty groups (only when the epoch has fewer samples than ranks; no
      sample at all gives no group).

    O(g log g + ranks · log g) for g groups (heaps; positions kept as paths so a split group's
    halves sit where it was)."""
    where = "mmbal.torch.deal_groups"
    ranks = _as_int(ranks, "ranks", where)
    if not 0 < ranks <= mmbal.max_ranks:
        raise mmbal.Error(f"{where}: ranks = {ranks} is out of range [1, {mmbal.max_ranks}]")
    groups = list(groups)
    try:
        costs = [float(c) for c in costs]
    except (TypeError, ValueError) as e:
        raise mmbal.Error(f"{where}: costs must be numbers ({e})") from None
    if len(costs) != len(groups):
        raise mmbal.Error(f"{where}: {len(costs)} costs for {len(groups)} groups")
    if not all(math.isfinite(c) for c in costs):
        raise mmbal.Error(f"{where}: costs must be finite, got {next(c for c in costs if not math.isfinite(c))}")
    if not all(_is_list_like(g) for g in groups):
        raise mmbal.Error(f"{where}: groups must be lists of sample indices, got {next(g for g in groups if not _is_list_like(g))!r}")
    out: List[Optional[List[int]]] = [list(g) for g in groups if len(g)]
    cost = [c for g, c in zip(groups, costs) if len(g)]
    count = len(out)
    if count >= ranks and count % ranks:
        # Merges, cheapest pair first: heap of (cost, position, version); an entry is stale
        # once its group was merged into or away (version bumped / group gone).
        version = [0] * count
        heap = [(cost[i], i, 0) for i in range(count)]
        heapq.heapify(heap)

        def pop_live() -> int:
            while True:
                c, i, v = heapq.heappop(heap)
                if out[i] is not None and version[i] == v:
                    return i

        while count % ranks:
            a, b = sorted((pop_live(), pop_live()))
            merged = out[a] + out[b]
            if fits is not None and not fits(merged):
                break  # the cheapest pair does not fit: split instead
            out[a], out[b] = merged, None
            cost[a] += cost[b]
            version[a] += 1
            heapq.heappush(heap, (cost[a], a, version[a]))
            count -= 1
        out = [g for g in out if g is not None]
        target = -(-len(out) // ranks) * ranks if len(out) % ranks else len(out)
    else:
        target = ranks if 0 < count < ranks else count
    if len(out) < target:
        # Splits, the group with most samples first (ties: earlier position). A position is a
        # path: the halves of group p are p + (0,) and p + (1,), which sort where p was.
        parts = {i: (g, (i,)) for i, g in enumerate(out)}  # id -> (members, path)
        by_size = [(-len(g), path, i) for i, (g, path) in parts.items()]
        heapq.heapify(by_size)
        next_id = len(out)
        while len(parts) < target and -by_size[0][0] >= 2:
            _, path, i = heapq.heappop(by_size)
            g, _ = parts.pop(i)
            for half, members in ((0, g[: len(g) // 2]), (1, g[len(g) // 2 :])):
                parts[next_id] = (members, path + (half,))
                heapq.heappush(by_size, (-len(members), path + (half,), next_id))
                next_id += 1
        out = [g for g, _ in sorted(parts.values(), key=lambda entry: entry[1])]
        out += [[] for _ in range(target - len(out))]
    return out


def _epoch_rng(seed: int, epoch: int) -> np.random.Generator:
    """The generator of one (seed, epoch), identical on every rank. Negative values (which
    NumPy's seeding refuses) are taken modulo 2^64; non-negative ones as they are."""
    return np.random.default_rng([seed % (1 << 64) if seed < 0 else seed, epoch % (1 << 64) if epoch < 0 else epoch])


class _RankBatchSampler:
    """Shared part of the samplers: per-epoch global groups -> this rank's batches, epoch and
    mid-epoch position state."""

    def __init__(self, num_replicas: Optional[int], rank: Optional[int], seed: int):
        if num_replicas is None or rank is None:
            if not dist.is_available() or not dist.is_initialized():
                raise mmbal.Error(f"{type(self).__name__}: pass num_replicas and rank, or initialize torch.distributed")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        where = type(self).__name__
        num_replicas = _as_int(num_replicas, "num_replicas", where)
        rank = _as_int(rank, "rank", where)
        if not 0 < num_replicas <= mmbal.max_ranks:
            raise mmbal.Error(f"{where}: num_replicas = {num_replicas} is out of range [1, {mmbal.max_ranks}]")
        if not 0 <= rank < num_replicas:
            raise mmbal.Error(f"{where}: rank = {rank} not in [0, {num_replicas})")
        self.num_replicas = num_replicas
        self.rank = rank
        self.seed = _as_int(seed, "seed", where)
        self.epoch = 0
        self._start = 0  # batches of the current epoch to skip on the next __iter__
        self._yielded = 0
        self._cached_epoch: Optional[int] = None
        self._cached: List[List[int]] = []

    def _global_groups(self, epoch: int) -> Tuple[List[List[int]], List[float]]:
        raise NotImplementedError

    def _fits(self, members: List[int]) -> bool:
        """Whether a batch of ``members`` keeps the sampler's caps (``deal_groups`` merges only
        such batches)."""
        return True

    def global_batches(self, epoch: Optional[int] = None) -> List[List[int]]:
        """Every rank's batches of ``epoch`` (default: the current one), step-major: step s,
        rank r is entry ``s * num_replicas + r``. Identical on every rank. A copy: editing it
        does not change what the sampler yields."""
        return [list(b) for b in self._epoch_batches(self.epoch if epoch is None else _as_int(epoch, "epoch", type(self).__name__))]

    def _epoch_batches(self, e: int) -> List[List[int]]:
        if self._cached_epoch != e:
            groups, costs = self._global_groups(e)
            self._cached = deal_groups(groups, self.num_replicas, costs, self._fits)
            self._cached_epoch = e
        return self._cached

    def _batches(self) -> List[List[int]]:
        return self._epoch_batches(self.epoch)[self.rank :: self.num_replicas]

    def set_epoch(self, epoch: int) -> None:
        """Selects the epoch (reshuffles); like ``DistributedSampler.set_epoch``. After
        :meth:`load_state_dict`, ``set_epoch`` of the loaded epoch (the usual loop
        ``for epoch in range(start, E): sampler.set_epoch(epoch)``) keeps the resume position
        until the next ``__iter__``; any other epoch starts from its first batch."""
        epoch = _as_int(epoch, "epoch", f"{type(self).__name__}.set_epoch")
        if epoch == self.epoch and self._start:
            return
        self._select(epoch)

    def _select(self, epoch: int) -> None:
        self.epoch = epoch
        self._start = 0
        self._yielded = 0

    def __len__(self) -> int:
        return len(self._batches())

    def __iter__(self) -> Iterator[List[int]]:
        # Not a generator function: the position is reset when iter() is called, not at the
        # first next().
        batches = self._batches()
        start, self._start = self._start, 0
        self._yielded = start

        def gen():
            for b in batches[start:]:
                self._yielded += 1
                yield list(b)

        return gen()

    def state_dict(self, consumed: Optional[int] = None) -> Dict[str, int]:
        """``{"epoch", "seed", "position"}``: position = batches of this epoch already taken.
        The sampler counts what it yielded; a DataLoader with workers prefetches ahead, so pass
        the trainer's ``consumed`` count (batches actually trained this epoch) in that case."""
        where = f"{type(self).__name__}.state_dict"
        pos = self._yielded if consumed is None else _as_int(consumed, "consumed", where)
        if not 0 <= pos <= len(self):
            raise mmbal.Error(f"{where}: consumed = {pos} not in [0, {len(self)}] (batches of this epoch)")
        return {"epoch": self.epoch, "seed": self.seed, "position": pos}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        """Resumes exactly: the next ``__iter__`` yields the remaining batches of that epoch.
        Raises :class:`mmbal.Error` for a seed that differs (the epoch would be another one)
        or a position beyond the epoch."""
        where = f"{type(self).__name__}.load_state_dict"
        for key in ("epoch", "seed", "position"):
            if key not in state:
                raise mmbal.Error(f"{where}: missing key '{key}'")
        seed, epoch, pos = (_as_int(state[key], f"state['{key}']", where) for key in ("seed", "epoch", "position"))
        if seed != self.seed:
            raise mmbal.Error(f"{where}: seed {seed} differs from this sampler's {self.seed}")
        self._select(epoch)
        if not 0 <= pos <= len(self):
            raise mmbal.Error(f"{where}: position {pos} not in [0, {len(self)}]")
        self._start = pos
        self._yielded = pos


def _sample_costs(lengths, where: str, weights: Optional[Sequence[float]] = None) -> np.ndarray:
    if isinstance(lengths, Mapping):
        cols = [_int_array(f"lengths[{k!r}]", v, where) for k, v in lengths.items()]
        if len({c.shape[0] for c in cols}) > 1:
            raise mmbal.Error(f"{where}: the modality columns have different lengths {[c.shape[0] for c in cols]}")
        arr = np.stack(cols, axis=1) if cols else np.zeros((0, 0), np.int64)
    else:
        if isinstance(lengths, torch.Tensor):
            lengths = lengths.detach().cpu().numpy()
        arr = _as_array(lengths, "lengths", where)
        if arr.size == 0 and arr.dtype.kind not in "iu":
            arr = arr.astype(np.int64)  # an empty list is float64 to NumPy
        if arr.dtype.kind not in "iu":
            raise mmbal.Error(f"{where}: lengths must hold integers, got dtype {arr.dtype}")
        if arr.ndim == 1:
            arr = arr[:, None]
        if arr.ndim != 2:
            raise mmbal.Error(f"{where}: lengths must be 1-D [n] or 2-D [n, modalities], got shape {arr.shape}")
        if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
            raise mmbal.Error(f"{where}: lengths has a value {int(arr.max())} beyond int64")
        arr = arr.astype(np.int64)
        if arr.size and int(arr.min()) < 0:
            i = np.unravel_index(int(np.argmin(arr)), arr.shape)
            raise mmbal.Error(f"{where}: lengths{list(i)} = {int(arr[i])} is negative")
    try:
        w = np.ones(arr.shape[1]) if weights is None else np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        raise mmbal.Error(f"{where}: weights {weights!r} must be {arr.shape[1]} finite values >= 0") from None
    if w.shape != (arr.shape[1],) or not np.all(np.isfinite(w)) or (w.size and w.min() < 0):
        raise mmbal.Error(f"{where}: weights {list(np.atleast_1d(w))} must be {arr.shape[1]} finite values >= 0")
    return arr @ w


class TokenBudgetSampler(_RankBatchSampler):
    """Batch sampler: batches of at most ``max_tokens`` tokens per rank, counting every
    modality (text, image, audio, video tokens: the columns of ``lengths``).

    - ``lengths``: ``[n]`` or ``[n, modalities]`` integer tokens per sample, or a mapping
      modality name -> ``[n]``; a sample's tokens = Σ columns × ``weights`` (default 1 each).
    - Each epoch: shuffle (``shuffle=True``; seeded by ``(seed, epoch)``: identical on every
      rank), walk the order and close a batch when the next sample would exceed ``max_tokens``
      (a sample above the budget forms its own batch), then :func:`deal_groups`.
    Guarantees: every batch holds at most ``max_tokens`` tokens unless it is one sample above
    them (making the count a multiple of the ranks merges only batches that fit, else splits);
    every rank gets ``len(self)`` batches, equal on all ranks; within an epoch every sample is
    in exactly one batch of one rank; ``set_epoch``; ``state_dict`` / ``load_state_dict``
    resume mid-epoch exactly. Empty batches happen only when an epoch has fewer samples than
    ranks, or when every batch is one sample and no two fit together (the collate function
    must accept ``[]`` then). O(n log n) per epoch (computed once per epoch and cached).
    """

    def __init__(self, lengths, max_tokens: int, *, num_replicas=None, rank=None, shuffle: bool = True, seed: int = 0, weights=None):
        super().__init__(num_replicas, rank, seed)
        self.costs = _sample_costs(lengths, "mmbal.torch.TokenBudgetSampler", weights)
        if isinstance(max_tokens, torch.Tensor) and max_tokens.dim() == 0 and max_tokens.dtype != torch.bool:
            max_tokens = max_tokens.item()
        if isinstance(max_tokens, (bool, np.bool_)) or not isinstance(max_tokens, numbers.Real) or not (math.isfinite(max_tokens) and max_tokens > 0):
            raise mmbal.Error(f"mmbal.torch.TokenBudgetSampler: max_tokens = {max_tokens!r} must be a finite number > 0")
        self.max_tokens = max_tokens
        self.shuffle = _as_flag(shuffle, "shuffle", "mmbal.torch.TokenBudgetSampler")

    def _fits(self, members: List[int]) -> bool:
        return float(self.costs[members].sum()) <= self.max_tokens

    def _global_groups(self, epoch: int):
        n = self.costs.shape[0]
        order = _epoch_rng(self.seed, epoch).permutation(n) if self.shuffle else np.arange(n)
        groups: List[List[int]] = []
        costs: List[float] = []
        cur: List[int] = []
        total = 0.0
        for i in order.tolist():
            c = float(self.costs[i])
            if cur and total + c > self.max_tokens:
                groups.append(cur)
                costs.append(total)
                cur, total = [], 0.0
            cur.append(i)
            total += c
        if cur:
            groups.append(cur)
            costs.append(total)
        return groups, costs


class ISFSampler(_RankBatchSampler):
    """Batch sampler by OmniBal's Iterative Sampling and Filtering: groups whose vision size
    (≤ ``qv``) and LLM tokens (≤ ``qt``) both stay in a narrow band, dealt to the ranks with
    :func:`deal_groups` (same guarantees as :class:`TokenBudgetSampler`, the caps being
    ``qv`` and ``qt``: merges keep both). ``vision``: per
    sample vision size (images or vision tokens); ``text``: per sample LLM tokens (the whole
    sequence). The grouping is :func:`mmbal.isf` with a seed derived from ``(seed, epoch)``;
    extra keyword arguments go to it (``iterations``, ``qv_target``, ``qt_target``,
    ``sort_tail``; the options that drop samples are refused). O(n (T + 1)) per epoch.
    @see OmniBal §4.1, Alg. 1.
    """

    def __init__(self, vision, text, qv: int, qt: int, *, num_replicas=None, rank=None, seed: int = 0, **isf_options):
        super().__init__(num_replicas, rank, seed)
        where = "mmbal.torch.ISFSampler"
        self.vision = _int_array("vision", vision, where)
        self.text = _int_array("text", text, where)
        if self.vision.shape[0] != self.text.shape[0]:
            raise mmbal.Error(f"{where}: vision has {self.vision.shape[0]} samples but text has {self.text.shape[0]}")
        self.qv, self.qt = qv, qt
        for key, lossy in (("oversize", "drop"), ("drop_unfilled", True)):
            if isf_options.get(key) == lossy:
                raise mmbal.Error(f"{where}: {key}={lossy!r} would drop samples (a sampler loses none); use the defaults")
        if "seed" in isf_options:
            raise mmbal.Error(f"{where}: pass seed= to the sampler (each epoch derives ISF's seed from it)")
        self.isf_options = dict(isf_options)
        if not hasattr(mmbal, "isf"):
            raise mmbal.Error(f"{where}: this mmbal build has no ISF binding (mmbal.isf)")
        # fail now (not at the first epoch) on bad thresholds
        self._global_groups(0)

    def _global_groups(self, epoch: int):
        # One ISF seed per (seed, epoch), identical on every rank.
        isf_seed = int(_epoch_rng(self.seed, epoch).integers(0, 1 << 63))
        result = mmbal.isf(self.vision, self.text, qv=self.qv, qt=self.qt, seed=isf_seed, **self.isf_options)
        groups = [g.tolist() for g in result.groups]
        if sum(len(g) for g in groups) != self.text.shape[0]:  # guaranteed by ISF without drops
            raise mmbal.Error(f"mmbal.torch.ISFSampler: ISF grouped {sum(len(g) for g in groups)} of {self.text.shape[0]} samples")
        costs = [float(self.text[g].sum()) for g in groups]
        return groups, costs

    def _fits(self, members: List[int]) -> bool:
        return int(self.vision[members].sum()) <= self.qv and int(self.text[members].sum()) <= self.qt
