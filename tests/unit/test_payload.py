"""The payload model's rules (bench.schema): specMethod spelling, the consistency validators,
unknown keys, the schema version; read_payload's one-line errors; byte-stable write/read."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from bench.core import InputError, canonical_spec_method
from bench.schema import (
    PAYLOAD_SCHEMA,
    EngineFlags,
    Payload,
    Validity,
    ValidityReason,
    read_payload,
    write_payload,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "payloads"
VALID = FIXTURES / "vllm-dflash-c1.json"

FLAGS: dict[str, Any] = {
    "specDecoding": True,
    "specMethod": "MTP",
    "specNumTokens": 2,
    "tensorParallel": 2,
    "concurrency": 1,
    "temperature": 0.0,
}


def base() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(VALID.read_text(encoding="utf-8"))
    return copy.deepcopy(data)


def locs(err: ValidationError) -> list[tuple[str | int, ...]]:
    return [tuple(e["loc"]) for e in err.errors()]


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("mtp", "MTP"),
        ("Mtp", "MTP"),
        (" MTP ", "MTP"),
        ("dflash", "DFLASH"),
        ("DFlash", "DFLASH"),
        ("none", "NONE"),
        ("off", "NONE"),
        ("", "NONE"),
    ],
)
def test_spec_method_any_case_is_canonicalised(given: str, canonical: str) -> None:
    on = canonical != "NONE"
    flags = EngineFlags.model_validate(
        {**FLAGS, "specMethod": given, "specDecoding": on, "specNumTokens": 2 if on else None}
    )
    assert flags.specMethod == canonical
    assert canonical_spec_method(given) == canonical


def test_unknown_spec_method_is_rejected() -> None:
    with pytest.raises(ValidationError) as info:
        EngineFlags.model_validate({**FLAGS, "specMethod": "eagle3"})
    assert ("specMethod",) in locs(info.value)


@pytest.mark.parametrize(
    ("decoding", "method", "k"),
    [(True, "NONE", 2), (False, "MTP", 2), (False, "DFLASH", None), (True, "MTP", None)],
)
def test_spec_decoding_must_agree_with_method_and_k(
    decoding: bool, method: str, k: int | None
) -> None:
    with pytest.raises(ValidationError, match=r"specDecoding|specNumTokens"):
        EngineFlags.model_validate(
            {**FLAGS, "specDecoding": decoding, "specMethod": method, "specNumTokens": k}
        )


def test_no_speculation_needs_no_k() -> None:
    flags = EngineFlags.model_validate(
        {**FLAGS, "specDecoding": False, "specMethod": "none", "specNumTokens": None}
    )
    assert (flags.specDecoding, flags.specMethod) == (False, "NONE")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("specAcceptanceRate", 1.5),
        ("specAcceptanceRate", -0.1),
        ("concurrency", 0),
        ("tensorParallel", 0),
        ("specNumTokens", 0),
        ("gpuMemUtil", 0.0),
    ],
)
def test_engine_flag_bounds(field: str, value: float) -> None:
    with pytest.raises(ValidationError) as info:
        EngineFlags.model_validate({**FLAGS, field: value})
    assert (field,) in locs(info.value)


def test_validity_must_agree_with_its_reasons() -> None:
    bad = ValidityReason(code="x", message="broken")
    warn = ValidityReason(code="w", message="note", severity="warning")
    assert Validity(valid=True).valid
    assert Validity(valid=True, reasons=[warn]).valid
    assert not Validity(valid=False, reasons=[bad, warn]).valid
    for valid, reasons in ((True, [bad]), (False, []), (False, [warn])):
        with pytest.raises(ValidationError, match="valid must be false exactly"):
            Validity(valid=valid, reasons=reasons)


def test_fixture_is_a_valid_payload() -> None:
    p = Payload.model_validate(base())
    assert p.schemaVersion == PAYLOAD_SCHEMA
    assert p.simulated and p.evidence.run.simulated


@pytest.mark.parametrize(("top", "run"), [(True, False), (False, True)])
def test_simulated_flags_must_agree(top: bool, run: bool) -> None:
    data = base()
    data["simulated"] = top
    data["evidence"]["run"]["simulated"] = run
    with pytest.raises(ValidationError, match=r"simulated and evidence\.run\.simulated disagree"):
        Payload.model_validate(data)


def test_simulated_is_required() -> None:
    data = base()
    del data["simulated"]
    with pytest.raises(ValidationError) as info:
        Payload.model_validate(data)
    assert ("simulated",) in locs(info.value)


@pytest.mark.parametrize(
    "where",
    [(), ("engineFlags",), ("evidence",), ("evidence", "workload"), ("hardware",)],
)
def test_unknown_keys_are_rejected_at_every_level(where: tuple[str, ...]) -> None:
    data = base()
    node = data
    for key in where:
        node = node[key]
    node["surprise"] = 1
    with pytest.raises(ValidationError) as info:
        Payload.model_validate(data)
    assert (*where, "surprise") in locs(info.value)
    assert info.value.errors()[0]["type"] == "extra_forbidden"


def test_unknown_key_in_an_iteration_record_is_rejected() -> None:
    data = base()
    data["evidence"]["iterations"][0]["requests"][0]["tokens"] = 3
    with pytest.raises(ValidationError) as info:
        Payload.model_validate(data)
    assert ("evidence", "iterations", 0, "requests", 0, "tokens") in locs(info.value)


@pytest.mark.parametrize("version", ["specbench.payload/2", "specbench.payload/0", ""])
def test_other_schema_versions_are_rejected(version: str) -> None:
    data = base()
    data["schemaVersion"] = version
    with pytest.raises(ValidationError) as info:
        Payload.model_validate(data)
    assert ("schemaVersion",) in locs(info.value)


def test_schema_version_defaults_when_absent() -> None:
    data = base()
    del data["schemaVersion"]
    assert Payload.model_validate(data).schemaVersion == PAYLOAD_SCHEMA


def test_payload_is_frozen() -> None:
    p = Payload.model_validate(base())
    with pytest.raises(ValidationError):
        p.tokSOut = 1.0  # type: ignore[misc]


# read_payload: an InputError (exit 2) naming the file and the field.


def write(tmp_path: Path, data: dict[str, Any] | str) -> Path:
    path = tmp_path / "payload.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_read_payload_names_file_and_field(tmp_path: Path) -> None:
    data = base()
    data["engineFlags"]["concurrency"] = 0
    path = write(tmp_path, data)
    with pytest.raises(InputError) as info:
        read_payload(path)
    assert info.value.exit_code == 2
    assert info.value.where == f"{path}: engineFlags.concurrency"
    assert "greater than or equal to 1" in info.value.reason


def test_read_payload_names_nested_missing_field(tmp_path: Path) -> None:
    data = base()
    del data["evidence"]["workload"]["max_tokens"]
    path = write(tmp_path, data)
    with pytest.raises(InputError) as info:
        read_payload(path)
    assert info.value.where == f"{path}: evidence.workload.max_tokens"
    assert "Field required" in info.value.reason


def test_read_payload_counts_further_problems(tmp_path: Path) -> None:
    data = base()
    del data["hfId"]
    del data["quantization"]
    path = write(tmp_path, data)
    with pytest.raises(InputError, match=r"and 1 more problem\b"):
        read_payload(path)


def test_read_payload_non_json(tmp_path: Path) -> None:
    path = write(tmp_path, '{"schemaVersion": ')
    with pytest.raises(InputError) as info:
        read_payload(path)
    assert info.value.where == str(path)
    assert info.value.reason.startswith("cannot read JSON")


def test_read_payload_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    with pytest.raises(InputError) as info:
        read_payload(path)
    assert info.value.where == str(path) and "cannot read" in info.value.reason


def test_read_payload_canonicalises_spec_method(tmp_path: Path) -> None:
    data = base()
    data["engineFlags"]["specMethod"] = "dflash"
    assert read_payload(write(tmp_path, data)).engineFlags.specMethod == "DFLASH"


# Round trip.


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.json")))
def test_write_read_round_trip_is_byte_stable(tmp_path: Path, name: str) -> None:
    original = (FIXTURES / name).read_bytes()
    out = tmp_path / name
    write_payload(out, read_payload(FIXTURES / name))
    assert out.read_bytes() == original
    again = tmp_path / ("again-" + name)
    write_payload(again, read_payload(out))
    assert again.read_bytes() == original


def test_round_trip_of_a_lower_case_method_is_stable_after_first_write(tmp_path: Path) -> None:
    data = base()
    data["engineFlags"]["specMethod"] = "dflash"
    first = tmp_path / "first.json"
    write_payload(first, read_payload(write(tmp_path, data)))
    assert json.loads(first.read_text())["engineFlags"]["specMethod"] == "DFLASH"
    assert first.read_bytes() == VALID.read_bytes()
