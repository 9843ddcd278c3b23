"""Statistics behind the `agreement` and `experiment_results` assets: pure functions over arrays and frames.

- `reliability`: Krippendorff's alpha (nominal, ordinal, interval, ratio; missing values allowed).
- `kappa`: Cohen's kappa (unweighted, linear, quadratic; ASE and CI), Fleiss' and Randolph's kappa.
- `annotators`: majority labels, per-annotator agreement and quality, pairwise kappas, ground truth.
- `judge_agreement`: judge vs human on labels, scores and pairwise verdicts; position consistency.
- `experiments`: Welch's t-test, Cohen's d, Bayesian comparisons of means and of proportions.
- `ranking`: win rates with Wilson intervals, Bradley–Terry strengths.
- `proportions`: the Wilson interval of a proportion (win rates, pass rates, benchmark metrics), edges exact.

Degenerate input never raises: the result carries `value=None` and a `note` that says why.
"""
