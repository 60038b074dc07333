"""checkpoint.c: activation recomputation in one process: a model's layers cut
into nseg consecutive segments, the forward keeping only each segment's
input, the backward recomputing each segment before backpropagating it.

The numbers: the segments' gradients (one after another) and the loss
against one process's step on the whole batch (pp.py: the reference is the
same as a pipeline's with one rank holding nseg chunks, M = 1). The rules,
from the case record:

  - activations: the peak of XT_MEM_ACTIVATIONS (the saved inputs, which
    the program allocates, and what the kit's stage keeps) is at most

        4 rows (in_0 + ... + in_{nseg-1})                  the saved inputs
      + max_k 4 rows (in_k + 3 S_k [+ out, the last])      one segment

    in_k being segment k's input width, S_k the sum of its layer widths,
    out the model's output width: what one micro-batch keeps through
    xt_stage_forward, xt_stage_loss (the last) and the backward's input
    part (common/xt_nn.h). xt_stage_infer's scratch, two buffers of rows x
    the segment's widest layer, never meets a recomputed segment's
    activations, and 2 rows widest <= 3 rows S_k, so it adds no term. The
    program is held to the formula, not to a measured number; the
    solution's peak is at most it (it frees each saved input once its
    segment is done). Keeping every segment's activations instead exceeds
    it whenever there are two segments or more (the first case: equal
    widths, where it exceeds it by 4 rows w (2 c (nseg-1) - 1) for segments
    of c layers of width w). Nothing may be left at the end.
  - the timeline: when segment k's recomputation begins (its xt_stage_forward),
    the activations in use are exactly the saved inputs of segments 0..k,
    4 rows (in_0 + ... + in_k): a copy in malloc'd memory is bytes missing, a
    copy freed after the next segment's recomputation began is bytes over
    (neither changes the peak where the first recomputation is the peak);
  - forwards: every segment forwarded exactly twice (its stage calls N and
    F: once keeping nothing, once again for its backward).

Calling xt_mem_reset_peak is refused: it would hide the peak.

Cases (np = 1: no MPI call): nseg = 1, 2, 3 and L, models of 3 to 8 layers,
1 to 4 rows. Tolerance: pp.py; measured (grade.py --margins, 6 seeds): the
worst gradient or loss error was under 3% of its bound.
"""

from spec import hinted, test
from lectures.lc5_pp import pp


def ckpt_case(nlayers, nseg, rows, rng, width=None):
    """A model of nlayers layers (random widths, or all `width`), cut into nseg segments:
    one rank holding nseg chunks, in pp.py's terms."""
    case = pp.model_case(1, nlayers, 1, rows, rng, v=nseg)
    if width:
        case["dims"] = ",".join([str(width)] * (nlayers + 1))
    return case


def checkpoint_cases(rng):
    w = int(rng.integers(3, 9))
    out = [ckpt_case(4, 2, 2, rng, width=w)]
    for L, nseg, rows in ((3, 1, 3), (5, 2, 1), (6, 3, 4), (4, 4, 2), (8, 3, 3), (7, 2, 2),
                          (6, 6, 1)):
        out.append(ckpt_case(L, nseg, rows, rng))
    return out


def nseg(case):
    return pp.chunks(case)


def segments(case):
    """[(first, count)] of the segments, in order."""
    return pp.layers_of(case, 0)


def label(case):
    d = pp.dims_of(case)
    same = " equal widths" if len(set(d)) == 1 else ""
    return (f"layers={pp.nlayers(case)} v={nseg(case)} segments mb_rows={case['mb_rows']}"
            f"{same} dims={case['dims']} {case['act']}")


def facets(case):
    """Whether there is anything to recompute from: with one segment, the saved input is x."""
    return {"several segments": int(nseg(case) > 1)}


def checkpoint_reference(case, inputs):
    """The gradients and the loss; the forward counts are a rule (forwards_twice)."""
    out = pp.pipeline_reference(case, inputs)
    for mine in out:
        del mine["forwards"]
    return out


# ------------------------------------------------------------------ rules

def memory_bound(case):
    """(bound in bytes, the formula with the case's numbers)."""
    d, rows = pp.dims_of(case), case["mb_rows"]
    segs = segments(case)
    ins = [d[f] for f, _ in segs]
    saved = 4 * rows * sum(ins)
    ones = []
    for k, (f, c) in enumerate(segs):
        S = sum(d[f + 1:f + c + 1])
        last = d[-1] if k == len(segs) - 1 else 0
        ones.append((4 * rows * (d[f] + 3 * S + last), k, f, c, S, last))
    one, k, f, c, S, last = max(ones)
    names = (" + ".join(f"in_{k}" for k in range(len(segs))) if len(segs) <= 4
             else f"in_0 + ... + in_{len(segs) - 1}")
    text = (f"the saved inputs 4 rows ({names}) = 4*{rows}*"
            f"({' + '.join(map(str, ins))}) = {saved} B, plus the most one segment keeps while "
            f"it is recomputed and backpropagated, 4 rows (in + 3 S{' + out' if last else ''})"
            f" = 4*{rows}*({d[f]} + 3*{S}{f' + {last}' if last else ''}) = {one} B "
            f"(segment {k}, layers {f}..{f + c - 1})")
    return saved + one, text


def activations_bound(case, inputs, records):
    """Peak XT_MEM_ACTIVATIONS at most the saved inputs plus one segment's; none left."""
    current, peak = records[0].memory.get("activations", (0, 0))
    bound, formula = memory_bound(case)
    if peak > bound:
        return [(0, f"rank 0's activations (xt_alloc XT_MEM_ACTIVATIONS, with the stages' own) "
                    f"peaked at {peak} B; checkpointing keeps at most {bound} B: {formula}")]
    if current:
        return [(0, f"rank 0 still holds {current} B of activations after the step: each "
                    f"saved input is xt_free'd once its segment's backward is done")]
    return []


activations_bound = hinted(
    activations_bound,
    "checkpointing keeps each segment's input, and one segment's activations at a time: the "
    "forward runs xt_stage_infer (which keeps nothing), and each segment is forwarded with "
    "xt_stage_forward only right before its own backward")


def saved_inputs_held(case, inputs, records):
    """The memory timeline the contract fixes: when segment k's recomputation begins (its
    xt_stage_forward), rank 0's activations are exactly the saved inputs of segments 0..k,
    4 rows (in_0 + ... + in_k): the later segments' copies were freed after their backward,
    and nothing else is held. A copy in malloc'd memory shows as bytes missing, a copy freed
    late as bytes over."""
    d, rows = pp.dims_of(case), case["mb_rows"]
    segs = segments(case)
    for call in records[0].stages:
        if call.op != "F" or call.activations < 0:
            continue
        k = call.chunk
        ins = [d[f] for f, _ in segs[:k + 1]]
        want = 4 * rows * sum(ins)
        if call.activations == want:
            continue
        terms = " + ".join(f"in_{j}" for j in range(k + 1)) if k < 4 else f"in_0 + ... + in_{k}"
        held = (f"rank 0 held {call.activations} B of activations when segment {k}'s "
                f"recomputation began (its xt_stage_forward); the contract holds exactly the "
                f"saved inputs of segments 0..{k} there, 4 rows ({terms}) = 4*{rows}*"
                f"({' + '.join(map(str, ins))}) = {want} B")
        if call.activations < want:
            return [(0, held + ": copy each segment's input into xt_alloc(XT_MEM_ACTIVATIONS) "
                           "memory (malloc'd memory is not counted, so the grader cannot see "
                           "what the step keeps)")]
        return [(0, held + ": xt_free each saved input right after its segment's backward, "
                       "before the next segment's recomputation; memory freed later holds the "
                       "peak longer than checkpointing needs")]
    return []


saved_inputs_held = hinted(
    saved_inputs_held,
    "the forward copies every segment's input into xt_alloc(XT_MEM_ACTIVATIONS) memory; the "
    "backward frees segment k's copy right after xt_stage_backward(segments[k], ...)")


def forwards_twice(case, inputs, records):
    """Every segment forwarded exactly twice: N (xt_stage_infer), then F."""
    calls = records[0].stages
    for k, (f, c) in enumerate(segments(case)):
        mine = [s for s in calls if s.chunk == k]
        n, fw = sum(s.op == "N" for s in mine), sum(s.op == "F" for s in mine)
        if n + fw != 2:
            return [(0, f"segment {k} (layers {f}..{f + c - 1}) was forwarded {n + fw} "
                        f"time{'' if n + fw == 1 else 's'} ({n} xt_stage_infer, {fw} "
                        f"xt_stage_forward); checkpointing forwards every segment exactly "
                        f"twice: once keeping nothing, once again right before its backward")]
    return []


forwards_twice = hinted(
    forwards_twice,
    "one xt_stage_infer of every segment in the forward, one xt_stage_forward of it in the "
    "backward: the saved input of segment k is all its recomputation needs")


FORBIDDEN = [(r"^xt_mem_reset_peak$",
              "calls {}, which would hide the step's peak of activations from the grader")]


@test("checkpoint", points=10, inputs=pp.pipeline_inputs, reference=checkpoint_reference,
      tolerance=pp.pipeline_tolerance, label=label, facets=facets, locate=pp.grads_locator,
      rules=[activations_bound, forwards_twice, saved_inputs_held], forbidden=FORBIDDEN,
      hint="forward: copy x into xt_alloc(XT_MEM_ACTIVATIONS) memory, then for each segment "
           "k allocate the next segment's input and xt_stage_infer into it; backward, k = "
           "nseg-1 down to 0: xt_stage_forward(segments[k], 0, saved[k], ...), the loss on "
           "the last, xt_stage_backward(segments[k], 0, dy or NULL, dx or NULL), xt_free "
           "saved[k], and dx becomes the next dy")
def checkpoint_step(rng):
    return checkpoint_cases(rng)

