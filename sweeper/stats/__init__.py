"""Statistics beneath the proof: the general tools its tests are built from, with no notion of
tokens, records or verdicts (numpy and the standard library only; the layer table holds it to
that).

- `intervals.py`: confidence bounds on a rate (Wilson's score interval);
- `maxt.py`: Westfall and Young's max-T, several statistics combined on shared reshuffles.
"""
