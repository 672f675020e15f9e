"""CITATION.cff of a published bundle (issue 48): how to cite this run, in the Citation File
Format 1.2.0 (citation-file-format.github.io: ``cff-version``, ``message``, ``title`` and
``authors`` are required; ``type: dataset`` for data; ``commit`` names the code's version).

Only what the artifacts say: the report's title, the run id, the specbench commit from
provenance, the model, and the day the bundle was made. The authors are the run's operators,
whom the artifacts do not name: the file says so, for them to fill in before they publish."""

from __future__ import annotations

from typing import Any, Final

import yaml

from bench import __version__
from bench.core import utc_now
from bench.report._model import RunSet

CITATION_FILE: Final = "CITATION.cff"
CFF_VERSION: Final = "1.2.0"


def citation(rs: RunSet) -> dict[str, Any]:
    """The CITATION.cff document of a published run."""
    run = ", ".join(rs.run_ids) or "unknown"
    doc: dict[str, Any] = {
        "cff-version": CFF_VERSION,
        "message": "If you use these benchmark results, please cite them as below.",
        "title": f"{rs.title} (specbench run {run})",
        "type": "dataset",
        "authors": [{"name": "The operators of this run (fill in before publishing)"}],
        "version": run,
        "date-released": utc_now()[:10],
        "abstract": (
            f"Speculative-decoding benchmark of {rs.hf_id or 'a model'} "
            f"({rs.quantization or 'unknown quantization'}), measured by specbench "
            f"{__version__}; REPORT.md and the raw artifacts are in this bundle, each listed "
            "with its sha256 in SHA256SUMS."
        ),
        "keywords": ["speculative decoding", "LLM serving", "benchmark", "vLLM", "SGLang"],
        "references": [
            {
                "type": "software",
                "title": "specbench",
                "version": __version__,
                "authors": [{"name": "The specbench authors"}],
                **({"commit": rs.source_sha} if rs.source_sha else {}),
            }
        ],
    }
    if rs.source_sha:
        doc["commit"] = rs.source_sha
    return doc


def citation_text(rs: RunSet) -> str:
    return yaml.safe_dump(citation(rs), sort_keys=False, allow_unicode=True)
