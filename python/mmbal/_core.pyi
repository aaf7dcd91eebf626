"""Typed stubs of mmbal._core (the C++ module under the package mmbal)."""

from typing import Any, Optional, Sequence

import numpy as np
import numpy.typing as npt

IntArray = Any  # anything numpy.asarray turns into a 1-D integer array (list, ndarray, CPU tensor)

class Error(ValueError): ...

max_ranks: int

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
    def check(self, rank: int, rows: int) -> None: ...
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
def as_index(value: object, name: str) -> int: ...
def as_flag(value: object, name: str) -> bool: ...
def assignment_loads(rank: IntArray, slot: IntArray, ranks: int, lengths: IntArray, cost: str) -> npt.NDArray[np.float64]: ...
def alltoall_plan(
    source_rank: IntArray, target_rank: IntArray, target_slot: IntArray, target_ranks: int, sizes: IntArray, rank: int
) -> AllToAllPlan: ...
def balanced_partitions(seqlen_list: IntArray, k_partitions: int, equal_size: bool, refine: bool = True) -> list[list[int]]: ...

class Workload:
    def __init__(
        self,
        sample_rank: IntArray,
        segment_sample: IntArray,
        segment_modality: Sequence[str] | IntArray,
        segment_tokens: IntArray,
        segment_encoder_len: Optional[IntArray] = None,
        sample_group: Optional[IntArray] = None,
        modalities: Optional[Sequence[str]] = None,
    ) -> None: ...
    @property
    def samples(self) -> int: ...
    @property
    def segments(self) -> int: ...
    @property
    def modalities(self) -> list[str]: ...

class Orchestration:
    @property
    def phases(self) -> list[str]: ...
    @property
    def fingerprint(self) -> int: ...
    @property
    def ranks(self) -> int: ...
    @property
    def composed_bytes(self) -> int: ...
    @property
    def two_hop_bytes(self) -> int: ...
    def items(self, phase: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]: ...
    def target(
        self, phase: str
    ) -> tuple[
        npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.float64], float, str
    ]: ...
    def composed_layout(
        self, modality: str
    ) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.int32]]: ...
    def report(self, phase: str) -> dict[str, Any]: ...
    def phase_plan(self, phase: str, rank: int, sizes: Optional[IntArray] = None) -> AllToAllPlan: ...
    def composed_plan(self, modality: str, rank: int, sizes: Optional[IntArray] = None) -> AllToAllPlan: ...

class Orchestrator:
    def __init__(
        self,
        ranks: int,
        ranks_per_node: int,
        policies: Optional[dict[str, Any]],
        threads: Optional[int],
        bytes_per_token: int,
        relabel: bool,
    ) -> None: ...
    def plan(self, workload: Workload) -> Orchestration: ...
    def policy(self, phase: str) -> tuple[str, str]: ...

def isf(
    vision: IntArray,
    text: IntArray,
    qv: int,
    qt: int,
    qv_target: Optional[int],
    qt_target: Optional[int],
    iterations: int,
    seed: int,
    oversize: str,
    drop_unfilled: bool,
    sort_tail: bool,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], dict[str, Any]]: ...
def distribute_tokens(
    block_workloads: IntArray, tokens: int, ranks: int, block: int, distributor: str, seed: int
) -> dict[str, Any]: ...

class BitfieldMask:
    @staticmethod
    def from_bits(bits: IntArray, documents: IntArray) -> BitfieldMask: ...
    @property
    def size(self) -> int: ...
    @property
    def document_count(self) -> int: ...
    @property
    def bits(self) -> npt.NDArray[np.uint64]: ...
    @property
    def documents(self) -> npt.NDArray[np.int64]: ...
    def attends(self, q: int, k: int) -> bool: ...
    def token_workloads(self) -> npt.NDArray[np.int64]: ...
    def block_workloads(self, block: int = 128) -> npt.NDArray[np.int64]: ...
    def dense(self) -> npt.NDArray[np.bool_]: ...
    def block_mask(self, q_block: int = 128, kv_block: int = 128) -> dict[str, Any]: ...

def bitfield_mask(workload: Workload, samples: Optional[IntArray], assign: str, layout: str) -> BitfieldMask: ...
