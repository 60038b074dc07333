"""What lecture 6's kit logs: each call of an attention block or a tile of scores
(kit/attn_block.c) is an A event of the case record, read here as an AttnCall in rec.attn."""

import dataclasses

import records


@dataclasses.dataclass
class AttnCall:
    """One call of the kit's attention block, an A line of the record."""
    op: str  # F forward, B backward; T a tile of scores (xt_attn_scores)
    nq: int
    nk: int
    mask: str  # N none, C causal, S shifted
    pairs: int  # the (query, key) position pairs it computed
    start: float  # seconds since the case began
    end: float
    events_before: int = 0  # how many of the record's events (E lines) came before it
    recv_pending: int = 0  # receives started and not complete while it ran
    recv_bytes: int = 0  # the bytes those receives expect


def parse_attn(words):
    op, nq, nk, mask, pairs, start, end, before, pending, pbytes = words
    return AttnCall(op, int(nq), int(nk), mask, int(pairs), float(start), float(end),
                    int(before), int(pending), int(pbytes))


records.event_kind("A", "attn", parse_attn)
