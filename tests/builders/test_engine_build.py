"""The real payload: engine/ from this checkout, committed into a scratch repository, built twice
(wheel, sdist and the AOT kernels for two GPU generations)."""
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from spdx_tools.spdx.parser.parse_anything import parse_file
from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document

from builders.compare import compare
from builders.recipe import build_twice
from builders.sbom import write_sboms
from builders.snapshot import export_source, freeze
from hosts.local import LocalHost
from tests.builders.conftest import git

ENGINE = Path(__file__).resolve().parents[2] / "engine"


@pytest.mark.slow
def test_the_engine_builds_reproducibly(tmp_path):
    repo = tmp_path / "assay-src"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    # A copy, not the live checkout: other work may be mid-edit there, and this repository's
    # history is the lead's to write.
    shutil.copytree(ENGINE, repo / "engine", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # Two of the registry's archs, Ampere and Hopper (whose code generation differs most): each arch
    # costs over a minute a build on the test machine, and the mechanism does not change with the count.
    pyproject = repo / "engine" / "pyproject.toml"
    table = '[tool.assay.kernels]\nmodule = "engine.kernels.aot_build"\n'
    assert table in pyproject.read_text()
    pyproject.write_text(pyproject.read_text().replace(table, table + "archs = [80, 90]\n"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "engine snapshot")

    candidate = freeze(repo)
    assert candidate["package"]["name"] == "assay-engine"
    source = export_source(repo, candidate, tmp_path / "export")
    host = LocalHost()
    a, b = build_twice(host, host, candidate, source, str(tmp_path / "work"), timeout=600)

    names = [p.name for p in a.artifacts]
    version = candidate["package"]["version"]
    assert names == [f"assay_engine-{version}-kernels.tar", f"assay_engine-{version}-py3-none-any.whl",
                     f"assay_engine-{version}.tar.gz"]
    with tarfile.open(a.artifacts[0]) as tar:
        index = json.load(tar.extractfile("index.json"))
    assert index["archs"] == ["sm_80", "sm_90"]
    assert {e["arch"] for e in index["entries"]} == {"sm_80", "sm_90"}
    rec = compare(a.artifacts[0].parent, b.artifacts[0].parent, candidate)
    assert rec["verdict"] == "reproducible", rec["files"]
    assert [f["a_sha256"] for f in rec["files"]] == [f["b_sha256"] for f in rec["files"]]

    wheel = next(p for p in a.artifacts if p.suffix == ".whl")
    sboms = write_sboms(wheel, candidate, tmp_path / "sbom")
    assert validate_full_spdx_document(parse_file(str(sboms["spdx-2.3"]))) == []
    assert JsonStrictValidator(SchemaVersion.V1_5).validate_str(sboms["cyclonedx-1.5"].read_text()) is None
    assert b"torch" in sboms["spdx-2.3"].read_bytes()
