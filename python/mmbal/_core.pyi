"""Typed stubs of mmbal._core (the C++ module under the package mmbal)."""

from typing import Any, Optional

import numpy as np
import numpy.typing as npt

IntArray = Any  # anything numpy.asarray turns into a 1-D integer array (list, ndarray, CPU tensor)

class Error(ValueError): ...

class AllToAllPlan:
    rank: int
    ranks: int
    send_splits: list[int]
    recv_splits: list[int]
    source_rows: int
    dest_rows: int
    send_items: npt.NDArray[np.int64]
    recv_items: npt.NDArray[np.int64]
    pack_index: npt.NDArray[np.int64]
    unpack_index: npt.NDArray[np.int64]
    fingerprint: int
    def inverse(self) -> AllToAllPlan: ...

def balance(
    lengths: IntArray,
    ranks: int,
    algorithm: str,
    cost: str,
    origin: Optional[IntArray],
    count_cap: Optional[int | str],
    capacity: Optional[float],
    groups: Optional[IntArray],
    bytes: Optional[IntArray],
    ranks_per_node: Optional[int],
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.float64], float]: ...
def time_balance(lengths: IntArray, ranks: int, algorithm: str, cost: str, repeats: int) -> float: ...
def validate_assignment(rank: IntArray, slot: IntArray, ranks: int) -> None: ...
def assignment_loads(rank: IntArray, slot: IntArray, ranks: int, lengths: IntArray, cost: str) -> npt.NDArray[np.float64]: ...
def alltoall_plan(
    source_rank: IntArray, target_rank: IntArray, target_slot: IntArray, target_ranks: int, sizes: IntArray, rank: int
) -> AllToAllPlan: ...
