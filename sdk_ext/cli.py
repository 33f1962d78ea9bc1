"""The ``sdk-ext`` command: the whole Debugger loop on this machine, and a look at what it saved.

    sdk-ext run train.py --rule ExplodingTensor --report -- --epochs 3   # a local job (script args after --)
    sdk-ext run --request request.json                                            # a CreateTrainingJob request
    sdk-ext trial PATH [--tensor NAME]          # steps, modes, collections, tensors; or one tensor's values
    sdk-ext rules PATH --rule NAME              # run rules over a saved trial (profiler rules: its profiler output)
    sdk-ext profile PATH                        # hosts, utilization, step durations, profiler rules' verdicts
    sdk-ext report PATH [-o report.html]        # a self-contained HTML report

A script that imports torch gets the hook without code changes (``--no-zero-change`` opts out).
Progress is shown on a terminal only; piped or in CI, the output is just the result. Exit codes:
0 success, 1 the job failed (a full disk included) or saved nothing for its rules, 2 bad usage or input
(nothing started), 3 (``rules``) a rule found issues, 130 interrupted (143 by SIGTERM; the summary and report
are still written).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from sdk_ext import __version__
from sdk_ext.exceptions import SdkExtError


def parser() -> argparse.ArgumentParser:
    from sdk_ext.local.cli import inspect as cli_inspect
    from sdk_ext.local.cli import run as cli_run

    p = argparse.ArgumentParser(prog="sdk-ext", description=__doc__.split("\n\n")[0])
    p.add_argument("--version", action="version", version=f"sdk-ext {__version__}")
    p.add_argument("--log-level", default="WARNING", help="log level of sdk_ext's messages (default WARNING)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cli_run.add_parser(sub)
    cli_inspect.add_parsers(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``sdk-ext``; returns the exit code."""
    from sdk_ext.local.cli.console import Console

    argv = list(sys.argv[1:] if argv is None else argv)
    script_args: list[str] = []
    if "--" in argv:  # `sdk-ext run [options] SCRIPT -- ARGS...`: everything after -- is the script's
        cut = argv.index("--")
        argv, script_args = argv[:cut], argv[cut + 1:]
    p = parser()
    args, unknown = p.parse_known_args(argv)
    if unknown:
        hint = ""
        if getattr(args, "command", None) == "run" and getattr(args, "script", None) is not None:
            hint = (f"; arguments for the script go after --: sdk-ext run [options] {args.script} -- "
                    f"{' '.join(unknown)}")
        sys.stderr.write(f"sdk-ext {args.command}: error: unrecognized arguments: {' '.join(unknown)}{hint} "
                         f"(sdk-ext {args.command} -h lists the options)\n")
        return 2
    args.script_args = script_args
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.WARNING),
                        format="%(levelname)s %(name)s: %(message)s")
    console = Console(quiet=getattr(args, "quiet", False))
    try:
        code: int = args.handler(args, console)
    except BrokenPipeError:  # `sdk-ext trial ... | head`: the reader has what it wanted
        _silence_stdout()
        return 0
    except (SdkExtError, ValueError, OSError) as err:
        console.done()
        sys.stderr.write(f"sdk-ext: {err}\n")
        return 2
    except KeyboardInterrupt:
        console.done()
        sys.stderr.write("sdk-ext: interrupted\n")
        return 130
    return code


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush does not fail on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
