"""The two-process pipeline (grpo_edu/studies/pipeline.py): with no lag allowed it is the synchronous loop
step for step; a run through two processes learns where the same run with the update switched off does
not, and its recorded lag never exceeds the bound; an error, Ctrl-C or a kill in either process stops
both and leaves no child; where the child cannot start, a one-line warning and the synchronous loop; bad
input is one line before any work. (The error tests start the child with fork, the others with spawn,
the default: spawn imports torch again, about 2 s a run.)"""

import multiprocessing
import os
import re
import signal
import warnings

import pytest
import torch

from grpo_edu import ModelConfig, TinyGPT, make_algorithm, train
from grpo_edu.studies.pipeline import PipelineError, check_pipeline, train_pipeline


class FirstTokenSeven:
    """The arithmetic task with a reward a random tiny policy learns in a few steps: 1 when the first
    completion token is "7" (tests/test_objectives.py's), and, for the error tests, a fault at its n-th
    sample: an exception, or a KeyboardInterrupt (Ctrl-C in the generator). Module level: spawn pickles it."""

    def __init__(self, task, fault_at=None, fault=RuntimeError):
        self.task, self.fault_at, self.fault, self.calls = task, fault_at, fault, 0
        self.target = task.tokenizer.encode("7")[0]

    def __getattr__(self, name):  # the rest is the arithmetic task's
        if name == "task":
            raise AttributeError(name)
        return getattr(self.task, name)

    def sample(self, n, rng):
        self.calls += 1
        if self.calls == self.fault_at:
            raise self.fault("boom in the generator")
        return self.task.sample(n, rng)

    def token_scores(self, problems, completion_ids, mask, kind="outcome"):
        scores = torch.zeros(mask.shape)
        scores[:, 0] = (completion_ids[:, 0] == self.target).float()
        return scores


def _tiny():
    torch.manual_seed(0)
    return TinyGPT(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=12))


def _run(task, cpu_preset, fn=train_pipeline, lr=3e-3, steps=25, **kw):
    kw.setdefault("eval_every", steps)
    algo = make_algorithm("grpo", group_size=8, beta=0.0, lr=lr)
    return fn(algo, task=task, reference=_tiny(), preset=cpu_preset, steps=steps, sequences_per_step=64,
              progress=False, **kw)  # fmt: skip


def _gone(pid: int) -> bool:
    """No such process, or a zombie (exited; where no init reaps it, its entry stays)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
    except OSError:  # no /proc
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


def _pid(exc) -> int:
    return int(re.search(r"generator process \(pid (\d+)\)", " ".join(getattr(exc, "__notes__", []))).group(1))


def test_with_no_lag_allowed_the_pipeline_is_the_synchronous_loop_step_for_step(task, reference, cpu_preset):
    """max_staleness=0: the generator waits for each update, draws the same seeds: train()'s numbers."""
    kw = dict(steps=3, sequences_per_step=64, eval_every=3, progress=False)
    sync = train(make_algorithm("grpo"), task=task, reference=reference, preset=cpu_preset, **kw)
    pipe = train_pipeline(make_algorithm("grpo"), task=task, reference=reference, preset=cpu_preset, max_staleness=0, **kw)  # fmt: skip
    for key in ("reward", "kl", "grad_norm", "clip_ratio"):
        assert pipe.series(key).tolist() == sync.series(key).tolist(), key
    assert pipe.eval_series().tolist() == sync.eval_series().tolist()
    assert pipe.series("lag").tolist() == [0, 0, 0] and pipe.config["pipeline"] == "async"
    assert multiprocessing.active_children() == []


def test_two_processes_learn_within_the_lag_bound_and_without_updates_do_not(task, cpu_preset):
    """K = 2: the learner trains on batches up to 2 versions old (each 4 optimizer steps: staleness 8) and
    the reward of "7" first still rises by more than 0.3 in 25 steps; the control, lr 1e-9, does not."""
    rise = {}
    for lr in (3e-3, 1e-9):
        h = _run(FirstTokenSeven(task), cpu_preset, lr=lr, max_staleness=2, start_method="fork")
        reward = h.series("reward")
        rise[lr] = reward[-5:].mean() - reward[:5].mean()
        lag = h.series("lag")
        assert lag.max() <= 2 and lag[0] == 0 and (lag == 2).any(), lag  # the bound held, and was reached
        assert (h.series("staleness") == 4 * lag).all()  # 2 epochs x 2 minibatches: 4 optimizer steps a version
    assert rise[3e-3] > 0.3 and not rise[1e-9] > 0.3, rise


def test_the_correction_sees_the_lag(task, cpu_preset):
    """With off_policy_correction="decoupled" a batch of no lag has AReaL's weight pi_prox / pi_behav exactly 1
    (the learner sampled it), a lagged batch a weight that is not: pi_prox is the learner's own, recomputed.
    The learner told the off-policy path each batch's own lag."""
    algo = make_algorithm("grpo", group_size=8, beta=0.0, lr=3e-3, off_policy_correction="decoupled")
    h = train_pipeline(algo, task=FirstTokenSeven(task), reference=_tiny(), preset=cpu_preset, steps=4,
                       sequences_per_step=64, progress=False, max_staleness=1, start_method="fork")  # fmt: skip
    weight, lag = h.series("off_policy_is_ratio_mean"), h.series("lag")
    assert lag[0] == 0 and (lag[1:] == 1).all() and weight[0] == 1.0 and (weight[1:] != 1.0).all(), (lag, weight)
    assert algo.config.policy_lag == 0 and not hasattr(algo, "_lagged")  # the algorithm given back as it was


@pytest.mark.parametrize("correction, path", [("none", 4), ("decoupled", 4), ("tis", 4), ("ppo_clip", 0), ("m2po", 0)])
def test_a_lagged_batch_takes_the_off_policy_path_only_where_the_correction_reads_the_learner(correction, path):
    """4 optimizer steps behind: the ring's path (policy_lag = 4: pi_prox recomputed) for the corrections that
    read the learner's log-probs; ppo_clip and m2po read the sampler's only, the plain path (no extra forward)."""
    from grpo_edu.studies.pipeline import _Behind

    algo = make_algorithm("grpo", off_policy_correction=correction).setup(_tiny(), None)
    behind = _Behind(algo)
    behind.set(4)
    assert algo.config.policy_lag == path and behind.staleness == 4 and algo._lagged.staleness == 4
    behind.restore()
    assert algo.config.policy_lag == 0 and not hasattr(algo, "_lagged")


@pytest.mark.parametrize("fault, says", [(RuntimeError, "RuntimeError: boom in the generator"), (KeyboardInterrupt, "KeyboardInterrupt")])  # fmt: skip
def test_an_error_or_ctrl_c_in_the_generator_stops_both_in_one_line(task, cpu_preset, fault, says):
    with pytest.raises(PipelineError) as e:
        _run(FirstTokenSeven(task, fault_at=3, fault=fault), cpu_preset, max_staleness=1, start_method="fork")
    message = str(e.value)
    assert "\n" not in message and says in message and message.startswith("the generator process failed at batch 2")
    assert "Traceback" in e.value.child_traceback or fault is KeyboardInterrupt
    assert _gone(_pid(e.value)) and multiprocessing.active_children() == []


@pytest.mark.parametrize(
    "sig, says",
    [(9, r"the generator process \(pid \d+\) died \(exit code -9\)"), (2, r"failed at batch \d+: KeyboardInterrupt")],
    ids=["SIGKILL", "SIGINT"],
)
def test_a_generator_killed_or_interrupted_stops_the_learner(task, cpu_preset, sig, says):
    """A real signal to the child alone, at any point of its loop (a condition's notify would wait forever for
    a waiter killed in its wait: the learner must not)."""

    def signal_it(info):
        if info.step == 2:
            os.kill(multiprocessing.active_children()[0].pid, sig)

    # a forked child inherits its parent's SIGINT handling, and a pytest-xdist worker ignores SIGINT: run as a
    # program from a terminal does (Python's default handler), or the child would never see the signal
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(PipelineError, match=says) as e:
            _run(FirstTokenSeven(task), cpu_preset, steps=40, callback=signal_it, start_method="fork")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert "\n" not in str(e.value) and _gone(_pid(e.value)) and multiprocessing.active_children() == []


KILLED_LEARNER = """
import multiprocessing, time, torch
from grpo_edu import ModelConfig, TinyGPT, get_preset, make_algorithm, make_task
from grpo_edu.studies.pipeline import train_pipeline

def stuck(info):  # the learner, after its first step: says its child's pid, then hangs until killed
    print(multiprocessing.active_children()[0].pid, flush=True)
    time.sleep(60)

if __name__ == "__main__":
    torch.manual_seed(0)
    p, tiny = get_preset("cpu"), TinyGPT(ModelConfig(d_model=16, n_layers=1, n_heads=2, max_seq_len=12))
    train_pipeline(make_algorithm("grpo", beta=0.0), make_task(p), tiny, preset=p, steps=5, sequences_per_step=64,
                   progress=False, callback=stuck, start_method="fork")
"""


def test_a_learner_killed_outright_leaves_no_orphan(tmp_path):
    """SIGKILL runs no cleanup in the learner: the generator sees its parent gone and exits by itself."""
    import subprocess
    import sys
    import time

    (tmp_path / "learner.py").write_text(KILLED_LEARNER)
    learner = subprocess.Popen([sys.executable, str(tmp_path / "learner.py")], stdout=subprocess.PIPE, text=True)
    pid = int(learner.stdout.readline())
    assert not _gone(pid)  # the control: the generator was running
    learner.kill()
    learner.wait()
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    gone = _gone(pid)
    if not gone:  # the orphan the test found, not left behind
        os.kill(pid, 9)
    assert gone


@pytest.mark.parametrize("fault", [ValueError, KeyboardInterrupt])
def test_an_error_or_ctrl_c_in_the_learner_stops_the_generator(task, cpu_preset, fault):
    def fail(info):
        if info.step == 2:
            raise fault("boom in the learner")

    with pytest.raises(fault, match="boom in the learner") as e:
        _run(FirstTokenSeven(task), cpu_preset, callback=fail, start_method="fork")
    assert _gone(_pid(e.value)) and multiprocessing.active_children() == []


def test_where_processes_cannot_start_it_warns_in_one_line_and_runs_the_synchronous_loop(task, cpu_preset, monkeypatch):  # fmt: skip
    def refuse(self):
        raise OSError("no processes here")

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        h = _run(FirstTokenSeven(task), cpu_preset, steps=3)
    (w,) = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert str(w.message) == ("the two-process pipeline could not start (OSError: no processes here): training "
                              "with the synchronous loop instead")  # fmt: skip
    sync = _run(FirstTokenSeven(task), cpu_preset, fn=train, steps=3)
    assert h.series("reward").tolist() == sync.series("reward").tolist() and "pipeline" not in h.config


class FailsOnArrival(FirstTokenSeven):
    """A task the child cannot unpickle: with RuntimeError, a child that cannot start; with KeyboardInterrupt,
    Ctrl-C while it starts."""

    def __setstate__(self, state):
        raise state["fault"]("on arrival")


@pytest.mark.parametrize("fault", [RuntimeError, KeyboardInterrupt])
def test_a_child_that_cannot_start_falls_back_and_ctrl_c_as_it_starts_stops(task, cpu_preset, fault):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if fault is KeyboardInterrupt:  # killed by its signal (exit code < 0): stopped, not run another way
            with pytest.raises(PipelineError, match=r"the generator process exited with code -2 before it was ready"):
                _run(FailsOnArrival(task, fault=fault), cpu_preset, steps=3)
        else:  # exit code 1: it cannot start here; the synchronous loop runs
            h = _run(FailsOnArrival(task, fault=fault), cpu_preset, steps=3)
            assert len(h.steps) == 3 and "pipeline" not in h.config
    warned = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert warned == ([] if fault is KeyboardInterrupt else [
        "the two-process pipeline could not start (the generator process exited with code 1 before it was ready): "
        "training with the synchronous loop instead"])  # fmt: skip
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize(
    "algo, kw, says",
    [
        ("grpo", {"max_staleness": -1}, "max_staleness must be an integer >= 0"),
        ("grpo", {"max_staleness": 1.5}, "max_staleness must be an integer >= 0"),
        ("grpo", {"max_staleness": True}, "max_staleness must be an integer >= 0"),
        ("ppo", {}, "the two-process pipeline trains GRPO"),
        ("grpo", {"policy_lag": 2}, "policy_lag=2 simulates a lag in one process"),
        ("grpo", {"sampler_dtype": "bfloat16"}, "sampler_dtype='bfloat16' with the pipeline"),
    ],
)
def test_bad_input_is_one_line_before_any_work(task, cpu_preset, monkeypatch, algo, kw, says):
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", lambda self: pytest.fail("started"))
    K = kw.pop("max_staleness", 1)
    algorithm = make_algorithm(algo, **kw)
    with pytest.raises(ValueError, match=re.escape(says)) as e:
        check_pipeline(algorithm, K)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match=re.escape(says)):
        train_pipeline(algorithm, task=task, reference=_tiny(), preset=cpu_preset, max_staleness=K)


# ------------------------------------------------------------------ grpo-edu train --pipeline async


def _cli_error(argv, capsys, code=2) -> str:
    from grpo_edu.command.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == code
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "usage:" not in err, err
    return out, err


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--pipeline", "fast"], "argument --pipeline: invalid choice: 'fast' (choose from 'sync', 'async')"),
        (["--pipeline", "async", "--max_staleness", "-1"], "argument --max_staleness: must be >= 0, got -1"),
        (["--max_staleness", "2"], "--max_staleness acts only with --pipeline async (got --pipeline sync)"),
        (["--pipeline", "async", "--algo", "ppo"], "--pipeline async: the two-process pipeline trains GRPO"),
        (["--pipeline", "async", "--policy_lag", "2"], "--pipeline async: policy_lag=2 simulates a lag in one process"),
    ],
)
def test_a_bad_pipeline_flag_is_one_line_before_any_work(capsys, flags, says):
    out, err = _cli_error(["train", "--steps", "2", *flags], capsys)
    assert out == "" and err.startswith("grpo-edu train: error: " + says), err  # nothing printed: no work began


@pytest.mark.parametrize("raised, code, says", [
    (PipelineError("the generator process failed at batch 2: RuntimeError: boom (x.py:1); the learner stopped too"), 2,
     "grpo-edu train: error: the generator process failed at batch 2: RuntimeError: boom"),
    (KeyboardInterrupt(), 130, "grpo-edu train: interrupted: the learner and the generator process stopped"),
])  # fmt: skip
def test_the_commands_stop_on_the_pipelines_error_or_ctrl_c_is_one_line(capsys, monkeypatch, raised, code, says):
    import grpo_edu.studies.pipeline as pipeline

    def fail(*args, **kwargs):
        raise raised

    monkeypatch.setattr(pipeline, "train_pipeline", fail)
    out, err = _cli_error(["train", "--pipeline", "async", "--steps", "2", "--quiet"], capsys, code)
    assert out.startswith("training grpo (cpu preset, seed 0, two processes, max_staleness 1)") and err.startswith(says)


# ------------------------------------------------------------------ the race (python -m grpo_edu.studies.pipeline_race)


def test_the_races_table_computes_the_ratios():  # its --help: tests/test_package_maps.py STUDY_COMMANDS
    from grpo_edu.studies import pipeline_race as race

    names = list(race.variants(["ppo_clip"], (0, 2)))
    assert names == ["sync, 1 thread", "sync, 2 threads", "two processes K=0, ppo_clip", "two processes K=2, ppo_clip"]
    assert race.variants(["none"], (4,))["two processes K=4, none"] == (1, "none", 4)
    assert (
        race._at_zero("two processes K=2, none") == "two processes K=0, none"
        and race._at_zero("sync, 1 thread") is None
    )
    runs = [{"variant": v, "seed": 0, "seconds": s, "steps": 60, "accuracy": 0.91, "wall": s + 2, "step_seconds": 0.2}
            for v, s in zip(names, (40.0, 50.0, 30.0, 36.0))]  # fmt: skip
    runs[2].update(lag=0.0, lag_max=0, start=2.0, generate=0.03, wait=0.001)
    runs[3].update(lag=1.9, lag_max=2, start=2.0, generate=0.03, wait=0.001)
    res = {"machine": {"cpu": "X", "cores": 2, "kernel": "AVX2", "torch": "2"}, "max_staleness": [0, 2], "seeds": [0],
           "runs": runs, "median": race.medians(runs)}  # fmt: skip
    text = race.format_race(res)
    assert "machine: X, 2 cores" in text and "lag 1.90 (max 2), start 2.0 s, generate 30 ms, learner waits 1 ms" in text
    assert "each max_staleness K (0, 2)" in text
    last = text.splitlines()
    assert last[-1].endswith("ratio 0.90, vs K=0 1.20")  # 36/40, 36/30
    assert last[-2].endswith("ratio 0.75") and last[-3].endswith("ratio 1.25")  # 30/40 (the control), 50/40
