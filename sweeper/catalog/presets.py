"""The built-in parameter mappings: per engine, one per speculative method, as data.

Spellings follow each engine's own code: SGLang 0.5.23's `server_args.py` for DFLASH;
sgl-project/sglang PR #29907 (commit 93e9850e) for DDTREE, whose flag and environment names the
tests check against that PR's own sources; vLLM 0.32's `SpeculativeConfig` for ngram / eagle3 /
dflash, and vllm-project/vllm PR #42910 for ddtree. Each engine's record
(`sweeper.catalog.records`) holds its engine's presets; a spec picks one with `runtime.preset`,
or declares `runtime.mapping` for its own fork.
"""

from __future__ import annotations

from typing import Any

from sweeper.catalog.mapping import EffectiveRules, EngineMapping, JsonValue, ParamTarget

#: vLLM's speculative-config flag.
VLLM_SPEC_FLAG = "--speculative-config"

DDTREE_RUNTIME_PRESETS: dict[str, EngineMapping] = {
    "ddtree": EngineMapping(
        description="the bundled runtime's DDTree (tree budget, per-node topk, draft block)",
        speculative_args=["--speculative", "ddtree"],
        params={
            "budget": ParamTarget(flag="--budget"),
            "topk": ParamTarget(flag="--topk"),
            "block_size": ParamTarget(flag="--block-size"),
            # Lossy below 1.0 (docs/runtime-api.md): a speculative knob, so one AR baseline
            # serves every threshold.
            "accept_threshold": ParamTarget(flag="--accept-threshold"),
        },
    ),
}

#: SGLang's lossy acceptance knobs (a drafted token is accepted when its target probability is at
#: least `threshold_single`; 1.0, the default, is exact), flags of every SGLang build we drive
#: (0.5.15, 0.5.23, PR #29907) and the keys its `/set_internal_state` switches in place
#: (`sweeper.engines.sglang_switch`). Speculative keys: an AR baseline carries none.
SGLANG_ACCEPT_THRESHOLDS: dict[str, ParamTarget] = {
    "speculative_accept_threshold_single": ParamTarget(
        flag="--speculative-accept-threshold-single"
    ),
    "speculative_accept_threshold_acc": ParamTarget(flag="--speculative-accept-threshold-acc"),
}

SGLANG_PRESETS: dict[str, EngineMapping] = {
    "sglang-dflash": EngineMapping(
        description="stock SGLang DFLASH: block-diffusion drafting, one chain per step",
        speculative_args=["--speculative-algorithm", "DFLASH"],
        # Under DFLASH, --speculative-num-draft-tokens is the draft block size.
        params={
            "block_size": ParamTarget(flag="--speculative-num-draft-tokens"),
            **SGLANG_ACCEPT_THRESHOLDS,
        },
        draft=ParamTarget(flag="--speculative-draft-model-path"),
        unused={
            "budget": "SGLang's DFLASH has no tree budget (--speculative-num-draft-tokens "
            "is the block size); use preset sglang-ddtree for trees",
            "topk": "SGLang's DFLASH forces --speculative-eagle-topk to 1 with only a warning",
        },
        effective=EffectiveRules(
            source="sglang 0.5.23 server_args.py (DFLASH resolution)",
            forced={"topk": 1, "num_steps": 1},
        ),
    ),
    "sglang-ddtree": EngineMapping(
        description="SGLang DDTREE (sgl-project/sglang PR #29907): DFlash drafts, tree verify",
        speculative_args=["--speculative-algorithm", "DDTREE"],
        params={
            "budget": ParamTarget(flag="--speculative-ddtree-budget"),
            "block_size": ParamTarget(flag="--speculative-num-draft-tokens"),
            # PR #29907 has no flag for topk: an environment cap read at start.
            "topk": ParamTarget(env="SGLANG_DDTREE_MAX_TOPK"),
            **SGLANG_ACCEPT_THRESHOLDS,
        },
        draft=ParamTarget(flag="--speculative-draft-model-path"),
        effective=EffectiveRules(
            source=(
                "sgl-project/sglang 93e9850e: ddtree_worker.py "
                "DDTreeWorker._prepare_for_speculative_decoding (spine mode at "
                "budget <= block_size - 1), environ.py (SGLANG_DDTREE_MAX_TOPK = 6); "
                "ddtree_utils.build_ddtree_tree's width read at 6c52d319 (called with the "
                "same arguments at 93e9850e)"
            ),
            chain_at_budget_below_block=True,
            width_from_budget_per_block=True,
            topk_default=6,
        ),
    ),
}


def _vllm_json(key: str) -> ParamTarget:
    return ParamTarget(json_flag=VLLM_SPEC_FLAG, json_key=key)


def _vllm(
    method: str,
    description: str,
    *,
    topk: str,
    block_size: str,
    draft: bool = True,
    fixed: dict[str, JsonValue] | None = None,
    env: dict[str, str] | None = None,
) -> EngineMapping:
    """A vLLM method: every one takes its budget as `num_speculative_tokens` in the
    speculative config (and, with a draft model, the draft as its `model`); `topk` and
    `block_size` say why the method has no use for those grid keys."""
    given: dict[str, Any] = {"speculative_env": env} if env else {}
    if draft:
        given["draft"] = _vllm_json("model")
    return EngineMapping(
        description=description,
        speculative_json={VLLM_SPEC_FLAG: {"method": method, **(fixed or {})}},
        params={"budget": _vllm_json("num_speculative_tokens")},
        unused={"topk": topk, "block_size": block_size},
        **given,
    )


VLLM_PRESETS: dict[str, EngineMapping] = {
    "vllm-ngram": _vllm(
        "ngram",
        "vLLM n-gram prompt lookup: a chain of num_speculative_tokens",
        fixed={"prompt_lookup_max": 4, "prompt_lookup_min": 2},
        draft=False,
        topk="vLLM's n-gram method drafts one chain: it has no topk",
        block_size="vLLM's n-gram method has no draft block",
    ),
    "vllm-eagle3": _vllm(
        "eagle3",
        "vLLM EAGLE-3: a draft head proposing a chain of num_speculative_tokens",
        topk="vLLM's EAGLE-3 chain has no topk in speculative_config",
        block_size="vLLM's EAGLE-3 has no draft block",
    ),
    "vllm-dflash": _vllm(
        "dflash",
        "vLLM DFlash: block-diffusion drafts of num_speculative_tokens",
        topk="vLLM's DFlash drafts one chain: it has no topk",
        block_size="vLLM's DFlash block is num_speculative_tokens (use budget)",
    ),
    "vllm-ddtree": _vllm(
        "ddtree",
        "vLLM DDTree (vllm-project/vllm PR #42910): tree budget, TREE_ATTN",
        env={"VLLM_ATTENTION_BACKEND": "TREE_ATTN"},
        topk="PR #42910 sizes the tree by num_speculative_tokens alone",
        block_size="PR #42910 takes the draft block from the draft model",
    ),
}
