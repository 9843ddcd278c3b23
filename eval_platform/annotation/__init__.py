"""Annotation tasks, framework-free: which items people label and what is asked (`config`), how the items are
chosen (`sampling`), and how far the labelling is, how much annotators agree, and the consensus labels that become
ground truth (`progress`). The Label Studio exchange and the Dagster assets build on these."""
