"""Emulator profiles, tokenization rule and schedule maths (no server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.emulator import FailMode, load_profile, shipped_profiles
from bench.emulator.profile import Profile, ProfileError
from bench.emulator.tokens import completion_text, count_prompt_tokens, words_for

SEED_SHAPES = {  # configuration -> (seed decode tok/s at c=1, tolerance)
    "vllm-dflash": 109.36,
    "sglang-dflash": 97.54,
    "vllm-mtp": 92.78,
    "sglang-mtp": 86.98,
}


def test_six_profiles_ship_and_are_simulated() -> None:
    names = shipped_profiles()
    assert set(names) == {
        f"{e}-{m}" for e in ("vllm", "sglang") for m in ("dflash", "mtp", "baseline")
    }
    for name in names:
        p = load_profile(name)
        assert p.simulated is True
        assert "SIMULATED" in p.description
        assert p.engine == name.split("-")[0]


@pytest.mark.parametrize("name", sorted(SEED_SHAPES))
def test_profiles_are_shaped_after_the_seed(name: str) -> None:
    p = load_profile(name)
    assert p.spec is not None
    tokens_per_step = 1 + p.spec.expected_accepted()
    shaped = tokens_per_step / (p.step_ms(1) / 1000)
    assert shaped == pytest.approx(SEED_SHAPES[name], rel=0.01)
    ttft = p.prefill_ms(1044)
    assert 60 < ttft < 80


def test_sglang_admission_caps_follow_the_seed() -> None:
    """MTP and the baseline carry the seed's --max-running-requests 4; DFlash has no cap flag,
    so SGLang's default 48 is lowered by the Mamba state cache to the seed's five."""
    for name in ("sglang-mtp", "sglang-baseline"):
        assert load_profile(name).admission_cap == 4
    dflash = load_profile("sglang-dflash")
    assert (dflash.max_running_requests, dflash.mamba_cap, dflash.admission_cap) == (48, 5, 5)
    assert dflash.with_overrides(max_running_requests=4).admission_cap == 4


def test_step_time_interpolates_and_clamps() -> None:
    p = load_profile("vllm-dflash")
    assert p.step_ms(1) == p.decode_step_ms[1]
    assert p.step_ms(3) == pytest.approx((p.decode_step_ms[2] + p.decode_step_ms[4]) / 2)
    assert p.step_ms(64) == p.decode_step_ms[16]
    assert p.step_ms(0) == p.decode_step_ms[1]


def test_overrides_add_failure_modes_and_time_scale() -> None:
    p = load_profile("sglang-mtp").with_overrides(
        time_scale=0.01, fail=(FailMode.ZERO_ACCEPTANCE,), exit_code=7
    )
    assert p.time_scale == 0.01
    assert p.has(FailMode.ZERO_ACCEPTANCE)
    assert p.failures.exit_code == 7


def test_bad_profile_names_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    data = load_profile("vllm-dflash").model_dump()
    data["spec"]["acceptance"] = [1.5]
    import yaml

    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ProfileError, match=r"spec\.acceptance"):
        load_profile(bad)
    with pytest.raises(ProfileError, match="unknown"):
        load_profile("no-such-profile")
    with pytest.raises(ValueError):
        Profile.model_validate({**data, "decode_step_ms": {}})


def test_tokenization_rule_is_exact() -> None:
    words = words_for(1044)
    messages = [{"role": "user", "content": " ".join(["x"] * words)}]
    assert count_prompt_tokens(messages) == 1044
    parts = [{"role": "user", "content": [{"type": "text", "text": "a b c"}]}]
    assert count_prompt_tokens(parts) == 3 + 4 + 3
    assert len(completion_text(5, 4).split()) == 4
