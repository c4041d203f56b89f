"""The 20 most-downloaded open LLM architectures (Hugging Face ``model_type``), each imported from a real config in
``hf_configs/`` (its source in that folder's README) with parameters within 1 % of the published count (issue 26).

The ranking is by the largest Hugging Face "downloads last month" figure seen for a checkpoint of that
``model_type`` in stored copies of Hub pages (search tool, docs/pages corpora, collected 2026-11-29; the page and
its figure are in ``RANKING``). No stored source publishes one ranked top-20 of open LLM architectures: the
eyesinai.com "huggingface-signal" explainer lists only the first two text-generation models (Qwen3-0.6B 27.5M,
Qwen3-4B 16.1M), the ATOM report (Lambert & Brand, arXiv 2604.07190, April 2026) ranks families (Qwen, then Llama,
DeepSeek for > 250 B) and the solmaz.io leaderboard post names Qwen, Gemma and gpt-oss-20b (#8). Figures are from
snapshots of different dates, so ranks past ~12 are an ordering of what was found, not a measured rank.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hf_models import CONFIGS, hf_config, hf_data, hf_graph

# rank: (model_type, config in hf_configs, published total, published source, download evidence)
RANKING: dict[int, tuple[str, str, float, str, str]] = {
    1: ("qwen2", "qwen2.5-7b-instruct", 7.61e9, "Qwen2.5-7B-Instruct card: 7.61 B",
        "Qwen2.5-1.5B-Instruct 43.4M (huggingface.co/collections/sakaltcommunity/qwen-66f7467f0d2109c10e400673)"),
    2: ("qwen3", "qwen3-0.6b", 0.6e9, "Qwen3-0.6B card: 0.6 B",
        "Qwen3-0.6B 27.5M (eyesinai.com/explainers/huggingface-signal, #1 text-generation)"),
    3: ("gpt2", "gpt2", 124e6, "Radford et al. 2019 / HF card: 124 M",
        "openai-community/gpt2 17.1M (huggingface.co/sudaluojw/activity/likes)"),
    4: ("opt", "opt-125m", 125e6, "Zhang et al. 2022, table 1: 125 M",
        "facebook/opt-125m 8.39M (huggingface.co/sanarend/activity/likes)"),
    5: ("gpt_oss", "gpt-oss-20b", 20.91e9, "OpenAI gpt-oss model card, table 1: 20.91 B",
        "openai/gpt-oss-20b 7.98M (huggingface.co/collections/karislicem/instruct)"),
    6: ("llama", "llama-3.2-1b", 1_235_814_400, "HF safetensors metadata: 1,235,814,400",
        "meta-llama/Llama-3.1-8B-Instruct 6.18M (huggingface.co/sudaluojw/activity/likes)"),
    7: ("gemma3_text", "gemma-3-1b-it", 999_885_952, "keras-hub gemma3 preset: 999,885,952",
        "google/gemma-3-1b-it 5.12M (huggingface.co/asharma06/activity/likes)"),
    8: ("mistral", "mistral-7b-v0.1-awq", 7_241_732_096, "HF safetensors metadata (Mistral-7B-v0.1): 7,241,732,096",
        "mistralai/Mistral-7B-Instruct-v0.2 4.7M "
        "(huggingface.co/collections/sdonyh/favorite-models-66190d0669211da33bd944f4)"),
    9: ("mixtral", "mixtral-8x7b-v0.1", 46.7e9, "Mixtral of Experts (Jiang et al. 2024): 46.7 B",
        "mistralai/Mixtral-8x7B-Instruct-v0.1 3.75M "
        "(huggingface.co/collections/hemshah/mistral-65c0a480c084467acac24b7c)"),
    10: ("qwen3_moe", "qwen3-30b-a3b", 30.5e9, "Qwen3-30B-A3B card: 30.5 B",
         "Qwen/Qwen3-30B-A3B 3.27M (huggingface.co/Suzu007/activity/likes)"),
    11: ("deepseek_v3", "deepseek-v3", 671e9, "DeepSeek-V3 technical report: 671 B",
         "deepseek-ai/DeepSeek-V3 3.13M (huggingface.co/debingzhang/activity/likes)"),
    12: ("bloom", "bloom-560m", 559_214_592, "bloom-560m card: 559,214,592",
         "bigscience/bloom 1.82M (huggingface.co/neuron1862/activity/likes); bloom-560m 329k"),
    13: ("phi3", "phi-3-mini-4k-instruct", 3_821_079_552, "HF safetensors metadata: 3,821,079,552",
         "microsoft/Phi-3-mini-4k-instruct 859k (huggingface.co/collections/sirnii/api-66855a685b36b8c6113ebd49)"),
    14: ("phi", "phi-2", 2_779_683_840, "HF safetensors metadata: 2,779,683,840",
         "microsoft/phi-2 839k (huggingface.co/yordanoff04/activity/likes)"),
    15: ("gemma2", "gemma-2-2b", 2_614_341_888, "HF safetensors metadata: 2,614,341,888",
         "google/gemma-2-2b-it 652k (huggingface.co/collections/davidx08/david)"),
    16: ("gemma", "gemma-7b", 8_537_680_896, "HF safetensors metadata: 8,537,680,896",
         "google/gemma-2b 583k (huggingface.co/collections/kurilee/gemma-65dd8a42e58fdedf584ad353)"),
    17: ("phimoe", "phi-3.5-moe-instruct", 41.9e9, "Phi-3.5-MoE card: 41.9 B",
         "microsoft/Phi-3.5-MoE-instruct 116k (huggingface.co/models?search=microsoft/phi)"),
    18: ("starcoder2", "starcoder2-15b", 15_957_889_024, "HF safetensors metadata: 15,957,889,024",
         "bigcode/starcoder2-7b 56.3k (huggingface.co/collections/AMacFly/base-models-65e83d45263a71d47ff55ea8)"),
    19: ("falcon", "falcon-40b-instruct", 41_835_970_560,
         "tiiuae/falcon-40b model.safetensors.index.json total_size 83,671,941,120 B / 2 B (bf16) = 41,835,970,560, "
         "its tied lm_head stored as a second tensor (the Hub page's '42B params'); the card says '40B'",
         "tiiuae/falcon-40b 45k (huggingface.co/tanmaysingewar/activity/likes)"),
    20: ("gpt_bigcode", "starcoder", 15.5e9, "StarCoder paper (Li et al. 2023): 15.5 B",
         "bigcode/starcoder 13.5k (huggingface.co/collections/sirnii/api-66855a685b36b8c6113ebd49)"),
}
# Falcon's exact published count is its checkpoint's: the safetensors index's total_size over 2 bytes (bf16), quoted
# from the Hub's tiiuae/falcon-40b index in a public deployment note (find_string "83671941120"; the same note reads
# the Hub page's "42B params"). The checkpoint holds lm_head.weight beside transformer.word_embeddings.weight
# although the two are one tied matrix (vLLM PR #3579: "The Falcon models, specifically the 40B and 180B versions,
# are tied-embedding models ... The official release of falcon-40B model had duplicated this weight in the
# checkpoint"; PR #3590 the same for Falcon-7B; transformers' FalconForCausalLM ties them), so the stored count is
# the model's plus vocab x hidden, and the import (the model's own parameters) is compared to that identity.
TIED_HEAD_STORED_TWICE = {19}
ALIASES = {"RefinedWeb": "falcon"}  # Falcon's pre-transformers model_type


def test_the_ranking_holds_twenty_distinct_architectures_with_their_configs() -> None:
    assert sorted(RANKING) == list(range(1, 21))
    assert len({row[0] for row in RANKING.values()}) == 20
    for model_type, name, *_ in RANKING.values():
        raw = hf_data(name)["model_type"]
        assert ALIASES.get(raw, raw) == model_type, name


@pytest.mark.parametrize("rank", [r for r in sorted(RANKING) if r not in TIED_HEAD_STORED_TWICE])
def test_parameters_within_one_percent_of_the_published_count(rank: int) -> None:
    _, name, published, _, _ = RANKING[rank]
    assert hf_graph(name).params == pytest.approx(published, rel=0.01)


def test_falcon_40b_equals_its_checkpoints_exact_count_less_the_duplicated_tied_head() -> None:
    """Twelfth pass: the +3.3 % was against the rounded "40B". Against the exact stored count the import is
    -1.27 %, and that gap is exactly the tied lm_head the checkpoint stores twice (65,024 x 8,192 = 532,676,608):
    the importer counts the tied matrix once, as the model (and its memory) holds it. falcon-40b-instruct is the
    same architecture as the base model whose index is quoted (its config differs in no size field)."""
    _, name, published, _, _ = RANKING[19]
    cfg = hf_config(name)
    params = hf_graph(name).params
    assert params == 41_303_293_952
    assert params + cfg.vocab * cfg.hidden == published == 83_671_941_120 // 2
    assert params / published - 1 == pytest.approx(-0.0127, abs=5e-4)  # the whole gap is the duplicate
    assert params / 40e9 - 1 == pytest.approx(0.0326, abs=5e-4)  # vs the card's rounded "40B", as before


def test_every_config_is_cited_in_the_readme_with_its_source() -> None:
    readme = (CONFIGS / "README.md").read_text()
    for path in sorted(Path(CONFIGS).glob("*.json")):
        source = hf_data(path.stem)["_source"]
        assert f"`{path.name}`" in readme, path.name
        assert source.split()[0] in readme, path.name


def test_bundled_gpt2_and_mixtral_equal_their_copies_in_hf_configs() -> None:
    """The copies used here are the bundled perfmodel/graph/configs files, field for field."""
    import json

    bundled = Path(__file__).parents[2] / "perfmodel" / "graph" / "configs"
    for copy, original in [("gpt2", "gpt2"), ("mixtral-8x7b-v0.1", "mixtral-8x7b")]:
        assert hf_data(copy) == json.loads((bundled / f"{original}.json").read_text())
    assert hf_config("mixtral-8x7b-v0.1").experts == 8


@pytest.mark.parametrize("model_type", ["qwen3_vl", "qwen3_5", "qwen3_5_moe", "gemma4"])
def test_newer_multimodal_types_with_large_2026_downloads_are_refused_with_the_known_list(model_type: str) -> None:
    """solmaz.io's 2026 leaderboard puts Qwen3-VL-2B, Qwen3.6-35B-A3B / 27B (``qwen3_5*``: Gated DeltaNet hybrid)
    and Gemma 4 near the top; the Hub tags them image-text-to-text / any-to-any, not text-generation, and the
    importer does not build them: it refuses them naming the types it knows, never building them as Llama."""
    from perfmodel.graph import GraphError
    from perfmodel.graph.llm_config import LlmConfig

    with pytest.raises(GraphError, match=rf"{model_type}.*not supported; known: llama"):
        LlmConfig.from_hf(hf_data("qwen3-8b") | {"model_type": model_type}, model_type)
