"""Why ranks that stopped are stuck: their blocked calls explained (a receive cycle, sends
that wait on each other, MPI_COMM_WORLD in a graded case) and, from the ranks' ledgers of
the case's point-to-point messages, each message sent and never received, paired with the
receive of another tag or communicator that waits for it.
"""

import dataclasses
import re


BLOCKED_SEND = re.compile(r"MPI_(?:I?[sbr]?send|Ssend|Sendrecv(?:_replace)?)[( ]to (\d+), "
                          r"tag (\d+), (\d+ B)", re.I)


BLOCKED_RECV = re.compile(r"(?:MPI_(?:I?m?recv|I?m?probe)[( ]|B; )from (\d+|any), tag (\d+|any)",
                          re.I)


COMM_NAMES = {"case": "", "world": "MPI_COMM_WORLD", "self": "MPI_COMM_SELF",
              "other": "another communicator"}


def comm_words(kind):
    """', on MPI_COMM_WORLD' for a ledger's communicator kind; '' for the case's own."""
    name = COMM_NAMES.get(kind, f"the {kind.partition('@')[2]} group" if "@" in kind else kind)
    return f", on {name}" if name else ""


@dataclasses.dataclass
class Ledger:
    """What the ranks of a stopped case sent, received and still wait for (libxt's LEDGER
    status lines, one per rank), with peers as case ranks where they are in the case."""
    sent: dict  # (rank, comm kind, peer, tag) -> (messages, the last one's bytes)
    received: dict  # (rank, comm kind, peer, tag) -> messages
    waiting: list  # (rank, comm kind, peer | "any", tag | "any", bytes, the call)
    whole: bool  # no rank's ledger overflowed


def read_ledger(lines, ranks):
    """The Ledger of status lines `lines` (kind LEDGER), ranks: {world rank: case rank}; None
    when no rank wrote one. A peer outside the case keeps its world rank, as 'w<n>'."""
    if not lines:
        return None
    led = Ledger({}, {}, [], True)

    def peer(w):
        return "any" if w in ("any", "-1") else ranks.get(int(w), f"w{w}")
    for line in lines:
        for item in filter(None, line.text.split(";")):
            f = item.split()
            if f == ["+"]:
                led.whole = False
            elif len(f) == 7 and f[0] in "SR":
                key = (line.rank, f[1], peer(f[2]), int(f[3]))
                if f[0] == "S":
                    led.sent[key] = (int(f[4]), int(f[6]))
                else:
                    led.received[key] = int(f[4])
            elif len(f) == 6 and f[0] == "W":
                led.waiting.append((line.rank, f[1], peer(f[2]),
                                    "any" if f[3] == "any" else int(f[3]), int(f[4]), f[5]))
    return led


def unreceived(ledger):
    """[(sender, receiver, tag, comm kind, messages, the last one's bytes)]: the messages sent
    in the case that their receiver never received, by the ranks' own counts. MPI matches the
    messages of one sender, tag and communicator in the order they were sent, so those not
    received are the last ones."""
    out = []
    for (src, comm, dst, tag), (msgs, last) in sorted(ledger.sent.items(), key=str):
        if not isinstance(dst, int):
            continue  # outside the case: MPI_COMM_WORLD's own report says so
        got = ledger.received.get((dst, comm, src, tag), 0)
        if msgs > got:
            out.append((src, dst, tag, comm, msgs - got, last))
    return out


def unmatched_pairs(blocked, ledger=None):
    """Lines naming each message sent and never received, beside the receive its receiver
    waits for from that rank, if any, where their tags or communicators differ: the two can
    never meet. Without a ledger (a demo), the blocked sends stand for what was sent."""
    recvs = [(r, "world" if "on MPI_COMM_WORLD" in what else "case",
              m[1] if m[1] == "any" else int(m[1]), m[2] if m[2] == "any" else int(m[2]))
             for r, what in blocked for m in BLOCKED_RECV.finditer(what)
             if "group" not in what and "mesh's own" not in what]
    if ledger is None:
        sends = [(r, int(m[1]), int(m[2]), "case", 1, m[3]) for r, what in blocked
                 for m in BLOCKED_SEND.finditer(what)]
    else:
        sends = [(src, dst, tag, comm, n, f"{b} B")
                 for src, dst, tag, comm, n, b in unreceived(ledger)]
        # A send the sender is blocked in is on its line already.
        shown = {(r, int(m[1]), int(m[2])) for r, what in blocked
                 for m in BLOCKED_SEND.finditer(what)}
        recvs += [(r, comm, p, t) for r, comm, p, t, _, _ in ledger.waiting
                  if (r, comm, p, t) not in recvs]
    out = []
    for src, dst, tag, comm, n, size in sends:
        # The receives dst waits for from src that no message sent to it matches (a posted
        # receive whose message has arrived may still wait for its MPI_Wait).
        waits = [(c, t) for r, c, p, t in recvs if r == dst and p in (src, "any") and
                 not any(d == dst and c2 == c and (t == "any" or t2 == t) and
                         (p == "any" or s2 == src) for s2, d, t2, c2, _, _ in sends)]
        what = (f"r{src}'s message (to {dst}, tag {tag}, {size}{comm_words(comm)})" if n == 1
                else f"r{src}'s {n} messages (to {dst}, tag {tag}, the last {size}"
                     f"{comm_words(comm)})")
        if any(t in (tag, "any") and c == comm for r, c, p, t in recvs
               if r == dst and p in (src, "any")):
            continue  # it matches a receive posted now: a matter of order, not of tags
        if waits:
            c, t = waits[0]
            why = ("their tags differ, and a receive takes only a message of its own tag (or "
                   "MPI_ANY_TAG)" if c == comm else
                   "they are on different communicators, and a message is received only on "
                   "the communicator it was sent on")
            out.append(f"never matched: {what} and r{dst}'s receive (from {src}, tag {t}"
                       f"{comm_words(c)}): {why}")
        elif ledger is not None and (src, dst, tag) not in shown:
            out.append(f"sent and never received: {what}")
    return out


def blocked_explanation(blocked, in_a_case, ledger=None):
    """For ranks that made no progress, [(rank, the call they were in)]: the report's lines
    (one per rank, then why it cannot return) and the cause's hint, or None. in_a_case: the
    ranks ran a graded case, on a sub-communicator, where MPI_COMM_WORLD is the likely cause
    (a demo runs on the whole world, where it is not)."""
    lines = [f"  r{rank} {what}" for rank, what in blocked]
    on_world = [rank for rank, what in blocked if "on MPI_COMM_WORLD" in what]
    if in_a_case and on_world:
        # The usual cause, and the one that makes a matched-looking pair never meet.
        who = f"rank {on_world[0]}" if len(on_world) == 1 else \
            f"ranks {', '.join(map(str, on_world))}"
        return lines, (f"cause: {who} waited on MPI_COMM_WORLD: the function must use its comm "
                       f"argument. The grader runs each case on a sub-communicator of a larger "
                       f"world, so rank p of MPI_COMM_WORLD is another group's rank, or an idle "
                       f"one: the pair above looks matched but never meets")
    missed = unmatched_pairs(blocked, ledger)
    lines += missed
    missed = [ln for ln in missed if ln.startswith("never matched")]
    if not missed and any("MPI_Send(" in what or "MPI_Ssend(" in what for _, what in blocked):
        lines.append("strict send mode: MPI_Send returns only once the matching receive is "
                     "posted, so sends that wait on each other in a cycle never return")
    elif not missed and blocked and all(
            what.startswith(("MPI_Recv(", "MPI_Probe(", "MPI_Mprobe(")) for _, what in blocked):
        lines.append("every rank waits for a message that no rank has sent: each receives "
                     "before it sends, in a cycle; one side must send first (or use "
                     "MPI_Sendrecv, or post the receive with MPI_Irecv before the send)")
    return lines, None
