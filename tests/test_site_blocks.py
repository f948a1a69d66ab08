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


def test_every_block_names_a_command_that_exists():
    """Each block's command is one a reader can run: a `grpo-edu` verb whose flags parse (nothing is run),
    or ``python -m grpo_edu.<module>`` of a module with a ``__main__`` block that declares each flag given."""
    import importlib.util
    import re
    import shlex

    from grpo_edu.command.cli import _parser

    checked = 0
    for name, block in blocks.BLOCKS.items():
        for command in block.commands:
            line = re.sub(r"^(\w+=(\$\([^)]*\)|\S+)\s+)+", "", command.split("&&")[0])  # VAR=value before it
            words = shlex.split(line)
            if words[0] == "grpo-edu":
                args = _parser(only=words[1]).parse_args(words[1:])
                assert args.cmd == words[1], (name, command)
                checked += 1
            elif words[:2] == ["python", "-m"] and words[2].startswith("grpo_edu."):
                spec = importlib.util.find_spec(words[2])
                assert spec is not None, (name, command)
                source = open(spec.origin).read()
                assert 'if __name__ == "__main__":' in source, (name, command)
                flags = [w.split("=")[0] for w in words[3:] if w.startswith("--")]
                assert all(f'"{f}"' in source for f in flags), (name, command, flags)
                checked += 1
    assert checked >= 20  # all but the test timings (pip, pytest) and the knob map (python -c): 24 on this page
