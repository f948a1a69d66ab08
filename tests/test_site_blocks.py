"""The measured blocks of the site's pages (course/site/blocks.py): each where the table says,
once, under the command that prints it; none left in the README; the knob map still what the
bridge prints."""

from __future__ import annotations

from course.site import blocks


def test_every_block_is_on_its_page_under_its_command():
    assert blocks.check() == []


def test_the_readme_carries_no_block():
    readme = (blocks.ROOT / "README.md").read_text()
    assert not blocks._MARKER.findall(readme)


def test_write_replaces_only_the_blocks_output(tmp_path, monkeypatch):
    page = "BEFORE\n<!-- BEGIN sweep -->\n```\nold\n```\n<!-- END sweep -->\nAFTER\n"
    (tmp_path / "measurements.md").write_text(page)
    monkeypatch.setattr(blocks, "SITE", tmp_path)
    blocks.write("sweep", "new line 1\nnew line 2\n")
    assert blocks.read("sweep") == "new line 1\nnew line 2"
    assert (tmp_path / "measurements.md").read_text() == page.replace("old", "new line 1\nnew line 2")
