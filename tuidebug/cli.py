"""The ``tuidebug`` command.

    tuidebug [OPTIONS] SCRIPT [ARGS...]        the live dashboard
    tuidebug [OPTIONS] -m MODULE [ARGS...]     the same for ``python -m MODULE``
    tuidebug --headless [OPTIONS] SCRIPT ...   figures as lines on stderr, no screen
    tuidebug diagnose [OPTIONS] SCRIPT ...     walk the decision tree without a screen
    tuidebug replay BUNDLE SCRIPT ...          re-run a saved failing case against the script
    tuidebug ls                                this user's runs, and whether a screen shows them
    tuidebug attach [PID]                      show a run whose screen went away again
    tuidebug listen [--port P]                 show a job another launcher starts (its workers connect here)

Everything after the script (or ``-m MODULE``) goes to the script, as with ``python``.
Errors are one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from tuidebug import __version__
from tuidebug.launcher import Target, TargetError

USAGE_ERROR = 2
ATTACH_FAILED = 1
PROBE_SECONDS = 45  # diagnose's default deadline leaves this long for the checks after the window
# torchrun's options that tuidebug passes through (its launcher starts the workers, never one of ours)
TORCHRUN_OPTIONS = ("--nproc-per-node", "--nnodes", "--node-rank", "--rdzv-backend", "--rdzv-endpoint", "--rdzv-id",
                    "--master-addr", "--master-port")
VALUE_OPTIONS = {"--print-every", "--break-at", "--norm-stride", "--json", "--report", "--max-steps", "--steps",
                 "--seconds", "--timeout", "--bundle-dir", *TORCHRUN_OPTIONS}


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
    add_torchrun_options(parser)
    return parser


def add_torchrun_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "multi-process jobs", "start the script with torchrun (torch.distributed.run), the agent in every worker; "
                              "every rank reports to this one tuidebug")
    group.add_argument("--nproc-per-node", metavar="N", help="workers on this machine, as torchrun's --nproc-per-node")
    for option in TORCHRUN_OPTIONS[1:]:
        group.add_argument(option, metavar="VALUE", help=f"passed to torchrun as {option}")


def launch_args(options: argparse.Namespace) -> list[str]:
    """The torchrun options given, as torchrun's own arguments; empty for a single process."""
    given = [(option, getattr(options, option[2:].replace("-", "_"), None)) for option in TORCHRUN_OPTIONS]
    if not any(value is not None for _, value in given):
        return []
    if options.nproc_per_node is None:
        fail("a multi-process job needs --nproc-per-node (see tuidebug --help)")
    return [f"{option}={value}" for option, value in given if value is not None]


def build_diagnose_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tuidebug diagnose", usage="tuidebug diagnose [OPTIONS] (SCRIPT | -m MODULE) [ARGS...]",
                     description="Run the script for a bounded window and walk the decision tree without a screen. "
                                 "Exit 0: healthy; 1: a failure was diagnosed; 2: usage or tool error; "
                                 "3: inconclusive (nothing trained in the window).")
    parser.add_argument("--json", dest="json_path", metavar="PATH", help="write the report as JSON")
    parser.add_argument("--report", dest="report_path", metavar="PATH", help="write the Markdown report")
    parser.add_argument("--steps", "--max-steps", dest="steps", type=_positive, default=1000, metavar="N",
                        help="the window: stop the run after N optimizer steps (default 1000)")
    parser.add_argument("--seconds", type=_positive, default=15, metavar="S",
                        help="the window: stop the run after S seconds of the script (default 15)")
    parser.add_argument("--timeout", type=_positive, default=None, metavar="S",
                        help="the deadline for the whole diagnosis: past it, the checks left are skipped and the "
                             f"verdict so far is written, marked partial (default: the window + {PROBE_SECONDS}s)")
    parser.add_argument("--bundle-dir", metavar="DIR", help="where to save the reproduction bundle")
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run a module, as python -m")
    add_torchrun_options(parser)
    return parser


def build_replay_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tuidebug replay", usage="tuidebug replay [--timeout S] BUNDLE (SCRIPT | -m MODULE) [ARGS...]",
                     description="Re-run a saved failing case against the script. Exit 0: it no longer fails; "
                                 "1: it still fails; 2: usage or tool error.")
    parser.add_argument("--timeout", type=_positive, default=300, metavar="SECONDS")
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run a module, as python -m")
    return parser


def build_attach_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tuidebug attach", usage="tuidebug attach [--no-mouse] [PID]",
                     description="Show a run whose screen went away (the terminal closed, the SSH connection "
                                 "dropped) again. Without a PID: the most recent such run of yours. "
                                 "Exit 1: there is none, or it did not answer.")
    parser.add_argument("pid", nargs="?", type=_positive, metavar="PID", help="the run, as tuidebug ls lists it")
    parser.add_argument("--no-mouse", action="store_true", help="do not capture the mouse")
    return parser


def build_listen_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tuidebug listen", usage="tuidebug listen [--host HOST] [--port PORT]",
                     description="Show a job that another launcher starts (SLURM, a scheduler): listen on a TCP "
                                 "port and print the environment each worker needs; run the workers as "
                                 "python -m tuidebug.agent train.py ARGS. The token is the only guard, so the "
                                 "default host is loopback; reach it from other machines through an SSH tunnel "
                                 "(ssh -R PORT:localhost:PORT node).")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=_non_negative, default=0, help="the port (default: any free one)")
    parser.add_argument("--no-mouse", action="store_true", help="do not capture the mouse")
    return parser


def build_ls_parser() -> argparse.ArgumentParser:
    return _Parser(prog="tuidebug ls", usage="tuidebug ls",
                   description="List your runs that are alive under tuidebug: pid, age, whether a screen shows "
                               "them, the command and the log file their output goes to once the screen is gone.")


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


def parse(argv: Sequence[str], parser: argparse.ArgumentParser | None = None) -> tuple[argparse.Namespace, Target]:
    own, rest = split_argv(argv)
    options = (parser or build_parser()).parse_args(own)
    if options.module:
        target = Target(options.module, rest, module=True)
    elif rest:
        target = Target(rest[0], rest[1:])
    else:
        fail("no script given: tuidebug [OPTIONS] SCRIPT [ARGS...] (see tuidebug --help)")
    if hasattr(options, "nproc_per_node"):
        target.launch = launch_args(options)
    return options, target


def agent_options(options: argparse.Namespace) -> dict[str, Any]:
    return {
        "break_on_nan": options.break_on_nan and not options.headless,
        "break_at": None if options.headless else options.break_at,
        "norm_stride": options.norm_stride,
        "stop_on_disconnect": options.stop_on_disconnect,
        "attachable": not options.headless and not options.nproc_per_node,  # attach takes one process
    }


def checked(target: Target) -> Target:
    try:
        target.check()
    except TargetError as exc:
        fail(str(exc))
    return target


def diagnose(argv: list[str]) -> int:
    from tuidebug.diagnose import DiagnoseOptions, run_diagnose

    options, target = parse(argv, build_diagnose_parser())
    return run_diagnose(checked(target), DiagnoseOptions(
        steps=options.steps, seconds=float(options.seconds),
        timeout=float(options.timeout or options.seconds + PROBE_SECONDS),
        json_path=options.json_path, report_path=options.report_path, bundle_dir=options.bundle_dir))


def replay(argv: list[str]) -> int:
    from tuidebug.diagnose import run_replay

    timeout = []
    if argv[:1] == ["--timeout"]:
        timeout, argv = argv[:2], argv[2:]
    if not argv or argv[0].startswith("-"):
        fail("no bundle given: tuidebug replay BUNDLE SCRIPT [ARGS...]")
    bundle, rest = argv[0], argv[1:]
    if not os.path.isfile(os.path.join(bundle, "bundle.json")):
        fail(f"not a reproduction bundle (no bundle.json): {bundle}")
    options, target = parse(timeout + rest, build_replay_parser())
    return run_replay(bundle, checked(target), float(options.timeout))


def attach(argv: list[str]) -> int:
    from tuidebug.attach import AttachedRun, AttachError, choose
    from tuidebug.session import Session

    options = build_attach_parser().parse_args(argv)
    try:
        record = choose(options.pid)
        run = AttachedRun(record, Session(record.script, record.args))
        run.attach()
    except AttachError as exc:
        print(f"tuidebug: error: {exc}", file=sys.stderr)
        return ATTACH_FAILED
    from tuidebug.app import show

    return show(run, mouse=not options.no_mouse)


def listen(argv: list[str]) -> int:
    from tuidebug.attach import ListenedRun
    from tuidebug.session import Session

    options = build_listen_parser().parse_args(argv)
    run = ListenedRun(Session("listen", []), options.host, options.port)
    print(f"tuidebug: listening on {run.server.address}; start each worker with\n  {run.environment} "
          "python -m tuidebug.agent train.py ARGS", file=sys.stderr)
    from tuidebug.app import show

    return show(run, mouse=not options.no_mouse)


def list_runs(argv: list[str]) -> int:
    from tuidebug.attach import listing

    build_ls_parser().parse_args(argv)
    print(listing())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from tuidebug.server import SocketFolderError

    # A SIGINT ignored by inheritance (started with `&` from a script) would leave Ctrl-C and --stop-on-disconnect
    # (interrupt_main) no way to stop tuidebug or the script: with Python's handler here, the script, exec'd from
    # this process, starts with SIGINT at its default again.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return _dispatch(list(sys.argv[1:] if argv is None else argv))
    except SocketFolderError as exc:
        fail(str(exc))


def _dispatch(argv: list[str]) -> int:
    if argv[:1] == ["diagnose"]:
        return diagnose(argv[1:])
    if argv[:1] == ["replay"]:
        return replay(argv[1:])
    if argv[:1] in (["attach"], ["ls"], ["listen"]):
        return {"attach": attach, "ls": list_runs, "listen": listen}[argv[0]](argv[1:])
    options, target = parse(argv)
    checked(target)
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
