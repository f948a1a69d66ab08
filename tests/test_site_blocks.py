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


def test_readme_gpu_numbers_are_the_measured_block():
    """README's sentences on the gpu preset's runs quote only numbers the measurements page's blocks print:
    the CPU run's from the gpucurve block, the H200 runs' from gpucurveh200, comparegpu and the runs' kept machine.txt."""
    import re

    from course.site.blocks import ROOT, read

    readme = (ROOT / "README.md").read_text()
    a = readme.index("The gpu preset learns")
    h = readme.index("On an NVIDIA H200", a)
    end = readme.index("The curve, the command", h)
    kept = (ROOT / "tests/data/gpu_curve_h200/machine.txt").read_text()
    kept += (ROOT / "tests/data/compare_gpu_h200/machine.txt").read_text()
    for sentence, block in (
        (readme[a:h], read("gpucurve")),
        (readme[h:end], read("gpucurveh200") + read("comparegpu") + kept),
    ):
        numbers = [n for n in re.findall(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?", sentence) if len(n) > 1]
        assert len(numbers) >= 6, numbers
        missing = [n for n in numbers if n not in block]
        assert not missing, f"README's gpu numbers not in the block: {missing}"
