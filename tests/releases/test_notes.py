"""Release notes: every link resolves to exactly the value printed, no number stands unlinked,
charts appear where the receipts have their data, and the bytes are deterministic."""
from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
from html.parser import HTMLParser
from urllib.parse import unquote

import pytest
from typer.testing import CliRunner

from releases import exit_codes
from releases import manifest as mf
from releases.errors import RecordError
from releases.ledger import default_ledger, new_ledger
from releases.ledger_edits import add_item
from releases.notes import check_notes, render_notes, write_notes
from releases.notes.cli import app as notes_app
from releases.release_dir import ReleaseDir
from releases.verify import verify_release
from tests.releases.fixtures import T1, build_release
from tests.releases.notes_fixtures import AWKWARD_TITLE, build_rich_release

MD_LINK = re.compile(r"\[((?:\\.|[^\\\]])*)\]\(([^)\s]*)\)")
MD_UNESCAPE = re.compile(r"\\(.)|<br>")


@pytest.fixture(scope="module")
def rich(tmp_path_factory):
    return build_rich_release(tmp_path_factory.mktemp("notes") / "1.2.3")


def printed(value) -> str:
    """The documented print form of a figure (docs/INTERFACES.md, Release notes)."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def resolve_link(root, href: str):
    """Open the file the link names (a receipt: its decoded DSSE payload) and follow the pointer."""
    path, _, fragment = href.partition("#")
    doc = json.loads((root / unquote(path)).read_bytes())
    if {"payloadType", "payload", "signatures"} <= set(doc):
        doc = json.loads(base64.b64decode(doc["payload"]))
    pointer = unquote(fragment)
    assert pointer.startswith("/"), href
    for token in pointer[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        doc = doc[int(token)] if isinstance(doc, list) else doc[token]
    return doc


def receipt(rel, kind: str, label: str | None = None) -> str:
    """The path the manifest binds a receipt at (the layout is the release directory's to decide)."""
    return next(r["path"] for r in rel.manifest["receipts"] if (r["kind"], r["label"]) == (kind, label))


def md_links(text: str) -> list[tuple[str, str]]:
    unescape = lambda s: MD_UNESCAPE.sub(lambda m: m.group(1) if m.group(1) is not None else "\n", s)  # noqa: E731
    return [(unescape(m.group(1)), m.group(2)) for m in MD_LINK.finditer(text)]


class _Html(HTMLParser):
    """Links (href, text) and the text outside links, style, title and code."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[list[str]] = []
        self.loose: list[str] = []
        self.svgs = 0
        self._stack: list[str] = []

    def handle_starttag(self, tag, attrs):
        self._stack.append(tag)
        if tag == "a":
            self.links.append([dict(attrs)["href"], ""])
        self.svgs += tag == "svg"

    def handle_endtag(self, tag):
        while self._stack and self._stack.pop() != tag:
            pass

    def handle_data(self, data):
        if "a" in self._stack:
            self.links[-1][1] += data
        elif not {"style", "title", "code"} & set(self._stack):
            self.loose.append(data)


def test_every_markdown_link_resolves_to_the_value_printed(rich):
    text = render_notes(rich.root, "md")
    links = md_links(text)
    assert len(links) > 150
    for shown, href in links:
        assert shown == printed(resolve_link(rich.root, href)), href
    hrefs = {h for _, h in links}
    # Figures from every kind of record, with the pointer forms the interface documents.
    lane, abba = receipt(rich, "lane", "cpu-smoke"), receipt(rich, "verdict-abba", "cpu")
    repro = receipt(rich, "reproducibility")
    for expected in (f"{lane}#/predicate/phases/1/facts/seconds",
                     f"{lane}#/predicate/phases/1/facts/p99%20~1%20ms~0x",
                     f"{abba}#/predicate/parameters/floor", f"{abba}#/predicate/cases/2/ratio",
                     f"{receipt(rich, 'verdict-noninferiority', 'cpu')}#/predicate/metrics/0/bound",
                     f"{receipt(rich, 'verdict-latency', 'cpu')}#/predicate/positions/1/margin_s",
                     f"{receipt(rich, 'verdict-determinism', 'cpu')}#/predicate/first_difference/prompt",
                     f"{receipt(rich, 'phase', 'cpu-smoke.generate')}#/predicate/facts/decode_tok_s/1",
                     f"{receipt(rich, 'build', 'a')}#/predicate/buildDefinition/internalParameters/varied/umask",
                     f"{repro}#/predicate/files/0/identical", f"{repro}#/predicate/files/1/differences/0/detail",
                     f"{repro}#/predicate/files/1/differences/1/member", f"{repro}#/predicate/waived/0",
                     "manifest.json#/artifacts/0/size", "manifest.json#/waivers/0/sha256",
                     "waivers/lane-latency-p99.json#/measured", "ledger.json#/items/1/disposition/issue",
                     "ledger.json#/closure/statement", f"{rich.manifest['approval']['path']}#/predicate/approver"):
        assert expected in hrefs, expected
    assert (AWKWARD_TITLE, "ledger.json#/items/1/title") in links


def test_no_number_in_the_markdown_stands_outside_a_link(rich):
    text = render_notes(rich.root, "md")
    rest = MD_LINK.sub("", text)
    rest = re.sub(r"``.*?``|`[^`]*`", "", rest)  # keys and identifiers from the records, not figures
    assert not re.findall(r".{0,30}\d.{0,30}", rest)


def test_every_html_link_resolves_and_charts_are_drawn(rich):
    text = render_notes(rich.root, "html")
    page = _Html()
    page.feed(text)
    assert len(page.links) > 150
    for href, shown in page.links:
        assert shown == printed(resolve_link(rich.root, href)), href
    assert not [t for t in page.loose if re.search(r"\d", t)]
    # Speed ratios, quality bounds, and one timeline per lane, acceptance window and phase receipt.
    assert page.svgs == 6
    assert "Speed ratio per case" in text and "Quality screen: one-sided bound" in text
    assert text.count("<figcaption>Phase timeline</figcaption>") == 4
    # The floor and every charted ratio are labelled with linked figures inside the SVG.
    svgs = re.findall(r"<svg.*?</svg>", text)
    svg = next(s for s in svgs if "/predicate/parameters/floor" in s)
    assert f'href="{receipt(rich, "verdict-abba", "cpu")}#/predicate/parameters/floor"' in svg
    assert svg.count("/predicate/cases/") == 9  # id, ratio and status of each of three cases


def test_charts_only_where_the_receipts_have_the_data(published_release):
    text = render_notes(published_release.root, "html")
    assert "Speed ratio per case" not in text and "Quality screen" not in text
    assert text.count("<svg") == 2  # the lane's phases and the acceptance window's routes
    assert "<svg" not in render_notes(published_release.root, "md")


def test_output_is_byte_deterministic_and_names_no_machine_path(rich, tmp_path):
    copy = tmp_path / "elsewhere" / "1.2.3"
    shutil.copytree(rich.root, copy)
    for fmt in ("md", "html"):
        first = render_notes(rich.root, fmt)
        assert first == render_notes(rich.root, fmt) == render_notes(copy, fmt)
        assert str(rich.root.parent) not in first and str(tmp_path) not in first


def test_notes_render_against_a_manifest_about_to_be_written(rich):
    # The pipeline renders the notes just before it writes the published manifest.json.
    for fmt in ("md", "html"):
        assert render_notes(rich.root, fmt, manifest=rich.manifest) == render_notes(rich.root, fmt)
    with pytest.raises(RecordError, match="manifest record manifest.json at /: 'version' is a required property"):
        render_notes(rich.root, "md", manifest={k: v for k, v in rich.manifest.items() if k != "version"})


def test_a_ready_release_says_it_is_not_approved_yet(ready_release):
    text = render_notes(ready_release.root, "md")
    assert "Not approved yet: the release is in state [ready](manifest.json#/state)." in text


def test_an_altered_receipt_is_refused_by_name(rich, tmp_path):
    copy = tmp_path / "1.2.3"
    shutil.copytree(rich.root, copy)
    rel_path = receipt(rich, "verdict-abba", "cpu")
    path = copy / rel_path
    path.write_bytes(path.read_bytes().replace(b'"payload":"', b'"payload":"eyJ'))
    with pytest.raises(RecordError) as info:
        render_notes(copy, "md")
    assert info.value.where == rel_path
    assert "sha256 differs from the manifest's" in str(info.value)


def test_cli_writes_the_notes_and_refuses_bad_input(rich, tmp_path):
    runner = CliRunner()
    out = tmp_path / "notes" / "RELEASE-NOTES.html"
    result = runner.invoke(notes_app, [str(rich.root), "--format", "html", "--out", str(out)])
    assert result.exit_code == exit_codes.OK, result.output
    assert out.read_text() == render_notes(rich.root, "html")
    result = runner.invoke(notes_app, [str(rich.root)])
    assert result.exit_code == exit_codes.OK and result.stdout == render_notes(rich.root, "md")
    result = runner.invoke(notes_app, [str(rich.root), "--format", "pdf"])
    assert result.exit_code == exit_codes.USAGE and "pdf" in result.output
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "manifest.json").write_text("{")
    result = runner.invoke(notes_app, [str(broken)])
    assert result.exit_code == exit_codes.BAD_INPUT
    assert "manifest.json" in result.output and "Traceback" not in result.output


def test_notes_written_into_the_release_are_bound_and_checked_by_rendering_again(rich, tmp_path):
    copy = tmp_path / "1.2.3"
    shutil.copytree(rich.root, copy)
    entries = write_notes(copy, manifest=rich.manifest)
    assert [(e["path"], e["format"]) for e in entries] == [("notes/RELEASE-NOTES.md", "md"),
                                                           ("notes/RELEASE-NOTES.html", "html")]
    assert (copy / "notes/RELEASE-NOTES.md").read_text() == render_notes(rich.root, "md")
    bound = {**rich.manifest, "notes": entries}
    assert check_notes(copy, bound) == []
    # An edited figure is caught: by digest, and (digest updated too) by rendering again.
    md = copy / "notes/RELEASE-NOTES.md"
    edited = md.read_bytes().replace(b"[0.97]", b"[0.99]", 1)
    md.write_bytes(edited)
    assert [(f.file, f.field) for f in check_notes(copy, bound)] == [("notes/RELEASE-NOTES.md", "sha256")]
    entries[0] = {**entries[0], "sha256": hashlib.sha256(edited).hexdigest()}
    failures = check_notes(copy, {**rich.manifest, "notes": entries})
    assert [(f.file, f.message) for f in failures] == [
        ("notes/RELEASE-NOTES.md", "the notes differ from what the records render")]


def _with_ledger(tmp_path, ledger_for, closure_failures=()):
    rel = build_release(tmp_path / "1.2.3", state="ready")
    rd = ReleaseDir(rel.root)
    m = mf.update(rel.manifest, ledger=rd.add_ledger(ledger_for(rel.candidate_ref)))
    rd.write_manifest(m, rel.private_key)
    report = verify_release(rel.root, require_ready=True, public_key=rel.public_key)
    # verify --require-ready applies the closure rule; nothing else may fail.
    assert [(f.file, f.field, f.message) for f in report.failures] == [
        ("ledger.json", "closure", message) for message in closure_failures]
    return render_notes(rel.root, "md")


def test_notes_say_when_no_review_took_place(tmp_path):
    text = _with_ledger(tmp_path, lambda ref: default_ledger(ref, at=T1))
    assert ("No reviewer supplied a ledger for this candidate: [no review items were recorded]"
            "(ledger.json#/closure/statement) (recorded by [pipeline](ledger.json#/closure/by)") in text


def test_notes_name_the_items_that_block_closure(tmp_path):
    def open_p1(ref):
        led = new_ledger(ref, review_id="rc-1", base=None, seats=[{"role": "kernels"}])
        return add_item(led, id="R7", title="use-after-free", priority="P1")

    text = _with_ledger(tmp_path, open_p1, ["item R7 (P1, in scope) is open: use-after-free",
                                            "review rc-1 has no closure by its accountable lead"])
    assert "is not met; open: [R7](ledger.json#/items/0/id)." in text
    assert "The accountable lead has not closed the review." in text
