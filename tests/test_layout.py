"""The ladder reads as the README says: one default GRPO update, from the loop to
``backward()``, runs code in train.py, algorithms/grpo.py (and its objective's row in
algorithms/policy_losses.py), the functional core's modules of its equations (functional/:
advantages, log-probs, losses, reductions) and rollout.py (and the network's forward in model.py) and in no other file of grpo_edu; train() takes the reference it
starts from (the lab's `train_from_preset` builds one)."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import grpo_edu
from grpo_edu import make_algorithm
from grpo_edu.rollout import sample_batch
from grpo_edu.train import collect, update

PKG = Path(grpo_edu.__file__).resolve().parent


def _files_run(fn):
    """The grpo_edu files (relative paths) whose Python code runs during ``fn()``."""
    seen = set()

    def tracer(frame, event, arg):
        path = Path(frame.f_code.co_filename)
        if event == "call" and path.is_absolute() and PKG in path.resolve().parents:
            seen.add(path.resolve().relative_to(PKG).as_posix())

    previous = sys.getprofile()
    sys.setprofile(tracer)
    try:
        out = fn()
    finally:
        sys.setprofile(previous)
    return seen, out


def _one_update(algo, task, reference):
    """One step of train()'s loop: collect a rollout (sample + score), then update on it."""
    policy = grpo_edu.TinyGPT(reference.config)
    policy.load_state_dict(reference.state_dict())
    algo.setup(policy, reference, generator=torch.Generator().manual_seed(1))
    rng, gen, G = np.random.default_rng(0), torch.Generator().manual_seed(0), algo.config.group_size

    def sample():  # as train() samples
        return sample_batch(algo.sampling_policy(), task, 64 // G, G, rng, gen, algo.config.temperature)

    def step():
        ro, scores, _, _ = collect(algo, sample)
        return update(algo, ro, scores)

    return _files_run(step)


def test_one_default_grpo_update_opens_the_ladder_files_only(task, reference):
    seen, stats = _one_update(make_algorithm("grpo"), task, reference)
    assert stats["updates"] == 4 and stats["grad_norm"] > 0  # it did update: 2 epochs x 2 minibatches
    # covariance: GRPO logs Cov(log pi_old, A) every step (cov_logp_adv, Cui et al.'s entropy mechanism)
    core = {f"functional/{m}.py" for m in ("_checks", "advantages", "covariance", "logprobs", "losses", "reductions")}
    assert seen == {"train.py", "algorithms/grpo.py", "algorithms/policy_losses.py", "rollout.py", "model.py", *core}


def test_the_extras_run_only_with_their_knob(task, reference):
    """Each production extra is in its named place, reached only when its knob is on (the default
    update above reaches none of them): the objectives after DAPO are rows of POLICY_LOSSES whose
    functions are the core's objectives.py."""
    for knobs, where in [
        (dict(dynamic_sampling=True), "algorithms/grpo_extras.py"),
        (dict(reward_signal="random", beta=0.0), "algorithms/grpo_extras.py"),
        (dict(policy_loss="cispo"), "functional/objectives.py"),
        (dict(policy_loss="gspo"), "functional/objectives.py"),
        (dict(sampler_dtype="bfloat16"), "algorithms/sampler.py"),
        (dict(policy_lag=2, off_policy_correction="decoupled"), "functional/off_policy.py"),
        (dict(off_policy_correction="m2po"), "algorithms/off_policy.py"),
    ]:
        seen, _ = _one_update(make_algorithm("grpo", **knobs), task, reference)
        assert where in seen, knobs
        assert "algorithms/base.py" not in seen, knobs


def test_train_takes_the_reference_it_starts_from(task, reference, cpu_preset):
    algo = make_algorithm("grpo")
    with pytest.raises(ValueError, match="pass reference .*train_from_preset"):
        grpo_edu.train(algo, task=task, preset=cpu_preset, steps=1)
    with pytest.raises(ValueError, match="pass task, reference, preset"):
        grpo_edu.train(algo, steps=1)
    with pytest.raises(ValueError, match="preset='cpu' as a Preset"):
        grpo_edu.train(algo, task, reference, preset="cpu", steps=1)


def test_train_from_preset_builds_what_train_takes(task, reference, cpu_preset):
    """The lab's convenience: the preset's task and cached reference, then the same loop."""
    kw = dict(steps=1, sequences_per_step=64, eval_every=1, seed=0, progress=False)
    a = grpo_edu.train_from_preset(make_algorithm("grpo"), preset=cpu_preset, **kw)
    b = grpo_edu.train(make_algorithm("grpo"), task, reference, preset=cpu_preset, **kw)
    strip = lambda h: [{k: v for k, v in s.items() if k != "seconds"} for s in h.steps]  # noqa: E731
    assert strip(a) == strip(b) and [e["accuracy"] for e in a.evals] == [e["accuracy"] for e in b.evals]


def test_one_of_each():
    """One list of algorithm names, one sampler copy, one flat gradient, one GRPO eps."""
    from grpo_edu.algorithms import ALGORITHMS, GRPOConfig, sampler
    from grpo_edu.command import cli
    from grpo_edu.demos import maze_pg
    from grpo_edu.measure import ORDER, common, objectives, variance

    assert ORDER == tuple(ALGORITHMS)
    algo = next(a for a in cli._parser()._subparsers._group_actions[0].choices["train"]._actions if a.dest == "algo")
    assert algo.choices == list(ALGORITHMS)
    assert maze_pg.MAZE_ALGORITHMS == ("reinforce", "baseline") and not hasattr(maze_pg, "ALGORITHMS")
    assert objectives.sampler_copy is sampler.sampler_copy and objectives.flat_grad is common.flat_grad
    assert variance.GRPO_EPS == GRPOConfig().adv_eps == 1e-4


def test_sampler_copy_takes_a_dtype_or_its_name(tiny_policy):
    from grpo_edu.algorithms.sampler import sampler_copy

    for dtype in (torch.bfloat16, "bfloat16"):
        s = sampler_copy(tiny_policy, dtype)
        w, ws = next(tiny_policy.parameters()), next(s.parameters())
        assert ws.dtype == torch.bfloat16 and not ws.requires_grad and torch.equal(ws, w.detach().to(torch.bfloat16))
    assert sampler_copy(tiny_policy, None) is tiny_policy


def test_figures_only_in_the_plotting_modules():
    """plots draws what measure computes (token_view_values is measure's, importable from plots
    as before) and uses only public names of plotstyle."""
    import ast

    from grpo_edu import measure
    from grpo_edu.figures import plots

    assert plots.token_view_values is measure.token_view_values and plots.TOKEN_VIEW == measure.TOKEN_VIEW
    for mod in ("plots", "concept_plots"):
        tree = ast.parse((PKG / "figures" / f"{mod}.py").read_text())
        private = [
            a.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "plotstyle"
            for a in node.names
            if a.name.startswith("_")
        ]
        assert private == [], mod
        assert "autograd" not in (PKG / "figures" / f"{mod}.py").read_text(), mod
