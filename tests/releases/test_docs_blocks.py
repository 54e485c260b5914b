"""The docs-block extractor: executable blocks named by index and heading, bound by sha256."""
import hashlib

from releases.docs_blocks import changed_blocks, extract

DOC = """# Quickstart

Some prose.

## Install

```bash
python3 assay-install.pyz install "$URL" --prefix "$PREFIX" --key release.pub.pem
```

```bash no-run
rm -rf /
```

```python
print("not a shell block")
```

## Ask

```sh
# a comment, not a heading
curl -s http://127.0.0.1:$PORT/v1/engine/status
```
"""


def test_executable_blocks_in_order_with_headings_lang_and_digest():
    blocks = extract(DOC)
    assert [(b.index, b.heading, b.lang) for b in blocks] == [(0, "Install", "bash"), (1, "Ask", "sh")]
    assert blocks[0].text == 'python3 assay-install.pyz install "$URL" --prefix "$PREFIX" --key release.pub.pem\n'
    assert blocks[1].text.startswith("# a comment, not a heading\n")
    assert blocks[1].sha256 == hashlib.sha256(blocks[1].text.encode("utf-8")).hexdigest()


def test_prose_edit_changes_no_block():
    recorded = [b.record() for b in extract(DOC)]
    assert changed_blocks(DOC.replace("Some prose.", "Other prose entirely."), recorded) == []
    assert extract(DOC.replace("Some prose.", "x")) == extract(DOC)


def test_block_edit_is_named():
    recorded = [b.record() for b in extract(DOC)]
    edited = DOC.replace("/v1/engine/status", "/v1/models")
    assert changed_blocks(edited, recorded) == ['block 1 under "Ask" differs from the accepted one']


def test_added_and_removed_blocks_are_named():
    recorded = [b.record() for b in extract(DOC)]
    assert changed_blocks(DOC + "\n```bash\necho more\n```\n", recorded) == [
        'block 2 under "Ask" was added after acceptance']
    assert changed_blocks(DOC.split("## Ask")[0], recorded) == ['block 1 under "Ask" was removed after acceptance']


def test_no_run_and_other_languages_are_not_executable():
    assert extract("```bash no-run\nx\n```\n```console\n$ y\n```\n```\nz\n```\n") == []
