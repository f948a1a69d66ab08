"""The lab: the side worlds some notebooks measure, apart from the arithmetic ladder.

    maze_pg.py       the policy-gradient warm-up: REINFORCE on a maze with a table for a policy
    reward_model.py  a learned reward r_phi and the task that pays it: a reward that can be gamed
    silent_bugs.py   GRPO's silent bugs, each injected into the library's own loop, and their signatures
    accumulation_bug.py  one more: the token mean per micro-batch under gradient accumulation, and its signature

Each is imported where it is used (a notebook, a regime, a homework); nothing here is the ladder.
"""
