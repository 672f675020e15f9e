"""Ansible and the experiment file agree: one source of truth per pin.

Experiment-level pins (images, digests, model revisions) are read by the roles from the
experiment file, never copied; host-level pins live in ansible/group_vars/all.yml and must suit
the experiment's images (driver branch vs. the images' CUDA). The roles' own Jinja expressions
are rendered here with Ansible's templar against the real experiment file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ANSIBLE = REPO / "ansible"
EXPERIMENT = REPO / "bench" / "experiments" / "qwen38-27b-gptq-2x3090.yaml"
UNRESOLVED = "unresolved"

# Minimum Linux driver for CUDA 13.0 GA (CUDA release notes, via provisioning-anchors.md 1.11).
CUDA13_MIN_DRIVER = (580, 65, 6)
# First upstream releases whose default images are CUDA 13 (pins.md 3; anchors 1.11).
CUDA13_SINCE = {"vllm": (0, 20, 0), "sglang": (0, 5, 11)}


def _ver(s: str) -> tuple[int, ...]:
    return tuple(int(p) for p in s.split(".") if p.isdigit())


def _group_vars() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ANSIBLE / "group_vars" / "all.yml").read_text())
    return data


def _render(expr: str, variables: dict[str, Any]) -> Any:
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.template(trust_as_template(expr))


def _trusted(obj: Any) -> Any:
    """Mark role strings as templates, as Ansible does for files it loads from a role."""
    from ansible.template import trust_as_template

    if isinstance(obj, str):
        return trust_as_template(obj)
    if isinstance(obj, dict):
        return {k: _trusted(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_trusted(v) for v in obj]
    return obj


def _role_file(role: str, kind: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(
        (ANSIBLE / "roles" / role / kind / "main.yml").read_text()
    )
    return data


@pytest.fixture(scope="module")
def experiment_raw() -> dict[str, Any]:
    """The experiment as Ansible's from_yaml sees it."""
    data: dict[str, Any] = yaml.safe_load(EXPERIMENT.read_text())
    return data


DIGEST = {c: "sha256:" + c * 64 for c in "abcd"}
COMMIT = "f" * 40


def _pins(tmp: Path, lock: dict[str, Any] | None = None, host: str = "gpu1") -> dict[str, Any]:
    """`pins` as the pins role sets it: `specbench pins show --json` of the shipped experiment
    (its document on stdin, as the role passes it) with ``lock`` as its pins lock."""
    import subprocess
    import sys

    path = tmp / "x.lock.yaml"
    if lock is not None:
        path.write_text(yaml.safe_dump({"experiment": "qwen38-27b-gptq-2x3090", **lock}))
    r = subprocess.run(
        [sys.executable, "-m", "bench", "pins", "show", str(EXPERIMENT), "--host", host,
         "--lock", str(path), "--lock-may-be-new", "--document", "-", "--json"],
        input=json.dumps(yaml.safe_load(EXPERIMENT.read_text())),
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    out: dict[str, Any] = json.loads(r.stdout)
    return out


FIRST_RUN_LOCK = {
    "images": {
        "vllm": {"image": "vllm/vllm-openai:v0.33.0", "digest": DIGEST["a"]},
        "sglang": {"image": "specbench/sglang:0.5.19-66da4a94e4dc", "base_digest": DIGEST["b"],
                   "image_ids": {"gpu1": DIGEST["c"]}},
    },
    "models": {"target": {"hf_id": "btbtyler09/Qwen3.8-27B-GPTQ-4bit", "revision": COMMIT}},
}  # fmt: skip


def test_group_vars_name_the_experiment_file() -> None:
    assert (REPO / _group_vars()["specbench_experiment"]).resolve() == EXPERIMENT.resolve()


def test_no_experiment_pin_is_copied_into_ansible(experiment_raw: dict[str, Any]) -> None:
    pins: set[str] = set()
    for img in experiment_raw["images"].values():
        pins |= {img["image"], img["digest"]}
        build = img.get("build") or {}
        pins |= {build.get("base_image", ""), build.get("base_digest", "")}
        pins.add(build.get("patch_sha256", ""))
    for model in experiment_raw["models"].values():
        pins |= {model["hf_id"], model["revision"]}
    pins -= {"", UNRESOLVED}
    assert pins, "the experiment must pin something"
    texts = {p: p.read_text() for p in ANSIBLE.rglob("*") if p.is_file()}
    copies = [(str(p.relative_to(REPO)), pin) for p, t in texts.items() for pin in pins if pin in t]
    assert copies == []


def test_images_role_reads_the_experiment_images(tmp_path: Path) -> None:
    """The images role reads the images as pinned for the host (roles/pins): the experiment's
    own values, then the pins lock's; it pulls by digest what is pinned, by tag what is not."""
    from bench.engines import load_experiment

    exp = load_experiment(EXPERIMENT)
    role_vars = _trusted(_role_file("images", "vars"))
    env = {**role_vars, "pins_for_host": _pins(tmp_path)}
    pulled = _render(role_vars["images_pulled"], env)
    built = _render(role_vars["images_built"], env)
    assert {i["key"] for i in pulled} == {k for k, v in exp.images.items() if v.build is None}
    assert {i["key"] for i in built} == {k for k, v in exp.images.items() if v.build is not None}
    for item in pulled:
        img = exp.images[item["key"]]
        assert (item["value"]["image"], item["value"]["digest"]) == (img.image, img.digest)
    for item in built:
        build = exp.images[item["key"]].build
        assert build is not None
        assert item["value"]["build"]["dockerfile"] == build.dockerfile
        assert (REPO / build.dockerfile).is_file(), f"{build.dockerfile} missing"
    # a first run: every reference by tag
    refs = _render(role_vars["images_pull_refs"], env)
    assert refs == {"vllm": "vllm/vllm-openai:v0.33.0", "sglang": "lmsysorg/sglang:v0.5.19",
                    "sglang-stock": "lmsysorg/sglang:v0.5.19"}  # fmt: skip
    # a later run: what the lock holds, by digest
    env["pins_for_host"] = _pins(tmp_path, FIRST_RUN_LOCK)
    refs = _render(role_vars["images_pull_refs"], env)
    assert refs["vllm"] == f"vllm/vllm-openai@{DIGEST['a']}"
    assert refs["sglang"] == f"lmsysorg/sglang@{DIGEST['b']}"
    assert refs["sglang-stock"] == "lmsysorg/sglang:v0.5.19"


def test_images_role_records_the_registry_digest_of_each_repository(tmp_path: Path) -> None:
    """What `docker image info` says after a pull by tag becomes `specbench pins record` options:
    the RepoDigests entry of the image's own repository (a base shared by two keys is recorded
    for each: the local build's base and the stock image)."""
    role_vars = _trusted(_role_file("images", "vars"))
    pins = _pins(tmp_path)

    def info(key: str, digests: list[str]) -> dict[str, Any]:
        return {"item": {"key": key, "value": pins["images"][key]},
                "images": [{"RepoDigests": digests}]}  # fmt: skip

    env = {
        **role_vars,
        "pins_for_host": pins,
        "images_info": {"results": [
            info("vllm", [f"docker.io/other/x@{DIGEST['d']}", f"vllm/vllm-openai@{DIGEST['a']}"]),
            info("sglang", [f"lmsysorg/sglang@{DIGEST['b']}"]),
            info("sglang-stock", [f"lmsysorg/sglang@{DIGEST['b']}"]),
            {"item": {"key": "none", "value": {}}, "images": []},
        ]},
    }  # fmt: skip
    assert _render(role_vars["images_found_digests"], env) == [
        f"--image-digest=vllm={DIGEST['a']}",
        f"--base-digest=sglang={DIGEST['b']}",
        f"--image-digest=sglang-stock={DIGEST['b']}",
    ]


def test_models_role_reads_the_experiment_models(tmp_path: Path) -> None:
    from bench.engines import load_experiment

    exp = load_experiment(EXPERIMENT)
    models_pinned = _role_file("models", "vars")["models_pinned"]
    pinned = _render(models_pinned, {"pins_for_host": _pins(tmp_path)})
    got = {(m["value"]["hf_id"], m["value"]["revision"], m["value"]["path"]) for m in pinned}
    assert got == {(m.hf_id, m.revision, m.path) for m in exp.models.values()}
    pinned = _render(models_pinned, {"pins_for_host": _pins(tmp_path, FIRST_RUN_LOCK)})
    revs = {m["key"]: m["value"]["revision"] for m in pinned}
    assert revs == {"target": COMMIT, "dflash-draft": UNRESOLVED}


def test_role_defaults_agree_with_group_vars_pins() -> None:
    gv = _group_vars()
    pins = {
        "nvidia_driver": [
            "nvidia_driver_branch",
            "nvidia_driver_version",
            "nvidia_driver_min_version",
        ],
        "docker": ["docker_version", "docker_containerd_version", "docker_buildx_version"],
        "nvidia_container_toolkit": ["nvidia_container_toolkit_version"],
    }
    for role, names in pins.items():
        defaults = _role_file(role, "defaults")
        for name in names:
            assert defaults[name] == gv[name], f"roles/{role}/defaults {name} != group_vars"


def test_driver_pin_supports_the_images_cuda() -> None:
    from bench.engines import load_experiment

    exp = load_experiment(EXPERIMENT)
    gv = _group_vars()
    # the floor of any build installed (the branch's newest, or an exact build set)
    driver = _ver(gv["nvidia_driver_min_version"])
    assert gv["nvidia_driver_min_version"].startswith(gv["nvidia_driver_branch"] + ".")
    if gv["nvidia_driver_version"]:
        assert _ver(gv["nvidia_driver_version"]) >= driver
    cuda13 = [k for k, img in exp.images.items() if _ver(img.version) >= CUDA13_SINCE[img.engine]]
    assert cuda13, "expected CUDA 13 images for the pinned vLLM/SGLang releases"
    # GeForce cards get no CUDA forward compatibility: the driver itself must be new enough.
    assert driver >= CUDA13_MIN_DRIVER, f"driver {driver} too old for the CUDA 13 images {cuda13}"


def test_toolkit_pin_is_a_debian_version() -> None:
    v = _group_vars()["nvidia_container_toolkit_version"]
    upstream, _, revision = v.partition("-")
    assert len(_ver(upstream)) == 3 and revision.isdigit(), v


def test_requirements_match_the_bundled_collections() -> None:
    import ansible_collections

    reqs = yaml.safe_load((ANSIBLE / "requirements.yml").read_text())["collections"]
    root = Path(next(iter(ansible_collections.__path__)))
    for req in reqs:
        ns, name = req["name"].split(".")
        manifest = json.loads((root / ns / name / "MANIFEST.json").read_text())
        assert manifest["collection_info"]["version"] == req["version"], req["name"]


def test_benchmark_argv_uses_only_options_matrix_has() -> None:
    import typer

    from bench.cli import app

    matrix = typer.main.get_command(app).commands["matrix"]  # type: ignore[attr-defined]
    known = {o for p in matrix.params for o in [*p.opts, *p.secondary_opts] if o.startswith("--")}
    defaults = _role_file("benchmark", "defaults")
    env = {
        **_trusted(defaults),
        **_trusted(_role_file("benchmark", "vars")),
        "benchmark_backend": "emulated",
        "benchmark_home": "/h",
        "benchmark_run_id": "r",
        "benchmark_only": ["vllm-dflash"],
        "benchmark_iterations": 1,
        "benchmark_warmup": 0,
        "benchmark_emulator_image": "specbench/emulator:x",
        "specbench_experiment": "e.yaml",
        "inventory_hostname": "gpu1",
        "pins_lock_file": "/controller/repo/e.lock.yaml",
        "benchmark_long_matrix_ok": True,
    }
    argv = _render(env["benchmark_argv"], env)
    assert argv[:3] == ["/h/venv/bin/specbench", "matrix", "/h/src/e.yaml"]
    used = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
    want = {"--emulate", "--emulator-image", "--time-scale", "--only", "--pins-host", "--yes"}
    assert want <= used
    # the host's own entry in the pins lock, copied into the run's folder on the host
    at = argv.index("--pins-lock")
    assert (
        argv[at + 1] == "/h/reports/r/e.lock.yaml" and argv[argv.index("--pins-host") + 1] == "gpu1"
    )
    assert used <= known, f"options matrix does not have: {used - known}"


# ---- fresh-host order, driver paths, resolvable pins (issue #12) -------------------------------


def _site_roles() -> list[str]:
    """The roles of the fleet play, in order: import_role tasks inside its one block."""
    play = yaml.safe_load((ANSIBLE / "site.yml").read_text())[0]
    (stages,) = [t for t in play["tasks"] if "block" in t]
    assert stages["rescue"], "a failing host must be recorded, not just dropped"
    return [
        t["ansible.builtin.import_role"]["name"]
        for t in stages["block"]
        if "ansible.builtin.import_role" in t
    ]


def test_every_repository_task_runs_after_the_prerequisites() -> None:
    """deb822_repository needs python3-debian on the host and does not install it."""
    uses = sorted(
        str(p.relative_to(ANSIBLE))
        for p in (ANSIBLE / "roles").rglob("*.yml")
        if "ansible.builtin.deb822_repository:" in p.read_text()
    )
    # only the roles' tasks/repository.yml and the prerequisites role itself
    assert uses == [
        "roles/docker/tasks/repository.yml",
        "roles/nvidia_container_toolkit/tasks/repository.yml",
        "roles/nvidia_driver/tasks/repository.yml",
        "roles/prerequisites/tasks/main.yml",
    ]
    tasks = yaml.safe_load((ANSIBLE / "roles/prerequisites/tasks/main.yml").read_text())
    # python3-apt first (probe + apt-get), then the packages, all before any repository
    first_repo = next(i for i, t in enumerate(tasks) if "ansible.builtin.deb822_repository" in t)
    installs = [i for i, t in enumerate(tasks) if "ansible.builtin.apt" in t]
    assert installs and installs[0] < first_repo
    assert "python3-debian" in _role_file("prerequisites", "defaults")["prerequisites_packages"]
    # repository.yml files are included from the prerequisites role, nowhere else
    includers = sorted(
        str(p.relative_to(ANSIBLE))
        for p in (ANSIBLE / "roles").rglob("*.yml")
        if "tasks_from: repository.yml" in p.read_text()
    )
    assert includers == ["roles/prerequisites/tasks/main.yml"]
    roles = _site_roles()
    assert roles.index("preflight") < roles.index("prerequisites")
    for role in ("nvidia_driver", "docker", "nvidia_container_toolkit"):
        assert roles.index("prerequisites") < roles.index(role)


def _driver_packages(
    path: str, source: str = "cuda_repo", version: str | None = None
) -> dict[str, str]:
    gv = _group_vars()
    os_vars = yaml.safe_load((ANSIBLE / "roles/nvidia_driver/vars/Ubuntu.yml").read_text())
    env = {
        **_trusted(_role_file("nvidia_driver", "defaults")),
        **_trusted(os_vars),
        **_trusted(_role_file("nvidia_driver", "vars")),
        **{k: gv[k] for k in ("nvidia_driver_branch", "nvidia_driver_version")},
        **({} if version is None else {"nvidia_driver_version": version}),
        "nvidia_driver_source": source,
        "preflight_driver_path": path,
        "preflight_kernel_running": "6.8.0-85-generic",
        "ansible_facts": {"distribution_version": "24.04", "kernel": "x"},
    }
    rendered = _render(env["nvidia_driver_packages"], env)
    return {p["package"]: p["version"] for p in rendered}


def test_the_driver_pin_is_the_branch_not_one_build() -> None:
    """Issue #21: Ubuntu's archive serves only the newest build of a branch, so the shipped pin is
    the branch (580) and flavour (open); an exact build is the user's choice."""
    gv = _group_vars()
    assert gv["nvidia_driver_branch"] == "580" and gv["nvidia_driver_version"] == ""
    assert set(_driver_packages("prebuilt").values()) == {"*"}
    assert set(_driver_packages("dkms").values()) == {"*"}


def test_prebuilt_driver_path_uses_canonicals_signed_modules_for_the_running_kernel() -> None:
    ver = "580.95.05"
    pkgs = _driver_packages("prebuilt", version=ver)
    # ubuntu-drivers' ABI package name: linux-modules-nvidia-<flavour>-<uname -r>
    assert pkgs == {
        "linux-modules-nvidia-580-server-open-6.8.0-85-generic": "*",
        "nvidia-headless-no-dkms-580-server-open": f"{ver}-*",
        "nvidia-utils-580-server": f"{ver}-*",
    }
    assert not any("dkms" in p and "no-dkms" not in p for p in pkgs)


def test_dkms_driver_path_pins_the_driver_version() -> None:
    ver = "580.95.05"
    assert _driver_packages("dkms", version=ver) == {
        "nvidia-headless-580-open": f"{ver}-*",
        "nvidia-utils-580": f"{ver}-*",
    }
    assert _driver_packages("dkms", "ubuntu", version=ver) == {
        "nvidia-headless-580-server-open": f"{ver}-*",
        "nvidia-utils-580-server": f"{ver}-*",
    }


def test_pin_check_matches_madison_versions() -> None:
    """The madison check accepts a listed version matching the pattern, and only that."""
    expr = _role_file("prerequisites", "vars")["prerequisites_pin_problems"]

    def problems(pattern: str, lines: list[str]) -> Any:
        res = {"item": {"package": "docker-ce", "version": pattern}, "stdout_lines": lines}
        return _render(expr, {"prerequisites_madison": {"results": [res]}})

    src = "https://download.docker.com/linux/ubuntu noble/stable amd64 Packages"
    line = f" docker-ce | 5:28.5.1-1~ubuntu.24.04~noble | {src}"
    assert problems("5:28.5.1-*", [line]) == []
    assert problems("5:28.5.1-1~ubuntu.24.04~noble", [line]) == []
    assert problems("5:28.5.10-*", [line]) == [
        "docker-ce=5:28.5.10-* (listed: 5:28.5.1-1~ubuntu.24.04~noble)"
    ]
    assert problems("5:28.5.1-*", []) == [
        "docker-ce=5:28.5.1-* (listed: none; apt does not know the package)"
    ]


def test_fetch_model_resolves_a_branch_to_a_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    import huggingface_hub

    spec = importlib.util.spec_from_file_location(
        "fetch_model", ANSIBLE / "roles/models/files/fetch_model.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    asked: list[tuple[str, str]] = []

    class FakeApi:
        def model_info(self, repo_id: str, revision: str) -> Any:
            asked.append((repo_id, revision))
            sha = "0123456789abcdef0123456789abcdef01234567" if repo_id == "ok/m" else "main"
            return type("Info", (), {"sha": sha})()

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    assert mod.resolve("ok/m", "main") == "0123456789abcdef0123456789abcdef01234567"
    assert asked == [("ok/m", "main")]
    with pytest.raises(SystemExit, match="not a commit"):
        mod.resolve("bad/m", "main")


def test_sglang_dflash_runs_without_the_copied_admission_cap(
    experiment_raw: dict[str, Any],
) -> None:
    cfgs = {c["name"]: c for c in experiment_raw["configurations"]}
    cfg = cfgs["sglang-dflash"]
    assert "--max-running-requests" not in cfg["args"]
    dev = [d for d in cfg["deviations"] if d["flag"] == "--max-running-requests"]
    assert len(dev) == 1 and dev[0]["seed"] == "4" and dev[0]["used"] is None
    assert "five live requests" in dev[0]["reason"]
    # the seed's MTP command keeps its cap verbatim
    assert "--max-running-requests" in cfgs["sglang-mtp"]["args"]


def test_preflight_names_every_unresolved_pin_of_the_shipped_experiment(tmp_path: Path) -> None:
    """Issue #21/#29: preflight names, before anything changes, every pin this first run will
    resolve: what `specbench pins show` leaves unpinned for the host."""
    experiment = yaml.safe_load(EXPERIMENT.read_text())
    want = []
    for img in experiment["images"].values():
        if img.get("build"):
            if img["digest"] == UNRESOLVED:
                want.append(f"{img['image']} (image ID)")
            if img["build"]["base_digest"] == UNRESOLVED:
                want.append(f"{img['build']['base_image']} (base digest)")
        elif img["digest"] == UNRESOLVED:
            want.append(f"{img['image']} (digest)")
    want += [f"{m['hf_id']} (revision)" for m in experiment["models"].values()
             if m["revision"] == UNRESOLVED]  # fmt: skip
    assert want, "the shipped experiment has no unresolved pins any more"
    assert _pins(tmp_path)["unpinned"] == want
    # after the first run, a second host still resolves its own build of the local image only
    assert _pins(tmp_path, FIRST_RUN_LOCK, host="gpu2")["unpinned"] == [
        "specbench/sglang:0.5.19-66da4a94e4dc (image ID)",
        "lmsysorg/sglang:v0.5.19 (digest)",
        "z-lab/Qwen3.8-27B-DFlash2 (revision)",
    ]
    tasks = (ANSIBLE / "roles" / "preflight" / "tasks" / "main.yml").read_text()
    assert "pins_for_host.unpinned" in tasks and "allow_unresolved" not in tasks


def test_verify_checks_what_a_first_run_resolved_not_the_literal_unresolved(
    tmp_path: Path,
) -> None:
    """Issue #21/#29: after a first run, testinfra checks the images and models at what the run
    resolved and recorded in the pins lock, never the literal 'unresolved'."""
    expect = _trusted(_role_file("verify", "vars"))["verify_expectations"]
    env = {"pins_for_host": _pins(tmp_path, FIRST_RUN_LOCK)}
    images = {i["image"]: i["digest"] for i in _render(expect["images"], env)}
    assert images["vllm/vllm-openai:v0.33.0"] == DIGEST["a"]
    assert images["lmsysorg/sglang:v0.5.19"] == UNRESOLVED  # not in this lock
    assert "specbench/sglang:0.5.19-66da4a94e4dc" not in images  # a build: checked by ID
    models = {m["hf_id"]: m["revision"] for m in _render(expect["models"], env)}
    assert models["btbtyler09/Qwen3.8-27B-GPTQ-4bit"] == COMMIT
    assert models["z-lab/Qwen3.8-27B-DFlash2"] == UNRESOLVED
