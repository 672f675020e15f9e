"""The fallback where NVML is unusable: ``nvidia-smi`` query, header and ``topo -m`` texts parsed
into the same dump. ``run_command`` is the one way this package runs a host command."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from typing import Final

from bench.core import utc_now
from bench.machine._dump import (
    GpuDump,
    NvmlDump,
    capture_host,
    hash_uuid,
)

ANSI_RE: Final = re.compile(r"\x1b\[[0-9;]*m")  # nvidia-smi topo -m underlines its header

Runner = Callable[[Sequence[str]], str | None]


SMI_FIELDS: Final = (
    "index,name,uuid,memory.total,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,"
    "pcie.link.width.current,pcie.link.width.max,power.limit,power.default_limit,"
    "enforced.power.limit,clocks.max.sm,clocks.max.memory,vbios_version,compute_cap,driver_version"
)


def run_command(argv: Sequence[str]) -> str | None:
    """Run a short informational command; its stdout, or None if it is missing or fails."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _smi_value(raw: str) -> str | None:
    v = raw.strip()
    return None if not v or v.startswith("[") or v in ("N/A", "Not Supported") else v


def _smi_int(raw: str, scale: float = 1.0) -> int | None:
    v = _smi_value(raw)
    try:
        return round(float(v) * scale) if v is not None else None
    except ValueError:
        return None


def parse_nvidia_smi(csv_text: str, header_text: str | None, topo_text: str | None) -> NvmlDump:
    """Build a dump from ``nvidia-smi --query-gpu=SMI_FIELDS --format=csv,noheader,nounits``
    (memory in MiB, power in W), the plain ``nvidia-smi`` banner (CUDA version) and ``topo -m``."""
    gpus: list[GpuDump] = []
    driver: str | None = None
    for line in csv_text.strip().splitlines():
        f = [c.strip() for c in line.split(",")]
        if len(f) < 17:
            raise ValueError(f"nvidia-smi answered {len(f)} fields, expected 17: {line!r}")
        driver = driver or _smi_value(f[16])
        uuid = _smi_value(f[2])
        gpus.append(
            GpuDump(
                index=int(f[0]),
                name=_smi_value(f[1]),
                uuidSha256=hash_uuid(uuid) if uuid else None,
                memoryTotalBytes=_smi_int(f[3], 1024 * 1024),
                pciBusId=_smi_value(f[4]),
                pcieGenCurrent=_smi_int(f[5]),
                pcieGenMax=_smi_int(f[6]),
                pcieWidthCurrent=_smi_int(f[7]),
                pcieWidthMax=_smi_int(f[8]),
                powerLimitMw=_smi_int(f[9], 1000),
                powerLimitDefaultMw=_smi_int(f[10], 1000),
                powerLimitEnforcedMw=_smi_int(f[11], 1000),
                smClockMaxMhz=_smi_int(f[12]),
                memClockMaxMhz=_smi_int(f[13]),
                vbios=_smi_value(f[14]),
                computeCapability=_smi_value(f[15]),
            )
        )
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", header_text or "")
    return NvmlDump(
        source="nvidia-smi",
        capturedAt=utc_now(),
        driverVersion=driver,
        cudaDriverVersion=cuda.group(1) if cuda else None,
        gpus=gpus,
        topology=ANSI_RE.sub("", topo_text).strip() if topo_text else None,
        host=capture_host(),
    )


def record_nvidia_smi(run: Runner | None = None) -> NvmlDump | None:
    """The fallback when NVML cannot be loaded; None when nvidia-smi is absent or fails."""
    run = run or run_command
    csv_text = run(["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"])
    if not csv_text or not csv_text.strip():
        return None
    return parse_nvidia_smi(csv_text, run(["nvidia-smi"]), run(["nvidia-smi", "topo", "-m"]))


# ---------------------------------------------------------------- dump -> Hardware
