"""The ``polytri`` command."""

from __future__ import annotations

import argparse
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="polytri", description="polytri, a polyhedral loop optimizer")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log decisions (-vv: debug)")
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="run the suite's showcase kernels: reference vs compiled C, with timings")
    demo.add_argument("--no-source", action="store_true", help="do not print the generated C")
    demo.add_argument("--quick", action="store_true", help="skip the runs at benchmark sizes")
    bench = sub.add_parser("bench", help="CPU benchmarks side by side: naive C, OpenMP, polytri, tiled, "
                                         "numpy/torch, and the machine's measured peaks")
    from .bench import add_arguments as add_bench_arguments
    add_bench_arguments(bench)
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(name)s: %(message)s")
    if args.version:
        from . import __version__
        print(f"polytri {__version__}")
        return 0
    if args.command == "demo":
        from .demo import run_demo
        return run_demo(show_source=not args.no_source, bench=not args.quick)
    if args.command == "bench":
        from .bench import run as run_bench
        return run_bench(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
