"""The per-token view of one batch and the variants' small multiples (grpo_edu.figures.plots)."""

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from grpo_edu import functional as Fn  # noqa: E402
from grpo_edu.figures import plots  # noqa: E402
from grpo_edu.rollout import Rollout  # noqa: E402
from grpo_edu.tokenizer import CharTokenizer  # noqa: E402
from grpo_edu.train import History  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def batch(B=4, T=3, V=17, G=2, seed=0):
    """A small batch: random logits, log-probs of sampled tokens, an old policy nearby."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(B, T, V, generator=g)
    tokens = torch.randint(3, V, (B, T), generator=g)
    logp = Fn.token_logprobs(logits, tokens)
    old_logp = logp + 0.4 * torch.randn(B, T, generator=g)  # rho = exp(logp - old) spread around 1
    mask = torch.ones(B, T)
    mask[0, 2] = 0.0  # a shorter completion: padding after it
    tokens[0, 2] = 0
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])[:B]
    tok = CharTokenizer()
    prompts = torch.tensor([tok.encode("12+34=", add_bos=True)] * B)
    rollout = Rollout(prompt_ids=prompts, completion_ids=tokens, mask=mask, logprobs=old_logp,
                      group_ids=torch.arange(B) // G, truncated=torch.zeros(B, dtype=torch.bool),
                      texts=[""] * B, group_size=G)  # fmt: skip
    return logp, old_logp, adv, logits, mask, rollout, tok


def test_values_are_the_functional_cores():
    logp, old_logp, adv, logits, mask, _, _ = batch()
    v = plots.token_view_values(logp, old_logp, adv, logits, mask, eps_low=0.2, eps_high=0.28)
    assert set(v) == set(plots.TOKEN_VIEW)
    on = mask.bool()
    for k in plots.TOKEN_VIEW:
        assert v[k].shape == (4, 3)
        assert torch.isnan(v[k][~on]).all() and torch.isfinite(v[k][on]).all(), k
    assert torch.allclose(v["advantage"][on], adv[:, None].expand(4, 3)[on])
    assert torch.allclose(v["ratio"][on], torch.exp(logp - old_logp)[on])
    assert torch.allclose(v["entropy"][on], Fn.entropy(logits)[on])
    # clipped: exactly the tokens the clip statistics count, and exactly those with no gradient
    _, stats = Fn.clipped_surrogate_loss(logp, old_logp, adv, 0.2, 0.28, mask=mask)
    assert v["clipped"][on].mean().item() == pytest.approx(stats["clip_ratio"])
    rho, a = torch.exp(logp - old_logp), adv[:, None].expand(4, 3)
    by_rule = ((rho < 0.8) & (a < 0)) | ((rho > 1.28) & (a > 0))
    assert torch.equal(v["clipped"][on].bool(), by_rule[on])
    assert 0 < by_rule[on].sum() < on.sum()  # this batch has clipped and unclipped tokens


def test_clipped_uses_eps_high():
    logp, old_logp = torch.log(torch.tensor([[1.25, 1.25]])), torch.zeros(1, 2)  # rho = 1.25 on both tokens
    logits, mask, adv = torch.zeros(1, 2, 5), torch.ones(1, 2), torch.tensor([[1.0, -1.0]])
    sym = plots.token_view_values(logp, old_logp, adv, logits, mask, eps_low=0.2)
    high = plots.token_view_values(logp, old_logp, adv, logits, mask, eps_low=0.2, eps_high=0.28)
    assert sym["clipped"].tolist() == [[1.0, 0.0]]  # A > 0 above 1.2: clipped; A < 0 above 1: never
    assert high["clipped"].tolist() == [[0.0, 0.0]]  # 1.25 < 1.28
    assert torch.allclose(sym["entropy"], torch.full((1, 2), float(np.log(5))))  # uniform over 5 tokens


def test_values_bad_input():
    logp, old_logp, adv, logits, mask, _, _ = batch()
    with pytest.raises(ValueError, match="old_logp"):
        plots.token_view_values(logp, old_logp[:, :2], adv, logits, mask)
    with pytest.raises(ValueError, match="logits"):
        plots.token_view_values(logp, old_logp, adv, logits[:, :2], mask)
    with pytest.raises(ValueError, match="advantages"):
        plots.token_view_values(logp, old_logp, adv[:3], logits, mask)
    with pytest.raises(ValueError, match="logp"):
        plots.token_view_values(logp[0], old_logp, adv, logits, mask)


def test_plot_token_view_draws():
    logp, old_logp, adv, logits, mask, rollout, tok = batch()
    v = plots.token_view_values(logp, old_logp, adv, logits, mask)
    fig = plots.plot_token_view(rollout, v, tok, groups=(0, 1), rewards=torch.tensor([1.0, 0, 1, 0]))
    assert isinstance(fig, Figure)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title().split(" ")[0] for ax in panels] == ["advantage", "ratio", "clipped", "entropy"]
    assert len(fig.axes) == 8  # four panels, four colour bars
    for ax in panels:
        assert ax.get_xlabel()
        written = [t.get_text() for t in ax.texts]
        assert len(written) == int(mask.sum())  # one label per completion token, none on padding
        assert written[:2] == [tok.vocab[int(i)] for i in rollout.completion_ids[0, :2]]
    assert "12+34=" in panels[0].get_yticklabels()[0].get_text()
    fig.savefig(io.BytesIO(), format="png", dpi=40)


def test_plot_token_view_bad_input():
    logp, old_logp, adv, logits, mask, rollout, tok = batch()
    v = plots.token_view_values(logp, old_logp, adv, logits, mask)
    with pytest.raises(ValueError, match="groups"):
        plots.plot_token_view(rollout, v, tok, groups=(2,))  # 4 rows / G = 2: groups 0 and 1
    with pytest.raises(ValueError, match="missing"):
        plots.plot_token_view(rollout, {k: v[k] for k in ("ratio", "entropy")}, tok, groups=(0,))
    with pytest.raises(ValueError, match="values\\['ratio'\\]"):
        plots.plot_token_view(rollout, {**v, "ratio": v["ratio"][:, :2]}, tok, groups=(0,))
    with pytest.raises(ValueError, match="rewards"):
        plots.plot_token_view(rollout, v, tok, groups=(0,), rewards=torch.ones(3))


def history(name, final, steps=10):
    h = History(name)
    for s in range(0, steps + 1, 5):
        h.evals.append({"step": s, "samples": 64 * s, "seconds": 0.1 * s, "accuracy": 0.5 + (final - 0.5) * s / steps})
    return h


def test_plot_variants_grid():
    default = [history("default", f) for f in (0.7, 0.8)]
    variants = {"a": history("a", 0.75), "b": history("b", 0.9), "c": history("c", 0.6)}
    fig = plots.plot_variants_grid(default, variants, ncols=2, reference=0.5)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 3 and not fig.axes[3].get_visible()
    titles = [ax.get_title() for ax in panels]
    assert titles == ["a\nfinal 0.750: inside the band", "b\nfinal 0.900: above the band",
                      "c\nfinal 0.600: below the band"]  # fmt: skip
    assert "one run (one seed) each" in fig._suptitle.get_text() and "2 seeds" in fig._suptitle.get_text()
    assert "dotted: the reference" in fig._suptitle.get_text()
    for ax in panels:
        assert ax.get_xlabel() and ax.get_ylabel()
        assert len(ax.collections) == 1  # the default's band, in every panel
    fig.savefig(io.BytesIO(), format="png", dpi=40)


def test_plot_variants_grid_bad_input():
    with pytest.raises(ValueError, match="variants"):
        plots.plot_variants_grid([history("d", 0.7)], {})
    with pytest.raises(ValueError, match="ncols"):
        plots.plot_variants_grid([history("d", 0.7)], {"a": history("a", 0.7)}, ncols=0)
    with pytest.raises(ValueError, match="x must be"):
        plots.plot_variants_grid([history("d", 0.7)], {"a": history("a", 0.7)}, x="epochs")
