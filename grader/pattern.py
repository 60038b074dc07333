"""The pattern of a test's failures: which cases failed and which passed, said by
the parameters that tell them apart.

A test's cases vary in a few parameters (np, dtype, count, bucket_bytes,
dims, ...); which of them a failure follows is often the diagnosis: a ring
that fails only when np does not divide count, a ZeRO step that fails only
with padding. summary() says it in one line:

    11 of 16 cases failed: exactly those with np>=2
    36 of 108 cases failed: all but those with dtype=float32,float64
    9 of 102 cases failed: exactly those with np=3,5 and op=sum
    26 of 102 cases failed: all with np=3; 2 of 17 with np=5; none with np=1,2,4,8

It looks, in this order, for one parameter whose values split the cases
exactly (each value's cases all failed or all passed), then for two whose
values together do (the failing cases are those with p in A and q in B, or
the passing ones are), then for the one parameter that splits them best,
saying how many cases of each of its mixed values failed; failing that, it
lists the failing cases' numbers. Every sentence it writes is true of the
cases that ran. A parameter that is almost unique to each case (a seed, a
list of counts) explains nothing and is not used; np always is.

Rows are (features, failed): features a {name: value} of one case (np and its
parameters, and any derived facets its test declares), failed True, False, or
None for a case that did not run.
"""

import itertools

# Parameters that name the function, not the case.
IGNORED = ("fn",)
MAX_MIXED = 2  # values of a partial split that failed in part


class Word(str):
    """A 0/1 parameter's name as the word that says it is set ("bias"), with the words
    for unset (`off`, "no bias" unless given): the summary writes such a parameter
    as its word, as the case labels do (spec.word)."""

    def __new__(cls, on, off=None):
        w = super().__new__(cls, on)
        w.off = off or f"no {on}"
        return w


def _key(v):
    """A hashable, comparable stand-in for a parameter's value."""
    if isinstance(v, (list, tuple)):
        return tuple(_key(x) for x in v)
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        try:
            return v.item()
        except (ValueError, TypeError):
            return str(v)
    try:
        hash(v)
    except TypeError:
        return str(v)
    return v


def _number(v):
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _show(v):
    if isinstance(v, tuple):
        return "[" + ",".join(_show(x) for x in v) + "]"
    s = str(v)
    return f"[{s}]" if ("," in s or " " in s) else s


class Param:
    """One parameter of a test's cases: its name and its values in order."""

    def __init__(self, name, values):
        self.name = name
        distinct = list(dict.fromkeys(values))
        nums = [_number(v) for v in distinct]
        self.numeric = all(n is not None for n in nums)
        if self.numeric:
            distinct = [v for _, v in sorted(zip(nums, distinct), key=lambda p: p[0])]
        self.values = distinct
        # A 0/1 facet whose name is words or a condition, not a parameter's name.
        self.flag = (self.numeric and {_number(v) for v in distinct} <= {0.0, 1.0} and
                     (isinstance(name, Word) or not name.isidentifier()))

    def _form(self, chosen):
        """(condition, how many things it names) for the values `chosen`."""
        vals = [v for v in self.values if v in chosen]
        rest = [v for v in self.values if v not in chosen]
        k = len(vals)
        if self.flag and k == 1:
            # A flag named in words ("one token", "alpha>0"): itself, or its absence.
            off = self.name.off if isinstance(self.name, Word) else f"no {self.name}"
            return (str(self.name) if _number(vals[0]) else off), 1
        if k >= 2 and self.numeric and vals == self.values[-k:]:
            return f"{self.name}>={_show(vals[0])}", 1
        if k >= 2 and self.numeric and vals == self.values[:k]:
            return f"{self.name}<={_show(vals[-1])}", 1
        if rest and 2 * len(rest) <= k:
            # Most of the values: the few it leaves out are the news. Counted a little
            # higher than the plain form, which wins a tie.
            return f"{self.name}!={','.join(_show(v) for v in rest)}", len(rest) + 0.5
        return f"{self.name}={','.join(_show(v) for v in vals)}", k

    def terms(self, chosen):
        """How many things says(chosen) names: 1 for one value or a range."""
        return self._form(chosen)[1]

    def says(self, chosen):
        """The values `chosen` (a subset of self.values) as a condition: 'np=3,5',
        'np>=3', 'count<=7', 'dtype=int32', 'n!=0,217' (all values but those)."""
        return self._form(chosen)[0]


def candidates(rows, wide=False):
    """The parameters worth naming: those that every case has, that vary, and (np
    aside) whose values repeat across cases; wide: those whose values do not (M of
    1, 2, 3, 4 ...), which only a one-value split may use ("all but those with M=1")."""
    if not rows:
        return []
    names = list(dict.fromkeys(k for f, _ in rows for k in f if k not in IGNORED))
    out = []
    for name in names:
        if not all(name in f for f, _ in rows):
            continue
        values = [_key(f[name]) for f, _ in rows]
        p = Param(name, values)
        if len(p.values) < 2:
            continue
        if (name != "np" and len(p.values) > max(2, len(rows) // 2)) != wide:
            continue
        if wide and "seed" in name:
            continue  # a value of its own for each case: no explanation
        out.append(p)
    return out


def _split(p, rows):
    """{value: (failed, total)} over rows."""
    out = {}
    for f, failed in rows:
        v = _key(f[p.name])
        a, b = out.get(v, (0, 0))
        out[v] = (a + bool(failed), b + 1)
    return out


def exact_single(params, rows, most_terms=None):
    """Every sentence 'exactly those with p=A' / 'all but those with p=B' that holds, as
    (how many values it names, sentence); most_terms: only those naming at most that."""
    found = []
    for p in params:
        split = _split(p, rows)
        if any(0 < a < b for a, b in split.values()):
            continue
        fail = {v for v, (a, _) in split.items() if a}
        ok = {v for v, (a, _) in split.items() if not a}
        # Which cases failed is said outright unless the passing ones take fewer values.
        side, lead = (ok, "all but those with") if p.terms(ok) < p.terms(fail) else \
            (fail, "exactly those with")
        if most_terms is None or p.terms(side) <= most_terms:
            found.append((p.terms(side), f"{lead} {p.says(side)}"))
    return found


def exact_pair(params, rows):
    """Every sentence 'exactly those with p=A and q=B' (or 'all but those with ...', where
    the passing cases are the product) that holds, p and q each narrowing it."""
    found = []
    for p, q in itertools.combinations(params, 2):
        for which, lead in ((True, "exactly those with"), (False, "all but those with")):
            side = [f for f, failed in rows if bool(failed) == which]
            a = {_key(f[p.name]) for f in side}
            b = {_key(f[q.name]) for f in side}
            if len(a) == len(p.values) or len(b) == len(q.values):
                continue
            inside = [failed for f, failed in rows
                      if _key(f[p.name]) in a and _key(f[q.name]) in b]
            if all(bool(x) == which for x in inside):
                found.append((p.terms(a) + q.terms(b), f"{lead} {p.says(a)} and {q.says(b)}"))
    return found


def partial(params, rows):
    """The best split by one parameter that is not exact: 'all with np=3; 2 of 17 with
    np=5; none with np=1,2,4,8' (past MAX_MIXED values that failed in part, those go
    together: 'none with np=1; 79 of 90 with np>=2'), or None when no parameter has a
    value whose cases all failed or all passed."""
    best = None
    for p in params:
        split = _split(p, rows)
        mixed = [v for v in p.values if 0 < split[v][0] < split[v][1]]
        fail = {v for v in p.values if split[v][0] == split[v][1]}
        ok = {v for v in p.values if split[v][0] == 0}
        in_mixed = sum(split[v][1] for v in mixed)
        if not (fail or ok):
            continue
        parts = [f"all with {p.says(fail)}"] if fail else []
        if len(mixed) <= MAX_MIXED:
            parts += [f"{split[v][0]} of {split[v][1]} with {p.says({v})}" for v in mixed]
        else:
            parts.append(f"{sum(split[v][0] for v in mixed)} of {in_mixed} with "
                         f"{p.says(set(mixed))}")
        if ok:
            parts.append(f"none with {p.says(ok)}")
        text = "; ".join(parts)
        score = (in_mixed, len(text))
        if best is None or score < best[0]:
            best = (score, text)
    return best[1] if best else None


def numbers(indices, most=8):
    """'1, 4-7, 12': runs of three or more as ranges, at most `most` items, then how many
    more cases."""
    runs = []
    for i in sorted(indices):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    items = []  # (text, cases it names)
    for run in runs:
        if len(run) > 2:
            items.append((f"{run[0]}-{run[-1]}", len(run)))
        else:
            items += [(str(i), 1) for i in run]
    text = ", ".join(t for t, _ in items[:most])
    if len(items) > most:
        text += f" and {sum(n for _, n in items[most:])} more"
    return text


def explain(rows):
    """Which of the rows that ran failed, as a phrase (no count), or None when it says
    nothing the count does not (none failed, all failed, one case)."""
    ran = [(f, failed) for f, failed in rows if failed is not None]
    nfail = sum(1 for _, failed in ran if failed)
    if nfail == 0 or nfail == len(ran):
        return None
    params = candidates(ran)
    for finder in (lambda: exact_single(params, ran) +
                   exact_single(candidates(ran, wide=True), ran, most_terms=1),
                   lambda: exact_pair(params, ran)):
        found = finder()
        if found:
            # The fewest values named, then the shortest, then the first: np comes first.
            terms, best = min(found, key=lambda f: (f[0], len(f[1])))
            lead = best.split(" with ", 1)[0]
            others = [s for t, s in found if s != best and s.startswith(lead + " with ")
                      and t <= terms + 1 and len(s) <= len(best) + 12]
            if others:
                # The same cases, named by another parameter: the two go together here.
                best += f" (or equally, with {others[0].split(' with ', 1)[1]})"
            return best
    text = partial(params, ran)
    if text:
        return text
    failed_at = [i for i, (_, failed) in enumerate(rows) if failed]
    return f"cases {numbers(failed_at)}"


def summary(rows, kinds=(), not_run_why="the run had ended"):
    """The one line under a test's first failing case: how many cases failed and which;
    "" where only one case ran, or none failed. kinds: the verdicts of the failing cases
    (shown when they differ); not_run_why: why the cases that did not run did not."""
    ran = [failed for _, failed in rows if failed is not None]
    nfail = sum(1 for x in ran if x)
    if nfail == 0 or len(ran) < 2:
        return ""
    not_run = len(rows) - len(ran)
    counts = {}
    for k in kinds:
        counts[k] = counts.get(k, 0) + 1
    each = [f"{n} {k}" for k, n in counts.items()]
    mix = f", {', '.join(each[:-1])} and {each[-1]}" if len(each) > 1 else ""
    of = f"of the {len(ran)} cases run" if not_run else f"of {len(ran)} cases"
    if nfail == len(ran):
        text = f"all {len(ran)} cases run failed" if not_run else f"all {len(ran)} cases failed"
    elif nfail == 1:
        text = f"1 {of} failed: only this one"
    else:
        text = f"{nfail} {of} failed{mix}: {explain(rows)}"
    if nfail == len(ran) and mix:
        text += mix
    if not_run:
        text += f"; {not_run} did not run, as {not_run_why}"
    return text
