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
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
