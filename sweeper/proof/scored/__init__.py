"""The scored proof (`determinism.sampled: scored`, and beside coupling): every token a server
sampled, scored by the target's own prefill, and judged against the distribution the target
samples from. Pure: data and records in, verdicts out.

- `catalog.py`: what each engine's scorer does, as plain data from its code (basis, top
  logprobs, self-scoring, sampler and logit order, near-tie margin); the engines read it to ask
  for scores and the plan to choose who scores;
- `processors.py`: the request's processors, defined once (`Sampling`), and one position's logits
  after the logit processors, rebuilt from what a scorer returns;
- `processed.py`: the processed distribution a token was drawn from, its PIT, and the evidence
  when it could not have been drawn;
- `rebuilt.py`: an exact scorer's claims checked against that rebuild;
- `judge.py`: a point's scored verdict from its score rows, held to the AR's control;
- `agreement.py`: whether a scorer's path is the AR server's;
- `verdict.py`: the verdict as the run records it: at measurement, pending, settled, merged.

What stays outside is not the proof's: the score requests on the wire are the engines'
(`sweeper/engines/scoring.py`, `sglang_score.py`), sending them under load is measuring's
(`sweeper/measure/scores.py`), which check a point gets is the plan's (`sweeper/plan/sampling.py`),
who scores when is the runner's (`sweeper/runner/scoring.py`), and the score records' format is
the results' (`sweeper/results/scores.py`).
"""
