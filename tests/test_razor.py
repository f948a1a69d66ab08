"""The RL's Razor regime (grpo_edu/studies/regimes/razor.py): its KL per completion, its line fit and its
claims, by hand on small inputs, each with a control; and one tiny run end to end (numbers meaningless)."""

import copy

import pytest
import torch

from grpo_edu import ModelConfig, TinyGPT, get_preset
from grpo_edu.studies.regimes import razor


def _tiny(seed=0):
    torch.manual_seed(seed)
    return TinyGPT(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=12)).eval()


def test_sequence_kl_is_zero_against_itself_and_positive_against_another_policy():
    preset = get_preset("cpu")
    _, new, _ = razor.tasks(preset)
    base = _tiny()
    for d in razor.DIRECTIONS:  # the control: the base against itself
        assert razor.sequence_kl(copy.deepcopy(base), base, new, d, n_prompts=8, group=2) == pytest.approx(0, abs=1e-6)
    other = _tiny(1)
    both = [razor.sequence_kl(other, base, new, d, n_prompts=8, group=2) for d in razor.DIRECTIONS]
    assert min(both) > 0.01 and both[0] != pytest.approx(both[1])  # two directions, two numbers
    with pytest.raises(ValueError, match="direction must be one of"):
        razor.sequence_kl(other, base, new, "pi||ref")


def test_sequence_kl_is_the_chain_rule_sum_on_one_completion():
    """One prompt, one sampled completion: the sum over its tokens of the exact per-token KL, by hand."""
    preset = get_preset("cpu")
    _, new, _ = razor.tasks(preset)
    base, ft = _tiny(), _tiny(2)
    got = razor.sequence_kl(ft, base, new, "ft||base", n_prompts=1, group=1, seed=3)
    prompts = new.encode_prompts(new.eval_problems()[:1])
    gen = torch.Generator().manual_seed(3)
    ro = razor.generate(ft, prompts, 1, new.max_answer_length, 1.0, generator=gen)
    total = 0.0
    with torch.no_grad():
        ids = ro.input_ids
        lp, lq = ft(ids).log_softmax(-1), base(ids).log_softmax(-1)
        P = ro.prompt_length
        for t in range(int(ro.mask[0].sum())):
            p, q = lp[0, P - 1 + t], lq[0, P - 1 + t]
            total += float((p.exp() * (p - q)).sum())
    assert got == pytest.approx(total, rel=1e-4)


def test_sequence_kl_base_to_ft_samples_from_the_base_by_hand():
    """KL(pi_0 || pi): the completion sampled from the base, p_0 log(p_0 / p) summed over its tokens, by hand;
    the control: the same sum on the fine-tuned policy's sample (what a sampler mix-up would compute) differs."""
    preset = get_preset("cpu")
    _, new, _ = razor.tasks(preset)
    base, ft = _tiny(), _tiny(2)
    prompts = new.encode_prompts(new.eval_problems()[:4])

    def by_hand(sampler):  # mean over 4 prompts x 4 completions of sum_t sum_v p_0 log(p_0 / p)
        ro = razor.generate(sampler, prompts, 4, new.max_answer_length, 1.0, generator=torch.Generator().manual_seed(3))
        with torch.no_grad():
            lp, lq = ft(ro.input_ids).log_softmax(-1), base(ro.input_ids).log_softmax(-1)
        P, total = ro.prompt_length, 0.0
        for i in range(ro.input_ids.shape[0]):
            for t in range(int(ro.mask[i].sum())):
                p, q = lp[i, P - 1 + t], lq[i, P - 1 + t]
                total += float((q.exp() * (q - p)).sum())
        return total / ro.input_ids.shape[0]

    got = razor.sequence_kl(ft, base, new, "base||ft", n_prompts=4, group=4, seed=3)
    assert got == pytest.approx(by_hand(base), rel=1e-4)
    assert by_hand(ft) != pytest.approx(got, rel=1e-3)  # the control: sampled from the wrong policy


def test_line_fit_by_hand_and_its_control():
    fit = razor.line_fit([0.0, 1.0, 2.0, 3.0], [1.0, 3.0, 5.0, 7.0])  # drop = 1 + 2 KL exactly
    assert (fit["a"], fit["b"], fit["r2"], fit["n"]) == (pytest.approx(1.0), pytest.approx(2.0), pytest.approx(1.0), 4)
    # the control: drops that do not follow the KL (0, 1, 0, 1 at 0..3): R^2 = 0.2 by hand (slope 0.2, ss 1)
    assert razor.line_fit([0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 0.0, 1.0])["r2"] == pytest.approx(0.2)
    with pytest.raises(ValueError, match="at least 3"):
        razor.line_fit([0.0, 1.0], [0.0, 1.0])
    with pytest.raises(ValueError, match="every KL is the same"):
        razor.line_fit([1.0, 1.0, 1.0], [0.0, 1.0, 2.0])


def _res(sft_new, rl_new, sft=(0.2, 0.5), rl=(0.1, 0.2), early=(0.05, 0.02)):
    """A result by hand: per seed (3 seeds), two SFT and two RL runs (two lrs) at the given new-task accuracy,
    drop and KL in the claims' direction (near one line), and one run of each control stopped early (drops
    ``early``). The other direction is 1 - that KL: it orders the runs the other way, so claims that read the
    wrong direction give other verdicts."""
    runs = []
    other = next(d for d in razor.DIRECTIONS if d != razor.PRIMARY)
    for s in range(3):
        plan = (("SFT", sft_new, sft), ("RL", rl_new, rl), ("SFT early", 0.3, (early[0], 0.02)),
                ("RL early", 0.3, (early[1], 0.02)))  # fmt: skip
        for m, new, (drop, kl) in plan:
            for lr, scale in ((1e-4, 1.0), (3e-4, 1.5))[: 1 if "early" in m else 2]:  # two lrs: drop and KL x1.5
                kl_s = kl * scale + 0.01 * s
                runs.append({"method": m, "lr": lr, "target": 0.45, "seed": s, "steps": 10, "new": new,
                             "old": 0.4 - drop * scale, "drop": drop * scale, f"kl {razor.PRIMARY}": kl_s,
                             f"kl {other}": 1.0 - kl_s})  # fmt: skip
    res = {"seeds": [0, 1, 2], "targets": [0.45], "early": 0.3, "base": {"old": 0.44, "new": 0.2},
           "reference": {"old": 0.54, "new": 0.01}, "runs": runs}  # fmt: skip
    res["fit"] = {d: razor.line_fit([r[f"kl {d}"] for r in runs], [r["drop"] for r in runs]) for d in razor.DIRECTIONS}
    return res


def test_claims_hold_at_matched_accuracy_and_fail_on_the_controls():
    verdicts = [c["verdict"] for c in razor.claims(_res(0.46, 0.47))]
    # matched; RL drops less; RL's KL smaller; the 4 points of a seed near one line (R^2 > 0.5); each early
    # control forgets less than the other method at the target
    assert verdicts == ["holds"] * 6
    # control 1: unequal accuracy (SFT 0.46, RL 0.30): the condition fails here
    assert razor.claims(_res(0.46, 0.30))[0]["verdict"] == "fails here"
    # control 2: RL forgets as much as SFT, at the same KL: the claims of less forgetting and less KL fail
    same = razor.claims(_res(0.46, 0.47, rl=(0.2, 0.5)))
    assert [c["verdict"] for c in same[1:3]] == ["fails here", "fails here"]
    # control 3: the early runs forget more than the other method at the target: the controls' claims fail
    assert [c["verdict"] for c in razor.claims(_res(0.46, 0.47, early=(0.6, 0.6)))[4:]] == ["fails here"] * 2
    # control 4: drops that fall as the KL grows (drop = 0.7 - KL): a perfect line, but falling: fails here
    falling = _res(0.46, 0.47)
    for r in falling["runs"]:
        r["drop"] = 0.7 - r[f"kl {razor.PRIMARY}"]
    assert razor.claims(falling)[3]["verdict"] == "fails here"
    # control 5: the two directions swapped in the data: the KL claims read the other one and fail
    swapped = _res(0.46, 0.47)
    for r in swapped["runs"]:
        r["kl base||ft"], r["kl ft||base"] = r["kl ft||base"], r["kl base||ft"]
    assert [c["verdict"] for c in razor.claims(swapped)[2:4]] == ["fails here", "fails here"]


def test_the_runs_compared_are_each_methods_least_forgetting_run_that_reached_the_target():
    res = _res(0.46, 0.47)
    kl = f"kl {razor.PRIMARY}"
    sft = [r for r in res["runs"] if r["method"] == "SFT" and r["seed"] == 0]
    sft[1].update(drop=0.1, new=0.5)  # the second lr now forgets least (its KL is the larger one)
    assert razor.frontier_runs(res, "SFT", 0) == [sft[1]]
    # its KL, not the least KL over the lrs (the control: "least KL" would take the first run's)
    assert razor.per_seed(res, "SFT", kl, "frontier")[0] == pytest.approx(sft[1][kl]) != sft[0][kl]
    assert razor.per_seed(res, "SFT", "new", "frontier")[0] == 0.5
    sft[1]["new"] = 0.40  # short of the target 0.45 (hit max_steps): no longer compared, however little it forgot
    assert razor.frontier_runs(res, "SFT", 0) == [sft[0]]
    with pytest.raises(ValueError, match="how must be"):
        razor.per_seed(res, "SFT", "drop", "best")


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError, match="size must be one of"):
        razor.run_razor(_tiny(), "cpu", seeds=(0,), size="huge", progress=False)
    with pytest.raises(ValueError, match="seeds must name"):
        razor.run_razor(_tiny(), "cpu", seeds=(), size="tiny", progress=False)
    with pytest.raises(ValueError, match="target must be in"):
        razor.make_base(_tiny(), "cpu", target=1.5)


def test_tiny_run_end_to_end_and_its_figure():
    preset = get_preset("cpu", sequences_per_step=64)
    res = razor.run_razor(_tiny(), preset, seeds=(0, 1), size="tiny", progress=False)
    assert {r["method"] for r in res["runs"]} == set(razor.METHODS) and len(res["runs"]) == 8
    assert len(res["claims"]) == 6 and all(c["verdict"] in ("holds", "fails here", "depends") for c in res["claims"])
    for r in res["runs"]:
        assert r["drop"] == pytest.approx(res["base"]["old"] - r["old"]) and r["kl base||ft"] >= -1e-6
    fig = razor.figure(res)
    assert len(fig.axes) == 2 and all(ax.get_xlabel() and ax.get_ylabel() and ax.get_title() for ax in fig.axes)
