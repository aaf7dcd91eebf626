"""ISF grouping, CP token distribution and the bitfield mask / block-mask export, checked
against independent Python recomputation."""

import numpy as np
import pytest

import mmbal


# ------------------------------------------------------------------ ISF


@pytest.mark.parametrize("seed", range(4))
def test_isf_groups_every_sample_once_within_caps(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    vision = rng.integers(0, 6, n)
    text = rng.integers(10, 900, n)
    r = mmbal.isf(vision, text, qv=12, qt=2048, seed=seed)
    members = np.concatenate(r.groups) if len(r) else np.zeros(0, dtype=np.int64)
    assert sorted(members.tolist() + r.dropped.tolist()) == list(range(n))
    single = set(r.singletons.tolist())
    for g in r.groups:
        assert len(g) > 0
        if not (len(g) == 1 and int(g[0]) in single):
            assert vision[g].sum() <= 12 and text[g].sum() <= 2048
    assert r.stats["qt_target"] == 2048 - 128 and r.stats["qv_target"] == 12
    again = mmbal.isf(vision, text, qv=12, qt=2048, seed=seed)
    np.testing.assert_array_equal(again.members, r.members)
    np.testing.assert_array_equal(again.offsets, r.offsets)


def test_isf_oversize_policies():
    vision, text = [1, 50, 2], [10, 10, 10]
    assert mmbal.isf(vision, text, qv=10, qt=100).singletons.tolist() == [1]
    assert mmbal.isf(vision, text, qv=10, qt=100, oversize="drop").dropped.tolist() == [1]
    with pytest.raises(mmbal.Error, match="1"):
        mmbal.isf(vision, text, qv=10, qt=100, oversize="reject")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(vision=[1, 2], text=[1], qv=1, qt=1), "vision has 2 entries but text has 1"),
        (dict(vision=[1], text=[1], qv=0, qt=1), "qv = 0 is out of range"),
        (dict(vision=[1], text=[-1], qv=1, qt=1), r"text\[0\] = -1"),
        (dict(vision=[1], text=[1], qv=1, qt=1, oversize="keep"), "oversize = 'keep'"),
        (dict(vision=[1], text=[1], qv=4, qt=1, qv_target=9), "qv_target = 9 is out of range"),
        (dict(vision=[1], text=[1], qv=1, qt=1, drop_unfilled="no"), "drop_unfilled: expected True or False, got 'no'"),
        (dict(vision=[1], text=[1], qv=1, qt=1, sort_tail=None), "sort_tail: expected True or False, got None"),
    ],
)
def test_isf_bad_input(kwargs, message):
    with pytest.raises(mmbal.Error, match=message):
        mmbal.isf(**kwargs)


def test_isf_caps_take_64_bits_as_in_cpp_and_the_tool():
    # qv, qt above 2^32 - 1 were refused in Python only; such a cap is above every sample
    r = mmbal.isf([3, 4], [5, 6], qv=2**40, qt=2**63, qv_target=7, qt_target=11)
    assert sorted(i for g in r.groups for i in g) == [0, 1]
    with pytest.raises(mmbal.Error, match="qt = 18446744073709551616 is out of range"):
        mmbal.isf([3], [5], qv=1, qt=2**64)


# ------------------------------------------------------------------ masks


def random_mask_workload(rng, samples):
    seg_sample, seg_mod, seg_tok = [], [], []
    for s in range(samples):
        for _ in range(int(rng.integers(1, 5))):
            seg_sample.append(s)
            seg_mod.append(["text", "image", "audio"][int(rng.integers(0, 3))])
            seg_tok.append(int(rng.integers(1, 9)))
    return mmbal.Workload(np.zeros(samples, dtype=np.int64), seg_sample, seg_mod, seg_tok), seg_sample, seg_mod, seg_tok


def reference_dense(seg_sample, seg_mod, seg_tok, order, assign, layout):
    """The mask rule written directly: text attends earlier tokens of its document and itself;
    a modality token attends every token of its span ("span") or of every span of its modality
    in its document ("modality")."""
    doc, kind, span = [], [], []
    for d, s in enumerate(order):
        segs = [k for k in range(len(seg_sample)) if seg_sample[k] == s]
        if layout == "prefixed":
            segs = [k for k in segs if seg_mod[k] != "text"] + [k for k in segs if seg_mod[k] == "text"]
        for k in segs:
            for _ in range(seg_tok[k]):
                doc.append(d)
                kind.append(seg_mod[k])
                span.append(k)
    T = len(doc)
    out = np.zeros((T, T), dtype=bool)
    for q in range(T):
        for k in range(T):
            if doc[q] != doc[k]:
                continue
            if kind[q] == "text":
                out[q, k] = k <= q
            elif assign == "span":
                out[q, k] = span[k] == span[q]
            else:
                out[q, k] = kind[k] == kind[q]
    return out


@pytest.mark.parametrize("assign", ["modality", "span"])
@pytest.mark.parametrize("layout", ["embedded", "prefixed"])
def test_mask_workloads_and_block_mask_match_the_dense_rule(assign, layout):
    rng = np.random.default_rng(hash((assign, layout)) % 2**32)
    w, seg_sample, seg_mod, seg_tok = random_mask_workload(rng, 6)
    order = [4, 0, 2]
    m = mmbal.bitfield_mask(w, order, assign=assign, layout=layout)
    dense = reference_dense(seg_sample, seg_mod, seg_tok, order, assign, layout)
    T = dense.shape[0]
    assert m.size == T and m.document_count == 3
    np.testing.assert_array_equal(m.dense(), dense)
    assert m.attends(T - 1, 0) == dense[T - 1, 0]
    np.testing.assert_array_equal(m.token_workloads(), dense.sum(axis=1))
    for block in (1, 3, 8, 64):
        nb = -(-T // block)
        want = [int(dense[b * block:(b + 1) * block].sum()) for b in range(nb)]
        np.testing.assert_array_equal(m.block_workloads(block), want)
    for qb, kb in ((4, 4), (3, 5), (128, 128)):
        bm = m.block_mask(qb, kb)
        nq, nk = -(-T // qb), -(-T // kb)
        assert bm["kv_num_blocks"].shape == (1, 1, nq) and bm["kv_indices"].shape == (1, 1, nq, nk)
        assert bm["kv_indices"].dtype == np.int32 and bm["q_indices"].shape == (1, 1, nk, nq)
        for i in range(nq):
            partial = bm["kv_indices"][0, 0, i, :bm["kv_num_blocks"][0, 0, i]].tolist()
            full = bm["full_kv_indices"][0, 0, i, :bm["full_kv_num_blocks"][0, 0, i]].tolist()
            for j in range(nk):
                tile = dense[i * qb:(i + 1) * qb, j * kb:(j + 1) * kb]
                expect = "full" if tile.all() else ("partial" if tile.any() else "empty")
                got = "full" if j in full else ("partial" if j in partial else "empty")
                assert got == expect, (i, j)
            # The transpose agrees.
            for j in partial:
                assert i in bm["q_indices"][0, 0, j, :bm["q_num_blocks"][0, 0, j]].tolist()
    again = mmbal.BitfieldMask.from_bits(m.bits, m.documents)
    np.testing.assert_array_equal(again.dense(), dense)


def test_block_mask_feeds_flex_attention_when_available():
    torch = pytest.importorskip("torch")
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    w = mmbal.Workload([0, 0], [0, 0, 1], ["text", "image", "text"], [100, 60, 90])
    m = mmbal.bitfield_mask(w)
    bm = m.block_mask()
    block = flex.BlockMask.from_kv_blocks(torch.from_numpy(bm["kv_num_blocks"]), torch.from_numpy(bm["kv_indices"]),
                                          torch.from_numpy(bm["full_kv_num_blocks"]),
                                          torch.from_numpy(bm["full_kv_indices"]))
    assert block is not None


def test_mask_bad_input():
    with pytest.raises(mmbal.Error, match="2 bit patterns but 1 document ids"):
        mmbal.BitfieldMask.from_bits([1, 1], [0])
    with pytest.raises(mmbal.Error, match="reserved"):
        mmbal.BitfieldMask.from_bits(np.array([2**63 + 1], dtype=np.uint64), [0])
    with pytest.raises(mmbal.Error, match="document"):
        mmbal.BitfieldMask.from_bits([1, 1], [1, 0])
    w = mmbal.Workload([0], [0], ["text"], [4])
    with pytest.raises(mmbal.Error, match="assign = 'bits'"):
        mmbal.bitfield_mask(w, assign="bits")
    with pytest.raises(mmbal.Error, match="layout = 'sideways'"):
        mmbal.bitfield_mask(w, layout="sideways")
    with pytest.raises(mmbal.Error, match=r"samples\[0\] = 3 is out of range"):
        mmbal.bitfield_mask(w, [3])
    m = mmbal.bitfield_mask(w)
    with pytest.raises(mmbal.Error, match="block = 0"):
        m.block_workloads(0)
    with pytest.raises(mmbal.Error, match="q_block = 0"):
        m.block_mask(0, 128)
    # 40,000 1-token blocks a side: 1.6e9 cells (25 GiB), above the 2^28-cell limit
    long = mmbal.BitfieldMask.from_bits(np.ones(40000, np.uint64), np.zeros(40000, np.int64))
    with pytest.raises(mmbal.Error, match="40000 x 40000 blocks of 1 x 1 tokens exceed 2\\^28 cells"):
        long.block_mask(1, 1)
    assert long.block_mask(128, 128)["kv_num_blocks"].shape == (1, 1, 313)
    with pytest.raises(mmbal.Error, match="q = 4 is out of range"):
        m.attends(4, 0)


# ------------------------------------------------------------------ CP distribution


@pytest.mark.parametrize("distributor", ["lpt", "zigzag", "contiguous", "random"])
def test_distribution_is_a_partition_with_recomputed_workloads(distributor):
    rng = np.random.default_rng(5)
    w, *_ = random_mask_workload(rng, 12)
    m = mmbal.bitfield_mask(w)
    for ranks in (1, 2, 3, 5):
        for block in (2, 7):
            d = mmbal.distribute_tokens(m, ranks, block=block, distributor=distributor, seed=3)
            bw = m.block_workloads(block)
            owner = d["rank_of_block"]
            assert len(owner) == len(bw)
            np.testing.assert_array_equal(d["rank_workloads"], np.bincount(owner, weights=bw, minlength=ranks))
            idx = np.concatenate(d["token_indices"])
            assert sorted(idx.tolist()) == list(range(m.size))
            for r in range(ranks):
                assert len(d["token_indices"][r]) == d["rank_tokens"][r]
                assert (owner[d["token_indices"][r] // block] == r).all()
                assert (np.diff(d["token_indices"][r]) > 0).all()
            if distributor == "lpt":
                assert max(d["rank_workloads"]) <= bw.sum() / ranks + bw.max()


def test_distribution_from_arrays_and_bad_input():
    d = mmbal.distribute_tokens([5, 1, 1, 5], 2, tokens=8, block=2)
    assert sorted(d["rank_workloads"].tolist()) == [6, 6]
    with pytest.raises(mmbal.Error, match="tokens= is required"):
        mmbal.distribute_tokens([1, 2], 2)
    with pytest.raises(mmbal.Error, match="ranks = 0"):
        mmbal.distribute_tokens([1, 2], 0, tokens=4, block=2)
    with pytest.raises(mmbal.Error, match="block = 0"):
        mmbal.distribute_tokens([1, 2], 2, tokens=4, block=0)
    with pytest.raises(mmbal.Error, match="ring"):
        mmbal.distribute_tokens([1, 2], 2, tokens=4, block=2, distributor="ring")
    with pytest.raises(mmbal.Error, match="block"):
        mmbal.distribute_tokens([1, 2, 3], 2, tokens=4, block=2)
    with pytest.raises(mmbal.Error, match=r"block_workloads\[1\] = -2"):
        mmbal.distribute_tokens([1, -2], 2, tokens=4, block=2)
    # ceil(T / B) near 2^64 wrapped to 0 blocks, so an empty list passed and the tokens vanished
    with pytest.raises(mmbal.Error, match=r"tokens = 18446744073709551615 is out of range \[0, 268435456\]"):
        mmbal.distribute_tokens([], 1, tokens=2**64 - 1, block=2)
    # one block of 2^32 - 1 tokens (a one-element list) built 32 GiB of token_indices
    with pytest.raises(mmbal.Error, match=r"tokens = 4294967295 is out of range \[0, 268435456\]"):
        mmbal.distribute_tokens([5], 1, tokens=2**32 - 1, block=2**32 - 1)
    assert mmbal.distribute_tokens([5], 1, tokens=2**20, block=2**20)["rank_tokens"].tolist() == [2**20]
    with pytest.raises(mmbal.Error, match="sum to more than 2\\^64 - 1"):
        mmbal.distribute_tokens([2**63, 2**63], 2, tokens=4, block=2)
    with pytest.raises(mmbal.Error, match="sum to 9223372036854775812, above 2\\^63 - 1"):
        mmbal.distribute_tokens([2**63 - 1, 5], 1, tokens=4, block=2)
