"""Result types shared by the agreement statistics, and the bands used to interpret them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Agreement:
    """One agreement coefficient over `n` units; `value` is None (with a `note`) when undefined."""

    statistic: str
    value: float | None
    n: int
    interpretation: str | None = None
    note: str | None = None
    observed_agreement: float | None = None
    chance_agreement: float | None = None

    @property
    def defined(self) -> bool:
        return self.value is not None


def undefined(statistic: str, n: int, note: str) -> Agreement:
    return Agreement(statistic=statistic, value=None, n=n, note=note)


def interpret_alpha(alpha: float | None) -> str | None:
    """Krippendorff's (2004) guidance: >= 0.800 reliable, >= 0.667 tentative conclusions only, else unreliable."""
    if alpha is None:
        return None
    if alpha >= 0.8:
        return "reliable"
    if alpha >= 0.667:
        return "tentative"
    return "unreliable"


def interpret_kappa(kappa: float | None) -> str | None:
    """Landis & Koch (1977) bands: < 0 poor, then slight, fair, moderate, substantial, almost perfect."""
    if kappa is None:
        return None
    if kappa < 0:
        return "poor"
    for upper, band in ((0.2, "slight"), (0.4, "fair"), (0.6, "moderate"), (0.8, "substantial")):
        if kappa <= upper:
            return band
    return "almost perfect"
