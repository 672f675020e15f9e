"""The host venv is never built on a pre-release Python (issue 29): Ubuntu 22.04's python3.11 is
3.11.0~rc1. The bundle role reads the interpreter's sys.version (or, before it is installed, its
apt candidate) and refuses a pre-release before installing anything, saying what to do; a final
Python named with -e bundle_python (deadsnakes' python3.12) brings its own packages. Rendered
here from the role's vars with Ansible's templar."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROLE = Path(__file__).resolve().parents[2] / "ansible" / "roles" / "bundle"


def _render(expr: str, variables: dict[str, Any]) -> Any:
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(expr))


def _trusted(obj: Any) -> Any:
    """Role files' strings as Ansible's loader marks them: templates it may render."""
    from ansible.template import trust_as_template

    if isinstance(obj, str):
        return trust_as_template(obj)
    if isinstance(obj, list):
        return [_trusted(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _trusted(x) for k, x in obj.items()}
    return obj


def _vars(release: str, **extra: Any) -> dict[str, Any]:
    v = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    v.update(yaml.safe_load((ROLE / "vars" / f"{release}.yml").read_text()))
    v = _trusted(v)
    v.update(extra)  # -e wins over include_vars
    return dict(v)


def _refused(version_out: str, release: str = "Ubuntu-22", **extra: Any) -> bool:
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    (task,) = [t for t in tasks if t["name"] == "Refuse a pre-release Python for the venv."]
    v = _vars(release, **extra, bundle_python_version={"stdout": version_out})
    return all(bool(_render("{{ (" + c + ") | bool }}", v)) for c in task["when"])


@pytest.mark.parametrize(
    "out",
    [
        "3.11.0~rc1-1~22.04",  # jammy's candidate before it is installed
        "3.11.0rc1 (main, Aug 12 2022, 18:52:31) [GCC 11.2.0]",  # the installed interpreter
        "3.13.0b2 (main, ...)",
    ],
)
def test_a_pre_release_python_is_refused(out: str) -> None:
    assert _refused(out)


@pytest.mark.parametrize(
    "out",
    [
        "3.12.11-1+jammy1",  # deadsnakes' candidate
        "3.12.3 (main, Feb  4 2025, 14:48:35) [GCC 13.3.0]",  # noble's python3
        "3.11.2 (main, Mar 13 2023, 12:18:29) [GCC 12.2.0]",  # bookworm's
        "",  # nothing known: the apt install then says what is missing
    ],
)
def test_a_final_python_passes(out: str) -> None:
    assert not _refused(out)


def test_jammy_packages_follow_the_python_named() -> None:
    v = _vars("Ubuntu-22")
    assert v["bundle_python"] == "/usr/bin/python3.11"
    assert _render("{{ bundle_os_packages }}", v) == ["python3.11", "python3.11-venv"]
    v = _vars("Ubuntu-22", bundle_python="/usr/bin/python3.12")
    assert _render("{{ bundle_os_packages }}", v) == ["python3.12", "python3.12-venv"]


def test_the_refusal_says_what_to_do() -> None:
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    (task,) = [t for t in tasks if t["name"] == "Refuse a pre-release Python for the venv."]
    v = _vars("Ubuntu-22", bundle_python_version={"stdout": "3.11.0~rc1-1~22.04"})
    msg = " ".join(str(_render(task["ansible.builtin.fail"]["msg"], v)).split())
    assert "Python 3.11.0~rc1-1~22.04, a pre-release" in msg
    assert "-e bundle_python=/usr/bin/python3.12" in msg and "deadsnakes" in msg
    # and it comes before anything is installed
    names = [t["name"] for t in tasks]
    install = names.index("Ensure the OS packages for the virtual environment are installed.")
    assert names.index("Refuse a pre-release Python for the venv.") < install
