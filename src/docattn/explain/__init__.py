"""Explanations of every model's decisions, per sentence and word (docs/explanations.md).

``methods`` says which a model has (attention, linear, gradient x input, integrated gradients);
``attention.explain_documents`` gives them all in one schema (attention read from ``ModelOutput.attentions``,
signed contributions from ``attribution`` and ``linear``); ``html`` and ``compare`` draw them, one run or
several side by side; ``faithfulness`` measures them; ``collect`` and ``metrics`` summarise attention.
Beneath them, ``scores`` gives a model's probabilities and per-word scores, and ``tokens`` places words in an
encoded corpus."""
