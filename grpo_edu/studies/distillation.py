"""On-policy distillation against SFT on the teacher's answers and GRPO, at equal tokens and time (issue 50).

On-policy distillation (Agarwal et al. 2024, GKD; Thinking Machines 2025): the student samples, a teacher
scores every token of the student's own answer, A_t = -(log pi_student(a_t) - log pi_teacher(a_t))
(`grpo_edu.algorithms.distill`). Reported: a dense signal like SFT's, on the student's own states like
RL's, a score like RL's at a fraction of its compute. What it needs, written down before the measurement:
a teacher that is right where the student is wrong. Where the teacher is wrong too, it has nothing to give
that the 0/1 reward would not.

The worlds (cpu preset): "default" and "spread" (`presets.WORLDS`). The student is the world's reference;
the teachers, each trained from that reference with GRPO (``teacher_steps`` steps, 512 answers a step, its
own seed) and cached (``$GRPO_EDU_CACHE/distillation``):

    RL teacher          GRPO on the whole task: a course policy that RL made better than the reference
    easy-only teacher   GRPO on the easy prompts only (both operands < the spread bound): right where the
                        spread reference already is, wrong on the hard prompts (spread world only)

The arms, each from the reference, ``steps`` x 512 answers (equal generated answers; the tokens are counted):

    on-policy distillation        the student samples, the teacher scores each token (objective "advantage")
    SFT on the teacher's answers  the teacher samples, the student trains on -log pi(a_t) of its answers
    GRPO, 0/1 reward              make_algorithm("grpo"): 64 prompts x 8, the reward and no teacher

and a control, once: distillation from a teacher equal to the student (its signal is zero: nothing moves).
Measured: greedy held-out accuracy (500 problems), on the easy and the hard prompts (an operand >= the
spread bound), the generated tokens, the training wall time, the accuracy at equal generated tokens (each
arm's last evaluation within the fewest tokens any arm of its seed generated) and at equal wall time (within
the fastest arm's time). The wall time is the compute here: it counts the teacher's forward pass over every
student token (Thinking Machines count GPU hours, the teacher's passes included). Verdicts
(`measure.verdicts`), paired per seed, margin 0.02; each can go either way (tests/regime_verdicts.json pins
the tiny run's).

    python -m grpo_edu.studies.distillation --seeds 3       # about 3 minutes on one thread (2 with the teachers cached)
    python -m grpo_edu.studies.distillation --seeds 3 --store   # and rewrite the stored result notebook 14 reads
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import time
from pathlib import Path

import numpy as np

from ..measure.common import spread
from ..measure.verdicts import paired, rule, verdict

DISTILL, SFT, GRPO = "on-policy distillation", "SFT on the teacher's answers", "GRPO, 0/1 reward"
ARMS = {  # name -> (algorithm, its switches)
    DISTILL: ("distill", {}),
    SFT: ("distill", {"samples": "teacher", "objective": "nll"}),
    GRPO: ("grpo", {}),
}
CASES = {  # name -> (world, teacher, arms)
    "default world, RL teacher": ("default", "rl", (DISTILL, SFT, GRPO)),
    "spread world, RL teacher": ("spread", "rl", (DISTILL, SFT, GRPO)),
    "spread world, easy-only teacher": ("spread", "easy", (DISTILL, SFT)),
}
COMPARISONS = (  # (case, arm, against it in case, measure, the claim): a paired difference per seed
    ("default world, RL teacher", DISTILL, ("default world, RL teacher", GRPO), "all", "distillation beats GRPO"),
    ("default world, RL teacher", DISTILL, ("default world, RL teacher", SFT), "all", "distillation beats SFT on the teacher's answers"),
    ("spread world, RL teacher", DISTILL, ("spread world, RL teacher", GRPO), "all", "distillation beats GRPO"),
    ("spread world, RL teacher", DISTILL, ("spread world, RL teacher", SFT), "all", "distillation beats SFT on the teacher's answers"),
    ("default world, RL teacher", DISTILL, ("default world, RL teacher", GRPO), "acc_equal_tokens", "distillation beats GRPO at equal generated tokens"),
    ("spread world, RL teacher", DISTILL, ("spread world, RL teacher", GRPO), "acc_equal_tokens", "distillation beats GRPO at equal generated tokens"),
    ("default world, RL teacher", DISTILL, ("default world, RL teacher", GRPO), "acc_equal_time", "distillation beats GRPO at equal wall time"),
    ("spread world, RL teacher", DISTILL, ("spread world, RL teacher", GRPO), "acc_equal_time", "distillation beats GRPO at equal wall time"),
    ("spread world, easy-only teacher", DISTILL, ("spread world, RL teacher", GRPO), "hard", "distillation from a teacher wrong on the hard prompts beats GRPO there"),
)  # fmt: skip
MARGIN = 0.02
SIZES = {  # "full": the study's budget; "tiny": the test's (seconds, numbers meaningless)
    "full": dict(teacher_steps=60, steps=20, eval_every=2, sequences_per_step=None),  # the preset's batch
    "tiny": dict(teacher_steps=1, steps=1, eval_every=1, sequences_per_step=16),
}
STORED = Path(__file__).with_name("data") / "distillation.json"
"""The result of ``--seeds 3 --store`` (the cpu preset, seed 0): notebook 14 reads it with `stored`."""
TEACHER_SEED = 1000  # added to the preset's seed: the teachers' runs share no seed with the arms'
# the project files whose code runs while a teacher is trained, the reference's SFT sources and the RL loop's
# (tests/test_teacher_cache.py traces a short teacher and checks that every project file it runs is in this
# list): a change to any of them trains the teachers again
TEACHER_SOURCES = (
    "envs/*.py",
    "grpo_edu/model.py",
    "grpo_edu/progress.py",
    "grpo_edu/rollout.py",
    "grpo_edu/evaluation.py",
    "grpo_edu/tokenizer.py",
    "grpo_edu/train.py",
    "grpo_edu/algorithms/*.py",
    "grpo_edu/functional/*.py",
    "grpo_edu/warmstart/sft.py",
    "grpo_edu/warmstart/reference.py",
    "grpo_edu/studies/distillation.py",
)


class EasyPrompts:
    """``task`` with its training prompts restricted to both operands < ``bound`` (held-out set unchanged)."""

    def __init__(self, task, bound: int):
        self._task, self._bound = task, bound

    def sample(self, n: int, rng):
        from ..warmstart.sft import sample_below

        return sample_below(self._task, n, rng, self._bound)

    def __getattr__(self, name):
        return getattr(self._task, name)


def _bound(preset) -> int:
    from ..warmstart.presets import SPREAD

    return round(SPREAD["operand_fraction"] * 10 ** preset.task["digits"])


def teacher_policy(kind: str, task, preset, reference, steps: int, sequences_per_step=None, cache=None):
    """The teacher ``kind`` ("rl" | "easy") of the preset's world: GRPO from ``reference`` for ``steps`` steps
    (on the easy prompts only for "easy"), trained once and cached under ``cache`` (None: the reference
    cache's ``distillation/``). The file name is a hash of everything that determines the teacher's weights:
    the reference's config (`reference_config` with the preset's device: task, model, SFT config, the SFT's
    code, torch, the CPU kernel, the device type), ``reference``'s own model config and a hash of its weights,
    the task's config (its reward too), the kind (and the easy prompts' bound), the budget, the seed, and a hash
    of the code that trains the teacher (`TEACHER_SOURCES`): a teacher trained by other code, from another
    reference or on another device is never loaded in its place."""
    import torch

    from ..algorithms import make_algorithm
    from ..train import train
    from ..warmstart.reference import cache_dir, code_fingerprint, reference_config, weights_hash

    if kind not in ("rl", "easy"):
        raise ValueError(f"teacher kind must be 'rl' or 'easy', got {kind!r}")
    key = {"reference": reference_config(task, preset.model, preset.sft, preset.device),
           "reference_weights": weights_hash(reference), "reference_model": reference.config.to_dict(),
           "task": task.config, "kind": kind, "bound": _bound(preset) if kind == "easy" else None, "steps": steps,
           "sequences_per_step": sequences_per_step or preset.sequences_per_step, "seed": preset.seed + TEACHER_SEED,
           "source": code_fingerprint(TEACHER_SOURCES)}  # fmt: skip
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
    path = Path(cache if cache is not None else cache_dir() / "distillation") / f"teacher-{kind}-{digest}.pt"
    teacher = copy.deepcopy(reference)
    if path.exists():
        try:
            teacher.load_state_dict(torch.load(path, weights_only=True))
            return teacher.eval()
        except (RuntimeError, OSError, ValueError) as exc:  # corrupted or foreign: train it again
            print(f"distillation: retraining the teacher, {path} unreadable ({type(exc).__name__})")
    on = EasyPrompts(task, _bound(preset)) if kind == "easy" else task
    train(make_algorithm("grpo"), on, reference, teacher, preset, steps=steps, seed=preset.seed + TEACHER_SEED,
          sequences_per_step=sequences_per_step, eval_every=steps, progress=False, name=f"teacher {kind}")  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save(teacher.state_dict(), tmp)
    os.replace(tmp, path)
    return teacher.eval()


def accuracies(policy, task, bound: int) -> dict:
    """Greedy held-out accuracy on all, the easy and the hard problems (an operand >= ``bound``)."""
    from ..evaluation import evaluate
    from ..measure.difficulty import easy_mask

    _, correct = evaluate(policy, task, return_correct=True)
    c, easy = np.asarray(correct.cpu(), float), easy_mask(task.eval_problems(), bound)
    return {"all": float(c.mean()), "easy": float(c[easy].mean()), "hard": float(c[~easy].mean())}


def run_arm(arm, task, preset, reference, teacher, seed, size) -> dict:
    """One arm of `ARMS` from ``reference`` (``teacher``: the distillation arms'): its accuracies at the end,
    generated ``tokens``, training ``seconds``, ``evals`` ``[(seconds, accuracy)]`` and ``evals_tokens``
    ``[(generated tokens so far, accuracy)]``."""
    from ..algorithms import make_algorithm
    from ..train import train

    name, switches = ARMS[arm] if arm in ARMS else (None, None)
    if name is None:
        raise ValueError(f"unknown arm {arm!r}; choose from {list(ARMS)}")
    algorithm = make_algorithm(name, **switches, **({"teacher": teacher} if name == "distill" else {}))
    policy, tokens = copy.deepcopy(reference), [0.0]  # tokens[i]: generated by the end of step i
    h = train(algorithm, task, reference, policy, preset, steps=size["steps"], seed=seed, eval_every=size["eval_every"],
              sequences_per_step=size["sequences_per_step"], progress=False, name=arm,
              callback=lambda info: tokens.append(tokens[-1] + float(info.rollout.mask.sum())))  # fmt: skip
    return {**accuracies(policy, task, _bound(preset)), "tokens": tokens[-1], "seconds": h.steps[-1]["seconds"],
            "evals": [(e["seconds"], e["accuracy"]) for e in h.evals],
            "evals_tokens": [(tokens[e["step"]], e["accuracy"]) for e in h.evals]}  # fmt: skip


def at_time(evals, seconds: float) -> float:
    """The accuracy of the last evaluation at or before ``seconds`` of training (step 0's at 0); the same for
    ``evals_tokens`` and a number of generated tokens."""
    return [a for s, a in evals if s <= seconds + 1e-9][-1]


def run(preset="cpu", seeds=3, size="full", cases=None, cache=None, progress=True, references=None) -> dict:
    """Every case of `CASES` (or ``cases``) at seeds ``preset.seed + 0 .. seeds-1``, the teachers' and the
    references' accuracies, and the control; ``{"cases": {case: {"teacher", "reference", "runs": {arm: [..]}}},
    "own_teacher": {...}, "claims": verdicts}``, each run's ``acc_equal_tokens`` at its seed's fewest generated
    tokens and ``acc_equal_time`` at its fastest arm's training time. ``references``: ``{world: policy}`` in
    place of the worlds' SFT references (a test's tiny policies)."""
    from ..warmstart.presets import make_task, resolve_preset, setup_torch, with_world
    from ..warmstart.reference import reference_policy

    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; choose from {list(SIZES)}")
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"seeds must be an integer >= 1, got {seeds!r}")
    unknown = [c for c in cases or () if c not in CASES]
    if unknown:
        raise ValueError(f"unknown cases {unknown}; choose from {list(CASES)}")
    base, z = resolve_preset(preset), SIZES[size]
    setup_torch(base)
    out = {"size": size, "seeds": seeds, "cases": {}}
    for case in cases or CASES:
        world, kind, arms = CASES[case]
        p = with_world(base, world)
        task = make_task(p)
        own = (references or {}).get(world)
        reference = own if own is not None else reference_policy(p, task=task, progress=False)
        teacher = teacher_policy(kind, task, p, reference, z["teacher_steps"], z["sequences_per_step"], cache)
        rec = {"teacher": accuracies(teacher, task, _bound(p)), "reference": accuracies(reference, task, _bound(p)),
               "runs": {arm: [] for arm in arms}}  # fmt: skip
        for s in range(seeds):
            runs = {arm: run_arm(arm, task, p, reference, teacher, p.seed + s, z) for arm in arms}
            fastest, fewest = (min(r[k] for r in runs.values()) for k in ("seconds", "tokens"))
            for arm, r in runs.items():
                rec["runs"][arm].append({**r, "acc_equal_time": at_time(r["evals"], fastest),
                                         "acc_equal_tokens": at_time(r["evals_tokens"], fewest)})  # fmt: skip
            if progress:
                print(f"{case}, seed {s}: " + ", ".join(f"{a} {r['all']:.3f}" for a, r in runs.items()), flush=True)
        out["cases"][case] = rec
        if case == next(iter(cases or CASES)):  # the control, once: the student is its own teacher
            out["own_teacher"] = run_arm(DISTILL, task, p, reference, copy.deepcopy(reference), p.seed, z)
            out["own_teacher"]["reference"] = rec["reference"]["all"]
    out["claims"] = verdicts(out)
    return out


def stored(path=None) -> dict:
    """The stored result (`STORED`, or ``path``), as `run` returned it."""
    with open(path or STORED) as f:
        return json.load(f)


def verdicts(res: dict) -> list[dict]:
    """Each of `COMPARISONS` whose cases ran: the per-seed effect and its verdict at `MARGIN`."""
    rows = []
    for case, arm, (other_case, other), measure, claim in COMPARISONS:
        if case not in res["cases"] or other_case not in res["cases"]:
            continue
        a = [r[measure] for r in res["cases"][case]["runs"][arm]]
        b = [r[measure] for r in res["cases"][other_case]["runs"][other]]
        effects = paired(a, b)
        rows.append({"case": case, "claim": claim, "measure": measure, "effects": effects,
                     "verdict": verdict(effects, MARGIN)})  # fmt: skip
    return rows


def report(res: dict) -> str:
    """The tables and the verdicts, in text."""
    lines = [f"On-policy distillation, SFT on the teacher's answers, GRPO: {res['seeds']} seeds ({res['size']})"]
    for case, rec in res["cases"].items():
        t, ref = rec["teacher"], rec["reference"]
        lines += ["", f"{case}: reference all {ref['all']:.3f} easy {ref['easy']:.3f} hard {ref['hard']:.3f}; "
                  f"teacher all {t['all']:.3f} easy {t['easy']:.3f} hard {t['hard']:.3f}"]  # fmt: skip
        lines.append(
            f"  {'arm':30s} {'held-out':24s} {'easy':8s} {'hard':8s} {'tokens':>8s} {'seconds':>8s}  "
            f"{'at equal tokens':24s} at equal time"
        )
        for arm, runs in rec["runs"].items():
            col = {k: [r[k] for r in runs] for k in ("all", "easy", "hard", "tokens", "seconds", "acc_equal_tokens",
                                                     "acc_equal_time")}  # fmt: skip
            mean = {k: sum(v) / len(v) for k, v in col.items()}
            lines.append(f"  {arm:30s} {spread(col['all'], '.3f'):24s} {mean['easy']:<8.3f} {mean['hard']:<8.3f} "
                         f"{mean['tokens']:8.0f} {mean['seconds']:8.1f}  {spread(col['acc_equal_tokens'], '.3f'):24s} "
                         f"{spread(col['acc_equal_time'], '.3f')}")  # fmt: skip
    if "own_teacher" in res:
        c = res["own_teacher"]
        lines += [
            "",
            f"control (the student its own teacher): held-out {c['all']:.3f}, the reference {c['reference']:.3f}",
        ]
    lines += ["", f"verdicts ({rule(MARGIN, what='the paired difference', seeds=res['seeds'])}):"]
    for v in verdicts(res):
        effects = ", ".join(f"{e:+.3f}" for e in v["effects"])
        what = {"acc_equal_time": "at equal time", "acc_equal_tokens": "at equal tokens"}.get(
            v["measure"], v["measure"]
        )
        lines.append(f"  [{v['verdict']}] {v['case']}: {v['claim']} (held-out, {what}): {effects}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m grpo_edu.studies.distillation", description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=3, help="seeds per arm (default 3)")
    p.add_argument("--size", default="full", choices=list(SIZES), help="the budget (tiny: a smoke test)")
    p.add_argument("--cases", default=None, help=f"';'-separated, of: {'; '.join(CASES)}")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the numbers to this file")
    p.add_argument("--store", action="store_true", help=f"also write them to {STORED.name}, which notebook 14 reads")
    args = p.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(";")] if args.cases else None
    t0 = time.perf_counter()
    try:
        res = run(seeds=args.seeds, size=args.size, cases=cases)
    except ValueError as e:
        p.error(str(e))
    print(report(res))
    print(f"({time.perf_counter() - t0:.0f} s)")
    for path in [args.json] * bool(args.json) + [STORED] * args.store:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
