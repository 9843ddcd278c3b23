"""LLMFAO: Bradley–Terry rankings from crowd, GPT-4 and GPT-3 pairwise votes on the same 2,139 pairs.

The published notebook (data/sources/llmfao/PROVENANCE.md) fits Bradley–Terry with evalica on each CSV
(left → X, right → Y, tie → draw, i.e. a tie is half a win for each side; every crowd vote is one
comparison, not aggregated per pair or worker), ranks the models and takes the Pearson correlation of the
rank columns. `bradley_terry` maximises the same likelihood, so the correlations are reproduced to the six
printed decimals (tolerance 5e-7). Our MM iteration runs to convergence (1e-10); the notebook's evalica
stopped earlier on the GPT-4 votes, which is why its GPT-4 top score reads 0.192920 where the converged
value is 0.2002; no rank changes. No score is tied, so the rank method for ties does not matter here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from eval_platform.stats.ranking import bradley_terry

LLMFAO = Path(__file__).resolve().parents[2] / "data" / "sources" / "llmfao"
JUDGES = {"humans": "crowd-comparisons.csv", "gpt4": "gpt4-crowd-comparisons.csv", "gpt3": "gpt3-crowd-comparisons.csv"}
# The published correlation table (Pearson on ranks), the comparison target.
PUBLISHED_RANK_CORRELATION = {("humans", "gpt4"): 0.730918, ("humans", "gpt3"): 0.716610, ("gpt4", "gpt3"): 0.717136}
PUBLISHED_HUMAN_TOP = [("GPT 4", 0.041215), ("Platypus-2 Instruct (70B)", 0.029233)]


@pytest.fixture(scope="module")
def rankings() -> dict[str, pl.DataFrame]:
    fitted = {}
    for judge, file_name in JUDGES.items():
        votes = pl.read_csv(LLMFAO / file_name)
        result = bradley_terry(votes["left"], votes["right"], votes["winner"])
        assert result.converged and result.note is None
        fitted[judge] = result.table
    return fitted


@pytest.mark.parametrize(("first", "second"), PUBLISHED_RANK_CORRELATION)
def test_rank_correlation_between_judges(rankings, first, second):
    ranks = (
        rankings[first]
        .select("model", pl.col("rank").alias("first"))
        .join(rankings[second].select("model", pl.col("rank").alias("second")), on="model")
    )
    assert ranks.height == 59
    correlation = np.corrcoef(ranks["first"], ranks["second"])[0, 1]
    assert correlation == pytest.approx(PUBLISHED_RANK_CORRELATION[(first, second)], abs=5e-7)


def test_top_of_the_human_ranking(rankings):
    top = rankings["humans"].head(2).select("model", "score").rows()
    assert [model for model, _ in top] == [model for model, _ in PUBLISHED_HUMAN_TOP]
    assert [score for _, score in top] == pytest.approx([score for _, score in PUBLISHED_HUMAN_TOP], abs=5e-6)
    assert rankings["gpt4"]["model"][0] == "GPT 3.5 Turbo"
