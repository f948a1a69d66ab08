"""TRL's GRPOTrainer on two CPU ranks for real (torchrun, gloo): the world is 2, the ranks hold the
same parameters after training, and on the same injected completions one 2-rank update is one
1-rank update over the same global batch, loss type by loss type, except where TRL's bnpo divides
by each rank's own tokens. One launch serves the whole file (~20-40 s on two cores).
Skipped without the [trl] extra."""

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is ever downloaded
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from grpo_edu.hf import launch as L  # noqa: E402  (neither imports an optional package)
from grpo_edu.hf import missing_extra  # noqa: E402
from grpo_edu.hf import rank_parity as P  # noqa: E402

REASON = 'the [trl] extra is not installed: pip install -e ".[trl]"'
# launch() checks nproc, steps and sequences_per_step > 0 first, then that the extra is there
needs_trl = pytest.mark.skipif(missing_extra() is not None, reason=REASON)
ROWS = 12  # injected generation batch: 3 prompts x G=4; rank 0 rows 0-5, rank 1 rows 6-11 (group 1 straddles)


@pytest.fixture(scope="module")
def trl():
    for name in ("transformers", "tokenizers", "datasets", "accelerate"):
        pytest.importorskip(name, reason=REASON)
    return pytest.importorskip("trl", reason=REASON)


@pytest.fixture(scope="module")
def run(trl, reference, tmp_path_factory):
    """Two ranks: 2 generations of 32 completions (16 per rank, 8 optimizer steps), then one
    injected update per loss type, each rank writing its gradient."""
    out = tmp_path_factory.mktemp("two-ranks")
    return L.launch(nproc=2, steps=2, out=out, policy=reference, sequences_per_step=32, parity=P.PARITY_LOSS_TYPES)


@pytest.fixture(scope="module")
def one_rank(run, task):
    """The same injected updates on one process (this one), with the per-block gradients."""
    return {
        lt: P.injected_update(os.path.join(run["out"], "model"), task, lt, rows=ROWS, shards=2)
        for lt in P.PARITY_LOSS_TYPES
    }


def _two_ranks(run, loss_type):
    return [torch.load(os.path.join(run["out"], f"parity_{loss_type}_rank{r}.pt")) for r in (0, 1)]


def test_the_world_is_two_real_ranks(run):
    ranks = run["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1] and {r["world_size"] for r in ranks} == {2}
    assert {r["distributed_type"] for r in ranks} == {"DistributedType.MULTI_CPU"} and {
        r["backend"] for r in ranks
    } == {"gloo"}
    assert [r["rows_per_step"] for r in ranks] == [16, 16]
    assert len(ranks[0]["prompts"]) == len(ranks[1]["prompts"]) == 16  # each rank scored its own rows
    assert set(ranks[0]["prompts"]) != set(ranks[1]["prompts"])  # the prompts are sharded, not copied


def test_parameters_are_identical_on_both_ranks_after_training(run):
    r0, r1 = run["ranks"]
    assert len(r0["steps"]) == len(r1["steps"]) == 8  # 2 generations x 2 epochs x 2 minibatches
    for s0, s1 in zip(r0["steps"], r1["steps"]):
        assert s0["param_sha256"] == s1["param_sha256"], s0["step"]  # bit for bit: DDP averages the gradients
    assert r0["steps"][-1]["param_sha256"] != r0["initial_param_sha256"]  # and training did move them
    assert [s["loss"] for s in r0["steps"]] != [s["loss"] for s in r1["steps"]]  # each rank its own rows' loss


@pytest.mark.parametrize("loss_type", P.PARITY_LOSS_TYPES)
def test_one_update_on_two_ranks_against_one_rank(run, one_rank, loss_type):
    """Per rank the loss over its 6 rows, then DDP's mean of the two gradients. grpo (mean over
    sequences), dr_grpo (sum / (sequences x max_completion_length)) and dapo (sum / (all ranks'
    tokens, gathered, / 2)) then equal one rank's update over the 12 rows. bnpo divides by each
    rank's own tokens: the mean of the two ranks' token means, not the mean over all tokens, as
    soon as the ranks hold different numbers of tokens."""
    two, one = _two_ranks(run, loss_type), one_rank[loss_type]
    assert [r["rows"] for r in two] == [list(range(6)), list(range(6, 12))] and one["rows"] == list(range(ROWS))
    assert (two[0]["grad"] - two[1]["grad"]).abs().max() == 0  # the averaged gradient, on every rank
    # the rewards are gathered before the group statistics: the advantages are one process's
    assert (torch.cat([r["advantages"] for r in two]) - one["advantages"]).abs().max() <= 1e-6
    assert one["advantages"][4:8].abs().min() > 0.1  # the group that straddles the ranks carries signal
    n0, n1 = two[0]["tokens"], two[1]["tokens"]
    l0, l1 = two[0]["loss"], two[1]["loss"]
    assert n0 + n1 == one["tokens"] and n0 != n1
    g, g_one = two[0]["grad"], one["grad"]
    assert g_one.abs().max() > 1e-2
    if loss_type != "bnpo":
        assert (g - g_one).abs().max() <= 1e-6
        assert abs((l0 + l1) / 2 - one["loss"]) <= 1e-6  # the 2-rank objective is the 1-rank loss
        return
    g0, g1 = one["shard_grads"]  # what each rank computes alone on its 6 rows
    assert (g - (g0 + g1) / 2).abs().max() <= 1e-6  # two ranks: the mean of the ranks' token means
    assert (g_one - (n0 * g0 + n1 * g1) / (n0 + n1)).abs().max() <= 1e-6  # one rank: the token-weighted mean
    assert (g - g_one).abs().max() > 1e-3
    assert abs((n0 * l0 + n1 * l1) / (n0 + n1) - one["loss"]) <= 1e-6 and abs((l0 + l1) / 2 - one["loss"]) > 1e-3


def test_bnpo_equals_dapo_on_one_rank_only(run, one_rank):
    """With one minibatch on one process TRL's bnpo and dapo are the same token mean; on two ranks
    dapo keeps it (gathered token count), bnpo does not."""
    assert (one_rank["bnpo"]["grad"] - one_rank["dapo"]["grad"]).abs().max() <= 1e-6
    assert (_two_ranks(run, "bnpo")[0]["grad"] - _two_ranks(run, "dapo")[0]["grad"]).abs().max() > 1e-3


def test_accelerate_cpu_launch_runs_one_process_and_says_so(trl, reference, tmp_path):
    """`accelerate launch --cpu --num_processes 2` starts one process (WORLD_SIZE 1): launch says
    so and names the command that works, instead of training on one rank."""
    with pytest.raises(
        L.WorldSizeError, match=r"asked for 2 processes, the launcher started 1 .*torch\.distributed\.run"
    ):
        L.launch(nproc=2, steps=1, out=tmp_path, policy=reference, sequences_per_step=32, launcher="accelerate-cpu")


def test_fixed_completion(task):
    """Right every third row, else wrong: a digit and EOS, or 1-4 digits without EOS, longer with the row."""
    from grpo_edu.hf import reward_fn

    p = next(q for q in task.sample(200, 0) if q.answer == "18")  # 81, least significant digit first
    got = [P.fixed_completion(task, p, row) for row in (0, 1, 2, 5, 8, 11, 14)]
    assert got[0] == task.tokenizer.encode("18", add_eos=True)
    assert got[1] == task.tokenizer.encode("3", add_eos=True)  # (1 + 1 + 1) % 10: never the first digit "1"
    assert [len(c) for c in got[2:]] == [1, 2, 3, 4, 1] and all(task.tokenizer.eos_id not in c for c in got[2:])
    assert reward_fn(task)(["<bos>" + p.prompt] * 7, [], completion_ids=got) == [1, 0, 0, 0, 0, 0, 0]


def test_check_world():
    L.check_world([{"rank": 0, "world_size": 2}, {"rank": 1, "world_size": 2}], 2)
    with pytest.raises(L.WorldSizeError, match=r"asked for 2 processes, the launcher started 1 \(world size \[1\]"):
        L.check_world([{"rank": 0, "world_size": 1}], 2)
    with pytest.raises(L.WorldSizeError, match="started 0"):
        L.check_world([], 2)


def test_a_rank_shuts_its_process_group_down_before_it_exits(tmp_path):
    """A rank that finished closes its gloo group itself: left to the interpreter's exit, gloo's
    worker threads can be destroyed unjoined and abort the rank (SIGABRT) after its work is done."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        assert dist.is_initialized()  # control: open until the worker closes it
        L._close_process_group()
        assert not dist.is_initialized()
        L._close_process_group()  # a process without a group: nothing to do
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"nproc": 0}, "nproc"),
        ({"steps": 1.5}, "steps"),
        pytest.param({"sequences_per_step": 36}, "sequences_per_step", marks=needs_trl),
        pytest.param({"launcher": "mpirun"}, "launcher", marks=needs_trl),
        pytest.param({"parity": ("cispo",)}, "parity", marks=needs_trl),
    ],
)
def test_launch_bad_input_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        L.launch(**kwargs)
