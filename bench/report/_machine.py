"""hardware.json, provenance.json and per-payload telemetry as the report shows them: small
tables of facts, with "unknown" where a source did not say (nothing is filled in)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.report._model import Table, TelemetryView
from bench.schema import Hardware, Payload, RunLock, TelemetrySummary

UNKNOWN = "unknown"


def _s(value: Any, unit: str = "") -> str:
    if value is None or value == "":
        return UNKNOWN
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}{unit}"
    return f"{value}{unit}"


def hardware_tables(hw: Hardware) -> list[Table]:
    ext = hw.extended
    rows = [
        ("GPU", hw.gpuName),
        ("GPU count", str(hw.gpuCount)),
        ("VRAM (total)", f"{hw.vramGb:g} GiB"),
        ("Class", hw.hwClass),
        ("Driver", _s(ext.driverVersion if ext else None)),
        ("CUDA (driver)", _s(ext.cudaDriverVersion if ext else None)),
        ("CPU", hw.cpu),
        ("RAM", f"{hw.ramGb:g} GB"),
        ("OS", hw.os),
        ("Captured from", _s(ext.source if ext else None)),
    ]
    if ext and ext.cpuFlags is not None:
        rows.append(("CPU ISA flags", " ".join(ext.cpuFlags) or "none of the listed"))
    if ext and ext.topology:
        rows.append(("Topology", ext.topology))
    out = [Table(title="Machine", header=("Fact", "Value"), rows=tuple(rows))]
    if ext and ext.gpus:
        out.append(
            Table(
                title="GPUs",
                header=(
                    "GPU",
                    "PCIe gen (now/max)",
                    "PCIe width (now/max)",
                    "Power limit",
                    "Datasheet bandwidth",
                    "NVLink links",
                ),
                rows=tuple(
                    (
                        str(g.index),
                        f"{_s(g.pcieGenCurrent)}/{_s(g.pcieGenMax)}",
                        f"x{_s(g.pcieWidthCurrent)}/x{_s(g.pcieWidthMax)}",
                        _s(g.powerLimitW, " W"),
                        _s(g.datasheetBandwidthGBs, " GB/s"),
                        _s(g.nvlinkActiveLinks),
                    )
                    for g in ext.gpus
                ),
            )
        )
    if ext and (ext.p2p or ext.topologyPairs):
        pairs = sorted(set(ext.p2p) | set(ext.topologyPairs))
        out.append(
            Table(
                title="GPU pairs (P2P)",
                header=("Pair", "P2P", "Common ancestor"),
                rows=tuple((p, _s(ext.p2p.get(p)), _s(ext.topologyPairs.get(p))) for p in pairs),
            )
        )
    elif ext is not None:
        out.append(Table(title="GPU pairs (P2P)", header=("Pair", "P2P"), rows=(("all", UNKNOWN),)))
    return out


def cpu_kernel_table(payloads: dict[str, Payload]) -> list[Table]:
    """Which kernel build the CPU servers ran, as their logs said (none on GPU runs): one row per
    build, with the runs that used it."""
    builds: dict[tuple[str, str, str], list[str]] = {}
    for key, p in payloads.items():
        k = p.evidence.server_log.cpu_kernel if p.evidence.server_log else None
        if k is not None:
            builds.setdefault((k.library, k.isa, " ".join(k.cpu_flags)), []).append(key)
    if not builds:
        return []
    everyone = len(payloads)
    return [
        Table(
            title="CPU kernel build (as each server logged it)",
            header=("Library", "Built for", "CPU flags seen by the server", "Runs"),
            rows=tuple(
                (lib, isa, flags, f"all {everyone}" if len(keys) == everyone else ", ".join(keys))
                for (lib, isa, flags), keys in builds.items()
            ),
        )
    ]


#: the settings an engine resolves itself (bench.engines ResolvedPattern names), in report order
RESOLVED = (
    ("attention_backend", "Attention backend"),
    ("decode_graphs", "Decode graphs"),
    ("prefill_graphs", "Prefill graphs"),
)


def resolved_table(payloads: dict[str, Payload]) -> list[Table]:
    """What each server resolved at start, as its own log stated it (attention backend, graph
    mode per phase): one row per configuration and engine version, "not stated" where its log
    said nothing. A server that silently ran eager shows here, whatever its flags asked."""
    rows: dict[tuple[str, ...], None] = {}
    for key, p in payloads.items():
        sl = p.evidence.server_log
        if sl is None or not sl.resolved:
            continue
        config = key.rsplit("-c", 1)[0]
        row = (config, f"{p.engineName} {p.engineVersion}")
        rows[row + tuple(sl.resolved.get(k, "not stated") for k, _ in RESOLVED)] = None
    if not rows:
        return []
    return [
        Table(
            title="Resolved by the engine (from its own log)",
            header=("Configuration", "Engine", *(label for _, label in RESOLVED)),
            rows=tuple(rows),
        )
    ]


def provenance_tables(prov: dict[str, Any]) -> list[Table]:
    git = prov.get("git") if isinstance(prov.get("git"), dict) else {}
    exp = prov.get("experiment") if isinstance(prov.get("experiment"), dict) else {}
    docker = prov.get("docker") if isinstance(prov.get("docker"), dict) else {}
    ctk = prov.get("containerToolkit") if isinstance(prov.get("containerToolkit"), dict) else {}
    assert isinstance(git, dict) and isinstance(exp, dict)
    assert isinstance(docker, dict) and isinstance(ctk, dict)
    rows = [
        ("Git SHA", _s(git.get("sha"))),
        ("Git tree dirty", _s(git.get("dirty"))),
        ("specbench version", _s(prov.get("specbenchVersion"))),
        ("Experiment file", _s(exp.get("path"))),
        ("Experiment SHA256", _s(exp.get("sha256"))),
        ("Python", _s(prov.get("python"))),
        ("Driver / CUDA", f"{_s(prov.get('driverVersion'))} / {_s(prov.get('cudaDriverVersion'))}"),
        ("OS / kernel", f"{_s(prov.get('os'))} / {_s(prov.get('kernel'))}"),
        ("Docker (server)", _s(docker.get("serverVersion"))),
        ("NVIDIA container toolkit", _s(ctk.get("nvidiaCtk"))),
        ("Captured", _s(prov.get("capturedAt"))),
    ]
    out = [Table(title="Provenance", header=("Fact", "Value"), rows=tuple(rows))]
    images = [i for i in prov.get("images") or [] if isinstance(i, dict)]
    if images:
        out.append(
            Table(
                title="Engine images",
                header=("Engine", "Image", "Digest", "Upstream version"),
                rows=tuple(
                    (
                        _s(i.get("engine")),
                        _s(i.get("ref")),
                        _s(i.get("digest") or i.get("imageId")),
                        _s(i.get("upstreamVersion")),
                    )
                    for i in images
                ),
            )
        )
    return out


def telemetry_view(p: Payload) -> tuple[TelemetryView | None, str | None]:
    """(the payload's telemetry, None) or (None, the payload's own note saying why not)."""
    t = p.evidence.telemetry
    if isinstance(t, dict):
        try:
            t = TelemetrySummary.model_validate(t)
        except ValueError:
            return None, "telemetry present but not in the specbench.telemetry/1 shape"
    if t is None:
        notes = [w for w in p.evidence.warnings if w.startswith("no GPU telemetry")]
        return None, notes[0] if notes else "no GPU telemetry in this payload"
    sm = [g.smClockMinMhz for g in t.gpus if g.smClockMinMhz is not None]
    temp = [g.temperatureMaxC for g in t.gpus if g.temperatureMaxC is not None]
    return (
        TelemetryView(
            source=t.source,
            windows=t.windowCount,
            measured_s=t.measuredSeconds,
            power_w=t.totalPowerMeanW,
            gpu_power_w=tuple(g.powerMeanW for g in t.gpus),
            energy_per_token_j=t.energyPerOutputTokenJ,
            sm_clock_min_mhz=min(sm) if sm else None,
            temperature_max_c=max(temp) if temp else None,
            throttle_reasons=tuple(t.throttleReasons),
        ),
        None,
    )


def pins_table(lock: RunLock) -> list[Table]:
    """Every image and model pin of the run, its value and where it came from."""
    if not lock.pins:
        return []
    where = {
        "experiment": "experiment file",
        "lock": f"pins lock ({Path(lock.pins_lock).name})" if lock.pins_lock else "pins lock",
        "unpinned": "UNPINNED (--allow-unpinned)",
    }
    note = " (the emulator ran instead of these images and models)" if lock.simulated else ""
    if lock.local_engine:
        note = " (the engines ran as local processes, not these images: see What ran)"
    return [
        Table(
            title="Pins: where each came from" + note,
            header=("What", "Ref", "Pin", "Value", "From"),
            rows=tuple(
                (f"{p.kind} {p.key}", p.ref, p.field, p.value or "none", where[p.source])
                for p in lock.pins
            ),
        )
    ]


def source_fields(prov: dict[str, Any] | None) -> dict[str, Any]:
    """The run's source tree as provenance states it: SHA, dirty flag, how the SHA is known."""
    git = (prov or {}).get("git")
    if not isinstance(git, dict):
        return {}
    dirty = git.get("dirty")
    via = git.get("via")
    return {
        "source_sha": str(git["sha"]) if git.get("sha") else None,
        "source_dirty": dirty if isinstance(dirty, bool) else None,
        "source_via": str(via) if via else None,
    }


def _engine_ran(p: Payload) -> str:
    """The image a container ran, or the package a local process found, with its drift from
    the wheel it came from."""
    launch = p.evidence.launch
    if launch is None:
        return "not recorded"
    if launch.image:
        return f"image {launch.image}"
    inst = launch.engine_install
    if inst is None:
        return f"{launch.launcher} launcher; engine package not recorded"
    drift = (
        f"{len(inst.modified)} of {inst.record_files} wheel files modified "
        f"({', '.join(inst.modified)})"
        if inst.modified
        else f"all {inst.record_files - len(inst.missing)} present wheel files as released"
    )
    left_out = f"; {len(inst.missing)} wheel files not installed" if inst.missing else ""
    return f"{inst.package} {inst.version} from {inst.location} (local process): {drift}{left_out}"


def _model_ran(files: Any) -> str:
    if files is None:
        return "none"
    tensors = f", tensors {files.tensors_sha256[:12]}" if files.tensors_sha256 else ""
    return f"{files.hf_id} ({files.path}): weights {files.weights_sha256[:12]}{tensors}"


def what_ran_table(payloads: dict[str, Payload]) -> list[Table]:
    """What each configuration's server ran, by content, as the launcher recorded it: the image
    or the engine package (and the files that differ from its wheel), and the model folders it
    read, hashed on that host. One row per configuration (its levels ran one server)."""
    rows: dict[str, tuple[str, ...]] = {}
    for key, p in payloads.items():
        config = key.rsplit("-c", 1)[0]
        served = p.evidence.served
        launch = p.evidence.launch
        # the emulator reads no model files and is no engine package: nothing to identify
        ran = served is not None or (launch is not None and launch.engine_install is not None)
        if config in rows or not ran:
            continue
        tok = served.target.tokenizer_sha256 if served else None
        rows[config] = (
            config,
            _engine_ran(p),
            _model_ran(served.target if served else None),
            _model_ran(served.draft if served else None),
            tok[:12] if tok else "not recorded",
        )
    if not rows:
        return []
    return [
        Table(
            title="What ran (recorded by the launcher; files hashed where the server ran)",
            header=("Configuration", "Engine", "Target", "Draft", "Tokenizer"),
            rows=tuple(rows.values()),
        )
    ]
