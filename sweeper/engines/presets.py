"""The built-in parameter mappings: one per engine and speculative method, as data.

Each preset names its engine. Spellings follow each engine's own code: SGLang 0.5.23's
`server_args.py` for DFLASH; sgl-project/sglang PR #29907 (commit 93e9850e) for DDTREE, whose
flag and environment names the tests check against that PR's own sources; vLLM 0.32's
`SpeculativeConfig` for ngram / eagle3 / dflash, and vllm-project/vllm PR #42910 for ddtree.
A spec picks one with `runtime.preset`, or declares `runtime.mapping` for its own fork.
"""

from __future__ import annotations

from sweeper.engines.mapping import EffectiveRules, EngineMapping, ParamTarget

#: vLLM's speculative-config flag.
VLLM_SPEC_FLAG = "--speculative-config"


def _vllm_json(key: str) -> ParamTarget:
    return ParamTarget(json_flag=VLLM_SPEC_FLAG, json_key=key)


PRESETS: dict[str, tuple[str, EngineMapping]] = {
    "ddtree": (
        "ddtree_runtime",
        EngineMapping(
            description="the bundled runtime's DDTree (tree budget, per-node topk, draft block)",
            speculative_args=["--speculative", "ddtree"],
            params={
                "budget": ParamTarget(flag="--budget"),
                "topk": ParamTarget(flag="--topk"),
                "block_size": ParamTarget(flag="--block-size"),
            },
        ),
    ),
    "sglang-dflash": (
        "sglang",
        EngineMapping(
            description="stock SGLang DFLASH: block-diffusion drafting, one chain per step",
            speculative_args=["--speculative-algorithm", "DFLASH"],
            # Under DFLASH, --speculative-num-draft-tokens is the draft block size.
            params={"block_size": ParamTarget(flag="--speculative-num-draft-tokens")},
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
    ),
    "sglang-ddtree": (
        "sglang",
        EngineMapping(
            description="SGLang DDTREE (sgl-project/sglang PR #29907): DFlash drafts, tree verify",
            speculative_args=["--speculative-algorithm", "DDTREE"],
            params={
                "budget": ParamTarget(flag="--speculative-ddtree-budget"),
                "block_size": ParamTarget(flag="--speculative-num-draft-tokens"),
                # PR #29907 has no flag for topk: an environment cap read at start.
                "topk": ParamTarget(env="SGLANG_DDTREE_MAX_TOPK"),
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
    ),
    "vllm-ngram": (
        "vllm",
        EngineMapping(
            description="vLLM n-gram prompt lookup: a chain of num_speculative_tokens",
            speculative_json={
                VLLM_SPEC_FLAG: {"method": "ngram", "prompt_lookup_max": 4, "prompt_lookup_min": 2}
            },
            params={"budget": _vllm_json("num_speculative_tokens")},
            unused={
                "topk": "vLLM's n-gram method drafts one chain: it has no topk",
                "block_size": "vLLM's n-gram method has no draft block",
            },
        ),
    ),
    "vllm-eagle3": (
        "vllm",
        EngineMapping(
            description="vLLM EAGLE-3: a draft head proposing a chain of num_speculative_tokens",
            speculative_json={VLLM_SPEC_FLAG: {"method": "eagle3"}},
            params={"budget": _vllm_json("num_speculative_tokens")},
            draft=_vllm_json("model"),
            unused={
                "topk": "vLLM's EAGLE-3 chain has no topk in speculative_config",
                "block_size": "vLLM's EAGLE-3 has no draft block",
            },
        ),
    ),
    "vllm-dflash": (
        "vllm",
        EngineMapping(
            description="vLLM DFlash: block-diffusion drafts of num_speculative_tokens",
            speculative_json={VLLM_SPEC_FLAG: {"method": "dflash"}},
            params={"budget": _vllm_json("num_speculative_tokens")},
            draft=_vllm_json("model"),
            unused={
                "topk": "vLLM's DFlash drafts one chain: it has no topk",
                "block_size": "vLLM's DFlash block is num_speculative_tokens (use budget)",
            },
        ),
    ),
    "vllm-ddtree": (
        "vllm",
        EngineMapping(
            description="vLLM DDTree (vllm-project/vllm PR #42910): tree budget, TREE_ATTN",
            speculative_json={VLLM_SPEC_FLAG: {"method": "ddtree"}},
            speculative_env={"VLLM_ATTENTION_BACKEND": "TREE_ATTN"},
            params={"budget": _vllm_json("num_speculative_tokens")},
            draft=_vllm_json("model"),
            unused={
                "topk": "PR #42910 sizes the tree by num_speculative_tokens alone",
                "block_size": "PR #42910 takes the draft block from the draft model",
            },
        ),
    ),
}

#: The preset an engine uses when the spec names none (None: the spec must choose).
DEFAULT_PRESET: dict[str, str | None] = {
    "ddtree_runtime": "ddtree",
    "sglang": None,
    "vllm": "vllm-ngram",
    "openai": None,
}


def presets_of(engine: str) -> list[str]:
    """The preset names built for one engine."""
    return [name for name, (owner, _) in PRESETS.items() if owner == engine]
