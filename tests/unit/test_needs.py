"""tests/needs.py: a tool the project installs, missing, fails the test in CI and skips it
elsewhere."""

from __future__ import annotations

import pytest
from needs import missing_tool

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("ci", ["true", "1", "yes", "TRUE"])
def test_a_missing_tool_fails_in_ci(monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match=r"make is missing \(CI=true"):
        missing_tool("make", "apt-get install make")


@pytest.mark.parametrize("ci", [None, "", "false", "0"])
def test_a_missing_tool_skips_elsewhere(monkeypatch: pytest.MonkeyPatch, ci: str | None) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match=r"apt-get install make"):
        missing_tool("make", "apt-get install make")
