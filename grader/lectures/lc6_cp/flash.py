"""flash_attention.c: causal attention of one head in one process, by tiles of br
queries x bc keys, forward with the online softmax and backward recomputing the
probabilities from the LSE.

The numbers: the reference is the plain definition, causal attention over the
whole sequence in float64 (cp.py, grader/nn.py's attention block with hq = hkv
= 1 and the causal mask over T x T); q and k are random with a spread of 1.5
(scores of a few units, so that the running max grows from tile to tile), v
and dout random. The backward is given the exact forward's o and lse (rounded
to float32), so it is graded on its own. Shapes: T a multiple of neither br
nor bc, br != bc and br == bc, br or bc at least T, T = 1, d = 1.

The rules, none of which the values can show:
  - the tiles: every call of xt_attn_scores is an A line (op T) of the case
    record; a function computes exactly the tiles that hold a visible key
    (key tile J, query tile I with J bc <= the tile's last query), each once,
    each at most br x bc: a tile wholly above the diagonal computed, or the
    tiles cut bc x br, is refused;
  - the scratch: the peak of libxt's accounting (xt_alloc, every kind; the
    case's inputs and outputs are not counted) is at most

        4 (2 br bc + 4 (br + bc)(d + 1) + T) bytes

    two tiles of scores (P and dP in the backward), up to four rows of d + 1
    floats per query and per key of a tile (copies of q, k, v, dout, o rows,
    accumulators, and the running max and sum), and one float per position
    (FlashAttention-2's backward keeps D_i for every row). No term in T x T or
    T x d: the T x T scores fail it in every case with T^2 above it (the
    first), and nothing may remain allocated at the end. The solution's peak
    is 4 (br bc + 2 br) forward and 4 (2 br bc + br) backward;
  - the object: malloc and its kin (the accounting would not see them),
    attention already written (the kit's xt_attn_block_* and xt_lse_merge,
    libxt's xt_attention_* and xt_softmax_rows) and xt_mem_reset_peak are refused, and so are
    variable-length arrays, alloca, static arrays over 4 KiB and stack frames
    over 4 KiB (the source compiled once more with -Wvla -Walloca
    -Wframe-larger-than=4096, and nm -S);
  - no MPI call at all (one process, np = 1).

Tolerance: cp.TOLERANCE, each output within 4e-5 of its largest |value| (at
least 1). Measured (grade.py --margins, 6 seeds): the worst error was 2.5% of
the bound (dq, T=48 br=bc=16); the forward's, 0.9%.
"""

import os
import re
import subprocess
from collections import Counter

import builds
from spec import hinted, test
from lectures.lc4_tp.tp import no_communication
from lectures.lc6_cp import cp

# (T, d, br, bc). The first one: the tile whose first key is the query tile's last
# position exists (queries 0..3, keys 3..5), and T^2 exceeds the scratch bound.
SHAPES = [(22, 8, 4, 3), (37, 16, 8, 5), (30, 4, 5, 7), (9, 8, 12, 5), (11, 4, 3, 16),
          (1, 8, 4, 3), (48, 8, 16, 16), (13, 1, 2, 3)]


def flash_cases(rng):
    return [cp.attention_case(1, T, 1, 1, d, br=br, bc=bc) for T, d, br, bc in SHAPES]


def label(case):
    return f"T={case['T']} hd={case['hd']} br={case['br']} bc={case['bc']}"


def facets(case):
    """Whether the last tile of queries or keys is shorter, and whether a tile covers T."""
    T, br, bc = case["T"], case["br"], case["bc"]
    return {"T%br": int(T % br != 0), "T%bc": int(T % bc != 0),
            "tile >= T": int(br >= T or bc >= T)}


def locate(case, name, index, rank):
    """'position 13 (query tile 12..15), column 1' for o, dq; key tiles for dk, dv."""
    T, d = case["T"], case["hd"]
    width = 1 if name == "lse" else d
    pos, col = divmod(index, width)
    if pos >= T:
        return None
    size, kind = (case["bc"], "key") if name in ("dk", "dv") else (case["br"], "query")
    lo = pos // size * size
    where = f"position {pos} ({kind} tile {lo}..{min(lo + size, T) - 1})"
    return where if name == "lse" else f"{where}, column {col}"


# ------------------------------------------------------------------ rules

def tiles(T, br, bc):
    """The (nq, nk) of every tile holding a visible key: query tile i0.., key tile j0..
    with j0 <= the query tile's last position."""
    out = []
    for i0 in range(0, T, br):
        last = min(i0 + br, T) - 1
        out += [(last - i0 + 1, min(j0 + bc, T) - j0) for j0 in range(0, last + 1, bc)]
    return out


def tiles_exactly(case, inputs, records):
    """The score tiles (xt_attn_scores calls) are exactly the causal tiling's."""
    T, br, bc = case["T"], case["br"], case["bc"]
    got = [(a.nq, a.nk) for a in records[0].attn if a.op == "T"]
    want = tiles(T, br, bc)
    pairs, want_pairs = sum(a * b for a, b in got), sum(a * b for a, b in want)
    for nq, nk in got:
        if nq > min(br, T) or nk > min(bc, T):
            return [(0, f"rank 0 computed a {nq} x {nk} tile of scores; a tile is at most br x "
                        f"bc = {br} x {bc} (queries x keys)")]
    if not got:
        return [(0, f"rank 0 computed no tile of scores through xt_attn_scores; the causal "
                    f"tiling has {len(want)} ({want_pairs} (query, key) pairs), and every "
                    f"tile's scores come from xt_attn_scores, which the grader counts")]
    if Counter(got) == Counter(want):
        return []
    why = ("a tile wholly above the diagonal (its first key after the query tile's last "
           "position) is skipped" if len(got) > len(want) or pairs > want_pairs else
           "every tile holding a visible key is computed, once")
    return [(0, f"rank 0 computed {len(got)} tiles of scores ({pairs} (query, key) pairs); "
                f"the causal tiling of T={T} by {br} x {bc} has exactly {len(want)} "
                f"({want_pairs} pairs): {why}")]


tiles_exactly = hinted(
    tiles_exactly,
    "for the query tile starting at i0 with nq rows, the key tiles j0 = 0, bc, 2 bc, ... "
    "while j0 <= i0 + nq - 1: the later ones hold no key any of its queries sees")


def scratch_bound_of(case):
    """(bytes, the formula with the case's numbers)."""
    T, d, br, bc = case["T"], case["hd"], case["br"], case["bc"]
    bound = 4 * (2 * br * bc + 4 * (br + bc) * (d + 1) + T)
    return bound, (f"4 (2 br bc + 4 (br + bc)(d + 1) + T) = 4 (2*{br}*{bc} + 4*{br + bc}*"
                   f"{d + 1} + {T}) = {bound} B")


def scratch_bound(case, inputs, records):
    """Peak xt_alloc memory (every kind) at most one tile's worth; none left."""
    current, peak = records[0].memory.get("total", (0, 0))
    bound, formula = scratch_bound_of(case)
    T = case["T"]
    if peak > bound:
        return [(0, f"rank 0's scratch (xt_alloc, every kind) peaked at {peak} B; tiled "
                    f"attention needs at most {formula} (the T x T scores alone are "
                    f"{4 * T * T} B)")]
    if current:
        return [(0, f"rank 0 still holds {current} B of xt_alloc memory after the call: "
                    f"xt_free every scratch buffer before returning")]
    return []


scratch_bound = hinted(
    scratch_bound,
    "one br x bc tile of scores at a time (two in the backward), and per tile a few rows: "
    "nothing whose size grows with T x T or T x d; o, lse, dq, dk, dv are outputs and can "
    "hold the accumulators themselves")


# ------------------------------------------------------------ the object

FRAME_LIMIT = 4096  # bytes: a function's stack frame, a static array
ALLOCATORS = (r"^(malloc|calloc|realloc|reallocarray|aligned_alloc|posix_memalign|memalign|"
              r"valloc|pvalloc|xt_malloc_at|xt_calloc_at)$")
STACK_WARNINGS = {"-Wvla": "a variable-length array", "-Walloca": "alloca",
                  "-Wframe-larger-than": "a stack frame over 4096 bytes"}


def hidden_scratch(obj, source):
    """Scratch the accounting cannot see: static arrays over FRAME_LIMIT (nm -S on the
    object), and variable-length arrays, alloca and large stack frames (the source
    compiled again with the warnings that find them). Returns [message]."""
    msgs = []
    try:
        out = subprocess.run(["nm", "-S", "--defined-only", obj], capture_output=True,
                             text=True, timeout=30).stdout
    except OSError:
        out = ""
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "bBdDC" and int(parts[1], 16) > FRAME_LIMIT:
            msgs.append(f"defines a static array {parts[3].split('.')[0]} of {int(parts[1], 16)} B: the "
                        f"scratch is xt_alloc memory, which libxt's accounting sees")
    if not source or not os.path.exists(source):
        return msgs
    cc = os.environ.get("MPICC") or "mpicc"
    # The include path the Makefile gives the lecture's programs: libxt's headers, and the
    # kit's header (solutions/<lecture>/kit.h, which a mutant's or a drill's copy lacks).
    kit = builds.kit_include(".", source)
    cmd = [cc, "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-O2", "-Icommon", *kit,
           "-Wvla", "-Walloca", f"-Wframe-larger-than={FRAME_LIMIT}", "-c", source]
    try:
        returncode, stderr = builds.compile_once(cmd, source)
    except OSError as e:
        return msgs + [f"could not be compiled again to look for scratch on the stack "
                       f"({e}): the grader's fault, please report it"]
    if returncode != 0:
        # The program built, so this compile must too: a failure is the grader's, and a
        # silent one would let stack scratch pass unseen.
        first = next((ln for ln in stderr.splitlines() if "error" in ln), stderr[:200])
        return msgs + [f"could not be compiled again to look for scratch on the stack "
                       f"({first.strip()}): the grader's fault, please report it"]
    func = ""
    for line in stderr.splitlines():
        m = re.search(r"In function [‘'`](\w+)", line)
        if m:
            func = m.group(1)
        m = re.match(r"^.*?:(\d+):(?:\d+:)? warning: (.*)\[(-W[\w-]+)=?[^\]]*\]\s*$", line)
        if m and m.group(3) in STACK_WARNINGS:
            inside = re.search(r"in [‘'`](\w+)", m.group(2))
            where = inside.group(1) if inside else func
            msg = (f"has {STACK_WARNINGS[m.group(3)]} at line {m.group(1)}"
                   f"{f' (in {where})' if where else ''}: the scratch is xt_alloc memory, "
                   f"which libxt's accounting sees; the stack and static memory are not")
            if msg not in msgs:
                msgs.append(msg)
    return msgs


FORBIDDEN = [
    (ALLOCATORS, "calls {}: the scratch is xt_alloc memory, which libxt's accounting sees"),
    (r"^(xt_attn_block_\w+|xt_attention_\w+|xt_lse_merge|xt_softmax_rows)$",
     "calls {}, attention already written (libxt's or the lecture kit's), which this "
     "exercise writes"),
    (r"^xt_mem_reset_peak$", "calls {}, which would hide the scratch's peak from the grader"),
    hidden_scratch,
]

RULES = [no_communication("flash attention", has_comm=False), tiles_exactly,
         scratch_bound]


@test("flash_attention", points=8, inputs=cp.attention_inputs, reference=cp.forward_reference,
      tolerance=cp.tolerance, label=label, facets=facets, locate=locate, rules=RULES,
      forbidden=FORBIDDEN,
      hint="per query tile: m = -inf, l = 0, o = 0; per key tile up to the diagonal: the "
           "tile's scores, m_new = max(m, the row's visible scores), rescale l and o by "
           "e^(m - m_new), add e^(s - m_new) to l and e^(s - m_new) v to o; at the end o /= l "
           "and lse = m + log l")
def flash_attention_forward(rng):
    return flash_cases(rng)


@test("flash_attention", points=10, inputs=cp.attention_inputs,
      reference=cp.backward_reference, tolerance=cp.tolerance, label=label, facets=facets,
      locate=locate, rules=RULES, forbidden=FORBIDDEN,
      hint="zero dq, dk, dv; per query tile D = rowsum(dout * o); per key tile up to the "
           "diagonal: P = exp(S - lse) (0 where masked), dv += P^T dout, dP = dout v^T, "
           "dS = P (dP - D), dq += dS k / sqrt(d), dk += dS^T q / sqrt(d)")
def flash_attention_backward(rng):
    return flash_cases(rng)
