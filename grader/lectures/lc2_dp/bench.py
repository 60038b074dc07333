"""make bench LC=2 [NP=n] [SOL=0] [ARGS="..."]: the step time of lecture 2's
data-parallel training, naive (ddp_naive_step) against bucketed
(ddp_bucketed_step), beside the same step without communication, at np 1, 2
and 4 (NP=n: that one only), on a model large enough that communication
matters; the bucketed step also without its MPI_Testall progress calls, and
with libnbc's ring algorithm. Then one traced launch at np 2 (build/trace/)
and a summary of it: when each bucket's all-reduce started and finished
against backward's layers. Writes JSON under build/bench/. docs/lc2_dp.md
(Step time) explains it. Measured by build/bench/solutions/lc2_dp/bench
(grader/lectures/lc2_dp/bench.c), one launch per np.
"""

import json
import os
import re
import sys
import time

import launch
import nn
from benchlib import (build_bench, human, Launch, ms, output_tag, parse_size, TrainingRun,
                      tree_of)
from testkit import bench_results, fresh, mutant_tree, run_bench, tail
from lectures.lc2_dp import ddp

ABOUT = "DDP step time, naive vs bucketed, np 1, 2, 4, and a trace of the buckets"

# The model, and the variants of bench.c.
DIMS = "1024,1024,1024,1024,1024,1024,1024,16"
LC2_VARIANTS = ("compute", "naive", "onebucket", "bucketed", "noprogress", "onebucket_ring",
                "bucketed_ring", "noprogress_ring")
LC2_DEFAULT_VARIANTS = LC2_VARIANTS[:-1]


def add_options(g):
    g.add_argument("--bucket_bytes", type=parse_size, default=4 << 20,
                   help="ddp_bucketed_step's cap (default 4M: one 1024x1024 layer per bucket, "
                        "6 buckets)")
    g.add_argument("--variants", default="",
                   help="comma-separated, of " + ", ".join(LC2_VARIANTS) +
                        " (default: all but noprogress_ring)")
    g.add_argument("--trace-np", type=int, default=None,
                   help="ranks of the traced launch (default 2; 0: no trace)")


LC2_ABOUT = [
    ("compute", "forward, backward, update on every rank at once; no MPI"),
    ("naive", "ddp_naive_step: after backward, one MPI_Allreduce per tensor"),
    ("onebucket", "ddp_bucketed_step with a cap of all the gradients: one MPI_Iallreduce, "
                  "started when backward has finished (nothing can overlap)"),
    ("bucketed", "ddp_bucketed_step: an MPI_Iallreduce per bucket from backward's hook, "
                 "MPI_Testall at every later hook, MPI_Waitall"),
    ("noprogress", "ddp_bucketed_step with its MPI_Testall calls skipped: MPI only at the "
                   "Iallreduce starts and the Waitall"),
    ("*_ring", "the same with libnbc's ring for MPI_Iallreduce instead of its binomial tree"),
]
BUCKETED = LC2_VARIANTS[2:]


class Lc2Launch(Launch):
    """Collects one np's lines from grader/lectures/lc2_dp/bench.c."""

    def __init__(self):
        super().__init__()
        self.buckets, self.rows, self.calls, self.checks = [], {}, {}, []

    def line(self, text):
        parts = text.split()
        kind = parts[0] if parts else ""
        if kind == "BUCKET" and len(parts) == 6:
            self.buckets.append({"index": int(parts[1]), "first": parts[2], "last": parts[3],
                                 "bytes": int(parts[4]), "first_layer": int(parts[5])})
        elif kind == "ROW" and len(parts) == 7:
            self.rows[parts[1]] = {"median": float(parts[2]), "best": float(parts[3]),
                                   "worst": float(parts[4]), "rounds": int(parts[5]),
                                   "steps": int(parts[6])}
        elif kind == "CALLS" and len(parts) == 5:
            self.calls.setdefault(parts[1], {})[parts[2]] = float(parts[3])
        elif kind == "CHECK" and len(parts) >= 6:
            self.checks.append({"what": parts[1], "status": parts[2], "ndiff": int(parts[3]),
                                "maxdiff": float(parts[4]), "detail": text.split(None, 5)[5]})
        elif text.startswith("xt: trace of "):
            pass  # the traced launch's own note; the summary names the file
        else:
            super().line(text)


def lc2_derive(rows, np_):
    """exposed (best and median) per variant, and hidden: the share of naive's exposed time."""
    out = {}
    comp = rows.get("compute")
    naive = rows.get("naive")
    for name, r in rows.items():
        d = {}
        if comp and name != "compute":
            for stat in ("best", "median"):
                d[f"exposed_{stat}"] = r[stat] - comp[stat]
            if naive and name in BUCKETED:
                for stat in ("best", "median"):
                    ne = naive[stat] - comp[stat]
                    # One rank has nothing to hide: a share of noise would mean nothing.
                    if np_ > 1 and ne > 5e-4:
                        d[f"hidden_{stat}"] = (ne - (r[stat] - comp[stat])) / ne
        out[name] = d
    return out


def lc2_calls_text(calls):
    short = {"MPI_Allreduce": "Allreduce", "MPI_Iallreduce": "Iallreduce",
             "MPI_Testall": "Testall", "MPI_Waitall": "Waitall", "MPI_Wait": "Wait"}
    return " ".join(f"{v:g} {short.get(k, k)}" for k, v in calls.items()) or "-"


LC2_HEAD = "{:>4}  {:<16} {:>8} {:>8} {:>8} {:>7}  {:<32} {}"


def lc2_print_rows(np_, got, derived):
    checks = {c["what"].split("=", 1)[1]: c for c in got.checks if "=" in c["what"]}
    for name in LC2_VARIANTS:
        r = got.rows.get(name)
        if not r:
            continue
        d = derived.get(name, {})
        exposed = f"{d['exposed_best'] * 1e3:.1f}" if "exposed_best" in d else "-"
        hidden = f"{d['hidden_best'] * 100:.0f}%" if "hidden_best" in d else "-"
        c = checks.get(name)
        if name in ("compute", "naive") or not c:
            check = "-" if name != "naive" else "(reference)"
        elif c["status"] != "ok":
            check = f"WRONG {c['ndiff']}"
        elif c["ndiff"] == 0:
            check = "= naive"
        else:
            check = f"~ naive ({c['maxdiff']:.0e})"
        print(LC2_HEAD.format(np_, name, ms(r["best"]), ms(r["median"]), exposed, hidden,
                              lc2_calls_text(got.calls.get(name, {})), check), flush=True)
    for c in got.checks:
        if c["status"] != "ok":
            print(f"  ERROR: np {np_}: {c['what']} fails: {c['ndiff']} weight values differ "
                  f"(over all ranks), max |difference| {c['maxdiff']:.3g}: {c['detail']}",
                  flush=True)


def run(args):
    args.dims = args.dims or DIMS
    args.rows = args.rows if args.rows is not None else 16
    args.steps = args.steps if args.steps is not None else 3
    tree = tree_of(args, "lc2_dp")
    nps = [args.np] if args.np else [1, 2, 4]
    rounds = args.rounds or 11
    warmup = args.warmup if args.warmup >= 0 else 2
    variants = [v for v in args.variants.split(",") if v] or list(LC2_DEFAULT_VARIANTS)
    unknown = [v for v in variants if v not in LC2_VARIANTS]
    if unknown or min(nps) < 1 or args.rows < 1 or args.steps < 1 or rounds < 1:
        print(f"bench: need np, --rows, --steps, --rounds >= 1 and variants of "
              f"{', '.join(LC2_VARIANTS)}" + (f" (not {', '.join(unknown)})" if unknown else ""),
              file=sys.stderr)
        return 2
    trace_np = args.trace_np if args.trace_np is not None else (args.np or 2)

    binary = build_bench(tree)
    if binary is None:
        return 1

    run = TrainingRun(2, args, "data-parallel step time", tree, nps)
    for name, about in LC2_ABOUT:
        if name in variants or (name == "*_ring" and any(v.endswith("_ring") for v in variants)):
            print(f"#   {name:<16} {about}")
    print(f"# time: ms per step, the slowest rank's average over {args.steps} steps; best and "
          f"median of {rounds} rounds, the variants taking turns in every round")
    print("# exposed = best step - best compute step: what communication adds to a step; hidden = "
          "the part of naive's exposed time that a bucketed variant does not expose")

    env = launch.mpi_env()
    # Every element of a DDP sum is a float: no need for the grader's plain C kernels,
    # and the timed launches are not traced (tracing has its own launch below).
    if "OMPI_MCA_op" not in os.environ:
        env.pop("OMPI_MCA_op", None)
    env.pop("XT_TRACE", None)
    common = [binary, "--dims", args.dims, "--rows", str(args.rows),
              "--bucket_bytes", str(args.bucket_bytes)]
    results, failures, skipped, first = [], [], [], True
    for np_ in nps:
        prog = common + ["--steps", str(args.steps), "--rounds", str(rounds),
                         "--warmup", str(warmup), "--variants", ",".join(variants)]
        cmd = launch.mpirun_command(np_, prog)
        got = Lc2Launch()
        t0 = time.monotonic()
        res = launch.run(cmd, timeout=args.timeout, env=env, on_line=got.line)
        seconds = time.monotonic() - t0
        if got.skip or got.todo:
            where = re.search(r"TODO (\S+:\d+)", got.todo[0]) if got.todo else None
            msg = got.skip or (f"{tree}/ is not written yet (TODO at "
                               f"{where.group(1) if where else '?'})")
            print(f"# SKIPPED: {msg}")
            skipped.append(msg)
            break
        if first and got.info:
            first = False
            info = got.info
            print(f"# model {info.get('dims')}: {len(info.get('dims', '').split(',')) - 1} layers, "
                  f"{int(info.get('nparams', 0)):,} parameters, "
                  f"{int(info.get('grad_bytes', 0)) / 1e6:.1f} MB of gradients; "
                  f"{info.get('rows')} rows per rank and step, MSE loss, SGD")
            plan = ", ".join(f"{b['first']}..{b['last']} {b['bytes'] / (1 << 20):.1f}"
                             for b in got.buckets)
            print(f"# buckets of at least {human(args.bucket_bytes)}: {len(got.buckets)} "
                  f"(MiB, filled in this order): {plan}")
            alg = info.get("iallreduce_algorithm", "-")
            if alg != "-":
                print(f"# MPI_Iallreduce algorithm: {alg} (libnbc takes a binomial tree for every "
                      f"in-place call; the _ring rows set its ring through MPI_T)")
            print()
            print(LC2_HEAD.format("np", "variant", "best", "median", "exposed", "hidden",
                                  "MPI calls per step", "check"))
            print(LC2_HEAD.format("", "", "(ms)", "(ms)", "(ms)", "", "", ""), flush=True)
        derived = lc2_derive(got.rows, np_)
        lc2_print_rows(np_, got, derived)
        entry = {"np": np_, "seconds": round(seconds, 2), "info": got.info,
                 "buckets": got.buckets, "rows": got.rows, "derived": derived,
                 "calls": got.calls, "checks": got.checks}
        wrong = [c for c in got.checks if c["status"] != "ok"]
        if res.timed_out or res.returncode != 0 or wrong or not got.rows:
            why = (f"stopped after {args.timeout:.0f} s" if res.timed_out else
                   f"{len(wrong)} check(s) failed" if wrong else
                   f"exit status {res.returncode}" if res.returncode else "no results")
            print(f"# FAILED: np {np_}: {why}")
            print(f"#   rerun: {launch.shell_line(cmd)}")
            failures.append(f"np {np_}: {why}")
            entry["failed"] = why
        results.append(entry)

    if results:
        lc2_print_findings(results)

    trace = None
    if trace_np > 1 and results and not failures and not skipped:
        trace = lc2_trace(args, common, trace_np, tree, env)
        if trace and trace.get("failed"):
            failures.append(trace["failed"])

    return run.finish("lc2_dp", {"dims": args.dims, "rows": args.rows,
                                 "bucket_bytes": args.bucket_bytes, "steps": args.steps,
                                 "rounds": rounds, "warmup": warmup, "runs": results,
                                 "trace": trace}, skipped, failures)


LC2_CHANGES = [
    ("onebucket", "bucketed", "overlap: buckets from the hook, not one after backward"),
    ("noprogress", "bucketed", "the MPI_Testall progress calls in the hook"),
    ("bucketed", "bucketed_ring", "libnbc's ring instead of its binomial tree"),
    ("onebucket_ring", "bucketed_ring", "overlap, both with the ring"),
]


def lc2_print_findings(results):
    """What each change to the bucketed step saves, per np: the differences the table is about."""
    rows = []
    for slow, fast, what in LC2_CHANGES:
        cells = []
        for e in results:
            r = e["rows"]
            if slow in r and fast in r:
                gain = {st: (r[slow][st] - r[fast][st]) * 1e3 for st in ("best", "median")}
                cells.append(f"{gain['best']:+.1f} ({gain['median']:+.1f})")
            else:
                cells.append("-")
        if any(c != "-" for c in cells):
            rows.append((what, cells))
    if not rows:
        return
    print()
    print("# what each change saves per step, ms: best rounds (medians); negative: it costs")
    print(f"# {'':<56}" + "".join(f"{'np ' + str(e['np']):>15}" for e in results))
    for what, cells in rows:
        print(f"# {what:<56}" + "".join(f"{c:>15}" for c in cells))


# --------------------------------------------------------------- LC=2 trace

def lc2_trace(args, common, np_, tree, base_env):
    """One traced launch (naive, bucketed and noprogress steps) and a summary of it."""
    tag = output_tag(args)
    os.makedirs(os.path.join("build", "trace"), exist_ok=True)
    path = os.path.join("build", "trace", f"lc2_dp{tag}_np{np_}.trace.json")
    prog = common + ["--steps", "3", "--variants", "naive,bucketed,noprogress",
                     "--trace", path]
    cmd = launch.mpirun_command(np_, prog)
    got = Lc2Launch()
    res = launch.run(cmd, timeout=args.timeout, env=base_env, on_line=got.line)
    print()
    if res.timed_out or res.returncode != 0 or not os.path.exists(path):
        print(f"# FAILED: the traced launch (np {np_}): "
              f"{'timed out' if res.timed_out else f'exit status {res.returncode}'}")
        print(f"#   rerun: {launch.shell_line(cmd)}")
        return {"path": path, "failed": f"trace np {np_}"}
    try:
        with open(path) as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    except (OSError, ValueError, KeyError) as e:
        print(f"# FAILED: cannot read the trace {path}: {e}")
        return {"path": path, "failed": f"trace np {np_} unreadable"}
    out = {"path": path, "np": np_, "ranks": {}}
    print(f"# trace of np {np_}: {path} (XT_TRACE=1 timeline; open it in https://ui.perfetto.dev)")
    print("#   the last traced step of each kind; times in ms from the step's start. A bucket is "
          "'in flight' from its MPI_Iallreduce until it is known complete; it moves only inside "
          "MPI calls (MPI_Iallreduce, MPI_Testall, MPI_Wait)")
    for rank in range(np_):
        mine = [e for e in events if e["pid"] == rank]
        s = lc2_trace_rank(mine)
        if s is None:
            print(f"#   rank {rank}: no complete bucketed step in the trace")
            continue
        out["ranks"][rank] = s
        if rank < 2:
            lc2_print_trace_rank(rank, s)
    return out


def last_step(events, kind):
    steps = [e for e in events if e["name"].startswith(kind + " step ")]
    if not steps:
        return None, []
    s = max(steps, key=lambda e: e["ts"])
    t0, t1 = s["ts"], s["ts"] + s["dur"]
    inside = sorted((e for e in events if e is not s and t0 <= e["ts"] <= t1),
                    key=lambda e: (e["ts"], -e["dur"]))
    return s, inside


def lc2_trace_rank(events):
    """Per bucket of the last bucketed step: started, finished, in flight beside compute."""
    step, inside = last_step(events, "bucketed")
    if step is None:
        return None
    t0 = step["ts"]

    def rel(t):
        return (t - t0) / 1e3

    layers = [(int(e["name"].rsplit(" ", 1)[1]), e["ts"], e["ts"] + e["dur"])
              for e in inside if e["name"].startswith("backward layer ")]
    fwd = [e for e in inside if e["name"] == "forward"]
    starts = [e for e in inside if e["name"] == "MPI_Iallreduce"]
    if not layers or not starts:
        return None
    b0, b1 = min(l[1] for l in layers), max(l[2] for l in layers)
    waits = {int(e["name"].rsplit(" ", 1)[1]): e for e in inside
             if e["name"].startswith("wait bucket ")}
    marks = [(int(e["name"].split()[1]), e["ts"]) for e in inside if e["name"].startswith("done ")]
    tests = [e for e in inside if e["name"] == "MPI_Testall"]
    wait_from = min((w["ts"] for w in waits.values()), default=b1)
    wait_to = max((w["ts"] + w["dur"] for w in waits.values()), default=b1)
    buckets = []
    for i, st in enumerate(starts):
        after = [l for l in layers if l[2] <= st["ts"]]
        layer = min(after, key=lambda l: l[0])[0] if after else None
        known = [t for n, t in marks if n > i]
        w = waits.get(i)
        if known:
            done, how = min(known), "Testall"
        elif w and w["dur"] > 20:  # over 20 us in its MPI_Wait: it finished there
            done, how = w["ts"] + w["dur"], "Wait"
        elif w and w["ts"] - wait_from > 20:  # done when its wait began, after others' waits
            done, how = w["ts"], "by"
        else:  # complete before the waits began: sometime during backward's MPI calls
            done, how = wait_from, "before"
        beside = sum(max(0, min(done, l[2]) - max(st["ts"], l[1])) for l in layers)
        buckets.append({"index": i, "bytes": st.get("args", {}).get("bytes", 0),
                        "start": rel(st["ts"]), "start_ms_in_call": st["dur"] / 1e3,
                        "after_layer": layer, "done": rel(done), "done_how": how,
                        "in_flight_beside_compute": beside / 1e3})
    s = {"step": step["dur"] / 1e3, "step_name": step["name"],
         "forward": [rel(fwd[0]["ts"]), rel(fwd[0]["ts"] + fwd[0]["dur"])] if fwd else None,
         "backward": [rel(b0), rel(b1)], "layers": len(layers),
         "testall_in_backward": [len(tests), sum(e["dur"] for e in tests) / 1e3],
         "iallreduce_calls": [len(starts), sum(e["dur"] for e in starts) / 1e3],
         "waits": [rel(wait_from), rel(wait_to)], "buckets": buckets}
    # naive: what follows its backward; noprogress: how long its waits take.
    nstep, ninside = last_step(events, "naive")
    if nstep is not None:
        nl = [e for e in ninside if e["name"].startswith("backward layer ")]
        ar = [e for e in ninside if e["name"] == "MPI_Allreduce"]
        if nl and ar:
            nb1 = max(e["ts"] + e["dur"] for e in nl)
            s["naive"] = {"step": nstep["dur"] / 1e3, "backward_end": (nb1 - nstep["ts"]) / 1e3,
                          "allreduce_calls": len(ar),
                          "allreduce_ms": sum(e["dur"] for e in ar) / 1e3}
    pstep, pinside = last_step(events, "noprogress")
    if pstep is not None:
        pl = [e for e in pinside if e["name"].startswith("backward layer ")]
        pw = [e for e in pinside if e["name"].startswith("wait bucket ")]
        if pl and pw:
            s["noprogress"] = {
                "step": pstep["dur"] / 1e3,
                "backward_end": (max(e["ts"] + e["dur"] for e in pl) - pstep["ts"]) / 1e3,
                "wait_ms": sum(e["dur"] for e in pw) / 1e3,
                "buckets_finished_in_wait": sum(1 for e in pw if e["dur"] > 20)}
    return s


def lc2_print_trace_rank(rank, s):
    b0, b1 = s["backward"]
    fwd = f"forward {s['forward'][0]:.1f}-{s['forward'][1]:.1f}, " if s["forward"] else ""
    nt, tt = s["testall_in_backward"]
    ni, ti = s["iallreduce_calls"]
    print(f"#   rank {rank}, {s['step_name']} ({s['step']:.1f} ms): {fwd}backward "
          f"{b0:.1f}-{b1:.1f} ({s['layers']} layers); inside backward's hooks {ni} "
          f"MPI_Iallreduce {ti:.1f} ms and {nt} MPI_Testall {tt:.1f} ms; waits for the buckets "
          f"{s['waits'][0]:.1f}-{s['waits'][1]:.1f}")
    print(f"#     {'bucket':>6} {'MiB':>5} {'started':>8}  {'after':<8}  {'known complete':<38}"
          f"  in flight beside backward compute")
    for b in s["buckets"]:
        layer = f"layer {b['after_layer']}" if b["after_layer"] is not None else "-"
        if b["done_how"] in ("before", "by"):
            done = (f"by {b['done']:.1f}, before the waits" if b["done_how"] == "before" else
                    f"by {b['done']:.1f}, when its wait began")
            beside = f"at most {b['in_flight_beside_compute']:.1f} ms"
        else:
            how = "in its MPI_Wait" if b["done_how"] == "Wait" else "in an MPI_Testall"
            after = b["done"] - b1
            done = f"{b['done']:.1f} {how}" + (f", {after:.1f} after bwd" if after > 0 else "")
            beside = f"{b['in_flight_beside_compute']:.1f} ms"
        print(f"#     {b['index']:>6} {b['bytes'] / (1 << 20):>5.1f} {b['start']:>8.1f}  "
              f"{layer:<8}  {done:<38}  {beside}")
    if "naive" in s:
        n = s["naive"]
        waited = s["waits"][1] - s["waits"][0]
        print(f"#     time in MPI per step: bucketed {ti + tt:.1f} ms inside backward's hooks + "
              f"{waited:.1f} ms waiting after it = {ti + tt + waited:.1f} ms; naive ("
              f"{n['step']:.1f} ms step) {n['allreduce_ms']:.1f} ms in {n['allreduce_calls']} "
              f"MPI_Allreduce calls after its backward")
    if "noprogress" in s:
        p = s["noprogress"]
        print(f"#     noprogress ({p['step']:.1f} ms): {p['buckets_finished_in_wait']} of "
              f"{len(s['buckets'])} buckets finish only in the waits after backward, "
              f"{p['wait_ms']:.1f} ms")

# ------------------------------------------------------------------ make test

# make bench LC=2 on a small model at np=2: one launch, about a second.
SMALL = ["--lc", "2", "--np", "2", "--rounds", "2", "--steps", "1", "--warmup", "0", "--dims",
         "64,64,64,8", "--bucket_bytes", "1K"]


def selftest(s):
    """make test: the bench on a small model, and a wrong bucketed step it must reject."""
    s.section("bench (make bench LC=2, a small model)")
    out = fresh("bench2")
    rc, text, took = run_bench(SMALL, out)
    problems = [] if rc == 0 else tail(text)
    run = bench_results(os.path.join(out, "lc2_dp_np2.json"), problems,
                        {"rows": {}, "checks": [], "calls": {}}, first_run=True)
    for v in ("compute", "naive", "bucketed", "noprogress"):
        if not run["rows"].get(v, {}).get("best", 0) > 0:
            problems.append(f"no time for {v}")
    problems += [f"check {c['what']}: {c['status']}" for c in run["checks"] if c["status"] != "ok"]
    if run.get("calls", {}).get("bucketed", {}).get("MPI_Iallreduce") != 3.0:
        problems.append(f"bucketed calls per step: {run.get('calls', {}).get('bucketed')}")
    if "bucket   MiB  started" not in text:
        problems.append("no per-bucket trace summary")
    s.record("bench LC=2: naive, bucketed and their variants timed at np=2, every variant's "
             "weights equal to naive's, 3 Iallreduce per step, the trace summarised",
             not problems, problems, f"({took:.1f} s)")

    # A bucketed step that updates before its buckets are all-reduced must fail the check.
    tree = mutant_tree("bench2_mutant", "lc2_dp", "bucketed_wait_after_update")
    rc, out, _ = run_bench(SMALL, os.path.join(tree, "out"), tree)
    s.record("bench LC=2: a bucketed step that updates before waiting is reported and fails "
             "the run", rc == 1 and
             re.search(r"ERROR: np 2: naive=bucketed fails: \d+ weight values differ", out),
             tail(out))


# ------------------------------------------------------- the page's copy of a run

# A row of the table docs/lc2_dp.md copies: np, variant, best, median, exposed, hidden, the
# MPI calls per step, the check.
PAGE_ROW = re.compile(r"^ +(\d+)  (\w+) +([\d.]+) +([\d.]+) +(-|-?[\d.]+) +(-|-?\d+%)  "
                      r"(.+?) +(\(reference\)|= naive|~ naive \(\S+\)|-)$", re.M)
# A line of "what each change saves": the change, then best (median) per np.
PAGE_SAVES = re.compile(r"^# (\S.*?) +((?:[+-][\d.]+ \([+-][\d.]+\) *)+)$", re.M)


def page_calls(variant, bucket_bytes=4 << 20):
    """The MPI calls per step the bench counts for a variant of its default model, from the
    bucket rule: naive one MPI_Allreduce per tensor; a bucketed step one MPI_Iallreduce per
    bucket, an MPI_Testall in every hook after the first bucket's start (the hooks of the
    layers below it), one MPI_Waitall."""
    m = nn.Mlp(DIMS)
    base = variant.replace("_ring", "")
    if base == "compute":
        return "-"
    if base == "naive":
        return lc2_calls_text({"MPI_Allreduce": len(m.tensors)})
    cap = m.nparams * 4 if base == "onebucket" else bucket_bytes
    layers = ddp.bucket_layers(m, cap)
    calls = {"MPI_Iallreduce": len(layers)}
    if base == "bucketed" and layers[0] > 0:
        calls["MPI_Testall"] = layers[0]
    calls["MPI_Waitall"] = 1
    return lc2_calls_text(calls)


def page_figures(page):
    """The figures of the bench's table that docs/lc2_dp.md copies and that do not depend on
    the machine: the MPI calls per step (from the bucket rule), and the columns derived from
    the copied times (exposed = best - compute's best; hidden = naive's exposed time less this
    variant's, as a share of naive's; what each change saves), each within the rounding of the
    copied times. The times themselves are the machine's. Returns [problem]."""
    rows = {(int(n), v): (float(b), float(md), e, h, calls.strip())
            for n, v, b, md, e, h, calls, _ in PAGE_ROW.findall(page)}
    problems = []
    if not rows:
        return ["docs/lc2_dp.md: no row of the bench's table found"]
    half = 0.05 + 1e-9  # a copied time is rounded to 0.1 ms

    def spread(x, y):
        """The range of x - y for values rounded to 0.1."""
        return x - y - 2 * half, x - y + 2 * half
    for (n, v), (best, median, exposed, hidden, calls) in sorted(rows.items()):
        if calls != page_calls(v):
            problems.append(f"docs/lc2_dp.md: np {n} {v} shows '{calls}' per step; the bucket rule "
                            f"gives '{page_calls(v)}'")
        comp = rows.get((n, "compute"))
        if exposed != "-" and comp:
            lo, hi = spread(best, comp[0])
            if not lo - half <= float(exposed) <= hi + half:
                problems.append(f"docs/lc2_dp.md: np {n} {v} exposed {exposed}, but best {best} - "
                                f"compute {comp[0]} = {best - comp[0]:.1f}")
        naive = rows.get((n, "naive"))
        if hidden != "-" and comp and naive:
            nlo, nhi = spread(naive[0], comp[0])
            elo, ehi = spread(best, comp[0])
            shares = [(ne - e) / ne for ne in (nlo, nhi) for e in (elo, ehi) if ne > 0]
            got = float(hidden[:-1]) / 100
            if not shares or not min(shares) - 0.005 <= got <= max(shares) + 0.005:
                problems.append(f"docs/lc2_dp.md: np {n} {v} hidden {hidden}, outside what its "
                                f"times give ({min(shares or [0]):.0%} .. {max(shares or [0]):.0%})")
    nps = sorted({n for n, _ in rows})
    for what, cells in PAGE_SAVES.findall(page):
        change = next((c for c in LC2_CHANGES if c[2] == what), None)
        if change is None:
            continue
        for n, (b, md) in zip(nps, re.findall(r"([+-][\d.]+) \(([+-][\d.]+)\)", cells)):
            slow, fast = rows.get((n, change[0])), rows.get((n, change[1]))
            if not (slow and fast):
                continue
            for stat, got in ((0, b), (1, md)):
                lo, hi = spread(slow[stat], fast[stat])
                if not lo - half <= float(got) <= hi + half:
                    problems.append(f"docs/lc2_dp.md: '{what}' at np {n} shows {got}; the table's "
                                    f"{change[0]} - {change[1]} is {slow[stat] - fast[stat]:+.1f}")
    return problems


# make test's negative control of page_figures: a copied call count one off.
PAGE_BREAK = ("6 Iallreduce 5 Testall 1 Waitall = naive", "6 Iallreduce 4 Testall 1 Waitall = naive")
