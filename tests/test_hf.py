"""The Hugging Face / TRL bridge: export and import, tokenizer, task and reward, the knob
map, and loss parity with TRL's own GRPO loss. Skipped without the [trl] extra."""

import os
import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is ever downloaded
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from grpo_edu import functional as Fn  # noqa: E402
from grpo_edu import hf  # noqa: E402
from grpo_edu.algorithms import GRPO, Batch, GRPOConfig  # noqa: E402
from grpo_edu.model import ModelConfig, TinyGPT, ValueModel  # noqa: E402


def trl_named(**fields) -> GRPOConfig:
    """A GRPOConfig from fields that may use TRL's loss names ("dapo", "dr_grpo"): the bridge translates."""
    return GRPOConfig(**hf.from_trl(GRPOConfig, fields))


REASON = 'the [trl] extra is not installed: pip install -e ".[trl]"'


@pytest.fixture(scope="module")
def trl():
    for name in ("transformers", "tokenizers", "datasets"):
        pytest.importorskip(name, reason=REASON)
    return pytest.importorskip("trl", reason=REASON)


def _policy(seed=0, **cfg):
    """A small TinyGPT with every weight moved off its init (non-zero biases, LayerNorm gains)."""
    torch.manual_seed(seed)
    p = TinyGPT(ModelConfig(d_model=16, n_layers=2, n_heads=2, max_seq_len=12, **cfg))
    with torch.no_grad():
        for w in p.parameters():
            w.add_(0.3 * torch.randn_like(w))
    return p.eval()


# ------------------------------------------------------------- no extra needed


def test_core_imports_without_the_extra():
    code = "import sys, grpo_edu, grpo_edu.hf; assert not {'transformers', 'trl', 'datasets'} & set(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_extra_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "trl", None)  # import trl -> ImportError
    with pytest.raises(ImportError, match=r'pip install -e "\.\[trl\]"'):
        hf.trl_config(GRPOConfig(unbiased_std=True), max_completion_length=4)


# ----------------------------------------------------------- export and import


@pytest.mark.parametrize(
    "cfg",
    [{}, {"tie_embeddings": False}, {"tie_embeddings": False, "head_bias": True}],
    ids=["tied", "untied", "untied+bias"],
)
def test_round_trip_logits(trl, cfg, tmp_path):
    import transformers

    policy = _policy(**cfg)
    model, _ = hf.to_hf(policy, tmp_path)
    assert (
        model.config.activation_function == "gelu" and model.config.tie_word_embeddings == policy.config.tie_embeddings
    )
    ids = torch.randint(0, 17, (6, 12), generator=torch.Generator().manual_seed(1))
    ours = policy(ids)
    theirs = model(ids, attention_mask=torch.ones_like(ids)).logits
    assert (ours - theirs).abs().max() <= 1e-5
    back = hf.from_hf(model)
    assert back.config == policy.config
    assert (back(ids) - theirs).abs().max() <= 1e-5
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)  # what TRL does for pi_ref
    assert type(loaded) is type(model)
    assert (loaded(ids, attention_mask=torch.ones_like(ids)).logits - ours).abs().max() <= 1e-5


def test_greedy_generation_matches(trl, task):
    from grpo_edu import generate

    policy = _policy()
    model, tok = hf.to_hf(policy)
    prompts = task.encode_prompts(task.sample(16, 0))
    ours = generate(policy, prompts, max_new_tokens=4, temperature=0.0)
    out = model.generate(
        prompts,
        attention_mask=torch.ones_like(prompts),
        do_sample=False,
        max_new_tokens=4,
        pad_token_id=0,
        eos_token_id=2,
    )[:, prompts.shape[1] :]
    for row, mask, theirs in zip(ours.completion_ids, ours.mask, out):
        n = int(mask.sum())
        assert row[:n].tolist() == theirs[:n].tolist()


def test_export_errors_name_the_knob(trl):
    import transformers

    with pytest.raises(ValueError, match="TinyGPT"):
        hf.to_hf(ValueModel(ModelConfig()))

    @dataclass
    class Rotary(ModelConfig):
        rotary: bool = False

    with pytest.raises(ValueError, match=r"ModelConfig\.rotary"):
        hf.to_hf(TinyGPT(Rotary()))
    base = dict(vocab_size=17, n_positions=12, n_embd=16, n_layer=1, n_head=2)
    for bad, name in (
        (dict(activation_function="gelu_new"), "activation_function"),
        (dict(n_inner=24, activation_function="gelu"), "n_inner"),
        (dict(layer_norm_epsilon=1e-6, activation_function="gelu"), "layer_norm_epsilon"),
    ):
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**base, **bad))
        with pytest.raises(ValueError, match=name):
            hf.from_hf(model)


# ------------------------------------------------------------- task and reward


def test_tokenizer_has_the_course_vocabulary(trl, task):
    tok = hf.hf_tokenizer()
    assert tok.get_vocab() == {s: i for i, s in enumerate(task.tokenizer.vocab)}
    for p in task.sample(20, 3):
        assert tok("<bos>" + p.prompt)["input_ids"] == task.tokenizer.encode(p.prompt, add_bos=True)
    ids = task.tokenizer.encode("18", add_eos=True) + [0]
    assert tok.decode(ids, skip_special_tokens=True) == task.tokenizer.decode(ids) == "18"
    assert tok.padding_side == "left" and (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 1, 2)


def test_task_dataset(trl, task):
    ds = hf.task_dataset(task, 64, seed=5)
    assert len(ds) == 64 and ds["prompt"] == hf.task_dataset(task, 64, seed=5)["prompt"]
    problems = task.sample(64, 5)
    assert ds["prompt"] == ["<bos>" + p.prompt for p in problems]
    assert ds["answer"] == [p.answer for p in problems]
    tok = hf.hf_tokenizer()
    assert torch.equal(torch.tensor(tok(ds["prompt"][:8])["input_ids"]), task.encode_prompts(problems[:8]))


def test_reward_fn_is_the_course_reward(trl, task):
    problems = task.sample(6, 7)
    enc = task.tokenizer.encode
    right = [enc(p.answer, add_eos=True) for p in problems]
    completion_ids = [
        right[0],                                  # right
        enc("9" + problems[1].answer, add_eos=True),  # wrong digit first
        enc(problems[2].answer),                   # right digits, no EOS (truncated): 0
        [1] + right[3],                            # a stray special token: a mistake
        right[4][:1] + [2],                        # stops early
        right[5],
    ]  # fmt: skip
    prompts = ["<bos>" + p.prompt for p in problems]
    texts = [task.tokenizer.decode(c) for c in completion_ids]
    got = hf.reward_fn(task)(prompts, texts, completion_ids=completion_ids)
    assert got == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    terminated = [2 in c for c in completion_ids]
    assert got == [
        task.outcome_reward(p, t, term) if c[0] != 1 else 0.0
        for p, t, term, c in zip(problems, texts, terminated, completion_ids)
    ]
    process = hf.reward_fn(task, "process")(prompts, texts, completion_ids=completion_ids)
    K = [len(r) for r in right]
    assert process[0] == pytest.approx(1.0) and process[1] == 0.0 and process[3] == 0.0
    assert process[2] == pytest.approx((K[2] - 1) / K[2]) and process[4] == pytest.approx(1 / K[4])
    assert hf.reward_fn(task)(prompts, [p.answer for p in problems]) == [1.0] * 6  # text only: EOS assumed
    with pytest.raises(ValueError, match="kind"):
        hf.reward_fn(task, "dense")


# ----------------------------------------------------------------- the knob map


def test_knob_map_covers_every_field(trl):
    from dataclasses import fields

    assert {f.name for f in fields(GRPOConfig)} == {row[0] for row in hf.KNOB_MAP}
    assert "unbiased_std" in hf.format_knob_map()


def test_trl_config_maps_knob_by_knob(trl):
    cfg = trl_named(
        unbiased_std=True,
        group_size=4,
        epochs=3,
        minibatches=2,
        eps_low=0.2,
        eps_high=0.28,
        beta=0.02,
        scale_rewards="batch",
        loss_type="dapo",
        mask_truncated_completions=True,
        temperature=0.9,
        lr=1e-4,
        max_grad_norm=0.5,
        adam_betas=(0.8, 0.95),
    )
    a = hf.trl_config(cfg, sequences_per_step=64, max_completion_length=4, seed=3)
    assert isinstance(a, trl.GRPOConfig)
    want = dict(
        num_generations=4,
        num_iterations=3,
        steps_per_generation=2,
        per_device_train_batch_size=32,
        generation_batch_size=64,
        epsilon=0.2,
        epsilon_high=0.28,
        beta=0.02,
        use_bias_correction_kl=False,
        scale_rewards="batch",
        loss_type="bnpo",
        mask_truncated_completions=True,
        temperature=0.9,
        learning_rate=1e-4,
        max_grad_norm=0.5,
        adam_beta1=0.8,
        adam_beta2=0.95,
        weight_decay=0.0,
        gradient_accumulation_steps=1,
        bf16=False,
        seed=3,
        max_completion_length=4,
    )
    assert {k: getattr(a, k) for k in want} == want
    assert getattr(a.lr_scheduler_type, "value", a.lr_scheduler_type) == "constant"
    for loss_type, theirs in (
        ("grpo", "grpo"),
        ("sequence_mean", "grpo"),
        ("token_mean", "bnpo"),
        ("dr_grpo", "dr_grpo"),
    ):
        c = trl_named(unbiased_std=True, loss_type=loss_type, max_length=4)
        assert hf.trl_config(c).loss_type == theirs
    assert hf.trl_config(GRPOConfig(unbiased_std=True, kl_placement="none"), max_completion_length=4).beta == 0


@pytest.mark.parametrize("overrides, knob", [
    ({}, "unbiased_std"),  # the default 1/G std
    ({"unbiased_std": True, "kl_placement": "reward"}, "kl_placement"),
    ({"unbiased_std": True, "kl_estimator": "k1"}, "kl_estimator"),
    ({"unbiased_std": True, "adv_eps": 1e-6}, "adv_eps"),
    ({"unbiased_std": True, "dynamic_sampling": True}, "dynamic_sampling"),
    ({"unbiased_std": True, "loss_type": "dr_grpo"}, "max_length"),
    ({"unbiased_std": True, "warmup_steps": 5}, "warmup_steps"),
    ({"unbiased_std": True, "entropy_coef": 0.01, "temperature": 0.7}, "entropy_coef"),
])  # fmt: skip
def test_trl_config_refuses_what_trl_cannot_express(trl, overrides, knob):
    cfg = trl_named(**overrides)
    with pytest.raises(ValueError, match=rf"GRPOConfig\.{knob}"):
        hf.trl_config(cfg, max_completion_length=4)
    if knob in ("unbiased_std", "adv_eps", "warmup_steps", "max_length", "entropy_coef"):
        hf.trl_config(cfg, approximate={knob}, max_completion_length=4)  # accepted when asked for


def test_trl_config_other_errors(trl):
    cfg = GRPOConfig(unbiased_std=True)
    with pytest.raises(ValueError, match="num_generations"):
        hf.trl_config(cfg, max_completion_length=4, num_generations=4)
    with pytest.raises(ValueError, match="max_completion_length"):
        hf.trl_config(cfg)
    with pytest.raises(ValueError, match="sequences_per_step"):
        hf.trl_config(cfg, sequences_per_step=100, max_completion_length=4)
    hf.trl_config(cfg, beta=0.04, max_completion_length=4)  # agreeing with the map is fine

    @dataclass
    class Mine(GRPOConfig):
        rho: float = 0.5

    with pytest.raises(ValueError, match=r"GRPOConfig\.rho .*KNOB_MAP"):
        hf.trl_config(Mine(unbiased_std=True), max_completion_length=4)


# --------------------------------------------------------------------- loss parity

B, T, G = 8, 5, 4


@pytest.fixture(scope="module")
def ref_dir(trl, tmp_path_factory):
    path = tmp_path_factory.mktemp("ref")
    hf.to_hf(_policy(), path)
    return path


def _trainer(cfg, ref_dir, task, **trl_kwargs):
    """A real GRPOTrainer for the exported tiny model, configured by `hf.trl_config`."""
    import trl  # the ref_dir fixture needs the trl fixture, which skips without the [trl] extra

    with hf.quiet():
        model, tok = hf.to_hf(_policy())
        model.config._name_or_path = str(ref_dir)
        args = hf.trl_config(cfg, sequences_per_step=B, max_completion_length=T, **trl_kwargs)
        trainer = trl.GRPOTrainer(
            model=model,
            processing_class=tok,
            reward_funcs=hf.reward_fn(task),
            train_dataset=hf.task_dataset(task, 16, 0),
            args=args,
        )
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train() per optimizer step
    return trainer


def _batch():
    g = torch.Generator().manual_seed(0)
    lengths = torch.tensor([5, 3, 1, 4, 2, 5, 5, 3])
    mask = (torch.arange(T)[None] < lengths[:, None]).float()
    old = -torch.rand(B, T, generator=g) * 2 * mask
    logp = (old + 0.3 * torch.randn(B, T, generator=g)) * mask  # ratios well outside 1 +- 0.2
    ref = (old + 0.3 * torch.randn(B, T, generator=g)) * mask
    rewards = torch.tensor([1.0, 0, 0, 1, 0, 0, 0, 1])
    adv, _ = Fn.group_advantages(rewards, G, eps=1e-4, unbiased=True)
    return logp, old, ref, adv, mask


def _ours(cfg, monkeypatch):
    """grpo_edu's GRPO loss and d loss / d logp, through GRPO.loss (the library's code path)."""
    from grpo_edu import rollout

    logp, old, ref, adv, mask = _batch()
    logp = logp.clone().requires_grad_(True)
    monkeypatch.setattr(rollout, "sequence_logprobs", lambda *a, **k: (logp, torch.zeros(B, T, 17)))
    algo = GRPO(cfg)
    ro = type("R", (), {"mask": mask, "select": lambda self, idx: self})()
    batch = Batch(rollout=ro, scores=None, rewards=None, mask=mask, old_logp=old, ref_logp=ref, advantages=adv)
    loss, _ = algo.loss(batch, torch.arange(B))
    return loss.detach(), torch.autograd.grad(loss, logp)[0]


def _theirs(trainer, num_items=None):
    """TRL's own GRPOTrainer._compute_loss on the same log-probs (the model forward stubbed)."""
    logp, old, ref, adv, mask = _batch()
    logp = logp.clone().requires_grad_(True)
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: (logp, torch.zeros(B, T), None)
    inputs = {
        "prompt_ids": torch.ones(B, 2, dtype=torch.long),
        "prompt_mask": torch.ones(B, 2, dtype=torch.long),
        "completion_ids": torch.full((B, T), 5),
        "completion_mask": mask.long(),
        "advantages": adv,
        "old_per_token_logps": old,
        "ref_per_token_logps": ref,
        "num_items_in_batch": mask.sum() if num_items is None else num_items,
    }
    loss = trainer._compute_loss(trainer.model, inputs)
    return loss.detach(), torch.autograd.grad(loss, logp)[0]


@pytest.mark.parametrize("eps_high", [None, 0.28], ids=["symmetric", "clip-higher"])
@pytest.mark.parametrize("beta", [0.0, 0.04], ids=["beta0", "beta0.04"])
@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "dr_grpo"])
def test_loss_parity_with_trl(trl, ref_dir, task, monkeypatch, loss_type, beta, eps_high):
    cfg = trl_named(
        unbiased_std=True,
        loss_type=loss_type,
        beta=beta,
        eps_high=eps_high,
        max_length=T,
        group_size=G,
        epochs=1,
        minibatches=1,
    )
    loss, grad = _ours(cfg, monkeypatch)
    trl_loss, trl_grad = _theirs(_trainer(cfg, ref_dir, task))
    assert abs(float(loss - trl_loss)) <= 1e-6
    assert (grad - trl_grad).abs().max() <= 1e-6
    logp, old, _, adv, mask = _batch()
    clip = Fn.clipped_surrogate_loss(logp, old, adv, cfg.eps_low, cfg.eps_high, mask=mask)[1]["clip_ratio"]
    assert grad.abs().max() > 1e-3 and 0.1 < clip < 0.9  # both sides of the clip are exercised


def test_trl_dapo_normalises_by_the_generation_batch(trl, ref_dir, task, monkeypatch):
    """grpo_edu's token_mean ("dapo") averages over the minibatch's tokens = TRL's "bnpo". TRL's
    "dapo" divides by the generation batch's tokens / steps_per_generation: the same with one
    minibatch, not with several minibatches of different lengths."""
    cfg = trl_named(unbiased_std=True, loss_type="dapo", beta=0.0, group_size=G, epochs=1, minibatches=1)
    loss, _ = _ours(cfg, monkeypatch)
    one = _trainer(cfg, ref_dir, task)
    two = _trainer(
        trl_named(unbiased_std=True, loss_type="dapo", beta=0.0, group_size=G, epochs=1, minibatches=2), ref_dir, task
    )
    for trainer in (one, two):  # trl_config maps "dapo" to TRL's "bnpo"; switch to TRL's own "dapo"
        trainer.loss_type = trainer.args.loss_type = "dapo"
    assert abs(float(loss - _theirs(one)[0])) <= 1e-6
    mask = _batch()[4]
    generation_tokens = mask.sum() + 2 * mask.sum()  # this minibatch's 28 tokens + another minibatch of 56
    trl_loss = _theirs(two, num_items=generation_tokens)[0]
    assert float(trl_loss) == pytest.approx(float(loss) * float(mask.sum()) / float(generation_tokens / 2))
    assert abs(float(trl_loss - loss)) > 1e-3


def test_trl_default_bias_corrected_kl_differs(trl, ref_dir, task, monkeypatch):
    """TRL multiplies its k3 term by the ratio pi/pi_old by default (use_bias_correction_kl):
    a different KL gradient even where the ratio is 1. The map turns it off."""
    cfg = GRPOConfig(unbiased_std=True, beta=0.04, group_size=G, epochs=1, minibatches=1)
    loss, grad = _ours(cfg, monkeypatch)
    trl_loss, trl_grad = _theirs(_trainer(cfg, ref_dir, task, use_bias_correction_kl=True))
    assert (grad - trl_grad).abs().max() > 1e-3
    assert abs(float(loss - trl_loss)) > 1e-4


def _scored_by_trl(trainer, task, problems, completion_ids):
    """TRL's _generate_and_score_completions on given completions (a rollout_func feeds them)."""
    tok = task.tokenizer
    prompt_ids = [tok.encode(p.prompt, add_bos=True) for p in problems]
    trainer.rollout_func = lambda prompts, _: {
        "prompt_ids": prompt_ids,
        "completion_ids": completion_ids,
        "logprobs": None,
    }
    with hf.quiet():
        return trainer._generate_and_score_completions([{"prompt": "<bos>" + p.prompt} for p in problems])


def test_trl_advantages_use_the_unbiased_std(trl, ref_dir, task):
    """TRL's advantage is (r - mean) / (std + 1e-4) with the 1/(G-1) std: unbiased_std=True
    gives the same numbers, the derivation's 1/G std larger ones by sqrt(G/(G-1))."""
    cfg = GRPOConfig(unbiased_std=True, beta=0.0, group_size=G, epochs=1, minibatches=1)
    trainer = _trainer(cfg, ref_dir, task)
    problems = [p for p in task.sample(2, 11) for _ in range(G)]
    right = [task.tokenizer.encode(p.answer, add_eos=True) for p in problems]
    completions = [r if i in (0, 1, 4) else [3, 2] for i, r in enumerate(right)]  # "0<eos>" is wrong here
    out = _scored_by_trl(trainer, task, problems, completions)
    rewards = torch.tensor(hf.reward_fn(task)(["<bos>" + p.prompt for p in problems], [], completion_ids=completions))
    assert rewards.tolist() == [1, 1, 0, 0, 1, 0, 0, 0]
    unbiased, _ = Fn.group_advantages(rewards, G, eps=1e-4, unbiased=True)
    assert (out["advantages"] - unbiased).abs().max() <= 1e-6
    derivation, _ = Fn.group_advantages(rewards, G, eps=1e-4, unbiased=False)
    ratio = derivation / out["advantages"]
    assert torch.allclose(ratio, torch.full_like(ratio, (G / (G - 1)) ** 0.5), rtol=1e-3)


def test_end_to_end_parity_on_a_real_rollout(trl, ref_dir, task):
    """The whole step on the model itself: grpo_edu samples a rollout, TRL scores it (rewards,
    advantages, pi_ref log-probs) and computes its loss through the exported model's fused
    LM head; the loss and every parameter's gradient match grpo_edu's GRPO on TinyGPT."""
    from grpo_edu import generate
    from grpo_edu.rollout import expand

    cfg = GRPOConfig(unbiased_std=True, beta=0.04, group_size=G, epochs=1, minibatches=1)
    trainer = _trainer(cfg, ref_dir, task)
    policy, reference = _policy(), _policy()
    problems = task.sample(B // G, 2)
    ro = generate(
        policy,
        task.encode_prompts(problems),
        group_size=G,
        max_new_tokens=task.max_answer_length,
        generator=torch.Generator().manual_seed(0),
        tokenizer=task.tokenizer,
    )
    scores = task.token_scores(expand(problems, G), ro.completion_ids, ro.mask)
    algo = GRPO(cfg).setup(policy, reference)
    policy.train()
    batch = algo.prepare(ro, scores)
    loss, _ = algo.loss(batch, torch.arange(B))
    loss.backward()
    completions = [row[: int(n)].tolist() for row, n in zip(ro.completion_ids, ro.lengths)]
    inputs = _scored_by_trl(trainer, task, expand(problems, G), completions)
    assert (inputs["advantages"] - batch.advantages).abs().max() <= 1e-6
    trl_loss = trainer._compute_loss(trainer.model, inputs)
    trl_loss.backward()
    assert abs(float(loss.detach() - trl_loss.detach())) <= 1e-6
    theirs = dict(trainer.model.named_parameters())
    for ours_name, their_name, transposed in hf.export._weight_pairs(policy.config.n_layers):
        g = dict(policy.named_parameters())[ours_name].grad
        h = theirs[their_name].grad
        assert (g - (h.T if transposed else h)).abs().max() <= 1e-6, ours_name


def test_bench_trl_times_both_side_by_side(trl, task):
    """The speed comparison runs end to end: every phase timed for grpo_edu (with and without
    shared prompts) and TRL, and the table names each row."""
    cfg = GRPOConfig(unbiased_std=True, group_size=4)
    r = hf.bench_trl(_policy(), task, cfg, sequences_per_step=32, settings=((1, 1),), repeats=2)
    (row,) = r["settings"]
    assert row["cycles"] == 2 and r["group_size"] == 4 and r["threads"] == 1
    for who in ("grpo_edu", "grpo_edu_unshared", "trl"):
        d = row[who]
        assert all(d[k] >= 0 for k in ("sample", "reward", "prep")) and d["total"] > 0, who
        assert d["total"] >= d["sample"] + d["reward"] + d["prep"] - 1e-9, who
    assert row["ratio"] == row["grpo_edu"]["total"] / row["trl"]["total"]
    text = hf.format_bench_trl(r)
    assert "mu=1 grpo_edu unshared / TRL" in text and "mu=1 trl" in text
