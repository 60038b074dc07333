"""hierarchical_dispatch.c: GShard's layer with a two-hop dispatch (DeepEP's internode path):
each token across the network once per destination node, to the rank of the same local
index there, then forwarded inside that node; the combine mirrors it.

Values: y on every rank against one dense MoE layer in float64 (ep.layer_reference, as
gshard's forward), lecture 7's tolerance. Inputs: ep.layer_inputs (routing margins, so that
C and NumPy route alike; skewed routing on some cases, where a rank's experts get nothing).

How it was computed, from each rank's record (every message's peer named by its rank in the
case's group, so its node is known; nodes of ranks_per_node consecutive ranks):
  - point-to-point messages and at most two MPI_Alltoall of one int per rank (the counts);
  - every message to another node goes to the rank of the sender's local index there;
  - bytes to other nodes, per rank, exactly: a record of d + 2k floats for each of its
    tokens and each other node holding one of the token's experts, and a row of d floats
    back for each record it received from another node (GShard's dispatch sends a row for
    each choice whose expert is on another node, and one back);
  - bytes inside the node, per rank, exactly: a record for each token it holds (its own and
    those received) and each other rank of its node holding one of the token's experts, and
    a row back for each record forwarded to it;
  - each expert computed exactly the tokens routed to it (ep.expert_tokens).
"""


from spec import test
from lectures.lc7_ep import ep

# (np, ranks per node, T, d, E, ff, k, skew): one node, one rank a node, nodes of 2 and 4;
# k up to 4 (several of a token's experts on one node); skewed routing at np 4 and 8.
SHAPES = [(1, 1, 6, 8, 4, 6, 2, 0), (2, 1, 8, 8, 4, 8, 2, 0), (2, 2, 8, 6, 8, 6, 3, 0),
          (4, 1, 6, 8, 8, 6, 2, 1), (4, 2, 8, 8, 8, 8, 3, 0), (4, 2, 6, 6, 16, 6, 4, 1),
          (4, 4, 6, 8, 8, 6, 2, 0), (8, 2, 5, 8, 16, 6, 4, 0), (8, 4, 4, 8, 8, 6, 2, 1)]


def cases(rng):
    return [ep.moe_case(n, T, d, E, ff, k, skew=skew, ranks_per_node=L)
            for n, L, T, d, E, ff, k, skew in SHAPES]


def label(case):
    return f"{ep.label(case)} ranks_per_node={case['ranks_per_node']}"


def reference(case, inputs):
    return [{"y": o["y"].reshape(-1)} for o in ep.layer_reference(case, inputs, False)]


def tolerance(case, inputs, name, rank):
    return ep.TOLERANCE


def locate(case, name, index, rank):
    return f"rank {rank}'s token {index // case['d']}, column {index % case['d']}"


def node_of(case, r):
    return r // case["ranks_per_node"]


def plan(case, inputs):
    """From the routing, per rank: (records out across, rows back across, records out
    inside, rows back inside, GShard's rows across out), counted as the algorithm sends."""
    n, L = case.np, case["ranks_per_node"]
    across, back, inside, back_in, gshard = ([0] * n for _ in range(5))
    held = [[] for _ in range(n)]  # the tokens each rank holds: their experts' ranks
    for s in range(n):
        idx = ep.routing(case, inputs["x"][s], inputs["wr"])[0]
        for t in range(idx.shape[0]):
            ranks = {ep.owner(case, int(e)) for e in idx[t]}
            held[s].append(ranks)
            gshard[s] += sum(1 for e in idx[t] if node_of(case, ep.owner(case, int(e))) !=
                             node_of(case, s))
            for node in sorted({q // L for q in ranks} - {node_of(case, s)}):
                across[s] += 1
                forwarder = node * L + s % L
                back[forwarder] += 1
                held[forwarder].append(ranks)
    for r in range(n):
        for ranks in held[r]:
            for q in ranks:
                if q != r and node_of(case, q) == node_of(case, r):
                    inside[r] += 1
                    back_in[q] += 1
    return across, back, inside, back_in, gshard


def only_counts_collective(case, inputs, records):
    """Point-to-point messages, and at most two MPI_Alltoall of one int per rank."""
    for r, rec in enumerate(records):
        coll = [e for e in rec.events if e.dir == "C"]
        bad = [e for e in coll if e.fn != "MPI_Alltoall" or e.bytes != 4 * case.np]
        if bad or len(coll) > 2:
            e = bad[0] if bad else coll[2]
            return [(r, f"rank {r} called {e.fn} ({e.bytes} B): the records and rows go "
                        f"point-to-point, so that each one's node is known; the only "
                        f"collectives are at most two MPI_Alltoall of one int to each rank "
                        f"(each hop's counts)")]
    return []


def same_rail(case, inputs, records):
    """Every message to another node goes to the rank of the sender's local index there."""
    L = case["ranks_per_node"]
    for r, rec in enumerate(records):
        for e in rec.sends():
            if e.case_peer >= 0 and node_of(case, e.case_peer) != node_of(case, r) and \
                    e.case_peer % L != r % L:
                return [(r, f"rank {r} (node {node_of(case, r)}, local index {r % L}) sent "
                            f"{e.bytes} B to rank {e.case_peer} (node "
                            f"{node_of(case, e.case_peer)}, local index {e.case_peer % L}): "
                            f"across nodes a rank talks to its own local index only, the "
                            f"rank {node_of(case, e.case_peer) * L + r % L} there, which "
                            f"forwards inside its node")]
    return []


def node_bytes(case, inputs, records):
    """Bytes to other nodes and inside the node, per rank, exactly as the plan's."""
    d, k, L = case["d"], case["k"], case["ranks_per_node"]
    R = (d + 2 * k) * 4
    across, back, inside, back_in, gshard = plan(case, inputs)
    shape = (f"{case.np // L} node{'s' if case.np // L > 1 else ''} of {L} rank"
             f"{'s' if L > 1 else ''}, records of d + 2k = {d + 2 * k} floats")
    for r, rec in enumerate(records):
        mine = [e for e in rec.sends() if e.case_peer >= 0]
        far = sum(e.bytes for e in mine if node_of(case, e.case_peer) != node_of(case, r))
        near = sum(e.bytes for e in mine if node_of(case, e.case_peer) == node_of(case, r))
        want_far = across[r] * R + back[r] * d * 4
        if far != want_far:
            return [(r, f"rank {r} sent {far} B to other nodes; with {shape} the two-hop "
                        f"dispatch sends exactly {want_far} B across: {across[r]} record(s), "
                        f"one per token and other node holding one of its experts, and "
                        f"{back[r]} row(s) of d floats back, one per record it received "
                        f"(GShard's dispatch: {gshard[r]} row(s) out, one per choice on "
                        f"another node)")]
        want_near = inside[r] * R + back_in[r] * d * 4
        if near != want_near:
            return [(r, f"rank {r} sent {near} B inside its node; with {shape} it forwards "
                        f"exactly {inside[r]} record(s), one per token it holds and other "
                        f"rank of its node holding one of the token's experts, and sends "
                        f"{back_in[r]} row(s) of d floats back, one per record forwarded to "
                        f"it: {want_near} B")]
    return []


WHY_TOKENS = "each expert computes the rows routed to it from every rank, once"


@test("hierarchical_dispatch", points=12, inputs=ep.layer_inputs, reference=reference,
      tolerance=tolerance, label=label, words=ep.WORDS, locate=locate,
      rules=[only_counts_collective, same_rail, node_bytes, ep.expert_tokens("F", WHY_TOKENS)],
      hint="route; per token the other nodes holding one of its experts: one record (x, the "
           "k experts, the k weights) to the rank of your local index on each; then every "
           "record you hold to each rank of your node holding one of its experts; compute; "
           "rows back the same ways, each weighted and summed where it gathers")
def hierarchical_moe_forward(rng):
    return cases(rng)
