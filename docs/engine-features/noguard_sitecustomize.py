"""A vLLM 'fork' without the spec-decode guard of #31982 (as #42802's deployment relaxed it):
min_p and logit_bias reach the rejection sampler, which #42744 says does not apply them."""

try:
    import vllm.sampling_params as _sp

    _sp.SamplingParams._validate_spec_decode = lambda self, speculative_config: None
except Exception:  # noqa: BLE001
    pass
