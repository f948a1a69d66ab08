"""TRL's loss names live in the bridge only (`grpo_edu.hf.names`): TRL's ``loss_type`` becomes grpo_edu's
``policy_loss`` and ``loss_type`` on the way in (`from_trl`, what the command line and config files call),
and the two knobs become TRL's settings on the way out (`trl_config`'s rows). No TRL install needed."""

import pytest

from grpo_edu.algorithms import GRPOConfig, PPOConfig, ReinforceConfig
from grpo_edu.algorithms.policy_losses import POLICY_LOSSES
from grpo_edu.functional import AGGREGATIONS
from grpo_edu.hf import knobs
from grpo_edu.hf.names import TRL_LOSS_TYPES, from_trl, to_trl


@pytest.mark.parametrize(
    "given, ours",
    [
        ({"loss_type": "grpo"}, {"loss_type": "sequence_mean"}),
        ({"loss_type": "bnpo"}, {"loss_type": "token_mean"}),
        ({"loss_type": "dapo"}, {"loss_type": "token_mean"}),
        ({"loss_type": "dr_grpo", "beta": 0.1}, {"loss_type": "constant", "beta": 0.1}),
        ({"loss_type": "cispo"}, {"loss_type": "token_mean", "policy_loss": "cispo"}),
        ({"importance_sampling_level": "sequence"}, {"policy_loss": "gspo"}),
        ({"importance_sampling_level": "sequence", "loss_type": "grpo"}, {"policy_loss": "gspo", "loss_type": "sequence_mean"}),
        ({"importance_sampling_level": "token"}, {}),
        ({"loss_type": "constant", "policy_loss": "gspo"}, {"loss_type": "constant", "policy_loss": "gspo"}),  # ours: as given
    ],
)  # fmt: skip
def test_from_trl_by_hand(given, ours):
    assert from_trl(GRPOConfig, given) == ours
    GRPOConfig(**ours)  # a config grpo_edu takes


def test_from_trl_for_the_rungs_without_an_objective_knob():
    assert from_trl(PPOConfig, {"loss_type": "dr_grpo"}) == {"loss_type": "constant"}
    with pytest.raises(ValueError, match=r"^ReinforceConfig\.loss_type must be one of \['bnpo', 'constant', 'dapo'"):
        from_trl(ReinforceConfig, {"loss_type": "cispo"})  # an objective REINFORCE has no knob for
    with pytest.raises(ValueError, match="ReinforceConfig has no importance_sampling_level"):
        from_trl(ReinforceConfig, {"importance_sampling_level": "sequence"})


@pytest.mark.parametrize(
    "given, match",
    [
        ({"loss_type": "foo"}, r"GRPOConfig\.loss_type must be one of \['bnpo', 'cispo', 'constant', 'dapo', 'dr_grpo', "
                               r"'grpo', 'sequence_mean', 'token_mean'\], got 'foo'"),
        ({"importance_sampling_level": "seq"}, r"GRPOConfig\.importance_sampling_level must be one of"),
        ({"loss_type": "cispo", "policy_loss": "gspo"}, r"GRPOConfig\.policy_loss='gspo' contradicts"),
        ({"loss_type": "cispo", "importance_sampling_level": "sequence"}, r"GRPOConfig\.loss_type='cispo' with"),
    ],
)  # fmt: skip
def test_from_trl_refuses_in_one_line(given, match):
    with pytest.raises(ValueError, match=match) as e:
        from_trl(GRPOConfig, given)
    assert "\n" not in str(e.value)


def test_every_row_is_a_pair_of_our_knobs_and_each_pair_of_ours_has_one_trl_name():
    """The map's rows name our policy losses and aggregations; trl_config writes, for each of our
    pairs TRL has, the first row's name (bnpo before dapo: ours is a mean over the minibatch's tokens)."""
    for row in TRL_LOSS_TYPES.values():
        assert row.policy_loss in POLICY_LOSSES and row.loss_type in AGGREGATIONS
    names = {(p, a): to_trl(GRPOConfig(policy_loss=p, loss_type=a))[0] for p in ("clip", "gspo") for a in AGGREGATIONS}
    assert names == {("clip", "sequence_mean"): "grpo", ("clip", "token_mean"): "bnpo", ("clip", "constant"): "dr_grpo",
                     ("gspo", "sequence_mean"): "grpo", ("gspo", "token_mean"): "bnpo", ("gspo", "constant"): "dr_grpo"}  # fmt: skip
    assert to_trl(GRPOConfig(policy_loss="gspo"))[2] == "sequence" and to_trl(GRPOConfig())[2] == "token"
    assert to_trl(GRPOConfig(policy_loss="cispo"))[0] == "cispo"


def test_the_loss_rows_of_trl_config_by_hand():
    """TRL's loss_type, importance_sampling_level and epsilon_high of our knobs (knobs._loss): CISPO's
    epsilon_high is TRL's cap itself, 1 + ours (control: PPO's clip passes eps_high as it is)."""
    cispo = knobs._loss(GRPOConfig(policy_loss="cispo", eps_high=0.28, minibatches=1), ())
    assert cispo == {"loss_type": "cispo", "importance_sampling_level": "token", "epsilon_high": 1.28}
    default_cap = knobs._loss(GRPOConfig(policy_loss="cispo", minibatches=1), ())["epsilon_high"]
    assert default_cap == 1.0 + POLICY_LOSSES["cispo"].clip(GRPOConfig(policy_loss="cispo"))[1] == 5.0
    clip = knobs._loss(GRPOConfig(eps_high=0.28), ())
    assert clip == {"loss_type": "bnpo", "importance_sampling_level": "token", "epsilon_high": 0.28}
    gspo = knobs._loss(GRPOConfig(policy_loss="gspo", loss_type="sequence_mean"), ())
    assert gspo == {"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon_high": None}
    with pytest.raises(knobs.NoCounterpart, match=r"GRPOConfig\.loss_type: TRL's 'cispo' with minibatches > 1"):
        knobs._loss(GRPOConfig(policy_loss="cispo", minibatches=2), ())
    assert knobs._loss(GRPOConfig(policy_loss="cispo", minibatches=2), {"loss_type"})["loss_type"] == "cispo"
