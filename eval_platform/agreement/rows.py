"""Agreement rows: how a statistic becomes a row, and the rows shared by label and pairwise statistics."""

from __future__ import annotations

import json
from dataclasses import dataclass

from eval_platform.stats.results import interpret_alpha, interpret_kappa


@dataclass
class Rows:
    """Accumulates agreement rows sharing some fields."""

    out: list[dict]

    def add(self, statistic: str, value, n: int, **fields) -> None:
        interpretation = fields.pop("interpretation", None)
        if interpretation is None and value is not None:
            if "alpha" in statistic:
                interpretation = interpret_alpha(value)
            elif "kappa" in statistic:
                interpretation = interpret_kappa(value)
        self.out.append({"statistic": statistic, "value": value, "n": n, "interpretation": interpretation, **fields})


def pairwise_rows(labels, s, rows: Rows, fields: dict) -> None:
    label_rows(labels, rows, fields)
    rows.add("agreement_with_ties_s1", s.with_ties, s.n_with_ties, note=s.note, **fields)
    rows.add("agreement_without_ties_s2", s.without_ties, s.n_without_ties, note=s.note, **fields)


def label_rows(labels, rows: Rows, fields: dict) -> None:
    details = json.dumps({"labels": [str(v) for v in labels.labels], "confusion": labels.confusion})
    rows.add("accuracy", labels.accuracy, labels.n, note=labels.note, **fields)
    rows.add("macro_precision", labels.precision, labels.n, **fields)
    rows.add("macro_recall", labels.recall, labels.n, **fields)
    rows.add("macro_f1", labels.f1, labels.n, **fields)
    rows.add("cohen_kappa", labels.kappa.value, labels.n, note=labels.kappa.note, details=details, **fields)
