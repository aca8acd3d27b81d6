#!/usr/bin/env python3
"""Mutation check: does the unit-test suite notice when a formula changes?

Each entry of tests/mutations.json names a file, an exact snippet found once in it and a mutant. For each, the
script writes the mutant, rebuilds `unit_tests`, runs it and restores the file (from memory, whatever happens).
A mutant the tests pass is SURVIVED: a formula nothing pins. Not part of ctest (10-20 s a mutant on 2 cores, as
many objects as the file reaches are rebuilt; about 15 minutes for the list):

    python3 tests/mutation_check.py [--build build] [--only 3,7]

Exits 1 when a mutant survives or a snippet is no longer found (the list must follow the code it names)."""
import argparse
import json
import os
import signal
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    """The command's exit code. Interrupted, the command (a build in flight) is killed and waited for first, so it
    cannot write an object of the mutant after the file is restored."""
    child = subprocess.Popen(cmd, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        return child.wait()
    except BaseException:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        raise


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build", help="the CMake build directory (with LMSIM_BUILD_TESTS=ON)")
    ap.add_argument("--only", default="", help="comma-separated indices of mutations.json to run")
    args = ap.parse_args()
    # A kill (SIGTERM, as well as Ctrl-C) unwinds through the `finally` below, so the mutated file is restored.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    mutations = json.load(open(os.path.join(root, "tests", "mutations.json"), encoding="utf-8"))
    chosen = [int(i) for i in args.only.split(",")] if args.only else range(len(mutations))
    tests = os.path.join(args.build, "tests", "unit_tests")
    bad = 0
    for i in chosen:
        m = mutations[i]
        path = os.path.join(root, m["file"])
        with open(path, encoding="utf-8") as f:
            original = f.read()
        if original.count(m["from"]) != 1:
            print(f"{i:3d} STALE     {m['file']}: snippet found {original.count(m['from'])} times", flush=True)
            bad += 1
            continue
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(original.replace(m["from"], m["to"]))
            if run(["cmake", "--build", args.build, "-j2", "--target", "unit_tests"]) != 0:
                verdict = "NO BUILD"
                bad += 1
            else:
                passed = run([tests, "--gtest_brief=1"]) == 0
                verdict = "SURVIVED" if passed else "caught"
                bad += passed
        finally:
            with open(path, "w", encoding="utf-8") as f:  # a fresh mtime: the next build recompiles it
                f.write(original)
        print(f"{i:3d} {verdict:9s} {m['file']}: {m['from'][:90]}", flush=True)
    run(["cmake", "--build", args.build, "-j2", "--target", "unit_tests"])
    print(f"mutation_check: {len(chosen)} mutants, {bad} survived, stale or unbuildable")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
