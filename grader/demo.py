#!/usr/bin/env python3
"""make demo EX=fun_ring_allreduce NP=4 [SOL=0] [ARGS="--count 5"] [TRACE=1] [SAN=1]

Builds one exercise and runs it in lecture mode: a small readable input, and
every rank's before and after, printed in rank order. The solution by
default; SOL=0 runs the student's own file. TRACE=1 also writes the run's
timeline (build/trace/<exercise>.trace.json, for https://ui.perfetto.dev).
SAN=1 builds and runs it with AddressSanitizer (docs/debugging.md).
"""

import argparse
import glob
import os
import re
import shlex
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import builds  # noqa: E402
import hangs  # noqa: E402
import sanitizer  # noqa: E402
import launch  # noqa: E402
import lectures  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ex", help="exercise name, e.g. fun_ring_allreduce")
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--student", action="store_true", help="run the student's file")
    ap.add_argument("--args", default="", help="extra program options, e.g. '--count 5'")
    ap.add_argument("--trace", action="store_true", help="write a timeline trace of the run")
    ap.add_argument("--san", action="store_true", help="build and run with AddressSanitizer")
    ap.add_argument("--device", choices=["cuda", "emu"],
                    help="a CUDA exercise on the GPU or on the emulated device (default: the "
                         "GPU if there is one)")
    args = ap.parse_args()
    os.chdir(os.path.dirname(HERE))

    tree = "." if args.student else "solutions"
    found = sorted(glob.glob(os.path.join(tree, "lc*", f"{args.ex}.c")) +
                   glob.glob(os.path.join(tree, "lc*", f"{args.ex}.cu"))) if args.ex else []
    if not found:
        names = sorted({os.path.splitext(os.path.basename(p))[0]
                        for p in glob.glob("solutions/lc*/*.c") + glob.glob("solutions/lc*/*.cu")})
        print(f"demo: {'no exercise ' + repr(args.ex) if args.ex else 'which exercise?'} "
              f"(EX=name); there are:\n  " + "\n  ".join(names), file=sys.stderr)
        return 2
    source = os.path.normpath(found[0])
    binary = os.path.join("build", "san" if args.san else "", os.path.splitext(source)[0])
    if source.endswith(".cu"):
        device = args.device or ("cuda" if launch.has_gpu() else "emu")
        if device == "emu":
            print("(on the emulated device, DEVICE=emu: docs/setup.md, \"The emulated device\")")
            binary = os.path.join("build", "emu", os.path.splitext(source)[0])
    build = subprocess.run(["make", "-s", "--no-print-directory"] + (["SAN=1"] if args.san else [])
                           + [binary])
    if build.returncode != 0:
        return build.returncode
    extra = shlex.split(args.args) + (["--trace=1"] if args.trace else [])
    cmd = launch.mpirun_command(args.np, [binary] + extra)
    san = launch.san_env() if args.san else {}
    if args.san:
        # Each rank's report to a file of its own: ranks printing at once interleave lines.
        name = os.path.splitext(os.path.basename(source))[0]
        reports = os.path.join("build", "san", "demo", name)
        os.makedirs(reports, exist_ok=True)
        for old in glob.glob(os.path.join(reports, "asan.*")):
            os.remove(old)
        san["ASAN_OPTIONS"] += ":log_path=" + os.path.join(reports, "asan")
    print(f"$ {''.join(f'{k}={v} ' for k, v in san.items())}{launch.shell_line(cmd)}", flush=True)
    launch.install_signal_handlers()
    banner = BannerFilter()
    # A lecture may draw something from the run afterwards (its DEMO_AFTER): the stage
    # calls each rank logged (XT_STAGE_LOG) for a pipeline's timeline.
    lecture = os.path.basename(os.path.dirname(source))
    after = getattr(lectures.load(lecture), "DEMO_AFTER", None)
    env = launch.mpi_env(san)
    logs = os.path.join("build", "demo", os.path.splitext(os.path.basename(source))[0])
    if after:
        os.makedirs(logs, exist_ok=True)
        for old in glob.glob(os.path.join(logs, "stages.r*.txt")):
            os.remove(old)
        env["XT_STAGE_LOG"] = logs
    res = launch.run(cmd, timeout=300, env=env, on_line=banner.line)
    if after and res.returncode == 0:
        after(os.path.splitext(os.path.basename(source))[0], args.np, logs)
    if banner.blocked:
        # The same explanation as a graded deadlock's, in rank order.
        lines, _ = hangs.blocked_explanation(sorted(banner.blocked), in_a_case=False)
        print(f"demo: no progress for {banner.limit} s; the ranks were blocked in:")
        for ln in lines:
            print(textwrap.fill(ln, 78, subsequent_indent="    "), flush=True)
    if res.timed_out:
        print("demo: stopped after 300 s", file=sys.stderr)
    if args.san:
        asan_summary(reports, binary, source)
    return res.returncode


def asan_summary(reports, binary, source):
    """Where the first of AddressSanitizer's reports happened (libxt has printed what, as
    a rank's CRASH line), and where they all are."""
    found = sorted(glob.glob(os.path.join(reports, "asan.*")), key=os.path.getmtime)
    if not found:
        return
    texts = {path: open(path, errors="replace").read() for path in found}
    # A rank that the end of the run killed mid-report left only its first lines.
    whole = [path for path in found if "SUMMARY: AddressSanitizer" in texts[path]] or found
    own = (source, builds.driver_of(source)) if builds.driver_of(source) else source
    lines = sanitizer.asan_report(texts[whole[0]].splitlines(), binary, own, "")[1:]
    print("demo: AddressSanitizer stopped " +
          ("a rank" if len(found) == 1 else f"{len(found)} ranks") + "; the first report:")
    for line in lines:
        print(f"  {line}")
    print(f"  (every report: {' '.join(found)})", flush=True)


class BannerFilter:
    """Prints the program's lines, not Open MPI's boxed help texts.

    When a rank stops the run (a TODO, a crash, the watchdog), libxt has
    already said why in one line; mpirun then adds boxes of dashes about
    aborting and non-zero exit codes, which say nothing more.
    """

    def __init__(self):
        self.inside = False
        self.blocked = []  # (rank, call) from the watchdog's lines, explained after the run
        self.limit = ""

    def line(self, text):
        m = re.match(r"\[xt\] watchdog: still running after ([\d.]+) s; rank (\d+): (.*)", text)
        if m:
            self.limit = m.group(1).removesuffix(".0")
            self.blocked.append((int(m.group(2)), m.group(3)))
            return
        if re.fullmatch(r"-{20,}", text.strip()):
            self.inside = not self.inside
            return
        if self.inside or re.match(r"\[[\w.-]+:\d+\] (\d+ more process|Set MCA parameter)", text):
            return
        print(text, flush=True)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
