"""Issue 35, part 0: in SGLang's OWN resolver code, on the CPU, the MTP draft of each GPTQ
checkpoint shape inherits GPTQ on stock SGLang and does not on patched SGLang, for the GPU
tier's release (0.5.17, patch docker/sglang/patches-0.5.17/) beside the pinned one (0.5.19,
docker/sglang/patches/).

Per release x tree (pristine / patched with GNU patch --fuzz=0) one subprocess runs
draft_shapes_probe.py (what it runs and what it stubs: its docstring) over every shape:

* mtp-gptq/, mtp35-gptq/, mtp35-gptq-mtprule/: the real config.json that
  ``specbench tiny-model DIR --quantization gptq-4bit`` writes (bench.tinymodel, generated once
  per module into a tmp dir);
* seed-standin/: the seed's stand-in, Qwen3_5ForConditionalGeneration with the seed target's
  GPTQ quantization_config (sglang_suite/suite_support.py).

The server flags are the seed's NEXTN ones (SEED_FLAGS). Expected values are written out
below, never computed from the code under test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import PATCHES, REPO, in_ci
from upstream_suite import build_tree

from bench.engines.upstream import UpstreamSource, ensure_release_source
from bench.tinymodel import GptqOptions, make_tiny_models

CONTRACT = Path(__file__).resolve().parent
SUITE = CONTRACT / "sglang_suite"
sys.path.insert(0, str(SUITE))
from suite_support import GPTQ_4BIT, QWEN35  # noqa: E402

PROBE = CONTRACT / "draft_shapes_probe.py"

# The GPU tier's release beside the pinned one; its only wheel is cp312. sha256 of
# sglang-0.5.17-cp312-cp312-manylinux_2_34_x86_64.whl as pip downloaded it from PyPI (and of
# the pinned wheel, recorded by bench.engines.upstream in the cache marker).
OTHER_RELEASE = "0.5.17"
OTHER_PYTHON = "3.12"
WHEEL_SHA256 = {
    "0.5.17": "fb4cba478a5dca5ee146550b39f33add1c4e475d21ee11810b86ed1c58068093",
    "0.5.19": "425e87377e725d03db8262382008f3fd9561a6cf5d82f485f8b9929f02ffe12b",
}
PATCH_DIRS = {
    "0.5.17": sorted((REPO / "docker" / "sglang" / "patches-0.5.17").glob("*.patch")),
    "0.5.19": PATCHES,
}
RELEASES = tuple(PATCH_DIRS)
TREES = ("pristine", "patched")

SEED_FLAGS = [
    "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "2",
    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3",
    "--speculative-draft-model-quantization", "unquant",
    "--device", "cuda",  # the CPU machine has no accelerator for get_device() to find
]  # fmt: skip

TINY_SHAPES = ("mtp-gptq", "mtp35-gptq", "mtp35-gptq-mtprule")  # specbench tiny-model folders
SEED_STANDIN = "seed-standin"
SHAPES = (*TINY_SHAPES, SEED_STANDIN)

QWEN35_MTP = "Qwen3_5ForCausalLMMTP"
QWEN3NEXT_MTP = "Qwen3NextForCausalLMMTP"
# The prefixes of the linear layers each draft class builds (both releases; lines: 0.5.17 /
# 0.5.19, SOURCE_LINES checks them):
# Qwen3_5ForCausalLMMTP: self.model = Qwen3_5ForCausalLM(prefix=add_prefix("mtp", "")) at
#   models/qwen3_5_mtp.py:102 / :127; its layers "mtp.layers.N" (qwen3_5.py:1380 / :1592),
#   the attention layer "....self_attn" (:1363 / :1575) -> qkv_proj (:894 / :1104); the dense
#   MLP "mtp.layers.0.mlp" (:925 / :1135) -> gate_up_proj (qwen2_moe.py:190 / :202).
#   fc is a plain nn.Linear, built without quant_config (qwen3_5_mtp.py:90 / :115): it stays
#   BF16 whatever the config says; its prefix is asked about only to show what a rule says.
# Qwen3NextForCausalLMMTP: self.model = Qwen3NextModel(prefix=add_prefix("model", "")) at
#   qwen3_next_mtp.py:75 (both): its layers are "model.layers.N" (qwen3_next.py:917), NOT
#   "mtp.layers.N"; attention "model.layers.0.self_attn" (:904) -> qkv_proj (:670); its MoE's
#   shared expert "model.layers.0.mlp.shared_expert" (:713, qwen2_moe.py:324 / :378) ->
#   gate_up_proj; fc an nn.Linear (qwen3_next_mtp.py:63). The mtp.* name is a counterfactual:
#   what the checkpoint's rule would do if the draft used the checkpoint's tensor names.
PREFIXES = {
    QWEN35_MTP: ["mtp.layers.0.self_attn.qkv_proj", "mtp.layers.0.mlp.gate_up_proj", "mtp.fc"],
    QWEN3NEXT_MTP: [
        "model.layers.0.self_attn.qkv_proj",
        "model.layers.0.mlp.shared_expert.gate_up_proj",
        "fc",
        "mtp.layers.0.self_attn.qkv_proj",
    ],
}
SOURCE_LINES: dict[str, list[tuple[str, int, int, str]]] = {
    # file, line in 0.5.17, line in 0.5.19, text on that line
    "models": [
        ("qwen3_5_mtp.py", 90, 115, "self.fc = nn.Linear(2 * config.hidden_size"),
        ("qwen3_5_mtp.py", 102, 127, 'prefix=add_prefix("mtp", prefix),'),
        ("qwen3_5.py", 1363, 1575, 'prefix = add_prefix("self_attn", prefix)'),
        ("qwen3_5.py", 1380, 1592, 'prefix=f"{prefix}.layers",'),
        ("qwen3_5.py", 894, 1104, 'prefix=add_prefix("qkv_proj", prefix),'),
        ("qwen3_5.py", 925, 1135, 'prefix=add_prefix("mlp", prefix.replace(".self_attn", "")),'),
        ("qwen2_moe.py", 190, 202, 'prefix=add_prefix("gate_up_proj", prefix),'),
        ("qwen2_moe.py", 324, 378, 'prefix=add_prefix("shared_expert", prefix),'),
        ("qwen3_next_mtp.py", 63, 63, "self.fc = nn.Linear(2 * config.hidden_size"),
        ("qwen3_next_mtp.py", 75, 75, 'prefix=add_prefix("model", prefix),'),
        ("qwen3_next.py", 904, 904, 'prefix = add_prefix("self_attn", prefix)'),
        ("qwen3_next.py", 917, 917, 'get_layer, prefix=f"{prefix}.layers"'),
        ("qwen3_next.py", 670, 670, 'prefix=add_prefix("qkv_proj", prefix),'),
        ("qwen3_next.py", 713, 713, 'prefix=add_prefix("mlp", prefix.replace(".self_attn", "")),'),
    ],
}  # fmt: skip

GPTQ, BF16 = "GPTQLinearMethod", "UnquantizedLinearMethod"
# What SGLang gives each prefix of a GPTQ draft (GPTQConfig.get_quant_method ->
# get_linear_quant_method -> get_dynamic_override): the naive shapes have no rule about mtp.*,
# mtp35-gptq-mtprule has -:.*mtp.*; mtp-gptq has -:.*mtp.* too, but its draft's layers are
# model.layers.0.* so the rule misses them.
STOCK_QWEN35_NAIVE = {p: GPTQ for p in PREFIXES[QWEN35_MTP]}
STOCK_QWEN35_MTPRULE = {p: BF16 for p in PREFIXES[QWEN35_MTP]}
QWEN3NEXT_METHODS = {
    "model.layers.0.self_attn.qkv_proj": GPTQ,
    "model.layers.0.mlp.shared_expert.gate_up_proj": GPTQ,
    "fc": GPTQ,
    "mtp.layers.0.self_attn.qkv_proj": BF16,
}


def expected(release: str, tree: str, shape: str) -> dict[str, Any]:
    """Literal expectations. "gptq": the CPU registry stand-in lets no method claim the config;
    on a GPU the same resolution ends at gptq_marlin (the reference's load line)."""
    # The flag as ServerArgs hands it to the draft's ModelConfig: `unquant` -> None, and the
    # explicit opt-out (0.5.19: is_draft_quantization_explicit; 0.5.17 has no such field:
    # its ModelConfig takes none until our port adds it).
    explicit = None if (release, tree) == ("0.5.17", "pristine") else True
    head = {"handed_quantization": None, "handed_explicit": explicit}
    if shape == "mtp-gptq":  # Qwen3-Next: the patch only fires for Qwen3_5ForCausalLMMTP
        return head | {
            "architecture": QWEN3NEXT_MTP,
            "quantization": "gptq",
            "linear_methods": QWEN3NEXT_METHODS,
        }
    if tree == "patched":
        return head | {"architecture": QWEN35_MTP, "quantization": None, "linear_methods": None}
    methods = STOCK_QWEN35_MTPRULE if shape == "mtp35-gptq-mtprule" else STOCK_QWEN35_NAIVE
    return head | {"architecture": QWEN35_MTP, "quantization": "gptq", "linear_methods": methods}


def fail_or_skip(msg: str) -> None:
    if in_ci():
        pytest.fail(msg + " (CI=true: contract tests must not be skipped)")
    pytest.skip(msg)


@pytest.fixture(scope="module")
def sources(upstream: dict[str, UpstreamSource]) -> dict[str, UpstreamSource]:
    try:
        other = ensure_release_source("sglang", OTHER_RELEASE, OTHER_PYTHON)
    except Exception as err:
        fail_or_skip(f"sglang {OTHER_RELEASE} sources unavailable: {err}")
    return {upstream["sglang"].package.version: upstream["sglang"], OTHER_RELEASE: other}


@pytest.fixture(scope="module")
def shape_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("tiny-gptq")
    make_tiny_models(out, gptq=GptqOptions())  # = specbench tiny-model --quantization gptq-4bit
    standin = out / SEED_STANDIN
    standin.mkdir()
    config = {"architectures": [QWEN35], "quantization_config": dict(GPTQ_4BIT)}
    (standin / "config.json").write_text(json.dumps(config), encoding="utf-8")
    dirs = {name: out / name for name in SHAPES}
    missing = [n for n, d in dirs.items() if not (d / "config.json").is_file()]
    assert not missing, f"specbench tiny-model wrote no {missing}"
    return dirs


@pytest.fixture(scope="module")
def results(
    sources: dict[str, UpstreamSource],
    shape_dirs: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[tuple[str, str], dict[str, Any]]:
    work = tmp_path_factory.mktemp("draft-shapes")
    request = work / "request.json"
    payload = {"argv": SEED_FLAGS, "shapes": {k: str(v) for k, v in shape_dirs.items()}}
    request.write_text(json.dumps(payload | {"prefixes": PREFIXES}), encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(CONTRACT), str(SUITE), str(REPO)])
    env.pop("PYTEST_ADDOPTS", None)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for release in RELEASES:
        assert PATCH_DIRS[release], f"no patch for {release}"
        for tree in TREES:
            patches = PATCH_DIRS[release] if tree == "patched" else []
            root = build_tree(sources[release].root, work / f"{release}-{tree}", patches)
            env["SPECBENCH_UPSTREAM_TREE"] = str(root)
            proc = subprocess.run(
                [sys.executable, str(PROBE), str(request)],
                env=env, cwd=work, capture_output=True, text=True, check=False, timeout=120,
            )  # fmt: skip
            assert proc.returncode == 0, f"{release} {tree}: {proc.stderr[-3000:]}"
            out[release, tree] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def test_the_releases_are_the_wheels_we_pinned(sources: dict[str, UpstreamSource]) -> None:
    assert sorted(sources) == sorted(RELEASES)
    for release, src in sources.items():
        assert src.wheel_sha256 == WHEEL_SHA256[release], (release, src.wheel)
        assert (src.package_dir / "srt" / "configs" / "model_config.py").is_file()


@pytest.mark.parametrize("release", RELEASES)
def test_the_draft_prefixes_come_from_the_release_source(
    sources: dict[str, UpstreamSource], release: str
) -> None:
    models = sources[release].package_dir / "srt" / "models"
    for name, line_0517, line_0519, text in SOURCE_LINES["models"]:
        line = line_0517 if release == "0.5.17" else line_0519
        lines = (models / name).read_text(encoding="utf-8").splitlines()
        assert text in lines[line - 1], f"{release} {name}:{line}: {lines[line - 1]!r}"


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("tree", TREES)
@pytest.mark.parametrize("release", RELEASES)
def test_draft_quantization_per_shape(
    results: dict[tuple[str, str], dict[str, Any]], release: str, tree: str, shape: str
) -> None:
    assert results[release, tree][shape] == expected(release, tree, shape)


def test_exactly_the_qwen35_shapes_change_with_the_patch(
    results: dict[tuple[str, str], dict[str, Any]],
) -> None:
    for release in RELEASES:
        stock, patched = results[release, "pristine"], results[release, "patched"]
        changed = sorted(
            s for s in SHAPES if stock[s]["quantization"] != patched[s]["quantization"]
        )
        assert changed == ["mtp35-gptq", "mtp35-gptq-mtprule", SEED_STANDIN], release
