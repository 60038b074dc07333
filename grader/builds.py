"""Building what a grade runs, and what a built exercise may not refer to: make's
invocations, the compiler's errors cut to the first few, and the symbols of an
exercise's object (nm) against the lists of calls an exercise must not make.
"""

import glob
import hashlib
import json
import os
import re
import subprocess
import tempfile

import clock


FORBIDDEN_SYMBOLS = [
    (r"^PMPI_", "calls {} directly, which hides the call from the grader; use the MPI_ name"),
    (r"^xti_", "calls libxt's internal {}"),
    (r"^(dlsym|dlvsym|dlopen)$", "calls {}(): only MPI may move data between ranks here"),
    (r"^(fork|vfork|system|popen|execv|execve|execvp|execl|execlp|posix_spawn|posix_spawnp)$",
     "calls {}(): no other processes here"),
    (r"^(socket|socketpair|shm_open|shmget|shmat|msgget|msgsnd|msgrcv|mq_open|mmap|mmap64|"
     r"fopen|fopen64|freopen|open|open64|openat|openat64|creat|pipe|pipe2|syscall|"
     r"process_vm_readv|process_vm_writev|ptrace)$",
     "calls {}(): only MPI may move data between ranks here"),
    (r"^MPI_T_", "calls the MPI tools interface ({})"),
]


def kit_include(root, path):
    """The include flags of a C file's lecture kit, as the Makefile's kit_include and
    uses_include give them: ["-Isolutions/<lecture>"] (relative to the repository root
    `root`), the lecture being the name of the file's directory (of kit/ or kit/tests/ for a
    kit's own files, of drivers/ for a driver), where solutions/<lecture>/kit.h exists; for a
    kit's own file, then "-Isolutions/<used>" for each lecture its manifest USES."""
    d = os.path.dirname(os.path.normpath(path))
    while os.path.basename(d) in ("kit", "tests") and "kit" in d.split(os.sep):
        d = os.path.dirname(d)
    if os.path.basename(d) == "drivers":
        d = os.path.dirname(d)
    lecture = os.path.basename(d)
    kit = os.path.join("solutions", lecture)
    flags = [f"-I{kit}"] if os.path.exists(os.path.join(root, kit, "kit.h")) else []
    if "kit" in os.path.normpath(path).split(os.sep):  # a kit's own file: what it USES too
        flags += [f"-I{os.path.join('solutions', u)}" for u in uses(root, lecture)]
    return flags


USES_LINE = re.compile(r'^USES = \[(.*)\]', re.M)


def uses(root, lecture):
    """The lectures a lecture's kit builds on, as make reads them: the manifest's one line
    USES = ["lcN_x", ...] (grader/lectures/<lecture>/__init__.py); [] without one."""
    try:
        with open(os.path.join(root, "grader", "lectures", lecture, "__init__.py")) as f:
            m = USES_LINE.search(f.read())
    except OSError:
        return []
    return re.findall(r'"([^"]*)"', m.group(1)) if m else []


def driver_of(source):
    """The driver compiled with an exercise's file into its program (the grader's cases, the
    demo and main), as the Makefile's driver_of finds it: a tree's own
    (<tree>/grader/lectures/<lecture>/drivers/<file>, a mutant's) before the lecture's;
    None for a file without one."""
    path = os.path.normpath(source)
    lecture_dir, name = os.path.split(path)
    tree, lecture = os.path.split(lecture_dir)
    shared = os.path.join("grader", "lectures", lecture, "drivers", name)
    for candidate in (os.path.join(tree, shared), shared):
        if os.path.isfile(candidate):
            return candidate
    return None


def driver_left_in(source, errors=""):
    """The lines that say so when an exercise's file still holds its program's driver (a
    file written before the drivers moved out: run_case, demo and main, and the helpers only
    they use, are defined twice once it is compiled with grader/lectures/<lecture>/drivers/);
    else []. errors: the compiler's output, whose redefinitions name what to delete."""
    driver = driver_of(source)
    try:
        with open(source) as f:
            text = f.read()
    except OSError:
        return []
    m = re.search(r"^(static void run_case\(|static void demo\(|int main\()", text, re.M)
    if driver is None or m is None:
        return []
    names = list(dict.fromkeys(re.findall(r"redefinition of [‘'`](\w+)[’'`]", errors)))
    names = names or ["run_case", "demo", "main"]
    return [f"{source}: this file still holds its program's driver, which now lives in "
            f"{driver} and is compiled with it: delete these definitions from your file "
            f"(your own functions stay as they are): {', '.join(names)}"]


def harness_only():
    """[(regex, message)]: libxt's functions for the runner, benches and tests, which
    common/xt_harness.h declares and an exercise's header does not (xt_rank() is the
    world's rank, never the case communicator's). Read once per version of the header."""
    path = os.path.join("common", "xt_harness.h")
    try:
        st = os.stat(path)
        key = (os.path.abspath(path), st.st_mtime_ns, st.st_size)
        if key not in _HARNESS_ONLY:
            with open(path) as f:
                names = sorted(set(re.findall(r"\b(xt_\w+)\s*\(", f.read())))
            _HARNESS_ONLY.clear()
            _HARNESS_ONLY[key] = [(rf"^({'|'.join(names)})$",
                                   "calls libxt's harness function {}(), which runs the "
                                   "grader's cases; an exercise has xt.h and xt_nn.h")
                                  ] if names else []
    except OSError:
        return []
    return _HARNESS_ONLY[key]


_HARNESS_ONLY = {}  # (path, its time and size) -> harness_only()'s answer


# obj -> (its modification time, the symbols it uses and does not define), as nm -u gave them.
_UNDEFINED = {}
# nm's answers kept between grades, one file per object's bytes (an object is rebuilt, not
# edited, so its digest names it; a grade scans a lecture's objects in 0.05 s otherwise).
NM_CACHE = os.path.join("build", "cache", "nm")
NM_CACHE_FILES = 5000  # past this many, the cache starts afresh


def _object_digest(path):
    with open(path, "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()


def _kept_symbols(digest):
    try:
        with open(os.path.join(NM_CACHE, digest)) as f:
            return f.read().split()
    except OSError:
        return None


def _keep_symbols(found, digests):
    try:
        os.makedirs(NM_CACHE, exist_ok=True)
        if len(os.listdir(NM_CACHE)) > NM_CACHE_FILES:
            for old in os.listdir(NM_CACHE):
                os.remove(os.path.join(NM_CACHE, old))
        for o, symbols in found.items():
            kept = os.path.join(NM_CACHE, digests[o])
            with open(f"{kept}.{os.getpid()}", "w") as f:
                f.write("\n".join(symbols))
            os.replace(f"{kept}.{os.getpid()}", kept)
    except OSError:
        pass  # a tree one cannot write to scans again next time


def undefined_symbols(objs):
    """{obj: [the symbols it uses and does not define]} for every object of objs that
    exists, from one nm for all those neither seen since they were last built nor scanned
    before with these very bytes (build/cache/nm/: a lecture's exercises are scanned in one
    process, each nm costing as much as its scan)."""
    stamp = {}
    for o in objs:
        try:
            stamp[o] = os.stat(o).st_mtime_ns
        except OSError:
            pass
    digests = {}
    stale = []
    for o in stamp:
        if _UNDEFINED.get(o, (None,))[0] == stamp[o]:
            continue
        try:
            digests[o] = _object_digest(o)
        except OSError:
            continue
        kept = _kept_symbols(digests[o])
        if kept is None:
            stale.append(o)
        else:
            _UNDEFINED[o] = (stamp[o], kept)
    if stale:
        try:
            with clock.timed("nm"):
                out = subprocess.run(["nm", "-u"] + stale, capture_output=True, text=True,
                                     timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return {o: _UNDEFINED[o][1] for o in stamp if o in _UNDEFINED}
        found = {o: [] for o in stale}
        current = stale[0] if len(stale) == 1 else None
        for line in out.stdout.splitlines():
            if len(stale) > 1 and line.endswith(":") and line[:-1] in found:
                current = line[:-1]  # nm of several files: "<file>:" before each one's
                continue
            words = line.split()
            if current is not None and words:
                found[current].append(words[-1].split("@")[0])
        for o in stale:
            _UNDEFINED[o] = (stamp[o], found[o])
        if out.returncode == 0:
            _keep_symbols(found, digests)
    return {o: _UNDEFINED[o][1] for o in stamp if o in _UNDEFINED}


def forbidden_calls(obj, extra=(), source=None):
    """RULE messages for symbols an exercise object must not use: every exercise's
    FORBIDDEN_SYMBOLS, libxt's harness functions and `extra`, [(regex, message)] from
    its tests. An entry of `extra` may instead be a function (obj, source) -> [message],
    a check of the object and its source that symbols cannot express (an array on the
    stack where memory is accounted)."""
    patterns = [e for e in extra if not callable(e)]
    symbols = undefined_symbols([obj]).get(obj)
    if symbols is None:
        return []
    msgs = []
    every = list(FORBIDDEN_SYMBOLS) + harness_only() + patterns
    for sym in symbols:
        for pat, msg in every:
            if re.search(pat, sym):
                msgs.append(msg.format(sym))
    for check in extra:
        if callable(check):
            msgs.extend(check(obj, source))
    return msgs


def build(binaries, jobs=2, san=False, cov=False):
    """Builds binaries with make (san: with AddressSanitizer, binaries under build/san/;
    cov: for gcov, under build/cov/); returns {binary: compiler output} for failures."""
    failed = {}
    if not binaries:
        return failed
    make = (["make", "-s", "--no-print-directory"] + (["SAN=1"] if san else []) +
            (["COV=1"] if cov else []))
    cmd = make + ["-k", f"-j{jobs}"] + list(binaries)
    with clock.timed("make"):
        res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode == 0:
        return failed
    for b in binaries:
        with clock.timed("make"):
            one = subprocess.run(make + [b], capture_output=True, text=True)
        if one.returncode != 0:
            failed[b] = (one.stdout + one.stderr).strip()
    if not failed:  # e.g. libxt itself
        for b in binaries:
            failed[b] = (res.stdout + res.stderr).strip()
    return failed


def build_errors(text, limit=12):
    """The compiler's messages from the first error on. The exercise's file is compiled as
    one unit with its driver (-include), which the compiler words as './<path>' and 'In file
    included from <command-line>': said here as the file's own path."""
    lines = [re.sub(r"(^|\s)\./(?=\S)", r"\1", ln) for ln in text.splitlines()
             if ln.strip() and not ln.startswith("In file included from <command-line>")]
    first = next((i for i, ln in enumerate(lines) if re.search(r"\berror\b:|: error", ln)), 0)
    return lines[first:first + limit]


CACHE = os.path.join("build", "cache", "compile")


def compile_once(cmd, source, timeout=120):
    """(returncode, stderr) of a compile that only looks at a file (its warnings), not
    at what it makes: cmd names the file and the include path (-I...) but no output, the
    object going to a throwaway directory. A compile that succeeded is kept under
    build/cache/compile/, keyed by the command and the bytes of the file and of every
    header in its include path, so that grading the same file again does not compile it
    again (0.13 s each). OSError where the compiler cannot start."""
    digest = hashlib.sha256("\0".join(cmd).encode())
    dirs = [c[2:] for c in cmd if c.startswith("-I")]
    for path in [source] + sorted(h for d in dirs for h in glob.glob(os.path.join(d, "*.h"))):
        digest.update(b"\0" + path.encode() + b"\0")
        with open(path, "rb") as f:
            digest.update(f.read())
    kept = os.path.join(CACHE, digest.hexdigest()[:32] + ".json")
    try:
        with open(kept) as f:
            got = json.load(f)
        return got["returncode"], got["stderr"]
    except (OSError, ValueError, KeyError):
        pass
    with tempfile.TemporaryDirectory() as tmp:
        res = subprocess.run(cmd + ["-o", os.path.join(tmp, "o.o")], capture_output=True,
                             text=True, timeout=timeout)
    if res.returncode == 0:
        os.makedirs(CACHE, exist_ok=True)
        part = f"{kept}.{os.getpid()}"
        with open(part, "w") as f:
            json.dump({"returncode": res.returncode, "stderr": res.stderr}, f)
        os.replace(part, kept)
    return res.returncode, res.stderr
