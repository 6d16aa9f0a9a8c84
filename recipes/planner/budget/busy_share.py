"""A device's share of the batch that keeps it busy. A GPU given few tokens an update spends its update on fixed costs
(kernel launches, the optimizer's step) and computes little; a larger batch over the same devices costs it hardly more
time. So no candidate gives a device fewer tokens an update than the share past which its seconds a token stop falling
steeply (:func:`busy_share`), and where every candidate's lowest comes before the budget ends, the batch is not shrunk
to fill the time: the pick trains to its lowest and the run ends early."""

from typing import Callable, Sequence

# doubling a device's share that saves at least this share of its seconds a token is still falling steeply
STEEP = 0.2


# a GPU's share without a speed file: the paper's 25,000 tokens an update over its 8 P100s (Section 5.2)
PAPER_SHARE = 25000 // 8


def busy_share(seconds_at: Callable[[int], float], shares: Sequence[int]) -> int:
    """The least of ``shares`` (tokens a device) past which doubling it saves less than STEEP of a device's seconds a
    token; ``seconds_at``: a device's seconds an update at a share. The most of ``shares`` where every doubling saves
    more."""
    for share in sorted(shares):
        if seconds_at(2 * share) / (2 * share) > (1 - STEEP) * seconds_at(share) / share:
            return share
    return max(shares)
