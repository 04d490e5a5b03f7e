"""The ``tuidebug`` command.

    tuidebug [OPTIONS] SCRIPT [ARGS...]        the live dashboard
    tuidebug [OPTIONS] -m MODULE [ARGS...]     the same for ``python -m MODULE``
    tuidebug --headless [OPTIONS] SCRIPT ...   figures as lines on stderr, no screen

Everything after the script (or ``-m MODULE``) goes to the script, as with ``python``.
Errors are one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from tuidebug import __version__
from tuidebug.launcher import Target, TargetError

USAGE_ERROR = 2
VALUE_OPTIONS = {"--print-every", "--break-at", "--norm-stride"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see tuidebug --help)")


def fail(message: str) -> NoReturn:
    print(f"tuidebug: error: {message}", file=sys.stderr)
    raise SystemExit(USAGE_ERROR)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tuidebug",
        usage="tuidebug [OPTIONS] (SCRIPT | -m MODULE) [ARGS...]",
        description="Run a PyTorch training script under a live debugger.",
    )
    parser.add_argument("--version", action="version", version=f"tuidebug {__version__}")
    parser.add_argument("--headless", action="store_true", help="no screen: print figures to stderr")
    parser.add_argument("--print-every", type=_positive, default=10, metavar="N",
                        help="headless: a line every N steps (default 10)")
    parser.add_argument("--no-break-on-nan", dest="break_on_nan", action="store_false",
                        help="do not pause at the first non-finite loss or gradient")
    parser.add_argument("--break-at", type=_positive, metavar="STEP", help="pause after step STEP")
    parser.add_argument("--norm-stride", type=_non_negative, default=10, metavar="K",
                        help="per-layer gradient norms every K steps (0: never; default 10)")
    parser.add_argument("--stop-on-disconnect", action="store_true",
                        help="stop the script if tuidebug goes away (default: it keeps training)")
    parser.add_argument("--no-mouse", action="store_true", help="do not capture the mouse")
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run a module, as python -m")
    return parser


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """tuidebug's own options, and the target with its arguments (the first word not ours)."""
    argv = list(argv)
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "-m":
            return argv[: index + 2], argv[index + 2 :]
        if word == "--":
            return argv[:index], argv[index + 1 :]
        if not word.startswith("-"):
            return argv[:index], argv[index:]
        index += 2 if word in VALUE_OPTIONS else 1
    return argv, []


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, Target]:
    own, rest = split_argv(argv)
    options = build_parser().parse_args(own)
    if options.module:
        target = Target(options.module, rest, module=True)
    elif rest:
        target = Target(rest[0], rest[1:])
    else:
        fail("no script given: tuidebug [OPTIONS] SCRIPT [ARGS...] (see tuidebug --help)")
    return options, target


def agent_options(options: argparse.Namespace) -> dict[str, Any]:
    return {
        "break_on_nan": options.break_on_nan and not options.headless,
        "break_at": None if options.headless else options.break_at,
        "norm_stride": options.norm_stride,
        "stop_on_disconnect": options.stop_on_disconnect,
    }


def main(argv: Sequence[str] | None = None) -> int:
    options, target = parse(sys.argv[1:] if argv is None else argv)
    try:
        target.check()
    except TargetError as exc:
        fail(str(exc))
    if options.headless:
        from tuidebug.headless import run_headless

        return run_headless(target, agent_options(options), options.print_every)
    from tuidebug.app import run_app

    return run_app(target, agent_options(options), mouse=not options.no_mouse)


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {text}")
    return value


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return value
