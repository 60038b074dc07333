"""What lecture 7's kit logs: each expert's part of a call of the expert bank (kit/moe.c)
is an X event of the case record, read here as an ExpertCall in rec.experts."""

import dataclasses

import records


@dataclasses.dataclass
class ExpertCall:
    """One expert's part of a call of the kit's expert bank, an X line."""
    op: str  # F forward, B backward
    expert: int  # its global index
    tokens: int  # the rows it computed
    start: float  # seconds since the case began
    end: float
    events_before: int = 0  # how many of the record's events (E lines) came before it
    pending: int = 0  # exchanges (receives, nonblocking collectives) pending while it ran
    pending_bytes: int = 0  # their bytes


def parse_expert(words):
    op, expert, tokens, start, end, before, pending, pbytes = words
    return ExpertCall(op, int(expert), int(tokens), float(start), float(end), int(before),
                      int(pending), int(pbytes))


records.event_kind("X", "experts", parse_expert)
