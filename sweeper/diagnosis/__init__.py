"""Diagnosis: which factors separate a run's broken requests from its exact ones, and the
experiments that separate what its grid could not.

- `factors.py`: judged requests, their factors and conditions on them (bit masks);
- `association.py`: Fisher's exact test, how a condition is called significant;
- `rule.py`: the rule the violations live in and every factor's standing (`diagnose`);
- `text.py`: a diagnosis in words, one wording for the CLI, the report, `compare` and nightly;
- `runs.py`: the diagnosis of run directories (their requests, calibrated near-ties);
- `followup.py`: the follow-up experiments `sweeper diagnose` plans as specs (ablations too);
- `evidence.py`: what a follow-up's arms show, and the features an ablation located;
- `compare.py`: the diagnosis line a newly broken config of a comparison carries.

It stands above the proof (verdicts, calibration) and analysis (compare), and below report and
the commands, which show it (`report/diagnosis.py`, `commands/diagnose.py`).
"""
