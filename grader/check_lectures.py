"""make test's checks that each lecture is one unit: found by looking, its manifest, page,
points table, links and hints in order, its labels carrying every parameter, no lecture
named outside its places, pyflakes over grader/, no import circle, libxt's layers and
usage, and a throwaway lecture (with a kit and an event kind of its own) graded in a copy
of the tree. selftest(suite) runs them all.
"""

import dataclasses
import glob
import os
import re
import shutil
import subprocess
import sys
import time


import builds
import harness
import lectures
import pattern
import spec
from testkit import fresh, sh, tail

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TESTS_BIN = os.path.join("build", "common", "tests")


LECTURE_NAME = re.compile(r"lc\d_")  # one digit: not the throwaway lecture


def project_files():
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        import throwaway
        out = throwaway.tree_files(".")
    return [f for f in out if os.path.isfile(f)]


def points_table(doc_text):
    """{file: (functions, points text)} of a lecture page's table of exercises."""
    rows = {}
    for m in re.finditer(r"^\| \[`([\w.]+)`\]\(#[\w-]+\) \| (.*?) \| (.*?) \|$", doc_text, re.M):
        rows[m.group(1)] = (re.findall(r"`(\w+)`", m.group(2)), m.group(3).strip())
    return rows


def docs_problems(lec, text=None):
    """The page's table of exercises and its total against the manifest's tests."""
    path = lectures.page_path(lec)
    if text is None:
        try:
            text = lectures.page(lec)
        except OSError as e:
            return [f"{path}: {e.strerror}"]
    tests = lectures.load(lec).TESTS
    rows = points_table(text)
    out = []
    seen = set()
    for t in tests:
        fname = None
        for ext in (".c", ".cu"):
            if os.path.exists(os.path.join("solutions", lec, t.exercise + ext)):
                fname = t.exercise + ext
        if fname in seen:
            continue
        seen.add(fname)
        mine = [x for x in tests if x.exercise == t.exercise]
        if fname not in rows:
            out.append(f"{path}: the table of exercises has no row for {fname}")
            continue
        fns, pts = rows[fname]
        with open(os.path.join("solutions", lec, fname)) as f:
            source = f.read()

        def defined(name):
            return re.search(rf"^\w[\w \t*]*\b{name}\(", source, re.M) is not None

        # A test named after a function of the file must be listed; every function
        # listed must be defined there (a test may also cover two, as save and load).
        missing = [x.name for x in mine if defined(x.name) and x.name not in fns]
        unknown = [fn for fn in fns if not defined(fn)]
        if missing or unknown:
            out.append(f"{path}: {fname} lists {fns}; " +
                       (f"its tests grade {missing} too" if missing else
                        f"{unknown} are not defined in solutions/{lec}/{fname}"))
        if all(x.device == "cpu" for x in mine):
            want = (" + ".join(str(x.points) for x in mine), str(sum(x.points for x in mine)))
            if pts not in want:
                out.append(f"{path}: {fname} is worth {pts} in the table; its tests give "
                           f"{want[0]}")
        elif "DEVICE=" not in pts:
            out.append(f"{path}: {fname} is graded with DEVICE=cuda; the table says {pts}")
    for fname in rows:
        if fname not in seen:
            out.append(f"{path}: the table lists {fname}, which no test grades")
    total = sum(t.points for t in tests if t.device == "cpu")
    m = re.search(r"the lecture is worth (\d+) points", text)
    if not m or int(m.group(1)) != total:
        out.append(f"{path}: should say \"the lecture is worth {total} points\" "
                   f"(found {m.group(0) if m else 'no such sentence'})")
    return out


def anchors(path):
    """The anchors of a markdown page's headings, as GitHub makes them: lower case,
    punctuation dropped, spaces as hyphens, -1, -2 ... for repeats."""
    out, seen, fence = set(), {}, False
    with open(path) as f:
        for line in f:
            if line.startswith("```"):
                fence = not fence
            m = None if fence else re.match(r"^#{1,6}\s+(.*?)\s*$", line)
            if m:
                slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
                n = seen.get(slug, 0)
                seen[slug] = n + 1
                out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def link_problems(page, text=None):
    """Each relative link of a markdown page whose file or heading does not exist."""
    if text is None:
        with open(page) as f:
            text = f.read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    out = []
    for target in re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        name, _, anchor = target.partition("#")
        path = os.path.normpath(os.path.join(os.path.dirname(page), name)) if name else page
        if not os.path.exists(path):
            out.append(f"{page}: a link to {target}: no file {path}")
        elif anchor and path.endswith(".md") and anchor not in anchors(path):
            out.append(f"{page}: a link to {target}: {path} has no such heading")
    return out


# What a reader of torch.distributed code meets, each of which docs/from_torch.md must
# give a row: start-up and launch, groups, point-to-point, collectives, CUDA, profiling,
# autograd and the parallel wrappers.


# What a reader of torch.distributed code meets, each of which docs/from_torch.md must
# give a row: start-up and launch, groups, point-to-point, collectives, CUDA, profiling,
# autograd and the parallel wrappers.
TORCH_APIS = """
dist.init_process_group | init_method="env://" | init_method="tcp://" | init_method="file://"
dist.destroy_process_group | dist.is_available | dist.is_initialized | dist.is_mpi_available
dist.is_gloo_available | dist.is_nccl_available | dist.get_backend | dist.get_rank
dist.get_world_size | torch.multiprocessing.spawn | torchrun | torchrun --nproc-per-node
torchrun --nnodes | torchrun --node-rank | torchrun --master-addr | torchrun --standalone
MASTER_ADDR | MASTER_PORT | RANK | WORLD_SIZE | LOCAL_RANK | --local-rank | dist.TCPStore
store.set | store.get | store.multi_set | store.multi_get | store.add | store.compare_set
store.append | store.wait | store.check | store.delete_key | store.num_keys | dist.FileStore
dist.HashStore | dist.PrefixStore | dist.monitored_barrier | backend="gloo" | backend="nccl"
backend="mpi" | dist.new_group | group= | dist.get_group_rank | dist.get_global_rank
dist.distributed_c10d.get_global_rank | dist.get_process_group_ranks | dist.ProcessGroup
group.rank() | group.size() | dist.distributed_c10d._get_default_group | dist.init_device_mesh
dist.device_mesh.init_device_mesh | dist.device_mesh.DeviceMesh | dist.send | dist.recv
dist.isend | dist.irecv | work.wait() | work.is_completed() | dist.P2POp
dist.batch_isend_irecv | tag= | dist.send_object_list | dist.recv_object_list | dist.broadcast
dist.broadcast_object_list | dist.reduce | dist.all_reduce | async_op=True | dist.ReduceOp
dist.reduce_op | dist.ReduceOp.SUM | dist.ReduceOp.MAX | dist.ReduceOp.AVG
dist.ReduceOp.PRODUCT | dist.ReduceOp.MIN | dist.gather | dist.all_gather
dist.all_gather_into_tensor | dist.all_gather_object | dist.scatter | dist.scatter_object_list
dist.reduce_scatter | dist.reduce_scatter_tensor | dist.all_to_all | dist.all_to_all_single
dist.barrier | torch.cuda.Stream | torch.cuda.Event | torch.cuda.current_device
torch.profiler.profile | torch.profiler.record_function | torch.autograd.Function
tensor.backward(gradient=) | torch.autograd.backward | Variable._execution_engine.run_backward
torch.utils.checkpoint.checkpoint
torch.save | torch.load | DistributedDataParallel | DistributedSampler
""".replace("\n", " | ").split(" | ")


TORCH_APIS = [a.strip() for a in TORCH_APIS if a.strip()]


def bridge_problems(text):
    """docs/from_torch.md: a row for each of TORCH_APIS, each row naming an exercise (a
    link to a lecture page) or saying why none."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            first = line.split(" | ")[0][2:]
            for name in re.findall(r"`([^`]+)`", first):
                rows[name] = line
    out = [f"no row for `{a}`" for a in TORCH_APIS if a not in rows]
    for name, line in rows.items():
        last = line.rstrip(" |").rsplit(" | ", 1)[-1]
        if not re.search(r"\]\(lc\d+_\w+\.md#[\w-]+\)", last) and "no exercise" not in last:
            out.append(f"the row of `{name}` neither links an exercise nor says why none")
    return out


def names_outside(files, owned):
    """'file:line: text' for each line naming a lecture in a file outside `owned`."""
    bad = []
    for f in files:
        if f.startswith(owned) or f.endswith((".png", ".svg")):
            continue
        try:
            with open(f, errors="replace") as fh:
                for k, line in enumerate(fh, 1):
                    if LECTURE_NAME.search(line):
                        bad.append(f"{f}:{k}: {line.strip()[:100]}")
        except OSError:
            continue
    return bad


def unlabelled_parameters(test, cases):
    """The parameters of test's cases that its label does not carry: those that vary among
    the cases and where some case, given another of the test's values for it (the rest
    unchanged), keeps its label. A report names the failing case by its label, and the
    line that says which cases failed names these parameters: each must be readable there."""
    varying = {k for c in cases for k in c.params if k != "fn" and
               len({repr(x.params.get(k)) for x in cases}) > 1}
    if len({c.np for c in cases}) > 1:
        varying.add("np")
    found = []
    for name in sorted(varying):
        values = list(dict.fromkeys(c.np if name == "np" else c.params.get(name)
                                    for c in cases))
        for c in cases:
            other = next((v for v in values
                          if repr(v) != repr(c.np if name == "np" else c.params.get(name))),
                         None)
            twin = dataclasses.replace(c, params=dict(c.params))
            if name == "np":
                twin.np = other
            else:
                twin.params[name] = other
            try:
                same = test.label(twin) == test.label(c)
            except Exception:
                continue  # a value this case's shape cannot take: another case decides
            if same:
                found.append(f"{test.lecture} {test.name}: the label '{test.label(c)}' does not "
                             f"change with {name} ({c.np if name == 'np' else c.params[name]}"
                             f" or {other})")
                break
    return found


def unnamed_parameters(test, cases):
    """The parameters that vary among test's cases and that some case's label does not
    name, as messages. A label names a parameter by its name ('M=4'), by the words of a
    0/1 parameter its test declares ('bias', 'no bias'; spec.word), or, for a parameter
    whose values are words, by its value ('float32', 'gelu'). The line that says which
    cases failed uses these names: a label that hides one leaves the student unable to
    find the cases it means."""
    values = {}
    for c in cases:
        for k, v in [("np", c.np)] + list(c.params.items()):
            values.setdefault(k, set()).add(pattern._key(v))
    found = []
    for name, vals in values.items():
        if name == "fn" or len(vals) < 2:
            continue
        numeric = all(pattern._number(v) is not None for v in vals)
        names = list(spec.flag_words(test, name)) if name in (test.words or {}) else [name]
        for c in cases:
            label = test.label(c)
            v = pattern._key(c.np if name == "np" else c.params[name])
            texts = set() if numeric else {str(v), pattern._show(v)}
            if isinstance(v, tuple):
                texts.add(",".join(str(x) for x in v))
            if not any(re.search(rf"(?<![\w.,]){re.escape(t)}(?![\w.])", label)
                       for t in names + sorted(texts)):
                found.append(f"{test.lecture} {test.name}: the label '{label}' does not name "
                             f"{name} ({name}={v})")
                break
    return found


def header_dependencies(d_file):
    """The files an object's make dependency file (.d) says it was compiled from."""
    try:
        with open(d_file) as f:
            text = f.read().replace("\\\n", " ")
    except OSError:
        return []
    first = text.split("\n", 1)[0]
    return first.split(":", 1)[1].split() if ":" in first else []


def grader_includes(lecture_dirs):
    """[(object's .d, the file under grader/ it was compiled from)] for every program of
    the student trees and solutions given (build/<dir>/*.d): what a student's file may read
    is beside it or in common/, never in the grader. The program's own driver
    (grader/lectures/<lecture>/drivers/<file>) is compiled with it and is not counted: the
    driver reads the student's file, not the other way round."""
    out = []
    for d in lecture_dirs:
        for dep_file in sorted(glob.glob(os.path.join("build", d, "*.d"))):
            name = os.path.basename(dep_file)[:-2]
            own = {os.path.join("grader", "lectures", os.path.basename(d), "drivers",
                                name + ext) for ext in ("", ".c", ".cu")}  # x.cu.d: x.cu
            out += [(dep_file, p) for p in header_dependencies(dep_file)
                    if (os.path.normpath(p).split(os.sep)[0] == "grader"
                        or os.sep + "grader" + os.sep in os.path.abspath(p))
                    and os.path.normpath(p) not in own]
    return out


def kit_uses(names, declared, dep_files):
    """What a lecture's kit reads of other lectures, against its manifest's USES: problems.
    declared: {lecture: [used lectures]}; dep_files: {lecture: its kit objects' .d files}. A
    kit compiled from another lecture's file (its solutions, its kit, its student tree) must
    name that lecture in USES (make puts only those on its include path and links only their
    kits), and each lecture it names must be read."""
    out = []
    for lec in names:
        read = {}
        for d in dep_files.get(lec, []):
            for p in header_dependencies(d):
                parts = os.path.normpath(p).split(os.sep)
                other = (parts[1] if parts[0] == "solutions" and len(parts) > 2 else
                         parts[2] if parts[:2] == ["grader", "lectures"] and len(parts) > 3 else
                         parts[0])
                if other in names and other != lec:
                    read.setdefault(other, p)
        uses = declared.get(lec, [])
        out += [f"{lec}'s kit is compiled from {p}, of {other}, which its manifest's USES does "
                f"not name" for other, p in sorted(read.items()) if other not in uses]
        out += [f"{lec}'s manifest USES {u}, whose files its kit never reads"
                for u in uses if u not in read]
    return out


DRIVER_START = re.compile(r"^(static void run_case\(|static void demo\(|int main\()", re.M)


def driver_share(text):
    """The share of a student file's lines that are its program's driver: from the first
    run_case, demo or main to the end (0 when it has none)."""
    m = DRIVER_START.search(text)
    lines = text.count("\n") or 1
    return 0.0 if m is None else text[m.start():].count("\n") / lines


DRIVER_NAME = re.compile(r"(?m)^static\b[^=;(\n]*?\b(\w+)\s*\(|^#define (\w+)|"
                         r"^static const [\w ]+?\**\b(\w+)\s*(?:\[|=)|^\} (\w+);|^enum \{([^}]*)\};")


def driver_names(text):
    """The names a driver defines at file scope that are not driver_/DRIVER_ names (run_case,
    demo and main aside). The driver is compiled as one unit with the student's file, so
    any other name could collide with a helper the student writes: a correct file would
    not build."""
    found = []
    for m in DRIVER_NAME.finditer(text):
        names = [g for g in m.groups()[:4] if g]
        if m.group(5):
            names += re.findall(r"\b([A-Za-z_]\w*)\s*=", m.group(5).split("/*")[0])
        found += [n for n in names if n not in ("run_case", "demo", "main")
                  and not n.lower().startswith("driver_")]
    return found


def student_rooms(names):
    """Problems with the student's room: a student file whose driver is more than a third
    of it, an exercise without its driver, a driver without its exercise."""
    problems = []
    for lec in names:
        files = sorted(glob.glob(os.path.join(lec, "*.c")) + glob.glob(os.path.join(lec, "*.cu")))
        for path in files:
            with open(path) as f:
                share = driver_share(f.read())
            if share > 1 / 3:
                problems.append(f"{path}: {share:.0%} of it is the program's driver (run_case, "
                                f"demo, main); at most a third may be")
        drivers = sorted(glob.glob(os.path.join("grader", "lectures", lec, "drivers", "*")))
        mine = {os.path.basename(p) for p in files}
        problems += [f"{path}: no exercise {lec}/{os.path.basename(path)} for this driver"
                     for path in drivers if os.path.basename(path) not in mine]
        for path in drivers:
            with open(path) as f:
                taken = driver_names(f.read())
            if taken:
                problems.append(f"{path}: defines {', '.join(taken)}, which a student's helper "
                                f"may also be called: name a driver's own driver_... "
                                f"(DRIVER_... for constants)")
        have = {os.path.basename(p) for p in drivers}
        problems += [f"{path}: no driver grader/lectures/{lec}/drivers/{os.path.basename(path)}"
                     for path in files if os.path.basename(path) not in have]
    return problems


def selftest(s):
    s.section("lectures: each one unit, found by looking")
    names = lectures.names()
    s.record(f"lectures found: {', '.join(names)}", bool(names), [])
    # Prose may name lectures: the README and the docs; code only in its lecture's places.
    owned = tuple(p for lec in names for p in lectures.places(lec)) + ("README.md", "docs/")
    bad = names_outside(project_files(), owned)
    s.record("no file outside a lecture's own places (and README/docs prose) names a lecture",
             not bad, bad)
    import grade
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()

    def in_sync(text):
        table = text.split(grade.README_BEGIN, 1)[-1].split(grade.README_END, 1)[0]
        return table.strip() == grade.lectures_markdown().strip()
    s.record("the README's table of lectures is the manifests' (make readme writes it)",
             in_sync(readme),
             ["the README's table differs from what the manifests give: run make readme"])
    stale = re.sub(r"(?m)^\| 1 \|.*\n", "", readme, count=1)
    s.record("a README whose table lacks a lecture's row is reported (negative control)",
             stale != readme and not in_sync(stale), [])
    stray = os.path.join(fresh("names"), "x.py")
    with open(stray, "w") as f:
        f.write("# harmless\nfrom lectures." + "lc2" + "_dp import ddp\n")
    found = names_outside([stray, lectures.places(names[0])[1] + "x.c"], owned)
    s.record("a file outside the lectures' places that names one is reported, with its line "
             "(negative control)", len(found) == 1 and ":2:" in found[0], found)
    bad = [p for lec in names for p in docs_problems(lec)]
    s.record("docs: every lecture page's table of exercises and total points match its tests",
             not bad, bad)
    # Negative control: a page whose table gives an exercise one point too many and
    # whose total is gone must be reported twice.
    lec = names[0]
    page = lectures.page(lec)
    row = re.search(r"^(\| \[`[\w.]+`\]\(#[\w-]+\) \| .*? \| )(\d+)( \|)$", page, re.M)
    broken = page.replace(row.group(0), row.group(1) + str(int(row.group(2)) + 1) + row.group(3))
    broken = re.sub(r"the lecture is worth \d+ points", "the lecture is worth a lot", broken)
    found = docs_problems(lec, broken)
    s.record("docs: a points table off by one and a missing total are reported (negative "
             "control)", len(found) == 2, found)
    pages = ["README.md"] + sorted(glob.glob("docs/*.md"))
    bad = [p for page in pages for p in link_problems(page)]
    s.record(f"docs: every relative link of the README and docs/ ({len(pages)} pages) leads to "
             f"a file and heading that exist", not bad, bad)
    with open("docs/from_torch.md") as f:
        bridge = f.read()
    bad = bridge_problems(bridge)
    s.record(f"docs/from_torch.md: a row for each of {len(TORCH_APIS)} torch.distributed calls, "
             f"each linking the exercise that teaches it or saying why none", not bad, bad)
    row = next(ln for ln in bridge.splitlines() if ln.startswith("| `dist.all_reduce` |"))
    link = re.search(r"\]\((\w+\.md)#[\w-]+\)", bridge)
    broken = bridge.replace(row + "\n", "").replace(link.group(0),
                                                      f"]({link.group(1)}#no_such_heading)")
    found = bridge_problems(broken) + link_problems("docs/from_torch.md", broken)
    s.record("docs: a bridge missing a call's row, and a link to a heading that does not "
             "exist, are reported (negative control)",
             any("dist.all_reduce" in p for p in found) and
             any("no_such_heading" in p for p in found), found)
    with open("README.md") as f:
        s.record("the README points to docs/from_torch.md", "(docs/from_torch.md)" in f.read(),
                 [])
    bad = []
    for lec in names:
        tests = lectures.load(lec).TESTS
        for ex in dict.fromkeys(t.exercise for t in tests):
            mine = [t for t in tests if t.exercise == ex]
            numbered = harness.numbered_cases(mine, 1)
            bad += [p for t in mine for p in unlabelled_parameters(t, numbered[t.name]) +
                    unnamed_parameters(t, numbered[t.name])]
    s.record("labels: each case's label carries and names every parameter its test's cases "
             "vary in", not bad, bad)
    # Negative control: the same label, shown each case's first varying parameter
    # as the first case has it, must be reported for that parameter.
    test = lectures.load(names[-1]).TESTS[0]
    cases = harness.numbered_cases([test], 1)[test.name]
    key = next(k for k in cases[0].params
               if k != "fn" and len({repr(c.params[k]) for c in cases}) > 1)

    def frozen(c):
        return test.label(dataclasses.replace(c, params={**c.params, key: cases[0][key]}))
    found = unlabelled_parameters(dataclasses.replace(test, label=frozen), cases)
    s.record(f"labels: a label of {test.name} that leaves out {key} is reported (negative "
             f"control)", len(found) == 1 and f"with {key} " in found[0], found)
    # Negative control: a label that writes the parameter's value without its name (and the
    # linear layers' "no bias" without "bias") must be reported as not naming it.
    unnamed = unnamed_parameters(dataclasses.replace(
        test, label=lambda c: test.label(c).replace(f"{key}=", "")), cases)
    flagged = next(t for lec in names for t in lectures.load(lec).TESTS if t.words)
    word = next(iter(flagged.words))
    on, off = spec.flag_words(flagged, word)
    fcases = harness.numbered_cases([flagged], 1)[flagged.name]
    unnamed += unnamed_parameters(dataclasses.replace(
        flagged, label=lambda c: flagged.label(c).replace(on, "") if c[word] else
        flagged.label(c)), fcases)
    s.record(f"labels: a label of {test.name} that writes {key}'s value without its name, and "
             f"one of {flagged.name} that says '{off}' and nothing where {word} is set, are "
             f"reported (negative control)",
             len(unnamed) == 2 and f"name {key} " in unnamed[0] and f"name {word} " in unnamed[1],
             unnamed)
    import bench
    checked, bad = [], []
    for lec in bench.benched():
        figures = getattr(bench.bench_module(lec), "page_figures", None)
        if figures:
            checked.append(lec)
            bad += figures(lectures.page(lec))
    s.record(f"docs: every figure a page copies from its bench that does not depend on the "
             f"machine (bytes, pairs, memory, calls, formulas, and what the page derives from "
             f"the measured ones) agrees with the bench's own arithmetic ({', '.join(checked)})",
             bool(checked) and not bad, bad)
    # Negative control: a copied row whose last figure is off by one must be reported.
    lec = checked[-1]
    page = lectures.page(lec)
    row = re.search(r"^\w+ +\w+ +\d\*? .* \d+ +\d+$", page, re.M).group(0)
    broken = page.replace(row, row[:-1] + str((int(row[-1]) + 1) % 10), 1)
    found = bench.bench_module(lec).page_figures(broken)
    s.record(f"docs: a bench row of docs/{lec}.md off by one digit is reported (negative "
             f"control)", len(found) == 1, found)
    # Negative controls of the others: each bench names an edit of its page (PAGE_BREAK, old
    # text and new) that its page_figures must report.
    missed = []
    for lec in checked:
        module = bench.bench_module(lec)
        edit = getattr(module, "PAGE_BREAK", None)
        page = lectures.page(lec)
        if edit is None:
            continue
        if edit[0] not in page or not module.page_figures(page.replace(edit[0], edit[1], 1)):
            missed.append(f"docs/{lec}.md: '{edit[0]}' -> '{edit[1]}' is not reported")
    broken_by = [lec for lec in checked if getattr(bench.bench_module(lec), "PAGE_BREAK", None)]
    s.record(f"docs: a figure changed on the page is reported ({', '.join(broken_by)}: negative "
             f"controls)", bool(broken_by) and not missed, missed)
    import hints
    bad = hints.check()
    s.record("hints: every exercise has its three (the idea, the structure, near-code); every "
             "TODO within max(3, ceil(n/3)) lines of an n-line solution", not bad, bad)
    # pyflakes as python3-pyflakes provides it, a module (grader/setup.sh looks the same way).
    flakes = next((py for py in (sys.executable, "/usr/bin/python3")
                   if os.path.exists(py) and sh([py, "-m", "pyflakes", "--version"])[0] == 0),
                  None)
    if flakes:
        rc, out = sh([flakes, "-m", "pyflakes", "grader"])
        s.record("pyflakes: grader/ has no warning", rc == 0 and not out.strip(), tail(out, 25))
    else:
        s.record("pyflakes: grader/ has no warning", False,
                 ["pyflakes is not installed: sudo apt-get install -y python3-pyflakes"])
    import imports
    found = imports.circles()
    s.record("grader/: no modules import each other round (imports inside functions too)",
             not found, [", ".join(c) for c in found])
    root = fresh("imports")
    for name, text in (("a.py", "import b\n"), ("b.py", "def f():\n    import a\n"),
                       ("c.py", "import a\n")):
        with open(os.path.join(root, name), "w") as f:
            f.write(text)
    found = imports.circles(root)
    s.record("grader/: a circle through an import inside a function is reported, a module "
             "that only joins it is not (negative control)", found == [["a", "b"]], found)
    import libxt_layers
    names = lectures.names()
    dirs = [d for lec in names for d in (lec, os.path.join("solutions", lec))]
    built = sum(len(glob.glob(os.path.join("build", d, "*.d"))) for d in dirs)
    found = grader_includes(dirs)
    s.record(f"no student's or solution's program includes a file from grader/ (the "
             f"compiler's own dependency lists of {built} programs)", built > 0 and not found,
             [f"{d}: {p}" for d, p in found[:6]])
    shares = [driver_share(open(p).read()) for lec in names
              for p in glob.glob(os.path.join(lec, "*.c")) + glob.glob(os.path.join(lec, "*.cu"))]
    bad = student_rooms(names)
    s.record(f"the student's room: each of {len(shares)} student files is the page, the contract "
             f"and the functions to write, its program's driver in "
             f"grader/lectures/<lecture>/drivers/ (at most a third of a file may be driver; the "
             f"largest share now {max(shares, default=0):.0%}), whose own names are driver_... "
             f"so that no helper of the student's collides with them", bool(shares) and not bad,
             bad)
    # Negative control: an exercise's file with its driver appended is reported, as is a
    # driver whose exercise is gone.
    lec = names[0]
    ex = sorted(glob.glob(os.path.join(lec, "*.c")))[0]
    with open(ex) as f, open(builds.driver_of(ex)) as g:
        joined = f.read() + g.read()
    fake = fresh("rooms")
    os.makedirs(os.path.join(fake, lec))
    os.makedirs(os.path.join(fake, "grader", "lectures", lec, "drivers"))
    with open(os.path.join(fake, ex), "w") as f:
        f.write(joined)
    with open(os.path.join(fake, "grader", "lectures", lec, "drivers", "gone.c"), "w") as f:
        f.write("static int step(void)\n{\n    return 0;\n}\n\nint main(void) { return step(); }\n")
    here = os.getcwd()
    os.chdir(fake)
    try:
        found = student_rooms([lec])
    finally:
        os.chdir(here)
    s.record(f"a student file that holds its driver ({driver_share(joined):.0%} of it), an "
             f"exercise without a driver, a driver without an exercise and a driver's helper "
             f"not named driver_... are reported (negative control)", len(found) == 4 and
             "at most a third" in found[0] and "no exercise" in found[1] and
             "defines step" in found[2] and "no driver" in found[3], found)
    # A student's file written before the drivers moved out (its driver still in it) is
    # graded BUILD with what to delete; the same file without it grades as the solution.
    tree = fresh("old_student_file")
    os.makedirs(os.path.join(tree, lec))
    name = os.path.splitext(os.path.basename(ex))[0]
    reports = {}
    for kind, text in (("with its driver", joined), ("without", open(ex).read())):
        with open(os.path.join(tree, ex), "w") as f:
            f.write(text)
        rc, out = sh([sys.executable, os.path.join("grader", "grade.py"), "--lc", lec, "--tree",
                      tree, "--ex", name])
        reports[kind] = " ".join(out.split())  # the report wraps its lines
    told = "still holds its program's driver" in reports["with its driver"] and \
        "run_case" in reports["with its driver"]
    s.record(f"a student's {ex} that still holds its driver (written before the drivers moved "
             f"out) is graded BUILD, the report naming the definitions to delete; without them "
             f"nothing is said of it (negative control)", told and
             "still holds" not in reports["without"], [reports["with its driver"][:600]])
    # Negative control: a dependency list naming a header under grader/ is reported.
    fake = os.path.join(fresh("includes"), "x")
    os.makedirs(fake)
    with open(os.path.join(fake, "ex.d"), "w") as f:
        f.write("build/x/ex.o: x/ex.c grader/lectures/x/lecture.h \\\n common/xt.h\n")
    shown = grader_includes([os.path.relpath(fake, "build")])
    s.record("a program compiled from a header under grader/ is reported (negative control)",
             [p for _, p in shown] == ["grader/lectures/x/lecture.h"], shown)

    def internal_users(dep_files):
        return [d for d in dep_files
                if any(p.endswith("common/xt_internal.h") for p in header_dependencies(d))]
    kit_deps = sorted(glob.glob(os.path.join("build", "grader", "lectures", "*", "kit", "*.d")))
    internal = internal_users(kit_deps)
    with open(os.path.join(fake, "kit.d"), "w") as f:
        f.write("build/x/kit.o: x/kit.c common/xt_internal.h \\\n common/xt.h\n")
    s.record(f"each lecture's kit uses libxt through xt_harness.h, never xt_internal.h "
             f"({len(kit_deps)} kit objects' dependency lists; one that includes it is "
             f"reported: negative control)",
             bool(kit_deps and not internal and internal_users([os.path.join(fake, "kit.d")])),
             internal[:6])
    # A kit that builds on another lecture's answer declares it (USES), on the one line make
    # reads; negative controls: a kit reading an undeclared lecture, a lecture declared unread.
    declared = {lec: builds.uses(".", lec) for lec in names}
    unreadable = [f"{lec}: the manifest's USES is {getattr(lectures.load(lec), 'USES', [])}, "
                  f"make reads {declared[lec]}: write it on one line, USES = [\"...\"]"
                  for lec in names if list(getattr(lectures.load(lec), "USES", [])) != declared[lec]]
    kit_dep_files = {lec: sorted(glob.glob(os.path.join("build", "grader", "lectures", lec, "kit",
                                                        "*.d")))
                     for lec in names}
    problems = unreadable + kit_uses(names, declared, kit_dep_files)
    used = sorted(f"{lec} uses {', '.join(u)}" for lec, u in declared.items() if u)
    with open(os.path.join(fake, "stage.d"), "w") as f:
        f.write(f"build/x/stage.o: x/stage.c solutions/{names[0]}/{names[0]}.c \\\n common/xt.h\n")
    control = kit_uses([names[0], names[1], "x"], {names[1]: [names[0]]},
                       {"x": [os.path.join(fake, "stage.d")]})
    s.record(f"each kit reads another lecture's files only where its manifest USES it "
             f"({'; '.join(used) or 'none'}), every lecture it USES is read (negative "
             f"controls: a kit that reads an undeclared lecture, a USES never read)",
             bool(used) and not problems and len(control) == 2
             and "does not name" in control[1] and "never reads" in control[0],
             problems or control)
    bad = libxt_layers.check(".")
    layers = libxt_layers.layers(".")
    s.record("libxt: files call each other in one direction, as xt_internal.h's layers say ("
             + " < ".join(" ".join(f) for _, f in layers) + ")", not bad, bad)
    used = libxt_layers.usage(".")
    single = libxt_layers.single_lecture(used)
    shared = sorted(f for f, lecs in used.items() if len(lecs) >= 2)
    s.record(f"libxt: each of its files is used by two lectures or more ({len(shared)} files, "
             "measured on the symbols the lectures' objects use), lecture code is in kits",
             not single and len(shared) >= len(used) - len(libxt_layers.DEVICE_LAYER)
             - len(libxt_layers.GRADER_MAIN), single)
    # Negative control: measured on one lecture's programs alone, every file it uses is one
    # lecture's, and must be reported.
    one = lectures.names()[-1]
    alone = libxt_layers.single_lecture(libxt_layers.usage(".", [one]))
    want = sorted(f for f, lecs in used.items()
                  if one in lecs and f not in libxt_layers.DEVICE_LAYER)
    got = sorted(p.split()[0][len("common/"):] for p in alone)
    s.record(f"libxt: a file only one lecture's programs use is reported (negative control: "
             f"the usage of {one}'s programs alone names all {len(want)} files they use)",
             want and got == want, alone[:3])
    # Negative control: the same objects against layers that swap init.c's with the base, and
    # a comment naming a lecture, must both be reported.
    root = fresh("layers")
    shutil.copytree("common", os.path.join(root, "common"))
    os.makedirs(os.path.join(root, "build"))
    os.symlink(os.path.abspath(os.path.join("build", "common")),
               os.path.join(root, "build", "common"))
    internal = os.path.join(root, "common", "xt_internal.h")
    with open(internal) as f:
        text = f.read()
    lines = text.split("\n")
    start = next(i for i, ln in enumerate(lines) if "LAYERS" in ln)
    layer = {}
    for i in range(start + 1, len(lines)):
        if "*/" in lines[i]:
            break
        m = re.match(r"( \*\s+\d+ )(.*)", lines[i])
        if m:
            layer[i] = m
    first, last = min(layer), max(k for k in layer if "init.c" in layer[k].group(2))
    lines[first] = layer[first].group(1) + layer[last].group(2)  # init.c at the bottom
    lines[last] = layer[last].group(1) + layer[first].group(2)
    text = "\n".join(lines)
    with open(internal, "w") as f:
        f.write(text)
    with open(os.path.join(root, "common", "mem.c"), "a") as f:
        f.write("/* as " + "lc" + "3_zero wants */\n")
    found = libxt_layers.check(root)
    ok = (any("init.c" in p for p in found) and
          any("names a lecture" in p for p in found))
    s.record("libxt layers: a file above its layer, or a lecture's name, is reported "
             "(negative control)", ok, found[:6])
    import throwaway
    start = time.monotonic()
    for what, ok, details in throwaway.check(fresh("throwaway")):
        s.record(f"a throwaway lecture in a copy of the tree: {what}", ok, details)
    print(f"  ({time.monotonic() - start:.1f} s)")
