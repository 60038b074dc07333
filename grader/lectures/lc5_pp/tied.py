"""pp_tied_embedding.c: lecture 4's decoder language model with its head tied to its
embedding (the head is E^T), trained through a pipeline on a pp x dp x tp mesh; the tied
matrix's two copies (the first stage's E, the last stage's head) kept identical by one
all-reduce of their gradients over the embedding group, the first and last stage of each
pipeline.

The reference is parallel_3d's (one process, the whole batch, AdamW, float64) on the tied
model: after each backward the embedding's and the head's gradients summed and given to
both (parallel_3d.tie), so that the head stays E^T; tie is checked against central
differences of the tied model's loss as a function of E when this module loads. The inputs are parallel_3d's with the
head of w0 set to E^T.

tied_embedding_group: every rank's group members, as case ranks, against the mesh's first
and last stage of its pipeline (-1 for a middle stage; the rank alone with one stage).

tied_pp_step, values: each step's loss on the last stage, every rank's shard's gradients
after step 1 and parameters after the last, and after every step the tied copy each end
holds (its vocabulary block of E on the first stage, of the head transposed on the last),
with parallel_3d's tolerances. Checked before the values: the two copies bit for bit the
same after every step, and the data-parallel replicas of a shard (parallel_3d's check).
Rules: point-to-point messages only on the pp group, M each way per step (parallel_3d's);
collectives only MPI_Allreduce: the stage's on the tp group, on the dp group one of the
shard's gradients a step and on the last stage one of the loss (parallel_3d's counts, either
left out at dp = 1), and on a group of the program's own exactly one a step of the tied
block (vocab_local d floats) on the first and last stage when there are two or more stages,
none otherwise.
"""

import numpy as np

import checked
import nn
from spec import Case, hinted, test
from lectures.lc4_tp.model import PARAM_TOLERANCE, initial_weights
from lectures.lc4_tp.tp import block
from lectures.lc5_pp.parallel_3d import (description, coords, dp_allreduces, group_of, mesh,
                                         messages_on_pp, model_of, p3d_facets, p3d_inputs,
                                         p3d_label, p3d_locator, p3d_reference, p3d_tolerance,
                                         rank_of, replicas_agree, tie, tp_allreduces, trained,
                                         where)

STEPS = 2

# ((dp, pp, tp), layers, M, sequences per micro-batch, ff): one stage (the tie on the rank),
# two and three stages (a middle stage outside the group), with data and tensor ranks; every
# model: vocabulary 19 (uneven over tp = 2), d 8, 4 query heads on 2 KV heads of 2, T 4.
MESHES = [((1, 1, 1), 2, 2, 1, 11), ((1, 2, 1), 2, 2, 1, 12), ((2, 2, 1), 3, 2, 1, 11),
          ((1, 3, 1), 3, 3, 1, 12), ((1, 2, 2), 2, 2, 1, 11), ((2, 1, 2), 2, 2, 1, 12),
          ((1, 4, 1), 4, 2, 1, 11)]


def _check_tie():
    """parallel_3d.tie against central differences, at import: a small decoder whose head is
    its embedding's transpose, its loss as a function of the one matrix E; tie's embedding
    gradient must be that function's."""
    params = {"vocab": 5, "d": 4, "layers": 1, "hq": 2, "hkv": 1, "hd": 2, "ff": 6, "tied": 1}
    case = Case(None, 1, params)
    m = model_of(case)
    rng = np.random.default_rng(11)
    w = initial_weights(m, rng).astype(np.float64)
    tokens, targets = rng.integers(0, 5, 6), rng.integers(0, 5, 6)
    E = m.views(w)["embed"].copy()

    def loss():
        tied = w.copy()
        views = m.views(tied)
        views["embed"][...], views["head"][...] = E, E.T
        return m.loss_and_grads(tied, tokens, targets, 2, 3)[0]

    views = m.views(w)
    views["head"][...] = E.T
    g = tie(case, m.loss_and_grads(w, tokens, targets, 2, 3)[1])
    num = nn.numeric_gradients(loss, [E])[0]
    err = float(np.abs(num - m.views(g)["embed"]).max())
    assert err < 1e-6 * (1 + float(np.abs(num).max())), f"tie: dE off by {err:.1e}"


checked.once(_check_tie)


def cases(rng):
    out = []
    for k, ((dp, pp, tp), layers, M, per_mb, ff) in enumerate(MESHES):
        out.append({"np": dp * pp * tp, "mesh": description(dp, pp, tp), "vocab": 19, "d": 8,
                    "layers": layers, "hq": 4, "hkv": 2, "hd": 2, "ff": ff,
                    "seqs": dp * M * per_mb, "T": 4, "M": M, "steps": STEPS, "lr": "0.01",
                    "wd": "0.1" if k % 2 else "0", "tied": 1})
    return out


def tied_inputs(case, rng):
    """parallel_3d's inputs, the head of w0 set to E^T."""
    inputs = p3d_inputs(case, rng)
    views = model_of(case).views(inputs["w0"])
    views["head"][...] = views["embed"].T
    return inputs


# ----------------------------------------------------------- tied_embedding_group

def members(case, r):
    """Rank r's embedding group, as case ranks, first stage first; -1 for none."""
    dp, pp, tp = mesh(case)
    c = coords(case, r)
    if pp == 1:
        return [r, -1]
    if c[1] not in (0, pp - 1):
        return [-1, -1]
    return [rank_of(case, c[0], 0, c[2]), rank_of(case, c[0], pp - 1, c[2])]


def group_reference(case, inputs):
    return [{"members": np.array(members(case, r), dtype=np.int32)} for r in range(case.np)]


def group_locate(case, name, index, rank):
    dp, pp, tp = mesh(case)
    c = coords(case, rank)
    return (f"rank {rank} (dp {c[0]}, pp {c[1]}, tp {c[2]}): its group's "
            f"{('first', 'second')[index]} member")


@test("pp_tied_embedding", points=4, inputs=tied_inputs, reference=group_reference,
      label=p3d_label, locate=group_locate,
      hint="split the pp group: color 0 at pp coordinate 0 and the last, MPI_UNDEFINED in "
           "between (MPI_COMM_NULL comes back), key the pp coordinate")
def tied_embedding_group(rng):
    return cases(rng)


# ------------------------------------------------------------------ tied_pp_step

def vocab_block(case, r):
    return block(case["vocab"], mesh(case)[2], coords(case, r)[2])


def step_reference(case, inputs):
    out = p3d_reference(case, inputs)
    embeds = trained(case, inputs)[3]
    dp, pp, tp = mesh(case)
    for r in range(case.np):
        lo, n = vocab_block(case, r)
        p = coords(case, r)[1]
        for k, e in enumerate(embeds):
            if p == 0:
                out[r][f"embed{k + 1}"] = e[lo:lo + n].reshape(-1)
            if p == pp - 1:
                out[r][f"head{k + 1}"] = e[lo:lo + n].reshape(-1)
    return out


def step_tolerance(case, inputs, name, rank):
    if name.startswith(("embed", "head")):
        return PARAM_TOLERANCE
    return p3d_tolerance(case, inputs, name, rank)


def step_locate(case, name, index, rank):
    if name.startswith(("embed", "head")):
        lo, _ = vocab_block(case, rank)
        return f"E[{lo + index // case['d']}, {index % case['d']}] of the tied matrix"
    return p3d_locator(case, name, index, rank)


def copies_agree(case, inputs, outs):
    """After every step, each pipeline's first stage's E block and last stage's head block
    (transposed) bit for bit the same; then parallel_3d's replica check."""
    dp, pp, tp = mesh(case)
    for r in range(case.np):
        c = coords(case, r)
        if c[1] != pp - 1:
            continue
        q = rank_of(case, c[0], 0, c[2])
        for k in range(1, case["steps"] + 1):
            a, b = outs[q].get(f"embed{k}"), outs[r].get(f"head{k}")
            if a is None or b is None or a.shape != b.shape:
                continue
            differ = np.flatnonzero(a.view(np.uint32) != b.view(np.uint32))
            if differ.size:
                i = int(differ[0])
                lo, _ = vocab_block(case, r)
                return [(r, f"after step {k}, rank {q}'s E[{lo + i // case['d']}, "
                            f"{i % case['d']}] is {a.flat[i]!r} but rank {r}'s head holds "
                            f"{b.flat[i]!r} there ({differ.size} of {a.size} differ): the two "
                            f"copies of the tied matrix must take the same step from the same "
                            f"gradient, the sum of both uses, every step")]
    return replicas_agree(case, inputs, outs)


MAKING = ("MPI_Comm_split", "MPI_Comm_free", "MPI_Comm_dup", "MPI_Comm_create")


def tied_collectives(case, inputs, records):
    """Collectives only MPI_Allreduce: parallel_3d's on the tp and dp groups, and on a group
    of the program's own exactly one a step of the tied block on the first and last stage
    when there are two stages or more."""
    dp, pp, tp = mesh(case)
    for r, rec in enumerate(records):
        # The embedding group's making (the driver calls tied_embedding_group) is no step's.
        coll = [e for e in rec.events if e.dir == "C" and e.fn not in MAKING]
        off = [e for e in coll if e.fn != "MPI_Allreduce" or
               (e.comm != "other" or (e.group and e.group not in ("dp", "tp")))]
        if off:
            e = off[0]
            return [(r, f"rank {r} made {e.fn} on {where(e)}: the step's collectives are "
                        f"MPI_Allreduce on the dp group (the gradients, the loss), the stage's "
                        f"own on the tp group, and the tied gradient's on the embedding "
                        f"group, nothing else")]
        p = coords(case, r)[1]
        tied = 4 * vocab_block(case, r)[1] * case["d"]
        want_tied = [tied] * case["steps"] if pp > 1 and p in (0, pp - 1) else []
        got_tied = sorted(e.bytes for e in coll if group_of(e) == "")
        if got_tied != want_tied:
            why = ("one a step of the tied block, its vocabulary rows of E: "
                   f"{tied // 4} floats" if want_tied else
                   "none: " + ("with one stage the two uses of the matrix are on this rank"
                               if pp == 1 else "a middle stage holds neither copy"))
            return [(r, f"rank {r} (pp stage {p} of {pp}) made {len(got_tied)} all-reduce(s) "
                        f"on a group of its own ({', '.join(str(b // 4) for b in got_tied)} "
                        f"floats) in {case['steps']} steps; expected {len(want_tied)}: {why}")]
        for name, want in (("tp", tp_allreduces(case, r)), ("dp", dp_allreduces(case, r))):
            got = sorted(e.bytes for e in coll if group_of(e) == name)
            if got == want or (name == "dp" and dp == 1 and
                               all(got.count(b) in (0, want.count(b)) for b in set(got))):
                continue
            return [(r, f"rank {r} made {len(got)} all-reduce(s) on the {name} group in "
                        f"{case['steps']} steps, expected {len(want)}: parallel_3d's (the "
                        f"stage's on tp; on dp the shard's gradients once a step and, on the "
                        f"last stage, the loss)")]
    return []


@test("pp_tied_embedding", points=12, inputs=tied_inputs, reference=step_reference,
      tolerance=step_tolerance, label=p3d_label, facets=p3d_facets, locate=step_locate,
      check=hinted(copies_agree, "cause: the two copies must step with the same gradient: "
                                 "E's plus the head's transposed, summed over the embedding "
                                 "group, given to both"),
      check_first=True,
      rules=[hinted(messages_on_pp, "cause: point to point, each micro-batch's activations to "
                                    "the next pp stage and its gradient back, on the pp group"),
             hinted(tied_collectives, "cause: one all-reduce a step of the tied block on the "
                                      "embedding group, on the first and last stage only")],
      hint="a pipeline step (parallel_3d's, any schedule); the dp all-reduce and average; then "
           "on the first stage E's gradient rows, on the last the head's gradient transposed, "
           "all-reduced over the embedding group and copied back (transposed on the last); "
           "xt_tp_stage_adam")
def tied_pp_step(rng):
    return cases(rng)
