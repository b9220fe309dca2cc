"""The ``polytri`` command: ``demo``, ``compile``, ``plot``, ``bench``.

Every error polytri raises on purpose (a :class:`~polytri.errors.PolytriError`), a file that cannot be
read or written, and a reader that closes the output early end the command with one line on stderr and
exit status 1, without a traceback (``POLYTRI_DEBUG=1`` shows it).  A compilation that takes more than a
few seconds says on stderr which stage it is in (:mod:`polytri.tools.progress`, ``POLYTRI_PROGRESS``).
"""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import PolytriError


def _verbosity(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                        help="log progress and decisions on stderr (-vv: debug)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``polytri`` and its sub-commands."""
    parser = argparse.ArgumentParser(
        prog="polytri", description="polytri, a polyhedral loop optimizer",
        epilog="environment: POLYTRI_LOG=debug (named loggers), POLYTRI_DUMP=dir (every compilation stage), "
               "POLYTRI_DEBUG=1 (tracebacks), POLYTRI_CACHE_DIR, CC; see docs/environment.md")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log progress and decisions on stderr (-vv: debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="run the suite's showcase kernels: reference vs compiled C, with timings")
    demo.add_argument("--no-source", action="store_true", help="do not print the generated C")
    demo.add_argument("--quick", action="store_true", help="skip the runs at benchmark sizes")
    _verbosity(demo)

    from .cli_compile import add_arguments as add_compile_arguments
    comp = sub.add_parser("compile", help="compile a program from a Python file; print its C, Triton, schedule, "
                                          "dependences or IR", description=_first_paragraph("tools.cli_compile"))
    add_compile_arguments(comp)
    _verbosity(comp)

    from ..plot.command import add_arguments as add_plot_arguments
    plot = sub.add_parser("plot", help="draw the iteration space with dependences and tiles, and the "
                                       "dependence graph, of a program from a Python file",
                          description=_first_paragraph("plot.command"))
    add_plot_arguments(plot)
    _verbosity(plot)

    from .bench import help_epilog
    bench = sub.add_parser("bench", help="CPU benchmarks side by side: naive C, OpenMP, polytri, tiled, "
                                         "clang+Polly, numpy/torch, and the machine's measured peaks",
                           epilog=help_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    from .bench import add_arguments as add_bench_arguments
    add_bench_arguments(bench)
    models = bench.add_argument_group("model zoo (--models)")
    models.add_argument("--models", action="store_true",
                        help="instead of the kernels: the model zoo in eager, Inductor and polytri, side by side")
    from .bench_models import add_arguments as add_models_arguments
    add_models_arguments(models)
    _verbosity(bench)
    return parser


def _first_paragraph(module: str) -> str:
    import importlib
    doc = importlib.import_module(f"polytri.{module}").__doc__ or ""
    return doc.split("\n\n")[0].strip().replace("``", "")


def _dispatch(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.version:
        from .. import __version__
        print(f"polytri {__version__}")
        return 0
    if args.command == "demo":
        from .demo import run_demo
        return run_demo(show_source=not args.no_source, bench=not args.quick)
    if args.command == "compile":
        from .cli_compile import run as run_compile
        return run_compile(args)
    if args.command == "plot":
        from ..plot.command import run as run_plot
        return run_plot(args)
    if args.command == "bench" and args.models:
        from .bench_models import run as run_models
        return run_models(args)
    if args.command == "bench":
        from .bench import run as run_bench
        return run_bench(args)
    parser.print_help()
    return 2


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from .logconfig import configure
    from .progress import reporting
    try:
        configure(args.verbose)
        with reporting():
            return _dispatch(args, parser)
    except BrokenPipeError:  # the reader went away (`polytri compile ... | head -1`): nothing more to say
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the interpreter's final flush does not fail again
        print("polytri: output closed by the reader (broken pipe)", file=sys.stderr)
        return 1
    except (PolytriError, OSError) as exc:
        if os.environ.get("POLYTRI_DEBUG", "") not in ("", "0"):
            raise
        print(f"polytri: error: {_message(exc)}", file=sys.stderr)
        return 1


def _message(exc: Exception) -> str:
    """One line naming the problem: polytri's own errors with their class, the system's with the file."""
    if isinstance(exc, OSError) and not isinstance(exc, PolytriError):
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror or exc}{where}"
    return f"{type(exc).__name__}: {exc}"


if __name__ == "__main__":
    sys.exit(main())
