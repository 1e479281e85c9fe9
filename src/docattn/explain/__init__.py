"""Explanations: attention per sentence and word, read from a model's output ``attentions``."""
