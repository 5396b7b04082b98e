"""The proof: whether a server's outputs are the target's. Pure functions from records to
verdicts, over the numpy-only statistics beneath (`sweeper.stats`).

- `verdicts.py`: the one list of verdict names, their severity order, colours and sets;
- `determinism.py`: token-exact judging (temperature 0, coupled sampling), per request and point;
- `garble.py`: how corrupt a text looks, against the baseline's;
- `calibration.py`: near-ties held to the AR-vs-AR control;
- `sampled.py`, `distribution.py`, `power.py`: the two-sample distribution test at
  temperature > 0, what its outcome proves, and how much it can see;
- `indistinguishable.py`: configs a run could not tell apart;
- `lines.py`: what a run proved, in a few lines: impossible tokens, points left unproven;
- `scored/`: the scored test (every sampled token scored by the target's prefill), whole: what
  each engine's scorer does, the processors, the processed distribution, the judge and a point's
  scored verdict as its run records it.
"""
