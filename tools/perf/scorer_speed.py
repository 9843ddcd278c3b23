"""Classical scorers through the registry, beside the same library called directly, in the same run.

    python -m tools.perf.scorer_speed [--cases 100000] [--only bleu,rouge1]

Each scorer scores `cases` synthetic (output, reference) pairs of 8-30 words through `Scorer.score` (what a
benchmark task does per case: options, field check, value) and through the library's own call with the same
settings, alternating in chunks of 5,000; the ratio is the registry's cost. The library column for
exact_match/token_f1 is the SQuAD v1.1 functions themselves, for numeric_match the regex and float parse, for
valid_json `json.loads`.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from collections.abc import Callable

from eval_platform.scoring import registry
from eval_platform.scoring.numeric import last_number
from eval_platform.scoring.squad import exact_match, token_f1

WORDS = "the a model answer judge score data case test value cat dog sat on mat quick brown fox jumps over lazy".split()


def _pairs(n: int, seed: int = 0) -> list[tuple[str, dict]]:
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        ref = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30)))
        out = " ".join(w if rng.random() < 0.7 else rng.choice(WORDS) for w in ref.split())
        pairs.append((f"{out} {i}", {"expected_output": f"{ref} {i}"}))
    return pairs


def _direct(name: str) -> Callable[[str, dict], float]:
    if name == "bleu":
        from sacrebleu.metrics import BLEU

        bleu = BLEU(tokenize="13a", effective_order=True)
        return lambda out, case: bleu.sentence_score(out, [case["expected_output"]]).score / 100
    if name == "chrf":
        from sacrebleu.metrics import CHRF

        chrf = CHRF()
        return lambda out, case: chrf.sentence_score(out, [case["expected_output"]]).score / 100
    if name.startswith("rouge"):
        from rouge_score import rouge_scorer

        scorer = rouge_scorer.RougeScorer([name], split_summaries=False)
        return lambda out, case: scorer.score(case["expected_output"], out)[name].fmeasure
    if name == "exact_match":
        return lambda out, case: exact_match(out, case["expected_output"])
    if name == "token_f1":
        return lambda out, case: token_f1(out, case["expected_output"])
    if name == "numeric_match":
        return lambda out, case: float(last_number(out) == last_number(case["expected_output"]))
    if name == "contains":
        return lambda out, case: float(case["expected_output"].lower() in out.lower())
    if name == "regex":
        pattern = re.compile(r"\d+")
        return lambda out, case: float(pattern.search(out) is not None)
    if name == "valid_json":

        def valid(out: str, case: dict) -> float:
            try:
                json.loads(out)
                return 1.0
            except ValueError:
                return 0.0

        return valid
    raise KeyError(name)


OPTIONS = {"regex": {"pattern": r"\d+"}}
CHUNK = 5_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument(
        "--only", default="exact_match,token_f1,bleu,chrf,rouge1,rouge2,rougeL,numeric_match,contains,regex,valid_json"
    )
    args = parser.parse_args()
    pairs = _pairs(args.cases)
    print(f"{args.cases:,} cases")
    print(f"{'scorer':<14} {'registry cases/s':>17} {'library cases/s':>16} {'ratio':>6}  same values")
    for name in args.only.split(","):
        scorer = registry.get(name)
        options = scorer.options(**OPTIONS.get(name, {}))
        direct = _direct(name)
        # Alternate chunk by chunk (the order flipping each time), so a change of load on the machine falls on
        # both alike.
        ours, theirs, ours_s, theirs_s = [], [], 0.0, 0.0
        for k, start in enumerate(range(0, len(pairs), CHUNK)):
            chunk = pairs[start : start + CHUNK]
            for side in (0, 1) if k % 2 == 0 else (1, 0):
                started = time.perf_counter()
                if side == 0:
                    ours += [scorer.score(out, case, options) for out, case in chunk]
                    ours_s += time.perf_counter() - started
                else:
                    theirs += [direct(out, case) for out, case in chunk]
                    theirs_s += time.perf_counter() - started
        same = all(abs(a - b) < 1e-12 for a, b in zip(ours, theirs, strict=True))
        print(
            f"{name:<14} {args.cases / ours_s:>17,.0f} {args.cases / theirs_s:>16,.0f} "
            f"{theirs_s / ours_s:>6.2f}  {same}"
        )


if __name__ == "__main__":
    main()
