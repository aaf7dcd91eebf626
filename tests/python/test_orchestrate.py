"""mmbal.Workload / Orchestrator / Orchestration: items, targets, phase and composed plans
checked by moving NumPy rows and comparing with layouts recomputed in Python."""

import numpy as np
import pytest

import mmbal


def random_workload(rng, samples, ranks):
    """A workload with text, image and audio segments; returns the Workload and its arrays."""
    sample_rank = np.sort(rng.integers(0, ranks, samples))  # rank-major gathered order
    seg_sample, seg_mod, seg_tok, seg_enc = [], [], [], []
    for s in range(samples):
        for _ in range(int(rng.integers(0, 5))):
            mod = ["text", "image", "audio"][int(rng.integers(0, 3))]
            tok = int(rng.integers(0, 50))  # zero-length segments included
            seg_sample.append(s)
            seg_mod.append(mod)
            seg_tok.append(tok)
            seg_enc.append(tok * 4 if mod != "text" else tok)
    w = mmbal.Workload(sample_rank, np.array(seg_sample, dtype=np.int64), seg_mod, np.array(seg_tok, dtype=np.int64),
                       np.array(seg_enc, dtype=np.int64))
    return w, sample_rank, np.array(seg_sample, dtype=np.int64), seg_mod, np.array(seg_tok), np.array(seg_enc)


def run(plans, inputs):
    """all_to_all_single among the plans' ranks, in process (rows of any width)."""
    ranks = len(plans)
    sends = [np.split(x[p.pack_index], np.cumsum(p.send_splits)[:-1]) for p, x in zip(plans, inputs)]
    outs = []
    for q, p in enumerate(plans):
        recv = np.concatenate([sends[s][q] for s in range(ranks)])
        assert recv.shape[0] == p.dest_rows
        outs.append(recv[p.unpack_index])
    return outs


def rows_of(keys, sizes):
    """Rows for items `keys` (in order): item k contributes sizes[k] rows [k, j]."""
    rows = [[k, j] for k in keys for j in range(int(sizes[k]))]
    return np.array(rows, dtype=np.int64).reshape(-1, 2)


POLICIES = {"llm": ("tokens", "lpt"), "image": ("tokens", "lpt+refine"), "audio": ("padded", "padded")}


@pytest.mark.parametrize("seed", range(6))
def test_orchestration_items_targets_and_plans(seed):
    rng = np.random.default_rng(seed)
    ranks = int(rng.integers(1, 6))
    samples = int(rng.integers(1, 30))
    w, sample_rank, seg_sample, seg_mod, seg_tok, seg_enc = random_workload(rng, samples, ranks)
    orch = mmbal.Orchestrator(ranks, ranks_per_node=2, policies=POLICIES, threads=2)
    o = orch.plan(w)
    assert o.phases[-1] == "llm"
    present = [m for m in dict.fromkeys(seg_mod) if m != "text"]
    assert o.phases[:-1] == present
    assert o.fingerprint == mmbal.Orchestrator(ranks, ranks_per_node=2, policies=POLICIES, threads=1).plan(w).fingerprint

    # LLM phase: items are the samples, weight = total tokens.
    sample, segment, length = o.items("llm")
    np.testing.assert_array_equal(sample, np.arange(samples))
    np.testing.assert_array_equal(segment, np.full(samples, -1))
    np.testing.assert_array_equal(length, np.bincount(seg_sample, weights=seg_tok, minlength=samples).astype(int))
    llm = o.target("llm")
    llm.validate()
    np.testing.assert_allclose(llm.loads, np.bincount(llm.rank, weights=length, minlength=ranks))
    np.testing.assert_array_equal(o.origin("llm"), sample_rank)

    for m in present:
        sample, segment, length = o.items(m)
        rows = [k for k in range(len(seg_mod)) if seg_mod[k] == m]
        np.testing.assert_array_equal(segment, rows)
        np.testing.assert_array_equal(sample, seg_sample[rows])
        np.testing.assert_array_equal(length, seg_enc[rows])
        t = o.target(m)
        t.validate()
        rep = o.report(m)
        np.testing.assert_allclose(rep["loads_after"], t.loads)
        assert rep["items"] == len(rows)

        # Encoder phase: rows of each segment (encoder length rows) from origin to encoder rank.
        enc_sizes = seg_enc[rows]
        origin = o.origin(m)
        plans = [o.phase_plan(m, r) for r in range(ranks)]
        assert len({p.fingerprint for p in plans}) == 1
        inputs = [rows_of([i for i in range(len(rows)) if origin[i] == r], enc_sizes) for r in range(ranks)]
        outs = run(plans, inputs)
        for r in range(ranks):
            mine = sorted((int(t.slot[i]), i) for i in range(len(rows)) if t.rank[i] == r)
            np.testing.assert_array_equal(outs[r], rows_of([i for _, i in mine], enc_sizes))

        # Composed plan: encoder outputs (LLM-token rows) from the encoder ranks straight to the
        # LLM rank, in assembly order: LLM slot order of the samples, then segment order.
        tok_sizes = seg_tok[rows]
        enc_out = []
        for r in range(ranks):
            mine = sorted((int(t.slot[i]), i) for i in range(len(rows)) if t.rank[i] == r)
            enc_out.append(rows_of([i for _, i in mine], tok_sizes))
        cplans = [o.composed_plan(m, r) for r in range(ranks)]
        assert len({p.fingerprint for p in cplans}) == 1
        got = run(cplans, enc_out)
        ct = o.composed_target(m)
        for r in range(ranks):
            llm_samples = sorted((int(llm.slot[s]), s) for s in range(samples) if llm.rank[s] == r)
            order = [i for _, s in llm_samples for i in range(len(rows)) if sample[i] == s]  # rows ascend = sequence
            np.testing.assert_array_equal(got[r], rows_of(order, tok_sizes))
            np.testing.assert_array_equal(ct.slot[order], np.arange(len(order)))
        back = run([p.inverse() for p in cplans], got)
        for r in range(ranks):
            np.testing.assert_array_equal(back[r], enc_out[r])
        # Explicit sizes override the defaults (e.g. 2 rows per token).
        p2 = o.composed_plan(m, 0, sizes=2 * tok_sizes)
        assert p2.source_rows == 2 * cplans[0].source_rows


def test_workload_from_integer_modality_ids_equals_the_named_form():
    rng = np.random.default_rng(9)
    w, sample_rank, seg_sample, seg_mod, seg_tok, seg_enc = random_workload(rng, 40, 4)
    names = ["text", "audio", "image"]
    ids = np.array([names.index(m) for m in seg_mod], dtype=np.int32)
    w2 = mmbal.Workload(sample_rank, seg_sample, ids, seg_tok, seg_enc, modalities=names)
    orch = mmbal.Orchestrator(4, policies=POLICIES)
    a, b = orch.plan(w), orch.plan(w2)
    assert sorted(a.phases) == sorted(b.phases)
    for ph in a.phases:
        np.testing.assert_array_equal(a.target(ph).rank, b.target(ph).rank)
        np.testing.assert_array_equal(a.items(ph)[1], b.items(ph)[1])
    with pytest.raises(mmbal.Error, match=r"segment_modality\[0\] = 3 is out of range \[0, 2\]"):
        mmbal.Workload([0], [0], [3], [1], modalities=names)
    with pytest.raises(mmbal.Error, match=r"modalities\[1\]: expected a str, got 5"):
        mmbal.Workload([0], [0], [0], [1], modalities=["text", 5])


def test_default_policies_and_reports():
    w = mmbal.Workload([0, 1], [0, 0, 1], ["text", "audio", "text"], [4, 6, 9], [4, 60, 9])
    orch = mmbal.Orchestrator(2)
    cost, algorithm = orch.policy("llm")
    assert cost.startswith("attention:alpha=1,beta=1.54") and algorithm == "lpt+refine"
    assert orch.policy("audio") == ("padded", "padded")
    assert orch.policy("image") == ("tokens", "lpt+refine")
    # A cost without an algorithm runs that cost's default.
    assert mmbal.Orchestrator(2, policies={"llm": ("padded", "")}).policy("llm") == ("padded", "padded")
    assert mmbal.Orchestrator(2, policies={"audio": ("tokens", "")}).policy("audio") == ("tokens", "lpt+refine")
    o = orch.plan(w)
    rep = o.report("llm")
    assert rep["cost"] == cost and rep["items"] == 2
    assert rep["max_after"] <= rep["max_before"]
    # The library computes the imbalance once; the dict only carries it.
    loads = rep["loads_after"]
    assert rep["mean"] == pytest.approx(sum(loads) / len(loads))
    assert rep["imbalance_after"] == pytest.approx(max(loads) / rep["mean"] if rep["mean"] > 0 else 1.0)
    before = rep["loads_before"]
    assert rep["imbalance_before"] == pytest.approx(max(before) / rep["mean_before"] if rep["mean_before"] > 0 else 1.0)


def test_empty_workload_has_only_the_llm_phase():
    o = mmbal.Orchestrator(3).plan(mmbal.Workload([], [], [], []))
    assert o.phases == ["llm"]
    assert len(o.target("llm").rank) == 0
    p = o.phase_plan("llm", 2)
    assert p.send_splits == [0, 0, 0] and p.dest_rows == 0


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: mmbal.Workload([0, 1], [0, 2], ["text", "text"], [1, 1]), r"segment_sample\[1\] = 2 is out of range"),
        (lambda: mmbal.Workload([0, 1], [1, 0], ["text", "text"], [1, 1]), r"segment_sample\[1\] = 0 < segment_sample"),
        (lambda: mmbal.Workload([0, -1], [0], ["text"], [1]), r"sample_rank\[1\] = -1"),
        (lambda: mmbal.Workload([0], [0], ["text"], [-5]), r"segment_tokens\[0\] = -5"),
        (lambda: mmbal.Workload([0], [0], ["text"], [1, 2]), "segment_tokens has 2 entries"),
        (lambda: mmbal.Workload([0], [0], [3], [1]), r"segment_modality\[0\]: expected a str, got 3"),
        (lambda: mmbal.Workload([0], [0], "text", [1]), "segment_modality: expected a sequence"),
        (lambda: mmbal.Workload([0], [0], ["llm"], [1]), "reserved"),
        (lambda: mmbal.Workload([0], [0, 0], ["text", "image"], [2**31, 2**31]), "LLM length 4294967296 exceeds"),
        (lambda: mmbal.Orchestrator(0), r"ranks = 0 is out of range"),
        (lambda: mmbal.Orchestrator(2, policies={"llm": ("tokens", "nope")}), "phase 'llm': unknown algorithm 'nope'"),
        (lambda: mmbal.Orchestrator(2, policies={"llm": ("attention:beta=nan", "lpt")}), "beta = 'nan'"),
        (lambda: mmbal.Orchestrator(2, policies={"text": ("tokens", "lpt")}), "phase 'text' does not exist"),
        (lambda: mmbal.Orchestrator(2, policies={"llm": {"colour": 1}}), "unknown key 'colour'"),
        (lambda: mmbal.Orchestrator(2, policies={"llm": {"cost": 5}}), r"policies\['llm'\]\['cost'\]: expected a str, got 5"),
        (lambda: mmbal.Orchestrator(2, policies={"llm": {"algorithm": None}}), r"\['algorithm'\]: expected a str, got None"),
        (lambda: mmbal.Orchestrator(2, policies={"llm": {"keep_groups": "yes"}}), r"\['keep_groups'\]: expected True or False, got 'yes'"),
        (lambda: mmbal.Orchestrator(2, policies={"llm": {"keep_groups": None}}), r"\['keep_groups'\]: expected True or False, got None"),
        (lambda: mmbal.Orchestrator(2, policies={"llm": {"capacity": True}}), "capacity: expected a number, got True"),
        (lambda: mmbal.Orchestrator(2, relabel="no"), "relabel: expected True or False, got 'no'"),
        (lambda: mmbal.Orchestrator(np.bool_(True)), "ranks: expected an int, got True"),
        # item bytes whose sums would wrap the traffic counts (2 x (2^32 - 1)^2 > 2^57)
        (lambda: mmbal.Orchestrator(2, bytes_per_token=2**32 - 1, ranks_per_node=1).plan(
            mmbal.Workload([0, 0, 1, 1], [0, 1, 2, 3], ["image"] * 4, [1] * 4, [2**32 - 1] * 4)),
         "phase 'image': its 4 items carry more than 2\\^57 bytes"),
        (lambda: mmbal.Orchestrator(2, bytes_per_token=2**32 - 1).plan(
            mmbal.Workload([0, 0, 1, 1], [0, 1, 2, 3], ["text"] * 4, [2**32 - 1] * 4)),
         "phase 'llm': its 4 items carry more than 2\\^57 bytes"),
        (lambda: mmbal.Orchestrator(2, policies={"llm": {"capacity": float("nan")}}), "capacity = nan"),
        (lambda: mmbal.Orchestrator(2, bytes_per_token=0), "bytes_per_token = 0"),
        (lambda: mmbal.Orchestrator(2).plan(mmbal.Workload([0, 5], [], [], [])), "is on rank 5 >= ranks 2"),
        (lambda: mmbal.Orchestrator(2).plan([0, 1]), "expected an mmbal.Workload"),
        (lambda: mmbal.Orchestrator(2).plan(mmbal.Workload([0], [], [], [])).phase_plan("video", 0), "no phase 'video'"),
        (lambda: mmbal.Orchestrator(2).plan(mmbal.Workload([0], [], [], [])).phase_plan("llm", 2), "rank = 2"),
        (lambda: mmbal.Orchestrator(2).plan(mmbal.Workload([0], [], [], [])).phase_plan("llm", 0, [1, 2]),
         "sizes has 2 entries but there are 1 items"),
        (lambda: mmbal.Orchestrator(2).plan(mmbal.Workload([0], [], [], [])).composed_plan("llm", 0),
         "no encoder phase 'llm'"),
        (lambda: mmbal.Orchestrator(2, policies={"llm": ("tokens", "lpt")}).plan(
            mmbal.Workload([0, 1], [0, 1], ["text", "text"], [1, 1])).phase_plan("llm", 0, [1, -1]), r"sizes\[1\] = -1"),
    ],
)
def test_orchestrator_bad_input(call, message):
    with pytest.raises(mmbal.Error, match=message):
        call()


def test_workload_forms_give_the_same_phases_and_fingerprint():
    """Modality ids with `modalities=` interned the names in list order, so the phase order
    and the plan fingerprint differed from the string form of the same batch."""
    names = ["text", "image", "audio"]
    mods = [0, 2, 1, 0, 2]
    args = ([0, 0, 1, 1], [0, 0, 1, 2, 3], [names[m] for m in mods], [5, 7, 3, 9, 4], [5, 70, 30, 9, 40])
    a = mmbal.Workload(*args)
    b = mmbal.Workload(args[0], args[1], mods, args[3], args[4], modalities=names)
    o = mmbal.Orchestrator(2)
    pa, pb = o.plan(a), o.plan(b)
    assert pa.phases == pb.phases == ["audio", "image", "llm"]
    assert pa.fingerprint == pb.fingerprint


PLAN_FIELDS = ("rank", "ranks", "send_splits", "recv_splits", "source_rows", "dest_rows", "send_items", "recv_items", "pack_index", "unpack_index", "fingerprint")


def test_plans_workloads_and_masks_pickle_to_equal_objects():
    """A plan, workload or mask crosses a process boundary (a DataLoader worker, a cache) by
    pickle: what comes back is equal field by field (read-only index arrays, the same
    fingerprint) and plans the same as the original; a corrupt state raises mmbal.Error."""
    import copy
    import pickle

    rng = np.random.default_rng(5)
    w, sample_rank, seg_sample, seg_mod, seg_tok, seg_enc = random_workload(rng, 40, 4)
    grouped = mmbal.Workload(sample_rank, seg_sample, [["text", "image", "audio"].index(m) for m in seg_mod], seg_tok, seg_enc, sample_group=np.arange(40) // 3, modalities=["audio", "text", "image"])
    orch = mmbal.Orchestrator(4, ranks_per_node=2)
    for work in (w, grouped):
        for back in [pickle.loads(pickle.dumps(work, protocol=p)) for p in range(2, pickle.HIGHEST_PROTOCOL + 1)] + [copy.deepcopy(work)]:
            assert (back.samples, back.segments, back.modalities) == (work.samples, work.segments, work.modalities)
            assert orch.plan(back).fingerprint == orch.plan(work).fingerprint
    plan = orch.plan(w)
    plans = [plan.phase_plan("llm", r) for r in range(4)] + [plan.composed_plan("image", 1)]
    plans += [mmbal.alltoall_plan(sample_rank, plan.target("llm"), np.arange(40) % 3, 2).inverse()]
    for p in plans:
        for back in (pickle.loads(pickle.dumps(p)), copy.deepcopy(p)):
            for field in PLAN_FIELDS:
                a, b = getattr(p, field), getattr(back, field)
                assert (a.tolist() == b.tolist() and not b.flags.writeable) if isinstance(a, np.ndarray) else a == b, field
            assert back.inverse().fingerprint == p.inverse().fingerprint
    mask = mmbal.bitfield_mask(w, np.arange(6))
    back = pickle.loads(pickle.dumps(mask))
    assert back.bits.tolist() == mask.bits.tolist() and back.documents.tolist() == mask.documents.tolist()
    assert np.array_equal(back.dense(), mask.dense())
    # Masks compare and hash by value (they had no __eq__: two identical masks were unequal).
    assert back == mask and hash(back) == hash(mask) and len({back, mask}) == 1
    other = mmbal.BitfieldMask.from_bits(mask.bits, np.where(mask.documents == 0, 0, mask.documents + 1))
    assert other != mask and mask != 5 and mask != None  # noqa: E711
    # a state that does not describe a plan / workload / mask
    state = list(plans[0].__getstate__())
    for index, value, message in [(0, 4, r"rank = 4 is out of range \[0, 4\)"), (3, np.zeros(40, np.int32), "slot"), (6, np.ones(3, np.int64), "sizes has 3 entries")]:
        bad = list(state)
        bad[index] = value
        with pytest.raises(mmbal.Error, match=message):
            mmbal.AllToAllPlan.__new__(mmbal.AllToAllPlan).__setstate__(tuple(bad))
    # a state of a few bytes with huge sizes asked for gigabytes of row indices
    huge = list(state)
    huge[6] = np.array(state[6], np.int64)
    huge[6][:4] = 2**40
    with pytest.raises(mmbal.Error, match=r"rows before and .* after the exchange \(at most 2\^32 - 1 each"):
        mmbal.AllToAllPlan.__new__(mmbal.AllToAllPlan).__setstate__(tuple(huge))
    with pytest.raises(mmbal.Error, match="at most 2\\^32 - 1 each"):
        mmbal.alltoall_plan(np.zeros(2, np.int64), mmbal.Assignment(np.zeros(2, np.int32), np.arange(2, dtype=np.int32), 1), [2**31, 2**31], 0)
    with pytest.raises(mmbal.Error, match="7 fields"):
        mmbal.AllToAllPlan.__new__(mmbal.AllToAllPlan).__setstate__((0,))
    wstate = list(w.__getstate__())
    wstate[2] = np.full(len(wstate[2]), 9)
    with pytest.raises(mmbal.Error, match="segment_modality"):
        mmbal.Workload.__new__(mmbal.Workload).__setstate__(tuple(wstate))
    with pytest.raises(mmbal.Error, match="documents"):
        mmbal.BitfieldMask.__new__(mmbal.BitfieldMask).__setstate__((mask.bits, mask.documents[::-1].copy()))
